package host

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/signals"
)

var now = time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC)

// memTotal is MemTotal of testdata/proc/meminfo, in bytes.
const memTotal = 16384000 * 1024

type sourceCase struct {
	name     string
	cgroup   string // testdata tree mounted as CgroupMount
	driver   string
	reserved int64
	edits    map[string]*string // relative to the copied cgroup tree
	proc     map[string]*string // relative to the copied proc tree
	want     signals.Observation
	wantErr  []string // substrings the error must hold; nil when none is wanted
	notExist bool     // the error must wrap fs.ErrNotExist
	// kubelet136 sets DisableHugepageAwareEviction.
	kubelet136 bool
}

// runSourceCases builds a source from each case's configuration and checks
// its one observation or its error.
func runSourceCases(t *testing.T, cases []sourceCase, build func(Config) (signals.Source, error)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			proc, cgroup := fixture(t, "proc"), fixture(t, tc.cgroup)
			if tc.proc != nil {
				proc = copyFixture(t, "proc")
				edit(t, proc, tc.proc)
			}
			if tc.edits != nil {
				cgroup = copyFixture(t, tc.cgroup)
				edit(t, cgroup, tc.edits)
			}
			cfg := fixtureConfig(t, proc, cgroup, tc.driver)
			cfg.ReservedMemory = tc.reserved
			cfg.DisableHugepageAwareEviction = tc.kubelet136
			src, err := build(cfg)
			if err != nil {
				t.Fatalf("build source: %v", err)
			}
			got, err := src.Observe(context.Background(), now)
			checkObserved(t, got, err, tc)
		})
	}
}

func checkObserved(t *testing.T, got []signals.Observation, err error, tc sourceCase) {
	t.Helper()
	if tc.wantErr != nil {
		if err == nil {
			t.Fatalf("got %+v and no error, want an error holding %q", got, tc.wantErr)
		}
		if got != nil {
			t.Errorf("got observations %+v with the error, want none", got)
		}
		for _, s := range tc.wantErr {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("got error %q, want it to hold %q", err, s)
			}
		}
		if tc.notExist && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("got error %q, want it to wrap fs.ErrNotExist", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("got error %v, want %+v", err, tc.want)
	}
	if len(got) != 1 || got[0] != tc.want {
		t.Fatalf("got %+v, want [%+v]", got, tc.want)
	}
	if err := got[0].Check(); err != nil {
		t.Errorf("observation fails Check: %v", err)
	}
}

func memObs(available int64) signals.Observation {
	return signals.Observation{Signal: signals.MemoryAvailable, Available: available, Capacity: memTotal, Time: now}
}

