package testcluster

import (
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	certutil "k8s.io/client-go/util/cert"
)

// ServingFiles are the PEM files of a TLS server for loopback addresses.
type ServingFiles struct {
	CA   string // the certificate of the CA that signed Cert
	Cert string // the server's certificate (then its CA's): 127.0.0.1, ::1 and localhost
	Key  string // the server's private key
}

// WriteServingCert generates a new CA and a serving certificate it signs
// for 127.0.0.1, ::1 and localhost (client-go's GenerateSelfSignedCertKey),
// and writes them with the key into dir (ca.crt, tls.crt, tls.key), for
// tests of servers that speak TLS.
func WriteServingCert(dir string) (ServingFiles, error) {
	f := ServingFiles{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key")}
	chain, key, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, nil)
	if err != nil {
		return f, fmt.Errorf("generate serving certificate: %w", err)
	}
	// The chain is the serving certificate followed by its CA's.
	_, rest := pem.Decode(chain)
	if ca, _ := pem.Decode(rest); ca == nil {
		return f, errors.New("generate serving certificate: no CA certificate after the serving one")
	}
	for _, w := range []struct {
		path string
		data []byte
	}{{f.CA, rest}, {f.Cert, chain}, {f.Key, key}} {
		if err := os.WriteFile(w.path, w.data, 0o600); err != nil {
			return f, err
		}
	}
	return f, nil
}
