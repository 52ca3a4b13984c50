package host

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"time"

	cadvisorfs "github.com/google/cadvisor/fs"
	// The filesystem types cadvisor can read: ext*, xfs and the like (vfs),
	// tmpfs and overlay (both through statfs). Without a plugin for its type
	// a filesystem is not in cadvisor's partition table at all.
	_ "github.com/google/cadvisor/fs/overlay/install"
	_ "github.com/google/cadvisor/fs/tmpfs/install"
	_ "github.com/google/cadvisor/fs/vfs/install"
	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/signals"
)

// fsInfo is the part of cadvisor's fs.FsInfo used here.
type fsInfo interface {
	GetDirFsDevice(dir string) (*cadvisorfs.DeviceInfo, error)
	GetMountpointForDevice(device string) (string, error)
	GetFsInfoForPath(mountSet map[string]struct{}) ([]cadvisorfs.Fs, error)
}

// errUnknownMount says cadvisor's mount table, parsed once, does not know the
// filesystem of a directory: it was probably mounted after the table was read.
var errUnknownMount = errors.New("filesystem not in the mount table read at start")

// Filesystems finds the filesystem holding a directory and reads its size
// and inodes through cadvisor. cadvisor parses /proc/self/mountinfo once;
// when that table does not know a directory's filesystem, or names another
// device than stat(2) finds for the directory (cadvisor falls back to the
// nearest parent mount it knows, so a filesystem mounted later reads as its
// parent's), Filesystems reads the mounts again once and retries. It is
// safe for concurrent use.
type Filesystems struct {
	mu    sync.Mutex
	info  fsInfo
	build func() (fsInfo, error)
	// statDev is the device number of a directory, from stat(2).
	statDev func(dir string) (major, minor uint, err error)
	// settled holds directories whose device cadvisor names differently
	// from stat(2) even with a fresh mount table (btrfs subvolumes): its
	// answer is taken without reading the mounts again each time.
	settled map[string]bool
	// read holds each directory's last figures and the collection they
	// were read in (StatIn).
	read map[string]statRead
}

// statRead is a directory's figures read in the collection coll.
type statRead struct {
	coll uint64
	st   cadvisorfs.Fs
}

// NewFilesystems returns a Filesystems that reads the mount table on first use.
func NewFilesystems() *Filesystems {
	return &Filesystems{
		build: func() (fsInfo, error) {
			return cadvisorfs.NewFsInfo(cadvisorfs.Context{})
		},
		statDev: func(dir string) (uint, uint, error) {
			var st unix.Stat_t
			if err := unix.Stat(dir, &st); err != nil {
				return 0, 0, err
			}
			return uint(unix.Major(st.Dev)), uint(unix.Minor(st.Dev)), nil
		},
	}
}

// Stat returns cadvisor's figures for the filesystem holding dir.
func (f *Filesystems) Stat(dir string) (cadvisorfs.Fs, error) {
	var st cadvisorfs.Fs
	err := f.retry(func(info fsInfo, fresh bool) error {
		dev, err := f.device(info, dir, fresh)
		if err != nil {
			return err
		}
		st, err = stat(info, dir, dev)
		return err
	})
	return st, err
}

