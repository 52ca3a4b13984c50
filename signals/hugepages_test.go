package signals

import (
	"strings"
	"testing"
	"time"
)

const gi = int64(1) << 30

// memAvail is a memory.available observation of available out of
// available + workingSet, as kubelet 1.36 computes it.
func memAvail(available, workingSet int64) Observation {
	return Observation{Signal: MemoryAvailable, Available: available, Capacity: available + workingSet,
		Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// TestHugepageAwareKubelet ports kubelet 1.37's TestAdjustForHugePages
// (pkg/kubelet/server/stats/summary_hugepages_test.go). The kubelet's
// cases with nil memory stats or nil AvailableBytes have no counterpart: a
// signal evictd cannot read has no observation, and nothing is adjusted.
// Its "nil node" case (no node, so no capacity to read hugepages from) and
// "no hugepages in capacity" both come to no hugepages here.
func TestHugepageAwareKubelet(t *testing.T) {
	for _, tc := range []struct {
		name          string
		in            Observation
		hugePages     int64
		wantAvailable int64
		wantCapacity  int64 // available + working set after the adjustment
	}{
		{name: "nil node", in: memAvail(10000, 1000), hugePages: 0, wantAvailable: 10000, wantCapacity: 11000},
		{name: "no hugepages in capacity", in: memAvail(10000, 1000), hugePages: 0, wantAvailable: 10000, wantCapacity: 11000},
		// 10Gi − 4Gi = 6Gi.
		{name: "hugepages subtracted from available", in: memAvail(10*gi, 50*gi), hugePages: 4 * gi,
			wantAvailable: 6 * gi, wantCapacity: 56 * gi},
		// hugepages-1Gi: 2Gi and hugepages-2Mi: 1Gi: 10Gi − 3Gi = 7Gi.
		{name: "multiple hugepage sizes", in: memAvail(10*gi, 50*gi), hugePages: 2*gi + 1*gi,
			wantAvailable: 7 * gi, wantCapacity: 57 * gi},
		{name: "hugepages exceed available clamps to zero", in: memAvail(2*gi, 60*gi), hugePages: 4 * gi,
			wantAvailable: 0, wantCapacity: 60 * gi},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			got, err := HugepageAware(in, tc.hugePages)
			if err != nil {
				t.Fatal(err)
			}
			if got.Available != tc.wantAvailable || got.Capacity != tc.wantCapacity {
				t.Errorf("got available %d of %d, want %d of %d", got.Available, got.Capacity, tc.wantAvailable, tc.wantCapacity)
			}
			if got.Signal != in.Signal || !got.Time.Equal(in.Time) {
				t.Errorf("got %+v: signal or time changed from %+v", got, in)
			}
			// The kubelet's TestAdjustForHugePagesDoesNotMutateOriginal.
			if in != tc.in {
				t.Errorf("the observation passed in changed: %+v, was %+v", in, tc.in)
			}
		})
	}
}

// TestHugepageAware tables the rule: available − hugepages, strictly above
// 0 or else 0; capacity = that available + the working set.
func TestHugepageAware(t *testing.T) {
	const mi = int64(1) << 20
	for _, tc := range []struct {
		name                        string
		in                          Observation
		hugePages                   int64
		wantAvailable, wantCapacity int64
	}{
		// A 64Gi node (MemTotal), 20Gi working set, 8Gi of 1Gi pages.
		{"capacity is MemTotal − hugepages", memAvail(44*gi, 20*gi), 8 * gi, 36 * gi, 56 * gi},
		{"one byte left", memAvail(4*gi+1, 20*gi), 4 * gi, 1, 20*gi + 1},
		// The kubelet subtracts only while available is strictly more.
		{"hugepages equal to available", memAvail(4*gi, 20*gi), 4 * gi, 0, 20 * gi},
		{"hugepages above available", memAvail(1*gi, 20*gi), 4 * gi, 0, 20 * gi},
		// Already nothing available: capacity stays the working set.
		{"nothing available before", memAvail(0, 20*gi), 512 * mi, 0, 20 * gi},
		{"a single 2Mi page", memAvail(1*gi, 1*gi), 2 * mi, 1*gi - 2*mi, 2*gi - 2*mi},
		{"no hugepages leaves it as it is", memAvail(3*gi, 5*gi), 0, 3 * gi, 8 * gi},
		{"no working set, some left", memAvail(8*gi, 0), 2 * gi, 6 * gi, 6 * gi},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := HugepageAware(tc.in, tc.hugePages)
			if err != nil {
				t.Fatal(err)
			}
			if got.Available != tc.wantAvailable || got.Capacity != tc.wantCapacity {
				t.Errorf("got available %d of %d, want %d of %d", got.Available, got.Capacity, tc.wantAvailable, tc.wantCapacity)
			}
			if err := got.Check(); err != nil {
				t.Errorf("result fails Check: %v", err)
			}
			if ws, want := got.Capacity-got.Available, tc.in.Capacity-tc.in.Available; ws != want {
				t.Errorf("working set %d after, %d before: it must not change", ws, want)
			}
		})
	}
}

func TestHugepageAwareRejects(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        Observation
		hugePages int64
		want      string
	}{
		{"another signal", Observation{Signal: AllocatableMemoryAvailable, Available: 1, Capacity: 2}, 1,
			"from memory.available only, not from allocatableMemory.available"},
		{"negative hugepages", memAvail(1*gi, 1*gi), -1, "hugepage capacity -1 is negative"},
		{"available above capacity", Observation{Signal: MemoryAvailable, Available: 3, Capacity: 2}, 1, "available 3 is not within capacity 2"},
		{"negative available", Observation{Signal: MemoryAvailable, Available: -1, Capacity: 2}, 1, "available -1 is not within capacity 2"},
		{"no capacity left", memAvail(2*gi, 0), 2 * gi, "hugepage capacity 2147483648 covers all of available 2147483648, with no working set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := HugepageAware(tc.in, tc.hugePages)
			if err == nil {
				t.Fatalf("got %+v, want an error holding %q", got, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %q, want it to hold %q", err, tc.want)
			}
			if got != (Observation{}) {
				t.Errorf("got %+v with the error, want none", got)
			}
		})
	}
}
