package testruntime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// MountsUnder returns the mount points at or below dir in this process's
// mount namespace (from /proc/self/mountinfo, read by moby/sys/mountinfo),
// deepest first.
func MountsUnder(dir string) ([]string, error) {
	infos, err := mountinfo.GetMounts(mountinfo.PrefixFilter(filepath.Clean(dir)))
	if err != nil {
		return nil, fmt.Errorf("mounts under %s: %w", dir, err)
	}
	mounts := make([]string, len(infos))
	for i, m := range infos {
		mounts[i] = m.Mountpoint
	}
	// Deeper paths sort after their parents; unmount in reverse order.
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	return mounts, nil
}

// UnmountUnder unmounts everything mounted at or below dir, deepest first;
// a busy mount is detached (MNT_DETACH) instead. A mount stacked several
// times over the same point is unmounted as often as it appears.
func UnmountUnder(dir string) error {
	mounts, err := MountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, mp := range mounts {
		err := unix.Unmount(mp, 0)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(mp, unix.MNT_DETACH)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}

// MountTmpfs mounts a tmpfs of the given size ("64m", "1g": mount(8)'s
// size=) limited to inodes inodes (0: the kernel's default) on a new
// directory and returns it; it is unmounted, with anything mounted below it,
// and removed when t ends. It skips t when not root (fails it under CI=true).
func MountTmpfs(t testing.TB, size string, inodes int) string {
	t.Helper()
	requireRoot(t)
	dir := t.TempDir()
	opts := "size=" + size
	if inodes > 0 {
		opts += ",nr_inodes=" + strconv.Itoa(inodes)
	}
	if _, err := runCommand("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir); err != nil {
		t.Fatalf("testruntime: %v", err)
	}
	t.Cleanup(func() {
		if err := UnmountUnder(dir); err != nil {
			t.Errorf("testruntime: tmpfs %s: %v", dir, err)
		}
	})
	return dir
}

// MountExt4 makes an ext4 filesystem of sizeMiB MiB in a sparse image file
// (mkfs.ext4 -q -m 0: no blocks reserved for root, so what is free is also
// available), loop-mounts it on a new directory and returns the directory;
// it is unmounted (which frees the loop device), with anything mounted below
// it, and the image removed when t ends. mkfs.ext4's default inode ratio
// gives one inode per 16 KiB at these sizes (4096 for 64 MiB). It skips t
// when not root (fails it under CI=true).
func MountExt4(t testing.TB, sizeMiB int) string {
	t.Helper()
	requireRoot(t)
	if sizeMiB < 8 {
		t.Fatalf("testruntime: MountExt4: %d MiB is too small for ext4 (at least 8)", sizeMiB)
	}
	base := t.TempDir()
	img, dir := filepath.Join(base, "ext4.img"), filepath.Join(base, "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("testruntime: %v", err)
	}
	f, err := os.Create(img)
	if err == nil {
		err = errors.Join(f.Truncate(int64(sizeMiB)<<20), f.Close())
	}
	if err != nil {
		t.Fatalf("testruntime: create %s: %v", img, err)
	}
	if _, err := runCommand(mkfsExt4(), "-q", "-F", "-m", "0", img); err != nil {
		t.Fatalf("testruntime: %v", err)
	}
	if _, err := runCommand("mount", "-t", "ext4", "-o", "loop", img, dir); err != nil {
		t.Fatalf("testruntime: %v", err)
	}
	t.Cleanup(func() {
		if err := UnmountUnder(dir); err != nil {
			t.Errorf("testruntime: ext4 %s: %v", dir, err)
		}
	})
	return dir
}

// mkfsExt4 returns mkfs.ext4's path: Debian keeps it in /usr/sbin, which a
// non-root PATH may lack.
func mkfsExt4() string {
	for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "mkfs.ext4"
}

// overlayWorks mounts a small overlay (lower, upper and work directories in
// dir) and unmounts it again: containerd's overlayfs snapshotter needs the
// filesystem of its root to serve as an upper directory.
func overlayWorks(dir string) error {
	tmp, err := os.MkdirTemp(dir, "overlay-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var sub [4]string
	for i, name := range []string{"lower", "upper", "work", "merged"} {
		sub[i] = filepath.Join(tmp, name)
		if err := os.Mkdir(sub[i], 0o755); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", sub[0], sub[1], sub[2])
	if err := unix.Mount("overlay", sub[3], "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay on %s: %w", dir, err)
	}
	return unix.Unmount(sub[3], 0)
}
