package cri

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/testing/testruntime"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
)

const callTimeout = 2 * time.Second

// dial connects to rt for t and closes the client when t ends.
func dial(t *testing.T, rt *testruntime.Runtime) *Client {
	t.Helper()
	c, err := Dial(t.Context(), rt.Endpoint(), "", callTimeout, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Dial(%s): %v", rt.Endpoint(), err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// observe returns the source's observations by signal.
func observe(t *testing.T, src signals.Source) signals.Observations {
	t.Helper()
	got, err := signals.Collect(t.Context(), time.Now(), []signals.Source{src})
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	return got
}

func statfs(t *testing.T, dir string) unix.Statfs_t {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestImageFsDedicated: containerd's root on a loop-mounted ext4, the kubelet
// root dir on a tmpfs. The layout is dedicated; the imagefs observations are
// statfs of the ext4 and follow an image import.
func TestImageFsDedicated(t *testing.T) {
	root := testruntime.MountExt4(t, 256)
	kubeletDir := testruntime.MountTmpfs(t, "64m", 10000)
	rt := testruntime.StartForTest(t, testruntime.Options{Root: root})
	c := dial(t, rt)
	fs := host.NewFilesystems()

	info, err := c.Filesystems(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if mp := info.ImageMountpoint(); !strings.HasPrefix(mp, rt.RootDir()+"/") {
		t.Errorf("image mountpoint %q, want one below %s", mp, rt.RootDir())
	}
	t.Logf("ImageFsInfo: images %+v, containers %+v", info.Images, info.Containers)
	if got, err := Layout(t.Context(), c, fs, kubeletDir); err != nil || got != signals.DedicatedImageFs {
		t.Errorf("Layout = %s, %v; want %s", got, err, signals.DedicatedImageFs)
	}

	src, err := NewImageFsSource(c, fs)
	if err != nil {
		t.Fatal(err)
	}
	check := func() int64 {
		got := observe(t, src)
		st := statfs(t, root)
		bsize := st.Bsize
		avail := got[signals.ImageFsAvailable]
		if want := int64(st.Bavail) * bsize; abs(avail.Available-want) > 2*bsize {
			t.Errorf("imagefs.available = %d, statfs of %s: %d (block %d)", avail.Available, root, want, bsize)
		}
		if want := int64(st.Blocks) * bsize; avail.Capacity != want {
			t.Errorf("imagefs.available capacity = %d, statfs: %d", avail.Capacity, want)
		}
		inodes := got[signals.ImageFsInodesFree]
		if want := int64(st.Ffree); abs(inodes.Available-want) > 2 || inodes.Capacity != int64(st.Files) {
			t.Errorf("imagefs.inodesFree = %d of %d, statfs: %d of %d", inodes.Available, inodes.Capacity, want, st.Files)
		}
		if _, ok := got[signals.ContainerFsAvailable]; ok {
			t.Errorf("containerfs.available observed, but containerd 1.6 reports no container filesystem")
		}
		return avail.Available
	}
	before := check()
	const extraMiB = 30
	if err := rt.ImportImage(t.Context(), "evictd.test/big:1", extraMiB); err != nil {
		t.Fatal(err)
	}
	after := check()
	t.Logf("imagefs.available %d before the import of a %d MiB layer, %d after", before, extraMiB, after)
	if before-after < extraMiB<<20 {
		t.Errorf("imagefs.available fell by %d bytes with a %d MiB layer imported, want at least %d", before-after, extraMiB, extraMiB<<20)
	}
}

// TestImageFsSingle: containerd's root and the kubelet root dir on the same
// filesystem make the single layout.
func TestImageFsSingle(t *testing.T) {
	root := testruntime.MountExt4(t, 128)
	kubeletDir := filepath.Join(root, "kubelet")
	if err := os.Mkdir(kubeletDir, 0o750); err != nil {
		t.Fatal(err)
	}
	rt := testruntime.StartForTest(t, testruntime.Options{Root: root})
	c := dial(t, rt)
	if got, err := Layout(t.Context(), c, host.NewFilesystems(), kubeletDir); err != nil || got != signals.SingleFs {
		t.Errorf("Layout = %s, %v; want %s", got, err, signals.SingleFs)
	}
	// Reclaim must never remove the sandbox image: the runtime names it
	// (containerd 1.x) or reports it pinned (containerd 2).
	sandboxProtected(t, c, rt)
}

// sandboxProtected fails t unless the runtime tells its sandbox image
// (testruntime.PauseImage) apart: by name in SandboxImage, or, when that
// names none, as a pinned image in ListImages.
func sandboxProtected(t *testing.T, c *Client, rt *testruntime.Runtime) {
	t.Helper()
	got, err := c.SandboxImage(t.Context())
	if err != nil {
		t.Fatalf("SandboxImage: %v", err)
	}
	if got != "" {
		if got != testruntime.PauseImage {
			t.Errorf("SandboxImage = %q; want %q", got, testruntime.PauseImage)
		}
		return
	}
	imgs, err := c.ImageService().ListImages(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var pinned []string
	for _, img := range imgs {
		if img.GetPinned() {
			pinned = append(pinned, img.GetRepoTags()...)
		}
		if slices.Contains(img.GetRepoTags(), testruntime.PauseImage) && !img.GetPinned() {
			t.Errorf("SandboxImage names none and ListImages reports %s not pinned: reclaim could remove the sandbox image", testruntime.PauseImage)
		}
	}
	t.Logf("the runtime (%s) names no sandbox image; pinned: %q", rt.BinDir(), pinned)
	if !slices.Contains(pinned, testruntime.PauseImage) {
		t.Errorf("SandboxImage names none and ListImages has no pinned %s (pinned: %q)", testruntime.PauseImage, pinned)
	}
}

// TestRuntimeDown: while containerd is frozen or stopped the imagefs signals
// go missing (an error naming the endpoint) within the call timeout and a
// refresh, no pass ever waits on the runtime once it has answered, and the
// signals come back when it runs again.
func TestRuntimeDown(t *testing.T) {
	rt := testruntime.StartForTest(t, testruntime.Options{Root: testruntime.MountTmpfs(t, "128m", 10000)})
	c := dial(t, rt)
	src, err := NewImageFsSource(c, host.NewFilesystems())
	if err != nil {
		t.Fatal(err)
	}
	if got := observe(t, src); len(got) != 2 {
		t.Fatalf("with containerd up: %v, want imagefs.available and imagefs.inodesFree", got)
	}
	// A frozen containerd (SIGSTOP) accepts connections and never answers:
	// the background request ends at its timeout.
	pid := rt.PID()
	t.Cleanup(func() { _ = unix.Kill(pid, unix.SIGCONT) }) // before the runtime's Stop
	if err := unix.Kill(pid, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, pid)
	err = untilMissing(t, src, rt.Endpoint(), "frozen")
	if err := unix.Kill(pid, unix.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("with containerd frozen: %v", err)
	untilPresent(t, src, "thawed")

	if err := rt.StopContainerd(); err != nil {
		t.Fatal(err)
	}
	t.Logf("with containerd stopped: %v", untilMissing(t, src, rt.Endpoint(), "stopped"))
	ds, err := NewDiskStats(c, DiskStatsConfig{KubeletRootDir: t.TempDir(), PodLogsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, perr := ds.PodStats(t.Context(), time.Now(), nil); perr == nil || !strings.Contains(perr.Error(), rt.Endpoint()) {
		t.Errorf("DiskStats.PodStats with containerd stopped: %v, want an error naming %s", perr, rt.Endpoint())
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := rt.StartContainerd(ctx); err != nil {
		t.Fatal(err)
	}
	untilPresent(t, src, "started again")
}

// TestRuntimeFrozenFromStart: a runtime that never answered holds only the
// first pass, for the call timeout; the passes after it end at once with
// the signals missing and an error naming the endpoint, and the signals
// come once it answers.
func TestRuntimeFrozenFromStart(t *testing.T) {
	rt := testruntime.StartForTest(t, testruntime.Options{Root: testruntime.MountTmpfs(t, "128m", 10000)})
	c := dial(t, rt)
	src, err := NewImageFsSource(c, host.NewFilesystems())
	if err != nil {
		t.Fatal(err)
	}
	pid := rt.PID()
	t.Cleanup(func() { _ = unix.Kill(pid, unix.SIGCONT) }) // before the runtime's Stop
	if err := unix.Kill(pid, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, pid)
	begin := time.Now()
	got, err := signals.Collect(t.Context(), time.Now(), []signals.Source{src})
	t.Logf("first pass, containerd frozen: %s, %v", time.Since(begin).Round(time.Millisecond), err)
	if err == nil || len(got) != 0 || !strings.Contains(err.Error(), rt.Endpoint()) {
		t.Fatalf("first pass with containerd frozen: %v, %v; want no observation and an error naming %s", got, err, rt.Endpoint())
	}
	// Passes for longer than a refresh and a call timeout: none waits.
	for end := time.Now().Add(callTimeout + 2*imageFsRefresh); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		begin := time.Now()
		got, err := signals.Collect(t.Context(), time.Now(), []signals.Source{src})
		if took := time.Since(begin); took > passLimit {
			t.Errorf("a pass after the first with containerd frozen took %s, want at most %s (no wait on the runtime)", took, passLimit)
		}
		if err == nil || len(got) != 0 || !strings.Contains(err.Error(), rt.Endpoint()) {
			t.Fatalf("a pass after the first with containerd frozen: %v, %v; want no observation and an error naming %s", got, err, rt.Endpoint())
		}
	}
	if err := unix.Kill(pid, unix.SIGCONT); err != nil {
		t.Fatal(err)
	}
	untilPresent(t, src, "thawed")
}

// passLimit bounds one pass of the image filesystem source once the runtime
// has answered: two statfs calls, never a wait on the runtime.
const passLimit = 500 * time.Millisecond

// untilMissing observes src every 100 ms until its signals are missing,
// and returns the error: it must come within the call timeout and a
// refresh, name endpoint, and no pass may wait on the runtime meanwhile.
func untilMissing(t *testing.T, src signals.Source, endpoint, state string) error {
	t.Helper()
	deadline := time.Now().Add(callTimeout + imageFsRefresh + time.Second)
	for {
		begin := time.Now()
		got, err := signals.Collect(t.Context(), time.Now(), []signals.Source{src})
		if took := time.Since(begin); took > passLimit {
			t.Errorf("with containerd %s: a pass took %s, want at most %s (no wait on the runtime)", state, took, passLimit)
		}
		if err != nil {
			if len(got) != 0 || !strings.Contains(err.Error(), endpoint) {
				t.Errorf("with containerd %s: %v, %v; want no observation and an error naming %s", state, got, err, endpoint)
			}
			return err
		}
		if time.Now().After(deadline) {
			t.Fatalf("with containerd %s: the signals still present after %s: %v", state, callTimeout+imageFsRefresh+time.Second, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// untilPresent observes src until both imagefs signals are back, within
// 30 s.
func untilPresent(t *testing.T, src signals.Source, state string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := signals.Collect(t.Context(), time.Now(), []signals.Source{src})
		if err == nil && len(got) == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("with containerd %s: %v, %v after 30 s, want both imagefs signals", state, got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitStopped waits until every thread of pid is stopped: SIGSTOP takes
// effect asynchronously.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		stopped := true
		stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		for _, p := range stats {
			b, err := os.ReadFile(p)
			// The state follows the command name in parentheses.
			if i := strings.LastIndexByte(string(b), ')'); err == nil && i > 0 && i+2 < len(b) && b[i+2] != 'T' {
				stopped = false
			}
		}
		if stopped && len(stats) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd (pid %d) not stopped after SIGSTOP", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
