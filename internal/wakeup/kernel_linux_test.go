package wakeup

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testalloc"
)

// allocEnv makes the test binary a child holding this many MiB (testalloc).
const allocEnv = "EVICTD_NOTIFY_TEST_ALLOC_MIB"

func TestMain(m *testing.M) {
	if v := os.Getenv(allocEnv); v != "" {
		os.Exit(testalloc.Hold(allocEnv, v, 512))
	}
	os.Exit(m.Run())
}

// skipOrFail skips t, or fails it under CI=true, where a missing piece of
// the machine is a failure.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root (cgroups, PSI triggers)")
	}
}

// testCgroup creates a cgroup named evictd-notify-test-<random> under
// parent, removed when t ends (after the processes t put in it are killed:
// register those cleanups later).
func testCgroup(t *testing.T, parent string) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "evictd-notify-test-"+hex.EncodeToString(b))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create cgroup: %v", err)
	}
	t.Cleanup(func() {
		// A cgroup whose last task just exited can be busy a moment.
		var err error
		for range 100 {
			if err = os.Remove(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("remove cgroup %s: %v", dir, err)
	})
	return dir
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// checkNoLeak waits (bounded) until the fd and goroutine counts are back
// to what they were, and fails t if they are not.
func checkNoLeak(t *testing.T, fds, goroutines int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		f, g := openFDs(t), runtime.NumGoroutine()
		if f <= fds && g <= goroutines {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leak: %d open fds (was %d), %d goroutines (was %d)", f, fds, g, goroutines)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitWake waits (bounded) for a wake-up on wakes.
func waitWake(t *testing.T, wakes <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-wakes:
	case <-time.After(10 * time.Second):
		t.Fatalf("no wake-up within 10s: %s", what)
	}
}

func waitDone(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: got %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of its context's end")
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func closeFD(t *testing.T, fd int) {
	t.Helper()
	if err := os.NewFile(uintptr(fd), "fd").Close(); err != nil {
		t.Fatal(err)
	}
}
