package wakeup

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testalloc"
)

const unifiedMount = "/sys/fs/cgroup/unified"

// TestPSITriggerArmAndClose writes a real trigger to /proc/pressure/memory
// and to a cgroup v2 cgroup's memory.pressure, runs it and stops it; every
// descriptor and goroutine is released. A real stall cannot be caused on
// purpose here, so the wake-up itself is not tested.
func TestPSITriggerArmAndClose(t *testing.T) {
	requireRoot(t)
	paths := []string{"/proc/pressure/memory"}
	if _, err := os.Stat(filepath.Join(unifiedMount, "memory.pressure")); err == nil {
		paths = append(paths, filepath.Join(testCgroup(t, unifiedMount), "memory.pressure"))
	}
	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			if _, err := os.Stat(path); err != nil {
				skipOrFail(t, "no PSI: %v", err)
			}
			fds, goroutines := openFDs(t), runtime.NumGoroutine()
			p, err := NewPSITrigger(path, DefaultPSISpec)
			if err != nil {
				t.Fatal(err)
			}
			// arm is what Run does first: the kernel accepts the trigger.
			fd, err := p.arm()
			if err != nil {
				t.Fatalf("arm: %v", err)
			}
			closeFD(t, fd)

			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx, func() {}) }()
			waitFor(t, "the trigger's descriptors", func() bool { return openFDs(t) >= fds+3 }) // file, epoll, stop eventfd
			cancel()
			waitDone(t, done)
			checkNoLeak(t, fds, goroutines)
		})
	}
}

func TestPSITriggerRejected(t *testing.T) {
	if _, err := NewPSITrigger("/proc/pressure/memory", PSISpec{Stall: time.Second, Window: time.Second / 10}); err == nil ||
		!strings.HasPrefix(err.Error(), "/proc/pressure/memory: PSI trigger window 100ms") {
		t.Errorf("got %v, want the window named", err)
	}
	p, err := NewPSITrigger(filepath.Join(t.TempDir(), "memory.pressure"), DefaultPSISpec)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(t.Context(), func() {}); err == nil || !strings.Contains(err.Error(), "memory.pressure") {
		t.Errorf("missing file: got %v, want an error naming it", err)
	}
}

// TestFileEventsReal watches a cgroup v2 cgroup's cgroup.events, which the
// kernel notifies through the same kernfs mechanism as memory.events, and
// moves a child in: "populated 0" becomes "populated 1" and Run wakes.
func TestFileEventsReal(t *testing.T) {
	requireRoot(t)
	if _, err := os.Stat(filepath.Join(unifiedMount, "cgroup.procs")); err != nil {
		skipOrFail(t, "no cgroup v2 hierarchy at %s: %v", unifiedMount, err)
	}
	fds, goroutines := openFDs(t), runtime.NumGoroutine()
	t.Cleanup(func() { checkNoLeak(t, fds, goroutines) })
	dir := testCgroup(t, unifiedMount)
	child := testalloc.Start(t, t, allocEnv, 1)

	f := NewFileEvents(filepath.Join(dir, "cgroup.events"), func(prev, cur []byte) bool { return string(prev) != string(cur) })
	wakes := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, func() { wakes <- struct{}{} }) }()
	waitFor(t, "the watch", func() bool { return openFDs(t) >= fds+3+3 }) // child's pipes and pidfd; file, epoll, stop eventfd
	child.MoveTo(t, dir)
	waitWake(t, wakes, "cgroup.events changed to populated 1")
	cancel()
	waitDone(t, done)
}

func TestMemoryEventsMissing(t *testing.T) {
	dir := t.TempDir()
	f := NewMemoryEvents(dir)
	if got, want := f.Path(), filepath.Join(dir, "memory.events"); got != want {
		t.Errorf("got path %s, want %s", got, want)
	}
	if err := f.Run(t.Context(), func() {}); err == nil || !strings.Contains(err.Error(), "memory.events") {
		t.Errorf("got %v, want an error naming memory.events", err)
	}
}

// TestPSITriggerUnprivilegedWindow: without CAP_SYS_RESOURCE a 1s window
// is refused, and the error says why.
func TestPSITriggerUnprivilegedWindow(t *testing.T) {
	requireRoot(t)
	p, err := NewPSITrigger("/proc/pressure/memory", PSISpec{Stall: 100 * time.Millisecond, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fd, err := p.arm()
	if err == nil {
		closeFD(t, fd)
		t.Skip("this process has CAP_SYS_RESOURCE: any window is accepted")
	}
	if !strings.Contains(err.Error(), "without CAP_SYS_RESOURCE the window must be a multiple of 2s") {
		t.Errorf("got %v, want the 2s hint", err)
	}
}
