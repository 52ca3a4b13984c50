package host

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/evictd/evictd/signals"
)

// TestRealTmpfsImageFs mounts a small tmpfs as imagefs after the mount table
// was first read, so the sources must read it again, and checks its exact
// size and inodes and the dedicated-imagefs layout.
func TestRealTmpfsImageFs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	nodeDir, imageDir := t.TempDir(), t.TempDir()
	fs := NewFilesystems()
	if _, err := fs.Device(nodeDir); err != nil {
		t.Fatalf("nodefs device: %v", err)
	}
	if err := syscall.Mount("tmpfs", imageDir, "tmpfs", 0, "size=64m,nr_inodes=1000"); err != nil {
		t.Skipf("cannot mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(imageDir, 0); err != nil {
			t.Errorf("unmount %s: %v", imageDir, err)
		}
	})
	srcs, err := ImageFsSources(fs, imageDir)
	if err != nil {
		t.Fatal(err)
	}
	observe := func() (bytes, inodes signals.Observation) {
		return observeOne(t, srcs[0]), observeOne(t, srcs[1])
	}
	check := func(what string, got signals.Observation, signal signals.Signal, available, capacity int64) {
		t.Helper()
		want := signals.Observation{Signal: signal, Available: available, Capacity: capacity, Time: now}
		if got != want {
			t.Errorf("%s: got %+v, want %+v", what, got, want)
		}
	}

	bytes, inodes := observe()
	check("empty", bytes, signals.ImageFsAvailable, 64<<20, 64<<20)
	check("empty", inodes, signals.ImageFsInodesFree, 999, 1000) // the root directory uses one

	if err := os.WriteFile(filepath.Join(imageDir, "layer"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	bytes, inodes = observe()
	check("one 1 MiB file", bytes, signals.ImageFsAvailable, 63<<20, 64<<20)
	check("one 1 MiB file", inodes, signals.ImageFsInodesFree, 998, 1000)

	tests := []struct {
		name        string
		node, image string
		want        signals.FsLayout
	}{
		{"tmpfs imagefs is dedicated", nodeDir, imageDir, signals.DedicatedImageFs},
		{"imagefs on the nodefs disk is single", nodeDir, t.TempDir(), signals.SingleFs},
		{"no imagefs is single", nodeDir, "", signals.SingleFs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fs.Layout(tc.node, tc.image)
			if err != nil || got != tc.want {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