func TestMemorySource(t *testing.T) {
	const v1Stat = "memory/memory.stat"
	cases := []sourceCase{
		// 8 GiB usage − 1 GiB total_inactive_file (not the local inactive_file).
		{name: "v1 cgroupfs", cgroup: "cgroupv1", driver: DriverCgroupfs, want: memObs(memTotal - (8589934592 - 1073741824))},
		{name: "v1 systemd", cgroup: "cgroupv1-systemd", driver: DriverSystemd, want: memObs(9261023232)},
		// Root has no memory.current: anon 3 GiB + file 2 GiB − inactive_file 1 GiB.
		{name: "v2 cgroupfs", cgroup: "cgroupv2", driver: DriverCgroupfs, want: memObs(memTotal - (3221225472 + 2147483648 - 1073741824))},
		{name: "v2 systemd", cgroup: "cgroupv2-systemd", driver: DriverSystemd, want: memObs(12482248704)},
		{name: "v1 inactive above usage clamps working set at 0", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits: map[string]*string{"memory/memory.usage_in_bytes": str("1000\n")}, want: memObs(memTotal)},

		{name: "v1 garbled memory.stat", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits:   map[string]*string{v1Stat: str("cache 1\ntotal_inactive_file 12ab\n")},
			wantErr: []string{"memory.available", "memory/memory.stat", `"12ab"`}},
		{name: "v1 truncated memory.stat", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits:   map[string]*string{v1Stat: str("cache 1\nrss 2\ntotal_inact")},
			wantErr: []string{"memory/memory.stat", `line 3 "total_inact"`}},
		{name: "v1 memory.stat without total_inactive_file", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits:   map[string]*string{v1Stat: str("cache 1\nrss 2\ninactive_file 3\n")},
			wantErr: []string{"memory/memory.stat", "no total_inactive_file"}},
		{name: "v1 empty memory.stat", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits:   map[string]*string{v1Stat: str("")},
			wantErr: []string{"memory/memory.stat", "no total_inactive_file"}},
		{name: "v1 negative total_inactive_file", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits:   map[string]*string{v1Stat: str("total_inactive_file -4096\n")},
			wantErr: []string{"memory/memory.stat", `"-4096" is negative`}},
		{name: "v1 negative usage", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits:   map[string]*string{"memory/memory.usage_in_bytes": str("-1\n")},
			wantErr: []string{"memory/memory.usage_in_bytes", `"-1" is negative`}},
		{name: "v1 overflowing usage", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits:   map[string]*string{"memory/memory.usage_in_bytes": str("18446744073709551615\n")},
			wantErr: []string{"memory/memory.usage_in_bytes", "18446744073709551615", "out of range"}},
		{name: "v1 empty usage", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits:   map[string]*string{"memory/memory.usage_in_bytes": str("\n")},
			wantErr: []string{"memory/memory.usage_in_bytes", "empty"}},
		{name: "v1 missing memory.stat", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits:   map[string]*string{v1Stat: nil},
			wantErr: []string{"read ", "memory/memory.stat"}, notExist: true},
		{name: "no memory controller at all", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits:   map[string]*string{"memory": nil},
			wantErr: []string{"not a cgroup v1 mount", "cgroup.controllers"}, notExist: true},

		{name: "v2 root memory.stat without anon", cgroup: "cgroupv2", driver: DriverCgroupfs,
			edits:   map[string]*string{"memory.stat": str("file 2\ninactive_file 1\n")},
			wantErr: []string{"memory.stat", "no anon"}},
		{name: "v2 root memory.stat negative file", cgroup: "cgroupv2", driver: DriverCgroupfs,
			edits:   map[string]*string{"memory.stat": str("anon 5\nfile -2\ninactive_file 1\n")},
			wantErr: []string{"memory.stat", `"-2" is negative`}},
		{name: "v2 root anon + file overflows", cgroup: "cgroupv2", driver: DriverCgroupfs,
			edits:   map[string]*string{"memory.stat": str("anon 9223372036854775807\nfile 1\ninactive_file 1\n")},
			wantErr: []string{"memory.stat", "overflows"}},
		{name: "v2 without the memory controller", cgroup: "cgroupv2", driver: DriverCgroupfs,
			edits:   map[string]*string{"cgroup.controllers": str("cpu io pids\n")},
			wantErr: []string{"without the memory controller"}},

		{name: "missing meminfo", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc: map[string]*string{"meminfo": nil}, wantErr: []string{"read ", "proc/meminfo"}, notExist: true},
		{name: "meminfo without MemTotal", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc: map[string]*string{"meminfo": str("MemFree: 1 kB\n")}, wantErr: []string{"proc/meminfo", "no MemTotal"}},
		{name: "garbled MemTotal", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc: map[string]*string{"meminfo": str("MemTotal: 16G kB\n")}, wantErr: []string{"proc/meminfo", `"16G"`}},
		{name: "MemTotal in another unit", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc: map[string]*string{"meminfo": str("MemTotal: 16384 MB\n")}, wantErr: []string{"proc/meminfo", "MemTotal line"}},
		{name: "MemTotal 0", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc: map[string]*string{"meminfo": str("MemTotal: 0 kB\n")}, wantErr: []string{"proc/meminfo", "MemTotal is 0"}},
		{name: "MemTotal overflowing bytes", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc: map[string]*string{"meminfo": str("MemTotal: 9223372036854775807 kB\n")}, wantErr: []string{"proc/meminfo", "overflows"}},
	}
	runSourceCases(t, cases, func(cfg Config) (signals.Source, error) { return NewMemorySource(cfg) })
}

func allocObs(available, capacity int64) signals.Observation {
	return signals.Observation{Signal: signals.AllocatableMemoryAvailable, Available: available, Capacity: capacity, Time: now}
}

