package host

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

	// The node as it is now, as a snapshot simulate replays; /snapshot
	// behind the same token as /status.
	if code := get("/snapshot", ""); code != http.StatusUnauthorized {
		t.Errorf("/snapshot without the token: got %d, want 401", code)
	}
	snap := filepath.Join(t.TempDir(), "now.json")
	stdout, stderr, code = testagent.Run(t, "status", "--snapshot", snap, "--metrics-bind-address", addr, "--metrics-ca-file", files.CA, "--metrics-bearer-token-file", token)
	if code != 0 || !strings.Contains(stdout, "wrote the node as it is now") {
		t.Fatalf("evictd status --snapshot: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if info, err := os.Stat(snap); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, want mode 0600", snap, err)
	}
	stdout, stderr, code = testagent.Run(t, "simulate", "--snapshot", snap, "--eviction-hard=memory.available<99%")
	if code != 0 || !regexp.MustCompile(`memory\.available<99%\s+hard\s+met`).MatchString(stdout) {
		t.Errorf("simulate of the snapshot at other thresholds: exit %d, stdout %q, stderr %q", code, stdout, stderr)
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

// TestStatusTokenOnlyToTheAgent runs the real agent with a bearer token
// on loopback over plain HTTP: `evictd status` gives it the token. Then
// the same binary as nobody, as a local user who took the agent's port
// would serve it: status connects, sends no request, and names who holds
// the port; without a token status reads it, so nothing else kept the
// token from it.
func TestStatusTokenOnlyToTheAgent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a server as another user")
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.usage_in_bytes"); err != nil {
		t.Skip("needs the cgroup v1 memory controller at /sys/fs/cgroup/memory")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv (util-linux) on PATH")
	}
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("agent-token"), 0o600); err != nil {
		t.Fatal(err)
	}

	agent := testagent.FreeAddr(t)
	testagent.Start(t, nil, "--metrics-bind-address", agent, "--root-dir", t.TempDir(), "--metrics-bearer-token-file", token)
	testagent.WaitHTTP(t, "http://"+agent+"/readyz")
	if _, stderr, code := testagent.Run(t, "status", "--metrics-bind-address", agent); code != 1 || !strings.Contains(stderr, "401 Unauthorized") {
		t.Errorf("evictd status without the token: exit %d, stderr %q; want 1 and the agent's 401", code, stderr)
	}
	stdout, stderr, code := testagent.Run(t, "status", "--metrics-bind-address", agent, "--metrics-bearer-token-file", token)
	if code != 0 || !strings.HasPrefix(stdout, "last pass ") {
		t.Errorf("evictd status with the token, of the agent (root's socket): exit %d, stdout %q, stderr %q; want its last pass", code, stdout, stderr)
	}

	bin := executableByAll(t)
	taken := testagent.FreeAddr(t)
	cmd := exec.Command(setpriv, fmt.Sprintf("--reuid=%d", nobody), fmt.Sprintf("--regid=%d", nobody), "--clear-groups",
		bin, "--metrics-bind-address", taken, "--root-dir", filepath.Dir(bin))
	testagent.StartCmd(t, cmd)
	testagent.WaitHTTP(t, "http://"+taken+"/readyz")
	_, stderr, code = testagent.Run(t, "status", "--metrics-bind-address", taken, "--metrics-bearer-token-file", token)
	// setpriv execs the server: same PID.
	want := fmt.Sprintf("evictd status: not sending the token to %s: the socket listening there belongs to uid %d (nobody), pid %d (evictd), not to uid 0 (root)",
		taken, nobody, cmd.Process.Pid)
	if code != 1 || !strings.HasPrefix(stderr, want) {
		t.Errorf("evictd status with the token, of nobody's server: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	if stdout, stderr, code := testagent.Run(t, "status", "--metrics-bind-address", taken); code != 0 || !strings.HasPrefix(stdout, "last pass ") {
		t.Errorf("evictd status without a token, of nobody's server: exit %d, stdout %q, stderr %q; want its last pass", code, stdout, stderr)
	}
}
