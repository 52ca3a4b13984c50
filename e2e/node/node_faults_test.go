package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/testing/testalloc"
	"github.com/evictd/evictd/internal/testing/testnode"
	"github.com/evictd/evictd/internal/testing/testruntime"
	"github.com/evictd/evictd/signals"
)

// allocEnv makes the test binary a testalloc child holding that many MiB.
const allocEnv = "EVICTD_E2E_ALLOC_MIB"

func TestMain(m *testing.M) {
	if v, ok := os.LookupEnv(allocEnv); ok {
		os.Exit(testalloc.Hold(allocEnv, v, 2048))
	}
	os.Exit(m.Run())
}

// TestNodeFaults runs evictd beside a real kubelet through the faults of
// the node itself, on one node whose kubelet root, pod logs and containerd
// root share one small ext4 filesystem: evictd killed -9 in the middle of
// an eviction and restarted, cgroup files that read as garbage for a while,
// and containerd stopped and started again.
func TestNodeFaults(t *testing.T) {
	fs := testruntime.MountExt4(t, 1024)
	n := testnode.StartForTest(t, testnode.Options{Name: "e2e-faults", NodeFs: fs, ImageFs: fs})
	t.Run("evictd killed -9 while an evicted pod terminates", func(t *testing.T) { midEviction(t, n, killed9, nativeScale) })
	cleanPods(t, n)
	t.Run("garbled cgroup files", func(t *testing.T) { garbledCgroups(t, n) })
	cleanPods(t, n)
	t.Run("containerd down and back", func(t *testing.T) { containerdDown(t, n, fs) })
	cleanPods(t, n)
}

// passes returns how many passes the running evictd has made.
func passes(t *testing.T, n *testnode.Node) float64 {
	t.Helper()
	body, err := n.EvictdGet(t.Context(), "/metrics")
	if err != nil {
		t.Fatalf("evictd /metrics: %v", err)
	}
	total := 0.0
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "evictd_passes_total{"); ok {
			var v float64
			if _, err := fmt.Sscanf(rest[strings.Index(rest, "}")+1:], "%g", &v); err == nil {
				total += v
			}
		}
	}
	return total
}

// overlay bind-mounts a file holding content over path, as a cgroup file
// that reads as garbage, and returns the function that unmounts it. t's
// cleanup unmounts it too when t ends first (on a failure), and before
// the cleanups registered earlier, such as a pod's deletion. The mount is
// unmounted through a descriptor of it, so it goes even if path's directory
// has gone in the meantime (a pod cgroup removed under it), where unmounting
// by path fails and the mount would outlive the test.
func overlay(t *testing.T, path, content string) (restore func()) {
	t.Helper()
	f := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(f, path, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mount over %s: %v", path, err)
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = unix.Unmount(path, unix.MNT_DETACH)
		t.Fatalf("open the mount over %s: %v", path, err)
	}
	restore = func() {
		if fd < 0 {
			return
		}
		// Detached: a reader that has the garbage open (the kubelet's
		// cAdvisor) keeps it, every new open sees the real file again.
		if err := unix.Unmount(fmt.Sprintf("/proc/self/fd/%d", fd), unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", path, err)
		}
		_ = unix.Close(fd)
		fd = -1
	}
	t.Cleanup(restore)
	return restore
}

// logLines counts the lines of evictd's log from offset on that contain s.
func logLines(t *testing.T, n *testnode.Node, offset int64, s string) int {
	t.Helper()
	return len(logLinesWith(t, n, offset, s))
}

