package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/testing/testcluster"
)

// servingCerts writes n certificate and key pairs, each signed by a CA of
// its own, into directories of their own, and returns them with a pool
// that trusts every CA.
func servingCerts(t *testing.T, n int) ([]testcluster.ServingFiles, *x509.CertPool) {
	t.Helper()
	pool := x509.NewCertPool()
	out := make([]testcluster.ServingFiles, n)
	for i := range out {
		f, err := testcluster.WriteServingCert(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		ca, err := os.ReadFile(f.CA)
		if err != nil {
			t.Fatal(err)
		}
		if !pool.AppendCertsFromPEM(ca) {
			t.Fatalf("no certificate in %s", f.CA)
		}
		out[i] = f
	}
	return out, pool
}

// leaf returns the DER bytes of the first certificate in the PEM file.
func leaf(t *testing.T, certFile string) []byte {
	t.Helper()
	data, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("no PEM block in %s", certFile)
	}
	return b.Bytes
}

// served makes a new TLS handshake with the server at addr and returns the
// certificate it served.
func served(t *testing.T, addr string, pool *x509.CertPool) []byte {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Raw
}

// install puts the content of src at dst, by renaming a copy over it as
// rotating tools do (a new inode), or in place (the same inode), with mode.
func install(t *testing.T, src, dst string, inPlace bool, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeMode(t, dst, data, inPlace, mode)
}

