package host

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/evictd/evictd/internal/testing/testagent"
)

// TestAgentStartsProtected starts the built binary as a node freshly
// installed from the package might: a newer kubelet's configuration with
// a field evictd does not know, the package's kubeconfig path not written
// yet (--kubeconfig-optional), and one threshold beyond this host's memory
// beside one that fits. It runs, serves /status, and says each of the
// three in its log and metrics; check-config on the same flags exits 1 for
// the threshold set aside.
func TestAgentStartsProtected(t *testing.T) {
	dir := t.TempDir()
	kubelet := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(kubelet, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsomeFieldFromKubelet138: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	addr := testagent.FreeAddr(t)
	args := []string{"--kubelet-config", kubelet, "--kubeconfig", kubeconfig, "--kubeconfig-optional",
		"--eviction-hard", "memory.available<100Ti,nodefs.available<1%", "--enforce-node-allocatable=none",
		"--metrics-bind-address", addr, "--root-dir", t.TempDir(), "--housekeeping-interval", "1s",
		"--container-runtime-endpoint", "unix://" + filepath.Join(dir, "none.sock")}

	out, errOut, code := testagent.Run(t, append([]string{"check-config"}, args...)...)
	// The table on stdout; the errors and warnings on stderr.
	if code != 1 || !strings.Contains(out, "SIGNAL") || !strings.Contains(errOut, "error: --eviction-hard: threshold memory.available<100Ti is 100Ti") ||
		!strings.Contains(errOut, `ignored unknown field(s) "someFieldFromKubelet138"`) ||
		!strings.Contains(errOut, "does not exist yet and --kubeconfig-optional is set") {
		t.Errorf("check-config: exit %d, want 1 with the threshold set aside, the unknown field and the missing kubeconfig\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	cmd, logs := testagent.Start(t, nil, args...)
	status := testagent.WaitHTTP(t, "http://"+addr+"/status")
	if !strings.Contains(status, "nodefs.available") {
		t.Errorf("/status lacks the threshold kept, nodefs.available:\n%.500s", status)
	}
	metrics := testagent.ParseMetrics(t, testagent.WaitHTTP(t, "http://"+addr+"/metrics"))
	for series, want := range map[string]float64{
		`evictd_config_warnings{kind="unknown-field"}`:                       1,
		`evictd_thresholds_set_aside{kind="hard",signal="memory.available"}`: 1,
		`evictd_standalone`: 1,
	} {
		if got, ok := metrics[series]; !ok || got != want {
			t.Errorf("%s: got %v (exported %v), want %v", series, got, ok, want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("agent exit after SIGTERM: %v, want status 0", err)
	}
	log := logs.String()
	for _, want := range []string{
		`ignored unknown field(s) \"someFieldFromKubelet138\"`,
		"threshold set aside: it cannot hold on this node; the other thresholds protect it",
		"the kubeconfig does not exist yet and --kubeconfig-optional is set: running standalone",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}
