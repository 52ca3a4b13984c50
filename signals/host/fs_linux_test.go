package host

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	cadvisorfs "github.com/google/cadvisor/fs"

	"github.com/evictd/evictd/signals"
)

// fakeFsInfo is one mount table as cadvisor would have parsed it.
type fakeFsInfo struct {
	devices map[string]cadvisorfs.DeviceInfo // directory → device
	mounts  map[string]string                // device → mountpoint
	stats   map[string]cadvisorfs.Fs         // mountpoint → figures
	reads   int                              // GetFsInfoForPath calls
}

func (f *fakeFsInfo) GetDirFsDevice(dir string) (*cadvisorfs.DeviceInfo, error) {
	if dir == "/gone" {
		return nil, fmt.Errorf("stat failed on %s with error: no such file or directory", dir)
	}
	dev, ok := f.devices[dir]
	if !ok {
		return nil, fmt.Errorf("with major: 7, minor: 0: %w", cadvisorfs.ErrDeviceNotInPartitionsMap)
	}
	return &dev, nil
}

func (f *fakeFsInfo) GetMountpointForDevice(dev string) (string, error) {
	mp, ok := f.mounts[dev]
	if !ok {
		return "", fmt.Errorf("no partition info for device %q", dev)
	}
	return mp, nil
}

func (f *fakeFsInfo) GetFsInfoForPath(set map[string]struct{}) ([]cadvisorfs.Fs, error) {
	f.reads++
	var out []cadvisorfs.Fs
	for mp := range set {
		if st, ok := f.stats[mp]; ok {
			out = append(out, st)
		}
	}
	return out, nil
}

func u64(v uint64) *uint64 { return &v }

var (
	devVda = cadvisorfs.DeviceInfo{Device: "/dev/vda", Major: 254, Minor: 0}
	devVdb = cadvisorfs.DeviceInfo{Device: "/dev/vdb", Major: 254, Minor: 16}
	// onDisk is where each directory really is, as stat(2) would say.
	onDisk = map[string]cadvisorfs.DeviceInfo{
		"/var/lib/kubelet": devVda, "/var/lib/kubelet/pods": devVda, "/var/lib/containerd": devVdb,
		// A btrfs subvolume: stat finds an anonymous device, cadvisor the disk.
		"/var/lib/btrfs": {Major: 0, Minor: 55},
	}
)

func diskFs(dev cadvisorfs.DeviceInfo, capacity, available uint64, inodes, free *uint64) cadvisorfs.Fs {
	return cadvisorfs.Fs{DeviceInfo: dev, Capacity: capacity, Free: available, Available: available, Inodes: inodes, InodesFree: free}
}

// table holds /var/lib/kubelet on /dev/vda and /var/lib/containerd on
// /dev/vdb.
func table(vda, vdb cadvisorfs.Fs) *fakeFsInfo {
	return &fakeFsInfo{
		devices: map[string]cadvisorfs.DeviceInfo{"/var/lib/kubelet": devVda, "/var/lib/kubelet/pods": devVda,
			"/var/lib/containerd": devVdb, "/var/lib/btrfs": devVdb,
			"/var/lib/nothing": devVda}, // removed between cadvisor's stat and ours
		mounts: map[string]string{"/dev/vda": "/", "/dev/vdb": "/var/lib/containerd"},
		stats:  map[string]cadvisorfs.Fs{"/": vda, "/var/lib/containerd": vdb},
	}
}

var (
	vda = diskFs(devVda, 100<<30, 40<<30, u64(6553600), u64(6000000))
	vdb = diskFs(devVdb, 50<<30, 5<<30, u64(3276800), u64(100))
	// early was read before /dev/vdb was mounted on /var/lib/containerd:
	// cadvisor either does not know the directory, or falls back to the
	// parent mount and names /dev/vda.
	early = &fakeFsInfo{
		devices: map[string]cadvisorfs.DeviceInfo{"/var/lib/kubelet": devVda, "/var/lib/containerd": devVda},
		mounts:  map[string]string{"/dev/vda": "/"},
		stats:   map[string]cadvisorfs.Fs{"/": vda},
	}
	earlier = &fakeFsInfo{devices: map[string]cadvisorfs.DeviceInfo{"/var/lib/kubelet": devVda},
		mounts: map[string]string{"/dev/vda": "/"}, stats: map[string]cadvisorfs.Fs{"/": vda}}
)