func TestAllocatableSource(t *testing.T) {
	const gib = 1 << 30
	cases := []sourceCase{
		// kubepods limit 12 GiB − (4 GiB usage − 512 MiB total_inactive_file).
		{name: "v1 cgroupfs with limit", cgroup: "cgroupv1", driver: DriverCgroupfs, reserved: gib,
			want: allocObs(12884901888-(4294967296-536870912), 12884901888)},
		// kubepods.slice unlimited: MemTotal − 1 GiB reserved − (2 GiB − 147483648).
		{name: "v1 systemd unlimited", cgroup: "cgroupv1-systemd", driver: DriverSystemd, reserved: gib,
			want: allocObs(memTotal-gib-2000000000, memTotal-gib)},
		// memory.max 10 GiB − (memory.current 3 GiB − inactive_file 221225472).
		{name: "v2 cgroupfs with limit", cgroup: "cgroupv2", driver: DriverCgroupfs,
			want: allocObs(10737418240-3000000000, 10737418240)},
		// memory.max "max": MemTotal − 2 GiB reserved − (1.5e9 − 5e8).
		{name: "v2 systemd unlimited", cgroup: "cgroupv2-systemd", driver: DriverSystemd, reserved: 2 * gib,
			want: allocObs(13629732352, 14629732352)},
		{name: "v1 limit of 1<<62 is a limit", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits: map[string]*string{"memory/kubepods/memory.limit_in_bytes": str("4611686018427387904\n")},
			want:  allocObs(1<<62-3758096384, 1<<62)},
		{name: "v1 limit above 1<<62 is unlimited", cgroup: "cgroupv1", driver: DriverCgroupfs, reserved: gib,
			edits: map[string]*string{"memory/kubepods/memory.limit_in_bytes": str("4611686018427387905\n")},
			want:  allocObs(memTotal-gib-3758096384, memTotal-gib)},
		{name: "v2 memory.max above 1<<62 is unlimited", cgroup: "cgroupv2", driver: DriverCgroupfs,
			edits: map[string]*string{"kubepods/memory.max": str("9223372036854771712\n")},
			want:  allocObs(memTotal-3000000000, memTotal)},
		{name: "working set above the limit reads as nothing left", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits: map[string]*string{"memory/kubepods/memory.limit_in_bytes": str("1073741824\n")},
			want:  allocObs(0, 1073741824)},

		{name: "v1 kubepods missing", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits:   map[string]*string{"memory/kubepods": nil},
			wantErr: []string{"allocatableMemory.available", "memory/kubepods/memory.limit_in_bytes"}, notExist: true},
		{name: "kubepods of the other driver is not read", cgroup: "cgroupv1", driver: DriverSystemd,
			wantErr: []string{"memory/kubepods.slice/memory.limit_in_bytes"}, notExist: true},
		{name: "v2 kubepods missing", cgroup: "cgroupv2-systemd", driver: DriverSystemd,
			edits:   map[string]*string{"kubepods.slice": nil},
			wantErr: []string{"kubepods.slice/memory.max"}, notExist: true},
		{name: "v1 garbled limit", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits:   map[string]*string{"memory/kubepods/memory.limit_in_bytes": str("12G\n")},
			wantErr: []string{"memory/kubepods/memory.limit_in_bytes", `"12G"`}},
		{name: "v1 kubepods memory.stat truncated", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits:   map[string]*string{"memory/kubepods/memory.stat": str("cache 5\nrss")},
			wantErr: []string{"memory/kubepods/memory.stat", `"rss"`}},
		{name: "v1 kubepods usage missing", cgroup: "cgroupv1", driver: DriverCgroupfs,
			edits:   map[string]*string{"memory/kubepods/memory.usage_in_bytes": nil},
			wantErr: []string{"memory/kubepods/memory.usage_in_bytes"}, notExist: true},
		{name: "v2 negative memory.max", cgroup: "cgroupv2", driver: DriverCgroupfs,
			edits:   map[string]*string{"kubepods/memory.max": str("-1\n")},
			wantErr: []string{"kubepods/memory.max", `"-1" is negative`}},
		{name: "v2 memory.max 0", cgroup: "cgroupv2", driver: DriverCgroupfs,
			edits:   map[string]*string{"kubepods/memory.max": str("0\n")},
			wantErr: []string{"kubepods/memory.max", "limit is 0"}},
		{name: "v2 memory.current missing", cgroup: "cgroupv2", driver: DriverCgroupfs,
			edits:   map[string]*string{"kubepods/memory.current": nil},
			wantErr: []string{"kubepods/memory.current"}, notExist: true},
		{name: "v2 kubepods memory.stat without inactive_file", cgroup: "cgroupv2", driver: DriverCgroupfs,
			edits:   map[string]*string{"kubepods/memory.stat": str("anon 1\nfile 2\n")},
			wantErr: []string{"kubepods/memory.stat", "no inactive_file"}},
		{name: "unlimited and reserved eats MemTotal", cgroup: "cgroupv1-systemd", driver: DriverSystemd, reserved: memTotal,
			wantErr: []string{"no memory limit", "leaves nothing"}},
		{name: "unlimited and meminfo missing", cgroup: "cgroupv2-systemd", driver: DriverSystemd,
			proc: map[string]*string{"meminfo": nil}, wantErr: []string{"proc/meminfo"}, notExist: true},
	}
	runSourceCases(t, cases, func(cfg Config) (signals.Source, error) { return NewAllocatableSource(cfg) })
}

