package host

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/evictd/evictd/signals"
)

// These tests read this machine's real /proc, cgroups and disk and compare
// with the same figures read directly.

// meminfo reads /proc/meminfo in bytes.
func meminfo(t *testing.T) map[string]int64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[2] == "kB" {
			v, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			out[strings.TrimSuffix(fields[0], ":")] = v * 1024
		}
	}
	return out
}

func realConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.KubeletRootDir = t.TempDir()
	return cfg
}

func observeOne(t *testing.T, src signals.Source) signals.Observation {
	t.Helper()
	got, err := src.Observe(context.Background(), now)
	if err != nil {
		t.Fatalf("got error %v", err)
	}
	if len(got) != 1 || got[0].Time != now {
		t.Fatalf("got %+v, want one observation at %v", got, now)
	}
	return got[0]
}

func TestRealMemoryAvailable(t *testing.T) {
	cfg := realConfig(t)
	cg, err := newCgroups(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cg.version(); err != nil {
		t.Skipf("no readable memory cgroup at %s: %v", cfg.CgroupMount, err)
	}
	src, err := NewMemorySource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Hold 64 MiB of touched anonymous memory, so that a source reporting
	// no working set at all cannot pass.
	held := make([]byte, 64<<20)
	for i := range held {
		if i%4096 == 0 {
			held[i] = 1
		}
	}
	// The root cgroup's usage is the kernel's file pages plus mapped anon
	// pages: Cached + Buffers + SwapCached + AnonPages in meminfo terms.
	workingSet := func(m map[string]int64) int64 {
		return m["Cached"] + m["Buffers"] + m["SwapCached"] + m["AnonPages"] - m["Inactive(file)"]
	}
	before := meminfo(t)
	got := observeOne(t, src)
	after := meminfo(t)
	runtime.KeepAlive(held)

	// kubelet 1.37: MemTotal less the hugepage pools (0 here without any).
	if want := before["MemTotal"] - before["Hugetlb"]; got.Capacity != want {
		t.Errorf("got capacity %d, want MemTotal %d − Hugetlb %d", got.Capacity, before["MemTotal"], before["Hugetlb"])
	}
	lo, hi := min(workingSet(before), workingSet(after)), max(workingSet(before), workingSet(after))
	slack := max(hi/20, 16<<20)
	if ws := got.Capacity - got.Available; ws < lo-slack || ws > hi+slack {
		t.Errorf("got working set %d (available %d), want within %d of meminfo's %d..%d", ws, got.Available, slack, lo, hi)
	}
	t.Logf("memory.available %d of %d (working set %d; meminfo %d..%d)", got.Available, got.Capacity, got.Capacity-got.Available, lo, hi)
}

// TestRealHugePages compares the hugepage capacity evictd reads (the
// Hugetlb line of /proc/meminfo) with the kubelet's: cAdvisor's
// nr_hugepages × page size of every /sys/kernel/mm/hugepages/hugepages-<size>kB.
// It only reads; without hugepages reserved (nr_hugepages 0 everywhere)
// both are 0, which the fixture tests go beyond.
func TestRealHugePages(t *testing.T) {
	const dir = "/sys/kernel/mm/hugepages"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Skipf("no %s (a kernel without hugetlb, or no sysfs here): %v", dir, err)
	}
	read := func() int64 {
		var sum int64
		for _, e := range entries {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(e.Name(), "hugepages-"), "kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s/%s: %v", dir, e.Name(), err)
			}
			b, err := os.ReadFile(dir + "/" + e.Name() + "/nr_hugepages")
			if err != nil {
				t.Fatal(err)
			}
			n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			sum += n * kb * 1024
		}
		return sum
	}
	before := read()
	got, err := HugePages(realConfig(t))
	after := read()
	if err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Skipf("the hugepage pools changed while read: %d, then %d bytes", before, after)
	}
	if got != before {
		t.Errorf("got %d bytes of hugepages from /proc/meminfo, want the %d of %s", got, before, dir)
	}
	t.Logf("hugepages: %d bytes over %d page sizes", got, len(entries))
}

func TestRealNodeFs(t *testing.T) {
	cfg := realConfig(t)
	srcs, err := NodeFsSources(NewFilesystems(), cfg.KubeletRootDir)
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(cfg.KubeletRootDir, &st); err != nil {
		t.Fatal(err)
	}
	bytes, inodes := observeOne(t, srcs[0]), observeOne(t, srcs[1])
	tests := []struct {
		name                    string
		got                     signals.Observation
		signal                  signals.Signal
		wantCapacity, wantAvail int64
	}{
		{"bytes", bytes, signals.NodeFsAvailable, st.Frsize * int64(st.Blocks), st.Frsize * int64(st.Bavail)},
		{"inodes", inodes, signals.NodeFsInodesFree, int64(st.Files), int64(st.Ffree)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got.Signal != tc.signal || tc.got.Capacity != tc.wantCapacity {
				t.Errorf("got %s capacity %d, want %s capacity %d", tc.got.Signal, tc.got.Capacity, tc.signal, tc.wantCapacity)
			}
			// Others write to this disk meanwhile: allow 1% of its size.
			if d := tc.got.Available - tc.wantAvail; d > tc.wantCapacity/100 || d < -tc.wantCapacity/100 {
				t.Errorf("got available %d, want about statfs's %d", tc.got.Available, tc.wantAvail)
			}
			t.Logf("%s: %d of %d (statfs %d)", tc.signal, tc.got.Available, tc.got.Capacity, tc.wantAvail)
		})
	}
}

func TestRealPIDAvailable(t *testing.T) {
	src, err := NewPIDSource(realConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	readInt := func(path string) int64 {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tasks := func() int64 {
		b, err := os.ReadFile("/proc/loadavg")
		if err != nil {
			t.Fatal(err)
		}
		_, total, _ := strings.Cut(strings.Fields(string(b))[3], "/")
		v, err := strconv.ParseInt(total, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	wantCap := min(readInt("/proc/sys/kernel/pid_max"), readInt("/proc/sys/kernel/threads-max"))
	before := tasks()
	got := observeOne(t, src)
	after := tasks()
	if got.Capacity != wantCap {
		t.Errorf("got capacity %d, want %d", got.Capacity, wantCap)
	}
	lo, hi := min(before, after), max(before, after)
	slack := max(hi/20, 10)
	if running := got.Capacity - got.Available; running < lo-slack || running > hi+slack {
		t.Errorf("got %d tasks, want within %d of loadavg's %d..%d", running, slack, lo, hi)
	}
	t.Logf("pid.available %d of %d (loadavg tasks %d..%d)", got.Available, got.Capacity, lo, hi)
}