// fakeFilesystems returns a Filesystems whose successive mount tables are
// tables, and a pointer to how many it has read.
func fakeFilesystems(tables ...*fakeFsInfo) (*Filesystems, *int) {
	builds := 0
	return &Filesystems{
		build: func() (fsInfo, error) {
			builds++
			if builds > len(tables) {
				return nil, errors.New("no more mount tables")
			}
			return tables[builds-1], nil
		},
		statDev: func(dir string) (uint, uint, error) {
			d, ok := onDisk[dir]
			if !ok {
				return 0, 0, fmt.Errorf("stat %s: no such file or directory", dir)
			}
			return d.Major, d.Minor, nil
		},
	}, &builds
}

func TestFsSource(t *testing.T) {
	obs := func(s signals.Signal, available, capacity int64) *signals.Observation {
		return &signals.Observation{Signal: s, Available: available, Capacity: capacity, Time: now}
	}
	noStats := &fakeFsInfo{devices: map[string]cadvisorfs.DeviceInfo{"/var/lib/kubelet": devVda, "/var/lib/containerd": devVdb},
		mounts: map[string]string{"/dev/vda": "/", "/dev/vdb": "/var/lib/containerd"}}
	tests := []struct {
		name       string
		tables     []*fakeFsInfo
		warm       bool // read the nodefs device first, so the first table is old
		dir        string
		signal     signals.Signal
		want       *signals.Observation
		wantErr    string
		wantBuilds int
	}{
		{name: "nodefs bytes", tables: []*fakeFsInfo{table(vda, vdb)}, dir: "/var/lib/kubelet", signal: signals.NodeFsAvailable,
			want: obs(signals.NodeFsAvailable, 40<<30, 100<<30), wantBuilds: 1},
		{name: "nodefs inodes", tables: []*fakeFsInfo{table(vda, vdb)}, dir: "/var/lib/kubelet", signal: signals.NodeFsInodesFree,
			want: obs(signals.NodeFsInodesFree, 6000000, 6553600), wantBuilds: 1},
		{name: "imagefs bytes", tables: []*fakeFsInfo{table(vda, vdb)}, dir: "/var/lib/containerd", signal: signals.ImageFsAvailable,
			want: obs(signals.ImageFsAvailable, 5<<30, 50<<30), wantBuilds: 1},
		{name: "imagefs inodes", tables: []*fakeFsInfo{table(vda, vdb)}, dir: "/var/lib/containerd", signal: signals.ImageFsInodesFree,
			want: obs(signals.ImageFsInodesFree, 100, 3276800), wantBuilds: 1},
		{name: "containerfs works the same way", tables: []*fakeFsInfo{table(vda, vdb)}, dir: "/var/lib/containerd", signal: signals.ContainerFsAvailable,
			want: obs(signals.ContainerFsAvailable, 5<<30, 50<<30), wantBuilds: 1},

		{name: "mounted later, named as its parent: read again once", tables: []*fakeFsInfo{early, table(vda, vdb)}, warm: true,
			dir: "/var/lib/containerd", signal: signals.ImageFsAvailable, want: obs(signals.ImageFsAvailable, 5<<30, 50<<30), wantBuilds: 2},
		{name: "mounted later, unknown: read again once", tables: []*fakeFsInfo{earlier, table(vda, vdb)}, warm: true,
			dir: "/var/lib/containerd", signal: signals.ImageFsInodesFree, want: obs(signals.ImageFsInodesFree, 100, 3276800), wantBuilds: 2},
		{name: "device known but no stats: read again once", tables: []*fakeFsInfo{noStats, table(vda, vdb)}, warm: true,
			dir: "/var/lib/containerd", signal: signals.ImageFsInodesFree, want: obs(signals.ImageFsInodesFree, 100, 3276800), wantBuilds: 2},
		{name: "still unknown after reading again", tables: []*fakeFsInfo{earlier, earlier, table(vda, vdb)}, warm: true,
			dir: "/var/lib/containerd", signal: signals.ImageFsAvailable, wantErr: "could not find device in cached partitions map", wantBuilds: 2},
		{name: "unknown in a table read just now is not read again", tables: []*fakeFsInfo{earlier, table(vda, vdb)},
			dir: "/var/lib/containerd", signal: signals.ImageFsAvailable, wantErr: "could not find device in cached partitions map", wantBuilds: 1},
		{name: "fresh table naming another device than stat is believed", tables: []*fakeFsInfo{table(vda, vdb)},
			dir: "/var/lib/btrfs", signal: signals.ImageFsAvailable, want: obs(signals.ImageFsAvailable, 5<<30, 50<<30), wantBuilds: 1},
		{name: "missing directory is not retried", tables: []*fakeFsInfo{earlier, table(vda, vdb)}, warm: true,
			dir: "/gone", signal: signals.NodeFsAvailable, wantErr: "stat failed on /gone", wantBuilds: 1},
		{name: "mount table unreadable", dir: "/var/lib/kubelet", signal: signals.NodeFsAvailable,
			wantErr: "read mount table: no more mount tables", wantBuilds: 1},
		{name: "no inode figures: inodes missing", tables: []*fakeFsInfo{table(diskFs(devVda, 100, 40, nil, nil), vdb)},
			dir: "/var/lib/kubelet", signal: signals.NodeFsInodesFree, wantErr: "reports no inodes", wantBuilds: 1},
		{name: "zero inodes: inodes missing", tables: []*fakeFsInfo{table(diskFs(devVda, 100, 40, u64(0), u64(0)), vdb)},
			dir: "/var/lib/kubelet", signal: signals.NodeFsInodesFree, wantErr: "reports no inodes", wantBuilds: 1},
		{name: "zero inodes: bytes still observed", tables: []*fakeFsInfo{table(diskFs(devVda, 100, 40, u64(0), u64(0)), vdb)},
			dir: "/var/lib/kubelet", signal: signals.NodeFsAvailable, want: obs(signals.NodeFsAvailable, 40, 100), wantBuilds: 1},
		{name: "zero capacity", tables: []*fakeFsInfo{table(diskFs(devVda, 0, 0, u64(1), u64(1)), vdb)},
			dir: "/var/lib/kubelet", signal: signals.NodeFsAvailable, wantErr: "reports 0 available of 0", wantBuilds: 1},
		{name: "more available than capacity", tables: []*fakeFsInfo{table(diskFs(devVda, 10, 11, u64(1), u64(1)), vdb)},
			dir: "/var/lib/kubelet", signal: signals.NodeFsAvailable, wantErr: "reports 11 available of 10", wantBuilds: 1},
		{name: "capacity beyond int64", tables: []*fakeFsInfo{table(diskFs(devVda, math.MaxUint64, 1, u64(1), u64(1)), vdb)},
			dir: "/var/lib/kubelet", signal: signals.NodeFsAvailable, wantErr: "of 18446744073709551615", wantBuilds: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, builds := fakeFilesystems(tc.tables...)
			if tc.warm {
				if _, err := fs.Device("/var/lib/kubelet"); err != nil {
					t.Fatalf("warm up: %v", err)
				}
			}
			src, err := NewFsSource(fs, tc.dir, tc.signal)
			if err != nil {
				t.Fatal(err)
			}
			got, err := src.Observe(context.Background(), now)
			if *builds != tc.wantBuilds {
				t.Errorf("got %d mount table reads, want %d", *builds, tc.wantBuilds)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), string(tc.signal)) {
					t.Fatalf("got %+v, %v; want an error naming %s and holding %q", got, err, tc.signal, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want %+v", err, *tc.want)
			}
			if len(got) != 1 || got[0] != *tc.want {
				t.Fatalf("got %+v, want [%+v]", got, *tc.want)
			}
			// A second reading needs no new mount table.
			before := *builds
			if _, err := src.Observe(context.Background(), now); err != nil || *builds != before {
				t.Errorf("second reading: got %v and %d more mount table reads, want none", err, *builds-before)
			}
		})
	}
}