func writeMode(t *testing.T, dst string, data []byte, inPlace bool, mode os.FileMode) {
	t.Helper()
	target := dst
	if !inPlace {
		target = dst + ".new"
	}
	if err := os.WriteFile(target, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target, mode); err != nil {
		t.Fatal(err)
	}
	if !inPlace {
		if err := os.Rename(target, dst); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCertificateRotation rotates the served certificate and key on disk:
// the server serves the new pair from the first handshake after
// reloadInterval, without a restart, whether the files are renamed into
// place or rewritten; a rotation that cannot be used (a key that does not
// match yet, garbage, a key others can read) leaves the last good pair
// served and is logged once, naming the files.
func TestCertificateRotation(t *testing.T) {
	certs, pool := servingCerts(t, 4)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	install(t, certs[0].Cert, certFile, false, 0o644)
	install(t, certs[0].Key, keyFile, false, 0o600)

	var logs syncBuffer
	s := New("127.0.0.1:0", prometheus.NewRegistry(), nil, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	fc := clocktesting.NewFakeClock(time.Now())
	s.clock = fc
	if err := s.Secure(Access{CertFile: certFile, KeyFile: keyFile}); err != nil {
		t.Fatal(err)
	}
	start(t, s)
	addr := s.Addr()
	want := func(step string, i int) {
		t.Helper()
		if got := served(t, addr, pool); !bytes.Equal(got, leaf(t, certs[i].Cert)) {
			t.Errorf("%s: the server did not serve certificate %d", step, i)
		}
	}
	want("start", 0)

	// Renamed into place: the old pair until the interval is up.
	install(t, certs[1].Cert, certFile, false, 0o644)
	install(t, certs[1].Key, keyFile, false, 0o600)
	want("rotated, within the interval", 0)
	fc.Step(reloadInterval)
	want("rotated by rename", 1)

	// Rewritten in place, the same inodes.
	install(t, certs[2].Cert, certFile, true, 0o644)
	install(t, certs[2].Key, keyFile, true, 0o600)
	fc.Step(reloadInterval)
	want("rotated in place", 2)

	// Half done: the new certificate, the old key.
	install(t, certs[3].Cert, certFile, false, 0o644)
	fc.Step(reloadInterval)
	want("certificate rotated, key not yet", 2)
	if got := logs.String(); !strings.Contains(got, "serving with the last good one") || !strings.Contains(got, "private key does not match public key") ||
		!strings.Contains(got, keyFile) {
		t.Errorf("half-done rotation: got log %q, want a warning naming %s", got, keyFile)
	}
	// The key arrives, with a mode others can read: still refused.
	install(t, certs[3].Key, keyFile, false, 0o644)
	fc.Step(reloadInterval)
	want("key others can read", 2)
	if got := logs.String(); !strings.Contains(got, "TLS private key "+keyFile+": mode 0644 lets group or others read or write it") {
		t.Errorf("key others can read: got log %q, want the refusal naming %s", got, keyFile)
	}
	// Looking again at the same bad files neither loads nor warns again.
	warnings := strings.Count(logs.String(), "level=WARN")
	fc.Step(reloadInterval)
	want("same bad files", 2)
	if got := strings.Count(logs.String(), "level=WARN"); got != warnings {
		t.Errorf("same bad files looked at again: got %d warnings, want %d", got, warnings)
	}
	// chmod 600 fixes it.
	if err := os.Chmod(keyFile, 0o600); err != nil {
		t.Fatal(err)
	}
	fc.Step(reloadInterval)
	want("key made private", 3)

	// Garbage, then the files gone: the last good pair stays.
	writeMode(t, keyFile, []byte("not a key\n"), false, 0o600)
	fc.Step(reloadInterval)
	want("garbage key", 3)
	if err := os.Remove(certFile); err != nil {
		t.Fatal(err)
	}
	fc.Step(reloadInterval)
	want("certificate removed", 3)
	if got := logs.String(); !strings.Contains(got, "cannot look at the TLS certificate and key files") {
		t.Errorf("removed certificate: got log %q, want a warning", got)
	}
}

// TestTokenRotation rotates the bearer token file: after reloadInterval
// the old token is refused and the new one accepted; a rotation to an
// empty file, a file others can read or no file at all keeps the last good
// token asked for, never none.
func TestTokenRotation(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	writeMode(t, tokenFile, []byte("old-token\n"), false, 0o600)

	var logs syncBuffer
	s := New("127.0.0.1:0", prometheus.NewRegistry(), nil, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	fc := clocktesting.NewFakeClock(time.Now())
	s.clock = fc
	if err := s.Secure(Access{TokenFile: tokenFile}); err != nil {
		t.Fatal(err)
	}
	r := start(t, s)
	check := func(step string, accepted, refused []string) {
		t.Helper()
		for _, tok := range accepted {
			if code, body := do(t, http.DefaultClient, r.base+"/metrics", tok); code != http.StatusOK {
				t.Errorf("%s: token %q got %d (%s), want 200", step, tok, code, strings.TrimSpace(body))
			}
		}
		for _, tok := range refused {
			if code, _ := do(t, http.DefaultClient, r.base+"/metrics", tok); code != http.StatusUnauthorized {
				t.Errorf("%s: token %q got %d, want 401", step, tok, code)
			}
		}
	}
	check("start", []string{"old-token"}, []string{"", "new-token"})

	writeMode(t, tokenFile, []byte("new-token\n"), false, 0o600)
	check("rotated, within the interval", []string{"old-token"}, []string{"new-token"})
	fc.Step(reloadInterval)
	check("rotated", []string{"new-token"}, []string{"old-token", ""})

	for _, bad := range []struct {
		name  string
		write func()
		log   string
	}{
		{"empty", func() { writeMode(t, tokenFile, []byte(" \n"), false, 0o600) }, "bearer token file " + tokenFile + " is empty"},
		{"others can read", func() { writeMode(t, tokenFile, []byte("third-token\n"), false, 0o644) },
			"bearer token file " + tokenFile + ": mode 0644 lets group or others read or write it"},
		{"removed", func() {
			if err := os.Remove(tokenFile); err != nil {
				t.Fatal(err)
			}
		}, "cannot look at the bearer token files"},
	} {
		bad.write()
		fc.Step(reloadInterval)
		check("rotated to "+bad.name, []string{"new-token"}, []string{"third-token", ""})
		if got := logs.String(); !strings.Contains(got, bad.log) {
			t.Errorf("rotated to %s: got log %q, want %q", bad.name, got, bad.log)
		}
	}

	writeMode(t, tokenFile, []byte("third-token\n"), true, 0o600)
	fc.Step(reloadInterval)
	check("rotated again, good", []string{"third-token"}, []string{"new-token"})
	if got := logs.String(); !strings.Contains(got, "reloaded the bearer token") {
		t.Errorf("got log %q, want the reload logged", got)
	}
}
