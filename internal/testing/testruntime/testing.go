package testruntime

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/childproc"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// skipOrFail skips t, or fails it under CI=true, where `make test` installs
// everything first so a missing piece is a failure.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("testruntime: "+format, args...)
	}
	t.Skipf("testruntime: "+format, args...)
}

// requireRoot skips t (fails it under CI=true) when not running as root.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root (mounts, containerd)")
	}
}

// StartForTest starts a runtime for t and stops it when t and its subtests
// end. It skips t when not root or when containerd or runc is not installed
// (except under CI=true, where it fails), and fails t when the runtime does
// not start. If t fails, the end of containerd's log is logged before the
// runtime is stopped.
func StartForTest(t testing.TB, opts Options) *Runtime {
	t.Helper()
	requireRoot(t)
	if opts.BinDir == "" {
		// The lane's containerd: the cache's, PATH's ("") in the previous lane.
		dir, err := testcluster.ContainerdBinDir()
		if errors.Is(err, testcluster.ErrNoBinaries) {
			skipOrFail(t, "%v", err)
		}
		if err != nil {
			t.Fatalf("testruntime: %v", err)
		}
		opts.BinDir = dir
	}
	r, err := Start(t.Context(), opts)
	if errors.Is(err, ErrNotInstalled) {
		skipOrFail(t, "%v", err)
	}
	if err != nil {
		t.Fatalf("testruntime: start: %v", err)
	}
	t.Logf("testruntime: containerd at %s (%s snapshotter, root %s) ready in %s; log %s",
		r.Socket(), r.Snapshotter(), r.RootDir(), r.ReadyIn().Round(time.Millisecond), r.LogPath())
	if r.BinDir() != "" {
		t.Logf("testruntime: containerd, ctr and the runc shim from %s", r.BinDir())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testruntime: last lines of %s:\n%s", r.LogPath(), childproc.Tail(r.LogPath(), 40))
		}
		if err := r.Stop(); err != nil {
			t.Errorf("testruntime: stop: %v", err)
		}
	})
	return r
}
