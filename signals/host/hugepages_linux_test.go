package host

import (
	"strings"
	"testing"

	"github.com/evictd/evictd/signals"
)

// hugeMeminfo is a meminfo with the fixture's MemTotal and hugetlb pages
// of kB kilobytes in all (the default size's lines left at 0).
func hugeMeminfo(kB string) *string {
	return str("MemTotal:       16384000 kB\nMemFree:         9876543 kB\nHugePages_Total:       0\nHugePages_Free:        0\n" +
		"HugePages_Rsvd:        0\nHugePages_Surp:        0\nHugepagesize:       2048 kB\nHugetlb:        " + kB + " kB\n")
}

// TestMemorySourceHugePages: memory.available as kubelet 1.37 computes it,
// on the v1 fixture whose root working set is 7 GiB (8 GiB usage − 1 GiB
// total_inactive_file) of MemTotal 16384000 kB.
func TestMemorySourceHugePages(t *testing.T) {
	const (
		gib        = int64(1) << 30
		workingSet = 7 * gib
		before     = memTotal - workingSet // kubelet 1.36's available
	)
	obs := func(available, capacity int64) signals.Observation {
		return signals.Observation{Signal: signals.MemoryAvailable, Available: available, Capacity: capacity, Time: now}
	}
	// 1024 pages of 2Mi and 2 of 1Gi: Hugetlb 4 GiB.
	fourGiB := map[string]*string{"meminfo": str("MemTotal:       16384000 kB\nHugePages_Total:    1024\nHugePages_Free:     1000\n" +
		"HugePages_Rsvd:       0\nHugePages_Surp:        0\nHugepagesize:       2048 kB\nHugetlb:         4194304 kB\n")}
	cases := []sourceCase{
		// kubelet 1.37's node e2e test HugepageAwareMemoryReporting, gate
		// on: memory.available drops by the hugepage reservation, and
		// the capacity percentages apply to is MemTotal less it.
		{name: "1.37: 4Gi of 1Gi and 2Mi pages subtracted", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc: fourGiB, want: obs(before-4*gib, memTotal-4*gib)},
		// Its gate-off half: memory.available keeps the reservation.
		{name: "1.36: HugepageAwareEviction=false leaves them in", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc: fourGiB, kubelet136: true, want: memObs(before)},
		{name: "1.37: the same on cgroup v2", cgroup: "cgroupv2", driver: DriverCgroupfs,
			proc: fourGiB, want: obs(memTotal-(3221225472+2147483648-1073741824)-4*gib, memTotal-4*gib)},
		// The kubelet's "hugepages exceed available clamps to zero": the
		// capacity is then the working set alone.
		{name: "hugepages above available clamp it to 0", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc: map[string]*string{"meminfo": hugeMeminfo("10485760")}, want: obs(0, workingSet)},
		{name: "hugepages equal to available leave 0", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc: map[string]*string{"meminfo": hugeMeminfo("9043968")}, want: obs(0, workingSet)},
		{name: "Hugetlb 0: nothing subtracted", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc: map[string]*string{"meminfo": hugeMeminfo("0")}, want: memObs(before)},
		// A kernel without hugetlb writes no hugepage line: no hugepages,
		// as cAdvisor reads a machine without /sys/kernel/mm/hugepages.
		{name: "no hugetlb support: no hugepages", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc: map[string]*string{"meminfo": str("MemTotal:       16384000 kB\nMemFree: 1 kB\n")}, want: memObs(before)},

		{name: "HugePages_Total without Hugetlb", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc:    map[string]*string{"meminfo": str("MemTotal: 16384000 kB\nHugePages_Total: 8\nHugepagesize: 2048 kB\n")},
			wantErr: []string{"memory.available", "proc/meminfo", "HugePages_Total but no Hugetlb line", "HugepageAwareEviction=false"}},
		{name: "garbled Hugetlb", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc:    map[string]*string{"meminfo": hugeMeminfo("4G")},
			wantErr: []string{"memory.available", "proc/meminfo", `Hugetlb value "4G"`}},
		{name: "negative Hugetlb", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc:    map[string]*string{"meminfo": hugeMeminfo("-2048")},
			wantErr: []string{"proc/meminfo", `Hugetlb value "-2048"`}},
		{name: "Hugetlb in another unit", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc:    map[string]*string{"meminfo": str("MemTotal: 16384000 kB\nHugetlb: 4 GB\n")},
			wantErr: []string{"proc/meminfo", `Hugetlb line "Hugetlb: 4 GB"`}},
		{name: "Hugetlb without a value", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc:    map[string]*string{"meminfo": str("MemTotal: 16384000 kB\nHugetlb:\n")},
			wantErr: []string{"proc/meminfo", `Hugetlb line "Hugetlb:"`}},
		{name: "Hugetlb overflowing bytes", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc:    map[string]*string{"meminfo": hugeMeminfo("9223372036854775807")},
			wantErr: []string{"proc/meminfo", "Hugetlb 9223372036854775807 kB overflows"}},
		// With the 1.36 semantics the hugepage lines are not read at all.
		{name: "1.36: a garbled Hugetlb is not read", cgroup: "cgroupv1", driver: DriverCgroupfs,
			proc: map[string]*string{"meminfo": hugeMeminfo("4G")}, kubelet136: true, want: memObs(before)},
	}
	runSourceCases(t, cases, func(cfg Config) (signals.Source, error) { return NewMemorySource(cfg) })
}

func TestParseHugetlb(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     int64
		wantErr  string
	}{
		{"one 1Gi page", "Hugetlb:         1048576 kB\n", 1 << 30, ""},
		{"among other lines", "MemTotal: 1 kB\nHugePages_Total: 4\nHugepagesize: 2048 kB\nHugetlb: 8192 kB\nDirectMap4k: 1 kB\n", 8 << 20, ""},
		{"no hugepage lines", "MemTotal: 1 kB\n", 0, ""},
		{"empty file", "", 0, ""},
		{"HugePages_Total alone", "HugePages_Total: 0\n", 0, "HugePages_Total but no Hugetlb line"},
		{"trailing field", "Hugetlb: 8 kB extra\n", 0, `Hugetlb line "Hugetlb: 8 kB extra"`},
		{"fraction", "Hugetlb: 1.5 kB\n", 0, `Hugetlb value "1.5"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseHugetlb("/p/meminfo", []byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "/p/meminfo") {
					t.Fatalf("got %d, %v; want an error naming /p/meminfo and holding %q", got, err, tc.wantErr)
				}
				if got != 0 {
					t.Errorf("got %d with the error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// TestHugePagesFixture reads the fixture tree through the exported reader
// check-config uses.
func TestHugePagesFixture(t *testing.T) {
	proc := copyFixture(t, "proc")
	edit(t, proc, map[string]*string{"meminfo": hugeMeminfo("3145728")})
	got, err := HugePages(fixtureConfig(t, proc, fixture(t, "cgroupv1"), DriverCgroupfs))
	if err != nil || got != 3<<30 {
		t.Fatalf("got %d, %v; want 3 GiB", got, err)
	}
	edit(t, proc, map[string]*string{"meminfo": nil})
	if _, err := HugePages(fixtureConfig(t, proc, fixture(t, "cgroupv1"), DriverCgroupfs)); err == nil || !strings.Contains(err.Error(), "proc/meminfo") {
		t.Errorf("missing meminfo: got %v, want an error naming it", err)
	}
}
