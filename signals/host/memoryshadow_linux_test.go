package host

import (
	"context"
	"strings"
	"testing"

	"github.com/evictd/evictd/signals"
)

// meminfoWith is a meminfo file with testdata/proc/meminfo's MemTotal and
// the given lines after it.
func meminfoWith(lines ...string) *string {
	return str("MemTotal:       16384000 kB\n" + strings.Join(lines, "\n") + "\n")
}

// shadowWant is one formula's shadow: its available and capacity, or
// substrings of its error.
type shadowWant struct {
	available, capacity int64
	err                 []string
}

// TestMemoryShadows computes memory.available by every formula from the
// fixture trees, with meminfo files of swap, hugepages and faults; the
// observation in force is the same as without shadows whatever the other
// formulas meet.
func TestMemoryShadows(t *testing.T) {
	const (
		gib = int64(1) << 30
		// v1 cgroupfs root: 8 GiB usage − 1 GiB total_inactive_file.
		ws      = 8589934592 - 1073741824
		avail   = memTotal - ws
		memAvai = int64(12345678) * 1024 // testdata/proc/meminfo
	)
	fixtureMem := map[signals.MemoryFormula]shadowWant{
		signals.FormulaWorkingSet136: {available: avail, capacity: memTotal},
		signals.FormulaWorkingSet137: {available: avail, capacity: memTotal},
		signals.FormulaMemAvailable:  {available: memAvai, capacity: memTotal},
	}
	tests := []struct {
		name       string
		meminfo    *string // nil: testdata/proc/meminfo
		kubelet136 bool
		want       map[signals.MemoryFormula]shadowWant
		inForce    signals.Observation
	}{
		{name: "no swap, no hugepages: no swap-aware", want: fixtureMem, inForce: memObs(avail)},
		{name: "no swap, 1.36 in force", kubelet136: true, want: fixtureMem, inForce: memObs(avail)},
		{name: "hugepages: 1.37 subtracts them from available and capacity",
			meminfo: meminfoWith("MemAvailable: 8000000 kB", "SwapTotal: 0 kB", "SwapFree: 0 kB", "HugePages_Total: 512", "Hugetlb: 1048576 kB"),
			want: map[signals.MemoryFormula]shadowWant{
				signals.FormulaWorkingSet136: {available: avail, capacity: memTotal},
				signals.FormulaWorkingSet137: {available: avail - gib, capacity: memTotal - gib},
				signals.FormulaMemAvailable:  {available: 8000000 * 1024, capacity: memTotal},
			},
			inForce: signals.Observation{Signal: signals.MemoryAvailable, Available: avail - gib, Capacity: memTotal - gib, Time: now}},
		{name: "swap: SwapFree added to 1.37's available, SwapTotal to its capacity",
			meminfo: meminfoWith("MemAvailable: 8000000 kB", "SwapTotal: 4194304 kB", "SwapFree: 3145728 kB", "Hugetlb: 1048576 kB"),
			want: map[signals.MemoryFormula]shadowWant{
				signals.FormulaWorkingSet136: {available: avail, capacity: memTotal},
				signals.FormulaWorkingSet137: {available: avail - gib, capacity: memTotal - gib},
				signals.FormulaMemAvailable:  {available: 8000000 * 1024, capacity: memTotal},
				signals.FormulaSwapAware:     {available: avail - gib + 3*gib, capacity: memTotal - gib + 4*gib},
			},
			inForce: signals.Observation{Signal: signals.MemoryAvailable, Available: avail - gib, Capacity: memTotal - gib, Time: now}},
		{name: "swap with 1.36 in force: swap-aware on 1.36's", kubelet136: true,
			meminfo: meminfoWith("MemAvailable: 8000000 kB", "SwapTotal: 4194304 kB", "SwapFree: 0 kB", "Hugetlb: 1048576 kB"),
			want: map[signals.MemoryFormula]shadowWant{
				signals.FormulaWorkingSet136: {available: avail, capacity: memTotal},
				signals.FormulaWorkingSet137: {available: avail - gib, capacity: memTotal - gib},
				signals.FormulaMemAvailable:  {available: 8000000 * 1024, capacity: memTotal},
				signals.FormulaSwapAware:     {available: avail, capacity: memTotal + 4*gib},
			},
			inForce: memObs(avail)},

		{name: "no MemAvailable (kernel before 3.14): that formula's error only",
			meminfo: meminfoWith("MemFree: 1000 kB", "SwapTotal: 0 kB", "SwapFree: 0 kB"),
			want: map[signals.MemoryFormula]shadowWant{
				signals.FormulaWorkingSet136: {available: avail, capacity: memTotal},
				signals.FormulaWorkingSet137: {available: avail, capacity: memTotal},
				signals.FormulaMemAvailable:  {err: []string{"memory.available by memavailable", "proc/meminfo", "no MemAvailable line"}},
			},
			inForce: memObs(avail)},
		{name: "garbled MemAvailable",
			meminfo: meminfoWith("MemAvailable: 12G kB", "SwapTotal: 0 kB", "SwapFree: 0 kB"),
			want: map[signals.MemoryFormula]shadowWant{
				signals.FormulaWorkingSet136: {available: avail, capacity: memTotal},
				signals.FormulaWorkingSet137: {available: avail, capacity: memTotal},
				signals.FormulaMemAvailable:  {err: []string{"proc/meminfo", `"12G"`, "MemAvailable"}},
			},
			inForce: memObs(avail)},
		{name: "MemAvailable in another unit",
			meminfo: meminfoWith("MemAvailable: 12 MB"),
			want: map[signals.MemoryFormula]shadowWant{
				signals.FormulaWorkingSet136: {available: avail, capacity: memTotal},
				signals.FormulaWorkingSet137: {available: avail, capacity: memTotal},
				signals.FormulaMemAvailable:  {err: []string{"proc/meminfo", `MemAvailable line "MemAvailable: 12 MB"`}},
			},
			inForce: memObs(avail)},
		{name: "MemAvailable above MemTotal",
			meminfo: meminfoWith("MemAvailable: 16384001 kB", "SwapTotal: 0 kB"),
			want: map[signals.MemoryFormula]shadowWant{
				signals.FormulaWorkingSet136: {available: avail, capacity: memTotal},
				signals.FormulaWorkingSet137: {available: avail, capacity: memTotal},
				signals.FormulaMemAvailable:  {err: []string{"proc/meminfo", "above MemTotal"}},
			},
			inForce: memObs(avail)},
		{name: "garbled SwapFree",
			meminfo: meminfoWith("MemAvailable: 8000000 kB", "SwapTotal: 1024 kB", "SwapFree: -5 kB"),
			want: map[signals.MemoryFormula]shadowWant{
				signals.FormulaWorkingSet136: {available: avail, capacity: memTotal},
				signals.FormulaWorkingSet137: {available: avail, capacity: memTotal},
				signals.FormulaMemAvailable:  {available: 8000000 * 1024, capacity: memTotal},
				signals.FormulaSwapAware:     {err: []string{"memory.available by swap-aware", "proc/meminfo", `"-5" is negative`, "SwapFree"}},
			},
			inForce: memObs(avail)},
		{name: "SwapFree above SwapTotal",
			meminfo: meminfoWith("MemAvailable: 8000000 kB", "SwapTotal: 1024 kB", "SwapFree: 2048 kB"),
			want: map[signals.MemoryFormula]shadowWant{
				signals.FormulaWorkingSet136: {available: avail, capacity: memTotal},
				signals.FormulaWorkingSet137: {available: avail, capacity: memTotal},
				signals.FormulaMemAvailable:  {available: 8000000 * 1024, capacity: memTotal},
				signals.FormulaSwapAware:     {err: []string{"proc/meminfo", "SwapFree 2097152 bytes is above SwapTotal 1048576 bytes"}},
			},
			inForce: memObs(avail)},
		{name: "garbled Hugetlb with 1.36 in force: the 1.37 shadow's error only", kubelet136: true,
			meminfo: meminfoWith("MemAvailable: 8000000 kB", "SwapTotal: 0 kB", "HugePages_Total: 1", "Hugetlb: 2M kB"),
			want: map[signals.MemoryFormula]shadowWant{
				signals.FormulaWorkingSet136: {available: avail, capacity: memTotal},
				signals.FormulaWorkingSet137: {err: []string{"memory.available by working-set-1.37", "proc/meminfo", `Hugetlb value "2M"`}},
				signals.FormulaMemAvailable:  {available: 8000000 * 1024, capacity: memTotal},
			},
			inForce: memObs(avail)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proc := fixture(t, "proc")
			if tt.meminfo != nil {
				proc = copyFixture(t, "proc")
				edit(t, proc, map[string]*string{"meminfo": tt.meminfo})
			}
			cfg := fixtureConfig(t, proc, fixture(t, "cgroupv1"), DriverCgroupfs)
			cfg.DisableHugepageAwareEviction = tt.kubelet136
			src, err := NewMemorySource(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := src.Observe(context.Background(), now)
			checkObserved(t, got, err, sourceCase{want: tt.inForce})

			sh := src.MemoryShadows()
			wantInForce := signals.FormulaWorkingSet137
			if tt.kubelet136 {
				wantInForce = signals.FormulaWorkingSet136
			}
			if !sh.Time.Equal(now) || sh.InForce != wantInForce {
				t.Errorf("got shadows at %v in force %q, want at %v in force %q", sh.Time, sh.InForce, now, wantInForce)
			}
			var order []signals.MemoryFormula
			for _, s := range sh.Shadows {
				order = append(order, s.Formula)
				w, ok := tt.want[s.Formula]
				switch {
				case !ok:
					t.Errorf("%s: got %+v (err %v), want no such shadow", s.Formula, s.Observation, s.Err)
				case w.err != nil && s.Err == nil:
					t.Errorf("%s: got %+v, want an error holding %q", s.Formula, s.Observation, w.err)
				case w.err != nil:
					for _, sub := range w.err {
						if !strings.Contains(s.Err.Error(), sub) {
							t.Errorf("%s: got error %q, want it to hold %q", s.Formula, s.Err, sub)
						}
					}
				case s.Err != nil:
					t.Errorf("%s: got error %v, want %+v", s.Formula, s.Err, w)
				default:
					want := signals.Observation{Signal: signals.MemoryAvailable, Available: w.available, Capacity: w.capacity, Time: now}
					if s.Observation != want {
						t.Errorf("%s: got %+v, want %+v", s.Formula, s.Observation, want)
					}
				}
				if s.Formula == sh.InForce && s.Observation != got[0] {
					t.Errorf("%s in force: got shadow %+v, want the observation %+v", s.Formula, s.Observation, got[0])
				}
			}
			if len(order) != len(tt.want) {
				t.Errorf("got shadows %v, want one for each of %d formulas", order, len(tt.want))
			}
		})
	}
}

// TestMemoryShadowsWithoutObservation: when the reads the formulas share
// fail, the observation's error is the source's and no formula has a
// shadow, so none is exported as if current.
func TestMemoryShadowsWithoutObservation(t *testing.T) {
	cgroup := copyFixture(t, "cgroupv1")
	edit(t, cgroup, map[string]*string{"memory/memory.stat": nil})
	src, err := NewMemorySource(fixtureConfig(t, fixture(t, "proc"), cgroup, DriverCgroupfs))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := src.Observe(context.Background(), now); err == nil {
		t.Fatalf("got %+v, want an error", got)
	}
	sh := src.MemoryShadows()
	if !sh.Time.Equal(now) || len(sh.Shadows) != 0 {
		t.Errorf("got %+v, want no shadows at %v", sh, now)
	}
}