func TestNewFsSourceRejects(t *testing.T) {
	fs, _ := fakeFilesystems()
	tests := []struct {
		name   string
		fs     *Filesystems
		dir    string
		signal signals.Signal
		want   string
	}{
		{"memory signal", fs, "/var/lib/kubelet", signals.MemoryAvailable, "not a filesystem signal"},
		{"unknown signal", fs, "/var/lib/kubelet", "nodefs.bogus", "not a filesystem signal"},
		{"relative dir", fs, "var/lib/kubelet", signals.NodeFsAvailable, "not an absolute path"},
		{"no filesystems", nil, "/var/lib/kubelet", signals.NodeFsAvailable, "no Filesystems"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewFsSource(tc.fs, tc.dir, tc.signal)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error holding %q", err, tc.want)
			}
		})
	}
}

func TestLayout(t *testing.T) {
	tests := []struct {
		name          string
		node, image   string
		want          signals.FsLayout
		wantDedicated bool
		wantErr       string
	}{
		{name: "no imagefs", node: "/var/lib/kubelet", want: signals.SingleFs},
		{name: "imagefs on its own device", node: "/var/lib/kubelet", image: "/var/lib/containerd", want: signals.DedicatedImageFs, wantDedicated: true},
		{name: "imagefs on the nodefs device", node: "/var/lib/kubelet", image: "/var/lib/kubelet/pods", want: signals.SingleFs},
		{name: "stat fails", node: "/var/lib/kubelet", image: "/var/lib/nothing", wantErr: "imagefs: device of /var/lib/nothing: stat"},
		{name: "imagefs missing", node: "/var/lib/kubelet", image: "/gone", wantErr: "imagefs: device of /gone"},
		{name: "nodefs missing", node: "/gone", image: "/var/lib/containerd", wantErr: "nodefs: device of /gone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, _ := fakeFilesystems(table(vda, vdb))
			got, err := fs.Layout(tc.node, tc.image)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, %v; want an error holding %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
			if tc.image == "" {
				return
			}
			dedicated, err := fs.Dedicated(tc.node, tc.image)
			if err != nil || dedicated != tc.wantDedicated {
				t.Errorf("Dedicated got %v, %v; want %v", dedicated, err, tc.wantDedicated)
			}
		})
	}
}

