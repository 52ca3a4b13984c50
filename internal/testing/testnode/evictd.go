package testnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/evictd/evictd/internal/testing/childproc"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// EnvEvictdBin names a prebuilt evictd binary; without it Start builds one
// from the repository with the go command.
const EnvEvictdBin = "EVICTD_BIN"

// EvictdFlags returns the flags that tie evictd to this node, as an
// operator's environment file would: its kubeconfig (the evictd
// ServiceAccount), the node's name, the kubelet's root and pod log
// directories, cgroup root and driver, the runtime's endpoint, and the node
// allocatable settings of the kubelet.
func (n *Node) EvictdFlags() []string {
	return []string{
		"--kubeconfig=" + n.evictdKube,
		"--hostname-override=" + n.name,
		"--root-dir=" + n.rootDir,
		"--pod-logs-dir=" + n.podLogsDir,
		"--cgroup-root=" + n.cgroupRoot,
		"--cgroup-driver=" + n.cgroupDriver(),
		"--container-runtime-endpoint=" + n.runtime.Endpoint(),
		"--enforce-node-allocatable=pods",
		"--system-reserved=memory=" + strconv.FormatInt(n.SystemReserved(), 10),
		"--state-dir=" + n.StateDir(),
	}
}

// StateDir is evictd's --state-dir on this node, where its flight records
// are kept (in records/), within the node's own directory.
func (n *Node) StateDir() string { return filepath.Join(n.dir, "evictd-state") }

// StartEvictd starts the evictd binary beside the kubelet with EvictdFlags,
// a /metrics address of its own and args (thresholds and the like; a flag
// given again overrides), and waits until its /readyz answers (a first pass
// is done). Its log is LogPath("evictd"), appended to across restarts.
func (n *Node) StartEvictd(ctx context.Context, args ...string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return errors.New("node stopped")
	}
	if n.evictd != nil && !n.evictd.Exited() {
		return fmt.Errorf("evictd already running (pid %d)", n.evictd.PID())
	}
	if n.evUnitUp {
		return fmt.Errorf("evictd already running (unit %s)", n.evUnit)
	}
	if err := n.writeEvictdIdentity(ctx, false); err != nil {
		return err
	}
	ports, err := testcluster.FreePorts(1)
	if err != nil {
		return err
	}
	n.metrics = "127.0.0.1:" + strconv.Itoa(ports[0])
	n.evArgs = append(append(n.EvictdFlags(), "--metrics-bind-address="+n.metrics), args...)
	if n.evUnit != "" {
		return n.waitEvictdUnit(ctx)
	}
	p, err := childproc.Start("evictd", n.evictdBin, n.evArgs, n.logPath("evictd"))
	if err != nil {
		return err
	}
	n.evictd = p
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, p.ExitError()
		}
		return httpOK(ctx, "http://"+n.metrics+"/readyz") == nil, nil
	})
	if err != nil {
		return errors.Join(fmt.Errorf("evictd not ready: %w; last lines of its log:\n%s", err, childproc.Tail(p.LogPath, 30)), p.Stop(termGrace))
	}
	return nil
}

// waitEvictdUnit starts evictd as its unit and waits until its /readyz
// answers; it stops the unit if it does not.
func (n *Node) waitEvictdUnit(ctx context.Context) error {
	if err := n.startEvictdUnit(); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, "http://"+n.metrics+"/readyz") == nil, nil
	})
	if err != nil {
		return errors.Join(fmt.Errorf("evictd (unit %s) not ready: %w; last lines of its log:\n%s", n.evUnit, err, childproc.Tail(n.logPath("evictd"), 30)), n.stopEvictdUnit())
	}
	return nil
}

// SetEvictdBinary makes the next StartEvictd run bin instead of the binary
// the node started with, for comparing builds on one node.
func (n *Node) SetEvictdBinary(bin string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.evictdBin = bin
}

// SetEvictdLog makes the next StartEvictd append evictd's output to path
// (a file on a filesystem of the test's choosing) instead of the node's
// directory; "" goes back to the node's own. LogPath("evictd") follows.
func (n *Node) SetEvictdLog(path string) {
	if path == "" {
		n.evLog.Store(nil)
		return
	}
	n.evLog.Store(&path)
}

// EvictdBinary returns the evictd binary the next StartEvictd runs.
func (n *Node) EvictdBinary() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.evictdBin
}

// StopEvictd stops evictd with SIGTERM, as systemd does (through
// systemctl stop when systemd runs it).
func (n *Node) StopEvictd() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.evUnitUp {
		return n.stopEvictdUnit()
	}
	if n.evictd == nil {
		return nil
	}
	return n.evictd.Stop(termGrace)
}

// KillEvictd kills evictd with SIGKILL, as `kill -9` or the OOM killer
// would. When systemd runs it (SetEvictdUnit), systemd starts it again.
func (n *Node) KillEvictd() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.evUnitUp {
		return n.killEvictdUnit()
	}
	if n.evictd == nil {
		return nil
	}
	return n.evictd.Kill()
}

// EvictdPID returns evictd's process ID, or 0 when it is not running.
func (n *Node) EvictdPID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.evUnitUp {
		return n.unitMainPID()
	}
	if n.evictd == nil || n.evictd.Exited() {
		return 0
	}
	return n.evictd.PID()
}

// EvictdArgs returns the arguments evictd was last started with.
func (n *Node) EvictdArgs() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.evArgs...)
}

// MetricsAddr returns host:port of the running evictd's /metrics,
// /healthz, /readyz and /status.
func (n *Node) MetricsAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.metrics
}

// EvictdGet fetches a path (e.g. "/metrics", "/status") from the running
// evictd.
func (n *Node) EvictdGet(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.MetricsAddr()+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}
