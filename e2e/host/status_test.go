package host

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testagent"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// tlsClient trusts the certificates of the CA in caFile alone, as `evictd
// status --metrics-ca-file` does.
func tlsClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	data, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		t.Fatalf("%s: no PEM certificate in it", caFile)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}}}
}

// TestAgentServesGuardedEndpoints runs the real agent with the TLS and
// bearer-token flags: the probes answer over TLS without a token, /metrics
// asks for it, and `evictd status` reaches the agent with the CA and token.
func TestAgentServesGuardedEndpoints(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.usage_in_bytes"); err != nil {
		t.Skip("needs the cgroup v1 memory controller at /sys/fs/cgroup/memory")
	}
	dir := t.TempDir()
	files, err := testcluster.WriteServingCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("agent-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testagent.FreeAddr(t)
	testagent.Start(t, nil, "--metrics-bind-address", addr, "--root-dir", t.TempDir(),
		"--metrics-tls-cert-file", files.Cert, "--metrics-tls-private-key-file", files.Key, "--metrics-bearer-token-file", token)

	client := tlsClient(t, files.CA)
	get := func(path, bearer string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(20 * time.Second)
	for get("/readyz", "") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("https://%s/readyz did not answer 200 without a token in time", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code := get("/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: got %d, want 401", code)
	}
	if code := get("/metrics", "agent-token"); code != http.StatusOK {
		t.Errorf("/metrics with the token: got %d, want 200", code)
	}
	stdout, stderr, code := testagent.Run(t, "status", "--metrics-bind-address", addr, "--metrics-ca-file", files.CA, "--metrics-bearer-token-file", token)
	if code != 0 {
		t.Fatalf("evictd status: exit %d, stderr %q", code, stderr)
	}
	if !strings.HasPrefix(stdout, "last pass ") || !strings.Contains(stdout, "\nmemory.available ") || !strings.Contains(stdout, "\ndecision: ") {
		t.Errorf("evictd status printed %q, want the table of the agent's last pass", stdout)
	}
	stdout, stderr, code = testagent.Run(t, "status", "--metrics-bind-address", addr, "--metrics-ca-file", files.CA, "--metrics-bearer-token-file", token, "--output", "json")
	if code != 0 {
		t.Fatalf("evictd status --output json: exit %d, stderr %q", code, stderr)
	}
	if !strings.HasPrefix(stdout, "{") || !strings.Contains(stdout, `"threshold": "memory.available<100Mi"`) {
		t.Errorf("evictd status --output json printed %q, want the agent's JSON status, < as it is", stdout)
	}
}

// TestAgentRefusesBadMetricsFiles checks that the agent does not start
// with a certificate but no key, and names the flag.
func TestAgentRefusesBadMetricsFiles(t *testing.T) {
	files, err := testcluster.WriteServingCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd, logs := testagent.Start(t, nil, "--metrics-bind-address", testagent.FreeAddr(t), "--root-dir", t.TempDir(), "--metrics-tls-cert-file", files.Cert)
	err = cmd.Wait()
	if err == nil {
		t.Fatal("agent started with a certificate and no key")
	}
	if want := "--metrics-tls-cert-file: invalid value \"" + files.Cert + "\": needs --metrics-tls-private-key-file too"; !strings.Contains(logs.String(), want) {
		t.Errorf("agent said %q, want %q", logs.String(), want)
	}
}
