package testruntime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestStartFailureCleansUp makes Start fail once containerd runs (a ready
// timeout too short to meet) and checks that nothing is left behind. Its
// runtime directory is made in a temporary directory of its own: other
// tests start runtimes in the machine's at the same time (make test runs
// tier 1 beside e2e/node), and theirs are not this Start's.
func TestStartFailureCleansUp(t *testing.T) {
	requireRoot(t)
	root := MountTmpfs(t, "64m", 2000)
	t.Setenv("TMPDIR", t.TempDir())
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "evictd-testruntime-*"))
	_, err := Start(t.Context(), Options{Root: root, ReadyTimeout: time.Nanosecond})
	if errors.Is(err, ErrNotInstalled) {
		skipOrFail(t, "%v", err)
	}
	if err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("Start with a 1 ns ready timeout: %v, want a not-ready error", err)
	}
	t.Logf("Start failed as wanted: %.200s", err)
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "evictd-testruntime-*"))
	if len(after) != len(before) {
		t.Errorf("runtime directories before Start %q, after %q", before, after)
	}
	entries, err := os.ReadDir(root)
	if err != nil || len(entries) > 0 {
		t.Errorf("root %s after a failed Start: %v, %v; want it empty", root, entries, err)
	}
	procs, err := listProcs()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if len(p.argv) > 2 && filepath.Base(p.argv[0]) == "containerd" && !slices.Contains(before, filepath.Dir(p.argv[2])) &&
			strings.HasPrefix(p.argv[2], filepath.Join(os.TempDir(), "evictd-testruntime-")) {
			t.Errorf("containerd left running: %s", p)
		}
	}
}

// TestStopWithoutContainerd stops containerd first, as a crash would, so Stop
// cannot remove the pods through the CRI: runc, the shims' -address and
// mountinfo must still leave nothing behind.
func TestStopWithoutContainerd(t *testing.T) {
	root := MountTmpfs(t, "128m", 4000)
	rt := StartForTest(t, Options{Root: root})
	cgroupParent := fmt.Sprintf("/evictd-testruntime-%d-nocontainerd", os.Getpid())
	t.Cleanup(func() { removeCgroup(t, cgroupParent) })
	logDir := t.TempDir()
	p := runPod(t, rt.RuntimeService(), "orphan", cgroupParent, logDir, PauseImage, []string{"procs", "--count", "3"})
	waitLog(t, filepath.Join(logDir, "orphan", "orphan.log"), "workload: ready (spawned 3")
	ctrPID := containerPID(t, mustStatus(t, rt.RuntimeService(), p.ctr))
	pids, err := Processes(rt.Socket())
	if err != nil || len(pids) < 6 { // shim, pause, workload and its 3 children
		t.Fatalf("Processes(%s) = %v, %v; want the shim, the pause and workload processes and 3 children", rt.Socket(), pids, err)
	}
	if !slices.Contains(pids, ctrPID) {
		t.Errorf("Processes(%s) = %v, want the container's pid %d among them", rt.Socket(), pids, ctrPID)
	}
	var watched []proc
	var sockets []string
	for _, pid := range pids {
		if p, err := readProc(pid); err == nil {
			watched = append(watched, p)
			if sock := shimSocket(p); sock != "" {
				sockets = append(sockets, sock)
			}
		}
	}
	if len(sockets) != 1 {
		t.Fatalf("shim sockets %q, want one", sockets)
	}
	if _, err := os.Stat(sockets[0]); err != nil {
		t.Fatalf("shim socket: %v", err)
	}

	// A restart finds the pod again; then containerd goes away for good.
	if err := rt.StopContainerd(); err != nil {
		t.Fatal(err)
	}
	if left, _ := Processes(rt.Socket()); len(left) != len(pids) {
		t.Fatalf("after StopContainerd, processes %v, want the shim and containers %v still running", left, pids)
	}
	if err := rt.StartContainerd(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := mustStatus(t, rt.RuntimeService(), p.ctr).GetStatus().GetState(); st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("after a containerd restart the container is %s, want running", st)
	}
	if err := rt.StopContainerd(); err != nil {
		t.Fatal(err)
	}
	dirs := []string{rt.RootDir(), rt.StateDir(), rt.Dir()}
	if err := rt.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, p := range watched {
		if now, err := readProc(p.pid); err == nil && now.start == p.start && now.state != 'Z' {
			t.Errorf("after Stop, %s still runs", p)
		}
	}
	if _, err := os.Stat(sockets[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Stop, the killed shim's socket: %v; want it removed", err)
	}
	for _, d := range dirs {
		if m, err := MountsUnder(d); err != nil || len(m) > 0 {
			t.Errorf("after Stop, mounts under %s: %q, %v; want none", d, m, err)
		}
	}
}