// logLinesWith returns the lines of evictd's log from offset on that
// contain s.
func logLinesWith(t *testing.T, n *testnode.Node, offset int64, s string) []string {
	t.Helper()
	b, err := os.ReadFile(n.LogPath("evictd"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b[min(offset, int64(len(b))):]), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

func logSize(t *testing.T, n *testnode.Node) int64 {
	t.Helper()
	fi, err := os.Stat(n.LogPath("evictd"))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// garbledCgroups makes files evictd reads unreadable for a while: the
// kubepods cgroup's (allocatableMemory.available goes missing, nothing is
// evicted because of it, and it comes back) and a pod's (that pod has no
// stats for as long). Each case waits for a few passes with the fault, so
// evictd makes one every 2 s rather than every 10 s.
func garbledCgroups(t *testing.T, n *testnode.Node) {
	startEvictd(t, n, "--eviction-hard=memory.available<1200Mi", "--eviction-pressure-transition-period=5s", "--housekeeping-interval=2s")
	pod := run(t, n, labelled(n.Pod("plain", "alloc", "--mib", "100")))
	// Each case unmounts its overlay when it ends; whatever one could not
	// is unmounted here, before the pods and their cgroups are deleted
	// (cleanPods, after this test), so that no mount outlives its cgroup.
	t.Cleanup(func() {
		if left, err := testruntime.MountsUnder(n.PodsMemoryCgroup()); err != nil || len(left) > 0 {
			t.Errorf("mounted under the pods' cgroups after the cases: %q (%v)", left, err)
		}
		if err := testruntime.UnmountUnder(n.PodsMemoryCgroup()); err != nil {
			t.Errorf("unmount under the pods' cgroups: %v", err)
		}
	})
	const series = `evictd_signal_available{signal="allocatableMemory.available"}`
	const errSeries = `evictd_signal_errors_total{signal="allocatableMemory.available"}`
	if v := metric(t, n, series); v <= 0 {
		t.Fatalf("%s = %v before the fault", series, v)
	}
	for _, tc := range []struct{ file, content string }{
		{"memory.stat", ""},
		{"memory.stat", "total_inactive_file garbage\n"},
		{"memory.usage_in_bytes", "garbage\n"},
		{"memory.usage_in_bytes", "99999999999999999999999\n"},
	} {
		t.Run(fmt.Sprintf("kubepods %s %q", tc.file, tc.content), func(t *testing.T) {
			offset := logSize(t, n)
			// No series (-1) before the first error: none yet.
			errs0 := max(metric(t, n, errSeries), 0)
			restore := overlay(t, filepath.Join(n.PodsMemoryCgroup(), tc.file), tc.content)
			poll(t, "the signal to go missing", 30*time.Second, func() (bool, string) {
				v := metric(t, n, series)
				return v == -1, fmt.Sprintf("%s = %v", series, v)
			})
			// Several passes with the fault.
			poll(t, "three more signal errors", 30*time.Second, func() (bool, string) {
				v := metric(t, n, errSeries)
				return v >= errs0+3, fmt.Sprintf("%s = %v (was %v)", errSeries, v, errs0)
			})
			if k := logLines(t, n, offset, "some signals could not be read"); k != 1 {
				t.Errorf("%d log lines about the unreadable signal over several passes, want 1:\n%s", k, tail(n.LogPath("evictd"), 20))
			}
			restore()
			poll(t, "the signal to come back", 30*time.Second, func() (bool, string) {
				v := metric(t, n, series)
				return v > 0, fmt.Sprintf("%s = %v", series, v)
			})
			if k := logLines(t, n, offset, "some signals could not be read; they cannot trigger an eviction: resolved"); k != 1 {
				t.Errorf("%d log lines saying the signal is back, want 1", k)
			}
		})
	}
	// No threshold is met here, so no pass reads a pod's cgroup files
	// (Decider.Needs): a garbled one goes unnoticed until a threshold
	// ranks the pods. internal/manager's TestIdlePassReadsNoPodFile shows
	// the pressured pass reporting it once and its recovery.
	t.Run("a pod's memory.stat", func(t *testing.T) {
		offset := logSize(t, n)
		dir := filepath.Join(n.PodsMemoryCgroup(), "besteffort", "pod"+string(pod.UID))
		restore := overlay(t, filepath.Join(dir, "memory.stat"), "garbage\n")
		p0 := passes(t, n)
		poll(t, "three more passes", 30*time.Second, func() (bool, string) {
			v := passes(t, n)
			return v >= p0+3, fmt.Sprintf("%v passes", v)
		})
		if k := logLines(t, n, offset, "pod stats could not be read"); k != 0 {
			t.Errorf("%d log lines about the pod's stats over passes with no threshold met, want none: they read no pod file:\n%s", k, tail(n.LogPath("evictd"), 20))
		}
		restore()
	})
	alive(t, n, "default", "plain")
	if k := evictions(t, n, "default", "plain"); k != 0 {
		t.Errorf("plain: %d Evicted events", k)
	}
	// 0, or no series (-1): none issued.
	if v := metric(t, n, `evictd_evictions_total{eviction_signal="allocatableMemory.available",result="evicted",signal="allocatableMemory.available"}`); v > 0 {
		t.Errorf("evictions during the faults: %v", v)
	}
}

// containerdDown stops containerd beside a running evictd: evictd keeps
// serving and keeps its cgroup signals, evicts the right pod for memory
// (usage from cgroups) through the API server, evicts no pod for a disk
// signal it cannot attribute, and recovers when containerd is back.
func containerdDown(t *testing.T, n *testnode.Node, fs string) {
	free := statfsFree(t, fs)
	threshold := free - 150<<20
	startEvictd(t, n,
		fmt.Sprintf("--eviction-hard=memory.available<1200Mi,nodefs.available<%d,imagefs.available<1Mi", threshold),
		"--eviction-pressure-transition-period=5s")
	run(t, n, labelled(n.Pod("quiet", "sleep")))
	hog := run(t, n, labelled(n.Pod("hog", "alloc", "--mib", "100")))
	pid := n.EvictdPID()
	rt := n.Runtime()
	offset := logSize(t, n)
	if err := rt.StopContainerd(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := rt.StartContainerd(t.Context()); err != nil {
				t.Errorf("start containerd again: %v", err)
			}
		}
	})

	// The runtime's signal goes missing, with one error in the log; the
	// cgroup signals stay.
	const imageFs = `evictd_signal_available{signal="imagefs.available"}`
	poll(t, "imagefs.available to go missing", 30*time.Second, func() (bool, string) {
		v := metric(t, n, imageFs)
		return v == -1, fmt.Sprintf("%s = %v", imageFs, v)
	})
	p0 := passes(t, n)
	poll(t, "three more passes", 40*time.Second, func() (bool, string) {
		v := passes(t, n)
		return v >= p0+3, fmt.Sprintf("%v passes", v)
	})
	if k := logLines(t, n, offset, "some signals could not be read"); k != 1 {
		t.Errorf("%d log lines about the missing imagefs signal, want 1", k)
	}
	if v := metric(t, n, `evictd_signal_errors_total{signal="imagefs.available"}`); v < 3 {
		t.Errorf("evictd_signal_errors_total{signal=imagefs.available} = %v, want at least 3", v)
	}
	if v := metric(t, n, `evictd_signal_available{signal="allocatableMemory.available"}`); v <= 0 {
		t.Errorf("allocatableMemory.available lost with the runtime: %v", v)
	}
	if v := metric(t, n, `evictd_runtime_errors_total{operation="pod-disk-stats"}`); v < 3 {
		t.Errorf("evictd_runtime_errors_total{operation=pod-disk-stats} = %v, want at least 3", v)
	}
	if _, err := n.EvictdGet(t.Context(), "/healthz"); err != nil {
		t.Errorf("/healthz with containerd down: %v", err)
	}

	// Disk: nodefs crosses its threshold, but with the runtime down no pod
	// has disk stats and nothing can be reclaimed: the condition is set,
	// and no pod is evicted for a reason evictd cannot see.
	filler := filepath.Join(fs, "filler")
	writeFile(t, filler, 250)
	poll(t, "EvictdDiskPressure=True", 30*time.Second, func() (bool, string) {
		return conditionIs(t, n, diskCondition, v1.ConditionTrue)
	})
	p0 = passes(t, n)
	poll(t, "three more passes", 40*time.Second, func() (bool, string) {
		v := passes(t, n)
		return v >= p0+3, fmt.Sprintf("%v passes", v)
	})
	// 0, or no series (-1): none issued.
	if v := metric(t, n, fmt.Sprintf(`evictd_evictions_total{eviction_signal="%[1]s",result="evicted",signal="%[1]s"}`, signals.NodeFsAvailable)); v > 0 {
		t.Errorf("evicted %v pods for nodefs.available with no pod's disk use known", v)
	}
	for _, name := range []string{"quiet", "hog"} {
		alive(t, n, "default", name)
	}
	// Reclaim fails every pass: counted each time, said once.
	if v := metric(t, n, `evictd_reclaim_total{kind="images",result="failed"}`); v < 3 {
		t.Errorf("evictd_reclaim_total{kind=images,result=failed} = %v, want at least 3", v)
	}
	if k := logLines(t, n, offset, `msg="node-level reclaim failed"`); k != 1 {
		t.Errorf("%d log lines about the failed reclaim, want 1", k)
	}
	if k := logLines(t, n, offset, "no pod has stats"); k < 1 {
		t.Errorf("the decision log does not say why no pod is evicted for nodefs.available:\n%s", tail(n.LogPath("evictd"), 30))
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	poll(t, "EvictdDiskPressure=False", 30*time.Second, func() (bool, string) {
		return conditionIs(t, n, diskCondition, v1.ConditionFalse)
	})

	// Memory: 1100 MiB more in hog's pod cgroup. Its usage comes from
	// cgroups, so evictd evicts hog, not quiet, through the API server;
	// stopping its containers locally fails and is logged.
	deleted := watchDeletion(t, n, "default", "hog")
	child := testalloc.Start(t, t, allocEnv, 1100)
	child.MoveTo(t, filepath.Join(n.PodsMemoryCgroup(), "besteffort", "pod"+string(hog.UID)))
	child.Allocate(t)
	select {
	case <-deleted:
	case <-time.After(60 * time.Second):
		t.Fatalf("hog not evicted within 60 s with containerd down")
	}
	child.Kill()
	poll(t, "hog's Evicted event", 10*time.Second, func() (bool, string) {
		k := evictions(t, n, "default", "hog")
		return k == 1, fmt.Sprintf("%d events", k)
	})
	evs := evictedEvents(t, n, "default", "hog")
	if !strings.Contains(evs[0].Message, "The node was low on resource: memory.") {
		t.Errorf("hog's Evicted event: %q", evs[0].Message)
	}
	alive(t, n, "default", "quiet")
	poll(t, "the failed local stop in the log", 10*time.Second, func() (bool, string) {
		k := logLines(t, n, offset, "could not stop the pod's containers through the runtime")
		return k == 1, fmt.Sprintf("%d lines", k)
	})
	if v := metric(t, n, `evictd_runtime_errors_total{operation="stop-containers"}`); v != 1 {
		t.Errorf("evictd_runtime_errors_total{operation=stop-containers} = %v, want 1", v)
	}
	if k := logLines(t, n, offset, "stopped the evicted pod's containers through the runtime"); k != 0 {
		t.Errorf("evictd says it stopped hog's containers with containerd down")
	}
	if got := n.EvictdPID(); got != pid {
		t.Fatalf("evictd pid %d, want %d still running", got, pid)
	}

	// containerd back: the runtime's signal returns without a restart, and
	// the kubelet finishes hog.
	restarted = true
	if err := rt.StartContainerd(t.Context()); err != nil {
		t.Fatal(err)
	}
	poll(t, "imagefs.available to come back", 60*time.Second, func() (bool, string) {
		v := metric(t, n, imageFs)
		return v > 0, fmt.Sprintf("%s = %v", imageFs, v)
	})
	if k := logLines(t, n, offset, "some signals could not be read; they cannot trigger an eviction: resolved"); k < 1 {
		t.Errorf("no log line saying the runtime's signals are back")
	}
	poll(t, "hog to go", 90*time.Second, func() (bool, string) { return gone(t, n, "default", "hog") })
	alive(t, n, "default", "quiet")
	if got := n.EvictdPID(); got != pid {
		t.Errorf("evictd pid %d, want %d: it restarted", got, pid)
	}
}

// writeFile writes mib MiB of zeros to path.
func writeFile(t *testing.T, path string, mib int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for range mib {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(path) })
}