// StatIn is Stat within ctx's signals.Collect call: the second source
// of the same collection (a filesystem's inodes after its bytes) takes the
// figures the first read, so a pass reads each filesystem once (each read
// parses /proc/diskstats whole in cadvisor) and its two signals agree.
// Outside a collection, and after a failed read, it reads again.
func (f *Filesystems) StatIn(ctx context.Context, dir string) (cadvisorfs.Fs, error) {
	coll, in := signals.CollectionOf(ctx)
	if !in {
		return f.Stat(dir)
	}
	f.mu.Lock()
	if r, ok := f.read[dir]; ok && r.coll == coll {
		f.mu.Unlock()
		return r.st, nil
	}
	f.mu.Unlock()
	st, err := f.Stat(dir)
	if err != nil {
		return st, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.read == nil {
		f.read = map[string]statRead{}
	}
	f.read[dir] = statRead{coll: coll, st: st}
	return st, nil
}

// Device returns the device of the filesystem holding dir, as cadvisor names
// it ("/dev/vda", or the mountpoint for tmpfs).
func (f *Filesystems) Device(dir string) (string, error) {
	var dev string
	err := f.retry(func(info fsInfo, fresh bool) error {
		d, err := f.device(info, dir, fresh)
		if err == nil {
			dev = d.Device
		}
		return err
	})
	return dev, err
}

// Dedicated reports whether imagefsDir is on another filesystem than
// nodefsDir, which is how the kubelet decides it has a dedicated imagefs.
func (f *Filesystems) Dedicated(nodefsDir, imagefsDir string) (bool, error) {
	node, err := f.Device(nodefsDir)
	if err != nil {
		return false, fmt.Errorf("nodefs: %w", err)
	}
	image, err := f.Device(imagefsDir)
	if err != nil {
		return false, fmt.Errorf("imagefs: %w", err)
	}
	return node != image, nil
}

// Layout is SingleFs when imagefsDir is empty or on nodefsDir's filesystem,
// DedicatedImageFs otherwise. (SplitImageFs needs the runtime's own view of
// its container filesystem, which is not a path this package knows.)
func (f *Filesystems) Layout(nodefsDir, imagefsDir string) (signals.FsLayout, error) {
	if imagefsDir == "" {
		return signals.SingleFs, nil
	}
	dedicated, err := f.Dedicated(nodefsDir, imagefsDir)
	if err != nil {
		return signals.SingleFs, err
	}
	if dedicated {
		return signals.DedicatedImageFs, nil
	}
	return signals.SingleFs, nil
}

// retry runs read with the current mount table and, if that table was read
// before this call and does not know the filesystem, once more with a fresh
// one. fresh tells read whether its table was read during this call.
func (f *Filesystems) retry(read func(info fsInfo, fresh bool) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fresh := f.info == nil
	if fresh {
		if err := f.rebuild(); err != nil {
			return err
		}
	}
	err := read(f.info, fresh)
	if fresh || !errors.Is(err, errUnknownMount) {
		return err
	}
	if err := f.rebuild(); err != nil {
		return err
	}
	return read(f.info, true)
}

func (f *Filesystems) rebuild() error {
	info, err := f.build()
	if err != nil {
		return fmt.Errorf("read mount table: %w", err)
	}
	f.info = info
	return nil
}

// device finds the device of dir in info and checks it against stat(2).
func (f *Filesystems) device(info fsInfo, dir string, fresh bool) (*cadvisorfs.DeviceInfo, error) {
	dev, err := info.GetDirFsDevice(dir)
	if errors.Is(err, cadvisorfs.ErrDeviceNotInPartitionsMap) {
		return nil, fmt.Errorf("device of %s: %w: %w", dir, errUnknownMount, err)
	}
	if err != nil {
		return nil, fmt.Errorf("device of %s: %w", dir, err)
	}
	major, minor, err := f.statDev(dir)
	if err != nil {
		return nil, fmt.Errorf("device of %s: stat: %w", dir, err)
	}
	if dev.Major == major && dev.Minor == minor || f.settled[dir] {
		return dev, nil
	}
	if !fresh {
		return nil, fmt.Errorf("device of %s: cadvisor names %s (%d:%d), stat finds %d:%d: %w",
			dir, dev.Device, dev.Major, dev.Minor, major, minor, errUnknownMount)
	}
	if f.settled == nil {
		f.settled = map[string]bool{}
	}
	f.settled[dir] = true
	return dev, nil
}

// stat returns cadvisor's figures for the filesystem on dev, which holds dir.
func stat(info fsInfo, dir string, dev *cadvisorfs.DeviceInfo) (cadvisorfs.Fs, error) {
	mountpoint, err := info.GetMountpointForDevice(dev.Device)
	if err != nil {
		return cadvisorfs.Fs{}, fmt.Errorf("mountpoint of %s (device %s): %w: %w", dir, dev.Device, errUnknownMount, err)
	}
	all, err := info.GetFsInfoForPath(map[string]struct{}{mountpoint: {}})
	if err != nil {
		return cadvisorfs.Fs{}, fmt.Errorf("stats of %s (device %s at %s): %w", dir, dev.Device, mountpoint, err)
	}
	for _, st := range all {
		if st.Device == dev.Device {
			return st, nil
		}
	}
	return cadvisorfs.Fs{}, fmt.Errorf("stats of %s: cadvisor has none for device %s at %s: %w", dir, dev.Device, mountpoint, errUnknownMount)
}

// FsSource observes one disk signal of the filesystem holding a directory:
// free bytes for an ephemeral-storage signal (nodefs.available,
// imagefs.available, containerfs.available), free inodes for an inodes one
// (…inodesFree). A filesystem for which cadvisor reports no inodes has no
// inodes observation: that is an error, never a zero.
type FsSource struct {
	fs     *Filesystems
	dir    string
	signal signals.Signal
	inodes bool
}

// NewFsSource observes signal on the filesystem holding dir.
func NewFsSource(fs *Filesystems, dir string, signal signals.Signal) (*FsSource, error) {
	if fs == nil {
		return nil, fmt.Errorf("%s: no Filesystems", signal)
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%s: directory %q is not an absolute path", signal, dir)
	}
	if signal.Pressure() != signals.DiskPressure {
		return nil, fmt.Errorf("%q is not a filesystem signal", signal)
	}
	return &FsSource{fs: fs, dir: dir, signal: signal, inodes: signal.Resource() == signals.ResourceInodes}, nil
}

// NodeFsSources observes nodefs.available and nodefs.inodesFree on the
// filesystem holding the kubelet root dir.
func NodeFsSources(fs *Filesystems, kubeletRootDir string) ([]signals.Source, error) {
	return fsPair(fs, kubeletRootDir, signals.NodeFsAvailable, signals.NodeFsInodesFree)
}

// ImageFsSources observes imagefs.available and imagefs.inodesFree on the
// filesystem holding dir (the --imagefs-path, or a mountpoint the runtime
// reports).
func ImageFsSources(fs *Filesystems, dir string) ([]signals.Source, error) {
	return fsPair(fs, dir, signals.ImageFsAvailable, signals.ImageFsInodesFree)
}

func fsPair(fs *Filesystems, dir string, bytes, inodes signals.Signal) ([]signals.Source, error) {
	var out []signals.Source
	for _, s := range []signals.Signal{bytes, inodes} {
		src, err := NewFsSource(fs, dir, s)
		if err != nil {
			return nil, err
		}
		out = append(out, src)
	}
	return out, nil
}

// Observe reads the signal, stamped with now.
func (s *FsSource) Observe(ctx context.Context, now time.Time) ([]signals.Observation, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", s.signal, err)
	}
	st, err := s.fs.StatIn(ctx, s.dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.signal, err)
	}
	var available, capacity uint64
	if s.inodes {
		if st.Inodes == nil || *st.Inodes == 0 || st.InodesFree == nil {
			return nil, fmt.Errorf("%s: filesystem %s holding %s reports no inodes", s.signal, st.Device, s.dir)
		}
		available, capacity = *st.InodesFree, *st.Inodes
	} else {
		available, capacity = st.Available, st.Capacity
	}
	if capacity == 0 || capacity > math.MaxInt64 || available > capacity {
		return nil, fmt.Errorf("%s: filesystem %s holding %s reports %d available of %d", s.signal, st.Device, s.dir, available, capacity)
	}
	return []signals.Observation{{
		Signal:    s.signal,
		Available: int64(available),
		Capacity:  int64(capacity),
		Time:      now,
	}}, nil
}
