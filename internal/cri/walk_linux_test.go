package cri

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/signals"
)

// TestWalkHeapBounded walks a directory of twice the entry cap: the walk
// must fail with errTooMany having allocated a bounded amount, not the
// names of the whole directory first (filepath.WalkDir allocated 50 MiB
// here).
func TestWalkHeapBounded(t *testing.T) {
	const maxEntries = 100_000
	dir := t.TempDir()
	makeEmptyFiles(t, dir, 2*maxEntries)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := walkUsage(t, dir, maxEntries)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errTooMany) {
		t.Fatalf("walk of %d entries with a cap of %d: %v, want %v", 2*maxEntries, maxEntries, err, errTooMany)
	}
	// Every allocation of the walk counts, garbage included: a bound on
	// TotalAlloc bounds the heap the walk can have used at any moment.
	total := after.TotalAlloc - before.TotalAlloc
	t.Logf("walk allocated %.1f MiB in total; heap %.1f MiB after, %.1f MiB before",
		float64(total)/(1<<20), float64(after.HeapAlloc)/(1<<20), float64(before.HeapAlloc)/(1<<20))
	const most = 8 << 20
	if total > most {
		t.Errorf("walk allocated %d bytes, want at most %d", total, most)
	}
}

// makeEmptyFiles creates n empty files in dir.
func makeEmptyFiles(t *testing.T, dir string, n int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for i := range n {
		f, err := unix.Openat(fd, fmt.Sprintf("f%07d", i), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o640)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(f)
	}
}

// TestWalkSymlinkSwap walks a pod's directory 5,000 times while the pod
// keeps swapping its subdirectory for a symlink to a host directory full
// of big files: no walk may count anything of the host directory.
func TestWalkSymlinkSwap(t *testing.T) {
	host := t.TempDir()
	for i := range 16 {
		writeFile(t, filepath.Join(host, fmt.Sprintf("secret%d", i)), 256<<10)
	}
	pod := t.TempDir()
	sub, lnk := filepath.Join(pod, "sub"), filepath.Join(pod, "lnk")
	writeFile(t, filepath.Join(sub, "a"), 4<<10)
	if err := os.Symlink(host, lnk); err != nil {
		t.Fatal(err)
	}
	own, err := walkUsage(t, pod, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// The pod's directory, sub and its file, the symlink. Its two names
	// each stand, when read, for the directory (with its file) or the
	// symlink: counted twice at most, the pod's own inodes add up to
	// at most twice their usage. One file of the host's is 256 KiB.
	most := signals.FsUsage{Bytes: 2 * own.Bytes, Inodes: 2 * own.Inodes}
	t.Logf("the pod's directory alone: %+v", own)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, sub, unix.AT_FDCWD, lnk, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("swap %s and %s: %v", sub, lnk, err)
				return
			}
		}
	})
	escaped := 0
	for i := range 5000 {
		u, err := walkUsage(t, pod, 1000)
		if err != nil {
			t.Errorf("walk %d: %v", i, err)
			continue
		}
		if u.Bytes > most.Bytes || u.Inodes > most.Inodes {
			if escaped++; escaped <= 3 {
				t.Errorf("walk %d counted %+v, more than the pod's own inodes add up to (%+v)", i, u, most)
			}
		}
	}
	close(stop)
	wg.Wait()
	if escaped > 0 {
		t.Errorf("%d of 5000 walks counted the host's directory", escaped)
	}
}

// TestWalkDepthBounded walks, with the fds the process may still open
// lowered to maxDepth, a tree as deep as a walk enters, then one a level
// deeper: the first is measured, the second fails with errTooDeep rather
// than running out of fds, and neither leaves an fd open.
func TestWalkDepthBounded(t *testing.T) {
	top := t.TempDir()
	deepest := top
	for range maxDepth - 1 {
		deepest = filepath.Join(deepest, "d")
	}
	if err := os.MkdirAll(deepest, 0o750); err != nil {
		t.Fatal(err)
	}
	open := openFds(t)
	limitFds(t, uint64(open+maxDepth))

	u, n, err := walk(t.Context(), top, 1000)
	if err != nil || u.Inodes != maxDepth || n != maxDepth {
		t.Errorf("walk of %d nested directories: %+v, %d entries, %v; want %d inodes and entries", maxDepth, u, n, err, maxDepth)
	}
	if err := os.Mkdir(filepath.Join(deepest, "d"), 0o750); err != nil {
		t.Fatal(err)
	}
	if _, _, err := walk(t.Context(), top, 1000); !errors.Is(err, errTooDeep) {
		t.Errorf("walk of %d nested directories: %v, want %v", maxDepth+1, err, errTooDeep)
	}
	if got := openFds(t); got != open {
		t.Errorf("%d fds open after the walks, want %d as before", got, open)
	}
}

// openFds counts the process's open fds.
func openFds(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds) - 1 // the one that read them
}

// limitFds lowers the soft limit of the process's fds to n until the test
// ends.
func limitFds(t *testing.T, n uint64) {
	t.Helper()
	var was unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &was); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: was.Max}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &was); err != nil {
			t.Error(err)
		}
	})
}

func walkUsage(t *testing.T, dir string, maxEntries int) (signals.FsUsage, error) {
	u, _, err := walk(t.Context(), dir, maxEntries)
	return u, err
}
