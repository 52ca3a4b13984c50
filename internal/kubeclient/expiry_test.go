package kubeclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestExpiry(t *testing.T) {
	dir := t.TempDir()
	exp := time.Date(2026, 12, 25, 16, 0, 0, 0, time.UTC)
	notAfter := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	jwt := fakeJWT(`{"aud":["https://kubernetes.default.svc"],"exp":1798214400,"sub":"system:serviceaccount:kube-system:evictd"}`)
	cert := selfSigned(t, notAfter)
	tests := []struct {
		name            string
		rc              rest.Config
		wantTok, wantCt time.Time
	}{
		{"tokenFile, a JWT", rest.Config{BearerTokenFile: write("token", jwt+"\n")}, exp, time.Time{}},
		{"embedded JWT", rest.Config{BearerToken: jwt}, exp, time.Time{}},
		{"the file wins over the embedded token, as in client-go", rest.Config{BearerToken: "opaque", BearerTokenFile: write("token2", jwt)}, exp, time.Time{}},
		{"opaque token", rest.Config{BearerToken: "0123456789abcdef"}, time.Time{}, time.Time{}},
		{"JWT without exp", rest.Config{BearerToken: fakeJWT(`{"sub":"x"}`)}, time.Time{}, time.Time{}},
		{"JWT with a payload that is not JSON", rest.Config{BearerToken: fakeJWT(`not json`)}, time.Time{}, time.Time{}},
		{"missing tokenFile", rest.Config{BearerTokenFile: filepath.Join(dir, "none")}, time.Time{}, time.Time{}},
		{"client certificate file", rest.Config{TLSClientConfig: rest.TLSClientConfig{CertFile: write("client.crt", cert)}}, time.Time{}, notAfter},
		{"embedded client certificate", rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: []byte(cert)}}, time.Time{}, notAfter},
		{"not a certificate", rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")}}, time.Time{}, time.Time{}},
		{"nothing", rest.Config{}, time.Time{}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, ct := Expiry(&tt.rc)
			if !tok.Equal(tt.wantTok) {
				t.Errorf("token: got %v, want %v", tok, tt.wantTok)
			}
			if !ct.Equal(tt.wantCt) {
				t.Errorf("client certificate: got %v, want %v", ct, tt.wantCt)
			}
		})
	}
}

// fakeJWT is a JWT with this payload and a signature no one checks here.
func fakeJWT(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","kid":"k"}`)) + "." + enc([]byte(payload)) + "." + enc([]byte("signature"))
}

func selfSigned(t *testing.T, notAfter time.Time) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "system:node:n1"},
		NotBefore:    notAfter.Add(-24 * time.Hour),
		NotAfter:     notAfter,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
