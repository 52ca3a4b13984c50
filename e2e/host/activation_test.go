package host

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/evictd/evictd/internal/testing/testagent"
)

// startActivated starts the agent the way systemd starts a socket-activated
// service: the listening socket of ln as fd 3, LISTEN_FDS=1 and LISTEN_PID
// set to the agent's own PID (by a shell that execs it, since the PID is
// known only after the fork), or to listenPID when it is not empty. The
// test's copy of the socket is closed: only the agent holds it.
func startActivated(t *testing.T, ln net.Listener, listenPID string, args ...string) (*exec.Cmd, *testagent.Log) {
	t.Helper()
	bin := testagent.Binary(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	pid := "$$"
	if listenPID != "" {
		pid = listenPID
	}
	cmd := exec.Command(sh, append([]string{"-c", `export LISTEN_PID=` + pid + `; exec "$0" "$@"`, bin}, args...)...)
	cmd.Env = append(os.Environ(), "LISTEN_FDS=1", "LISTEN_FDNAMES=evictd.socket")
	cmd.ExtraFiles = []*os.File{f}
	return cmd, testagent.StartCmd(t, cmd)
}

// stopAgent sends SIGTERM and waits for a clean exit.
func stopAgent(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("agent exit after SIGTERM: %v, want status 0", err)
	}
}

// TestAgentServesOnSystemdSocket passes the agent a listening socket as
// systemd does for evictd.socket: it serves /metrics there and does not
// bind --metrics-bind-address.
func TestAgentServesOnSystemdSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	socket, flagAddr := ln.Addr().String(), testagent.FreeAddr(t)
	cmd, logs := startActivated(t, ln, "", "--metrics-bind-address", flagAddr, "--root-dir", t.TempDir(),
		"--container-runtime-endpoint=unix:///nonexistent/evictd-test.sock", "--runtime-request-timeout=1s")

	body := testagent.WaitHTTP(t, "http://"+socket+"/metrics")
	if !strings.Contains(body, "evictd_") {
		t.Errorf("/metrics on the passed socket has no evictd_ series:\n%.500s", body)
	}
	if c, err := net.Dial("tcp", flagAddr); err == nil {
		c.Close()
		t.Errorf("something listens on --metrics-bind-address %s, want only the passed socket served", flagAddr)
	}
	stopAgent(t, cmd)
	got := logs.String()
	for _, want := range []string{
		"serving the endpoints on the socket systemd passed (socket activation)",
		"socketActivated=true",
		"the socket systemd passed is not --metrics-bind-address",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
}

// TestAgentIgnoresSocketsForAnotherProcess: with LISTEN_PID naming another
// process the descriptors are not evictd's, and it binds
// --metrics-bind-address as usual.
func TestAgentIgnoresSocketsForAnotherProcess(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	flagAddr := testagent.FreeAddr(t)
	cmd, logs := startActivated(t, ln, "1", "--metrics-bind-address", flagAddr, "--root-dir", t.TempDir(),
		"--container-runtime-endpoint=unix:///nonexistent/evictd-test.sock", "--runtime-request-timeout=1s")
	testagent.WaitHTTP(t, "http://"+flagAddr+"/healthz")
	stopAgent(t, cmd)
	if got := logs.String(); strings.Contains(got, "socket systemd passed") || !strings.Contains(got, "socketActivated=false") {
		t.Errorf("want the agent to bind its address, not use the descriptors:\n%s", got)
	}
}
