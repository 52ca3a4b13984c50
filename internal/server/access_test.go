package server

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/internal/testing/testcluster"
)

// tlsClient trusts only the CA in caFile.
func tlsClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	pemData, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		t.Fatalf("no certificate in %s", caFile)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func do(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTLSAndBearerToken serves with a certificate made for the test and a
// token: /metrics and /status answer only with the token, the probes answer
// anyone, and plain HTTP gets no metrics.
func TestTLSAndBearerToken(t *testing.T) {
	dir := t.TempDir()
	files, err := testcluster.WriteServingCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	const token = "s3cret-token"
	s := New("127.0.0.1:0", prometheus.NewRegistry(), nil, func() any { return map[string]string{"pass": "done"} }, nil)
	if err := s.Secure(Access{CertFile: files.Cert, KeyFile: files.Key, TokenFile: writeFile(t, dir, "token", token+"\n")}); err != nil {
		t.Fatalf("Secure: %v", err)
	}
	r := start(t, s)
	base := strings.Replace(r.base, "http://", "https://", 1)
	c := tlsClient(t, files.CA)

	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", "wrong", http.StatusUnauthorized},
		{"/metrics", token + "x", http.StatusUnauthorized},
		{"/metrics", token, http.StatusOK},
		{"/status", "", http.StatusUnauthorized},
		{"/status", token, http.StatusOK},
		{"/healthz", "", http.StatusOK},
		{"/readyz", "", http.StatusOK},
		// The landing page names the build: the token's, as /metrics.
		{"/", "", http.StatusUnauthorized},
		{"/", "wrong", http.StatusUnauthorized},
		{"/", token, http.StatusOK},
		{"/nope", token, http.StatusNotFound},
	} {
		code, body := do(t, c, base+tc.path, tc.token)
		if code != tc.want {
			t.Errorf("GET %s with token %q: got %d (%s), want %d", tc.path, tc.token, code, strings.TrimSpace(body), tc.want)
		}
	}
	if code, body := do(t, c, base+"/status", token); !strings.Contains(body, `"pass": "done"`) {
		t.Errorf("GET /status: got %d %q, want the status", code, body)
	}
	// Plain HTTP to the TLS port: the server says so, and serves nothing.
	if code, body := do(t, http.DefaultClient, r.base+"/metrics", token); code != http.StatusBadRequest {
		t.Errorf("plain HTTP to the TLS port: got %d %q, want 400", code, body)
	}
	// A client that does not trust the CA is refused the handshake.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/healthz", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Error("a client without the CA completed a TLS handshake")
	}
}

// TestTokenWithoutTLS asks for the token on plain HTTP too (a loopback
// address shared with other local users).
func TestTokenWithoutTLS(t *testing.T) {
	s := New("127.0.0.1:0", prometheus.NewRegistry(), nil, nil, nil)
	if err := s.Secure(Access{TokenFile: writeFile(t, t.TempDir(), "token", "  abc  ")}); err != nil {
		t.Fatal(err)
	}
	r := start(t, s)
	if code, _ := do(t, http.DefaultClient, r.base+"/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("no token: got %d, want 401", code)
	}
	if code, _ := do(t, http.DefaultClient, r.base+"/metrics", "abc"); code != http.StatusOK {
		t.Errorf("token (white space trimmed from the file): got %d, want 200", code)
	}
}

// TestSecureErrorsNameTheFile checks that bad files are refused with their
// names, before the server listens.
func TestSecureErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	files, err := testcluster.WriteServingCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	empty := writeFile(t, dir, "empty", " \n")
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name string
		a    Access
		want string
	}{
		{"cert without key", Access{CertFile: files.Cert}, "give both or neither"},
		{"key without cert", Access{KeyFile: files.Key}, "give both or neither"},
		{"missing cert", Access{CertFile: missing, KeyFile: files.Key}, missing},
		{"key that is a certificate", Access{CertFile: files.Cert, KeyFile: files.CA}, files.CA},
		{"missing token", Access{TokenFile: missing}, missing},
		{"empty token", Access{TokenFile: empty}, empty + " is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New("127.0.0.1:0", nil, nil, nil, nil)
			err := s.Secure(tc.a)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
