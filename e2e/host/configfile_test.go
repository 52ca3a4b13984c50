package host

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/evictd/evictd/internal/testing/testagent"
)

// TestAgentReadsConfigFile runs the agent as the unit does, with
// --config naming evictd's own file, a --config-dir drop-in over it and a
// flag over both: it serves where the file says, logs as the drop-in says,
// and the flag wins where it is given.
func TestAgentReadsConfigFile(t *testing.T) {
	dir := t.TempDir()
	addr := testagent.FreeAddr(t)
	const header = "apiVersion: config.evictd.io/v1alpha1\nkind: AgentConfiguration\n"
	for name, text := range map[string]string{
		"config.yaml": header + "metricsBindAddress: " + addr + "\nrootDir: " + dir + "\nhousekeepingInterval: 1s\nlogFormat: text\nmaxEvictionsPerHour: 5\n",
		// The drop-in's logFormat over the file's.
		"config.d/10-json.conf": header + "logFormat: json\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd, logs := testagent.Start(t, nil, "--config", filepath.Join(dir, "config.yaml"), "--config-dir", filepath.Join(dir, "config.d"),
		"--max-evictions-per-hour=7")
	testagent.WaitHTTP(t, "http://"+addr+"/healthz")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("agent exit after SIGTERM: %v, want status 0", err)
	}
	out := logs.String()
	testagent.CheckJSONLogs(t, out)
	for _, want := range []string{
		`"msg":"logFormat in ` + filepath.Join(dir, "config.yaml") + ` is overridden by logFormat in ` + filepath.Join(dir, "config.d/10-json.conf") + `."`,
		`"msg":"maxEvictionsPerHour in ` + filepath.Join(dir, "config.yaml") + ` is overridden by --max-evictions-per-hour."`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %s:\n%s", want, out)
		}
	}
}

// TestAgentRefusesBadConfigFile: a file evictd cannot use stops the agent
// at start, exit 1, with an error naming the file, the field and the
// value; a KubeletConfiguration given to --config starts it, with a
// deprecation warning.
func TestAgentRefusesBadConfigFile(t *testing.T) {
	dir := t.TempDir()
	bad, kubelet := filepath.Join(dir, "bad.yaml"), filepath.Join(dir, "kubelet.yaml")
	for p, text := range map[string]string{
		bad:     "apiVersion: config.evictd.io/v1alpha1\nkind: AgentConfiguration\nhousekeepingInterval: soon\n",
		kubelet: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard: {memory.available: 300Mi}\n",
	} {
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, stderr, code := testagent.Run(t, "--config", bad, "--root-dir", dir)
	if want := "AgentConfiguration " + bad + `: housekeepingInterval: invalid value "soon"`; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("got exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}

	addr := testagent.FreeAddr(t)
	cmd, logs := testagent.Start(t, nil, "--config", kubelet, "--root-dir", dir, "--metrics-bind-address", addr)
	testagent.WaitHTTP(t, "http://"+addr+"/healthz")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("agent exit after SIGTERM: %v, want status 0", err)
	}
	if want := "level=WARN msg=\"--config " + kubelet + " is a KubeletConfiguration"; !strings.Contains(logs.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, logs.String())
	}
}