// Within one Collect, a filesystem's bytes and inodes sources read it once
// and agree; each Collect reads it again, and so does a source asked
// outside one.
func TestFsSourcesReadOncePerCollection(t *testing.T) {
	info := table(vda, vdb)
	fs, _ := fakeFilesystems(info)
	srcs, err := NodeFsSources(fs, "/var/lib/kubelet")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		before := info.reads
		if i == 1 {
			info.stats["/"] = diskFs(devVda, 100<<30, 30<<30, u64(6553600), u64(5000000))
		}
		obs, err := signals.Collect(t.Context(), now, srcs)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.reads - before; got != 1 {
			t.Errorf("collection %d: %d reads of the filesystem for its two signals, want 1", i+1, got)
		}
		if i >= 1 {
			if b, n := obs[signals.NodeFsAvailable].Available, obs[signals.NodeFsInodesFree].Available; b != 30<<30 || n != 5000000 {
				t.Errorf("collection %d after the filesystem changed: available %d, inodes free %d; want %d and 5000000", i+1, b, n, int64(30<<30))
			}
		}
	}
	before := info.reads
	for _, src := range srcs {
		if _, err := src.Observe(t.Context(), now); err != nil {
			t.Fatal(err)
		}
	}
	if got := info.reads - before; got != 2 {
		t.Errorf("outside a collection: %d reads for two sources, want 2", got)
	}
}
