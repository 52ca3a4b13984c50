package testagent

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// EnvBin names the evictd binary the tests run: `make build`'s, which the
// make targets of the tiers pass as $(abspath bin/evictd).
const EnvBin = "EVICTD_BIN"

// Binary returns $EVICTD_BIN. Without it t is skipped, or fails under
// CI=true, where `make test` sets it.
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(EnvBin)
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not set under CI=true: the evictd binary to run (make build)", EnvBin)
		}
		t.Skipf("%s not set: the evictd binary to run (make build; the e2e-* make targets set it)", EnvBin)
	}
	return bin
}

// Start runs the evictd binary with args and the test's environment plus
// env, its output in the returned log, and kills it when t ends.
func Start(t testing.TB, env []string, args ...string) (*exec.Cmd, *Log) {
	t.Helper()
	// Its flight records in the test's own directory, not the host's
	// /var/lib/evictd; a --state-dir in args comes later and wins.
	args = append([]string{"--state-dir", t.TempDir()}, args...)
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	return cmd, StartCmd(t, cmd)
}

// Run runs the evictd binary with args (a subcommand: check-config,
// status) to its end, and returns its output and exit code.
func Run(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(Binary(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &exit) {
		t.Fatalf("evictd %v: %v", args, err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// Log is an agent's output, safe to read while the agent writes it.
type Log struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StartCmd starts cmd, an agent, with its output in the returned log, and
// kills it when the test ends; a failed test logs the agent's output.
func StartCmd(t testing.TB, cmd *exec.Cmd) *Log {
	t.Helper()
	logs := &Log{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start agent: %v", err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	return logs
}

// FreeAddr returns a loopback address nothing listens on right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