func TestAllocatableSourceCgroupRoot(t *testing.T) {
	tests := []struct {
		name, driver, root, kubepods string
	}{
		{"cgroupfs", DriverCgroupfs, "/evictd/node", "memory/evictd/node/kubepods"},
		{"systemd", DriverSystemd, "/evictd.slice/evictd-node.slice", "memory/evictd.slice/evictd-node.slice/evictd-node-kubepods.slice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cgroup := copyFixture(t, "cgroupv1")
			edit(t, cgroup, map[string]*string{"memory/kubepods": nil})
			kubepods := filepath.Join(cgroup, tc.kubepods)
			if err := os.MkdirAll(kubepods, 0o755); err != nil {
				t.Fatal(err)
			}
			edit(t, kubepods, map[string]*string{
				"memory.limit_in_bytes": str("2000000000\n"),
				"memory.usage_in_bytes": str("1500000000\n"),
				"memory.stat":           str("total_inactive_file 500000000\n"),
			})
			cfg := fixtureConfig(t, fixture(t, "proc"), cgroup, tc.driver)
			cfg.CgroupRoot = tc.root
			src, err := NewAllocatableSource(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := src.Observe(context.Background(), now)
			checkObserved(t, got, err, sourceCase{want: allocObs(1000000000, 2000000000)})
		})
	}
}

// TestMemoryCgroup reads working sets and inactive page cache straight from
// one cgroup directory of the fixture trees, as the wake-up sources do.
func TestMemoryCgroup(t *testing.T) {
	tests := []struct {
		name         string
		tree, dir    string
		v2, root     bool
		edits        map[string]*string // relative to dir in a copy of tree
		wantWS       int64
		wantInactive int64
		wantErr      []string // substrings of WorkingSet's error
	}{
		{name: "v1 root: usage − total_inactive_file", tree: "cgroupv1", dir: "memory", root: true,
			wantWS: 8589934592 - 1073741824, wantInactive: 1073741824},
		{name: "v1 kubepods", tree: "cgroupv1", dir: "memory/kubepods",
			wantWS: 4294967296 - 536870912, wantInactive: 536870912},
		{name: "v2 root: anon + file − inactive_file", tree: "cgroupv2", dir: ".", v2: true, root: true,
			wantWS: 3221225472 + 2147483648 - 1073741824, wantInactive: 1073741824},
		{name: "v2 kubepods: memory.current − inactive_file", tree: "cgroupv2", dir: "kubepods", v2: true,
			wantWS: 3221225472 - 221225472, wantInactive: 221225472},
		{name: "v2 root at the int64 bound", tree: "cgroupv2", dir: ".", v2: true, root: true,
			edits:  map[string]*string{"memory.stat": str("anon 9223372036854775806\nfile 1\ninactive_file 7\n")},
			wantWS: 9223372036854775807 - 7, wantInactive: 7},
		// Wrapped around, anon + file would be -1<<63 and the working set
		// 0: the node's memory all free.
		{name: "v2 root anon + file overflows", tree: "cgroupv2", dir: ".", v2: true, root: true,
			edits:        map[string]*string{"memory.stat": str("anon 9223372036854775807\nfile 1\ninactive_file 0\n")},
			wantInactive: 0, wantErr: []string{"memory.stat", "anon + file", "overflows int64"}},
		{name: "v1 inactive above usage clamps at 0", tree: "cgroupv1", dir: "memory", root: true,
			edits:  map[string]*string{"memory.usage_in_bytes": str("1000\n")},
			wantWS: 0, wantInactive: 1073741824},
		{name: "v2 kubepods without memory.current", tree: "cgroupv2", dir: "kubepods", v2: true,
			edits:        map[string]*string{"memory.current": nil},
			wantInactive: 221225472, wantErr: []string{"read ", "kubepods/memory.current"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree := fixture(t, tt.tree)
			if tt.edits != nil {
				tree = copyFixture(t, tt.tree)
				edit(t, filepath.Join(tree, tt.dir), tt.edits)
			}
			c := MemoryCgroup{Dir: filepath.Join(tree, tt.dir), V2: tt.v2, Root: tt.root}
			ws, err := c.WorkingSet()
			switch {
			case tt.wantErr != nil && err == nil:
				t.Errorf("WorkingSet: got %d, want an error holding %q", ws, tt.wantErr)
			case tt.wantErr != nil:
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("WorkingSet: got error %q, want it to hold %q", err, s)
					}
				}
			case err != nil:
				t.Errorf("WorkingSet: %v", err)
			case ws != tt.wantWS:
				t.Errorf("WorkingSet: got %d, want %d", ws, tt.wantWS)
			}
			in, err := c.InactiveFile()
			if err != nil || in != tt.wantInactive {
				t.Errorf("InactiveFile: got %d, %v; want %d", in, err, tt.wantInactive)
			}
		})
	}
}
