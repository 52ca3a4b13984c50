package snapshot

import (
	"strings"
	"testing"

	"github.com/evictd/evictd/signals"
)

const gi = int64(1) << 30

func TestReadHugePages(t *testing.T) {
	sc, err := Read(strings.NewReader(`{"steps": [
	  {"at": "0s", "observations": {"memory.available": {"available": "10Gi", "capacity": "60Gi"}, "pid.available": {"available": 10, "capacity": 100}},
	   "hugepages": {"hugepages-1Gi": "4Gi", "hugepages-2Mi": "1Gi"}},
	  {"at": "10s", "observations": {"memory.available": {"available": "3Gi", "capacity": "60Gi"}}},
	  {"at": "20s", "observations": {"memory.available": {"available": "3Gi", "capacity": "60Gi"}}, "hugepages": {"hugepages-1Gi": "2Gi"}},
	  {"at": "30s", "observations": {"memory.available": {"available": "3Gi", "capacity": "60Gi"}}, "hugepages": {}},
	  {"at": "40s", "observations": {}, "hugepages": {"hugepages-1Gi": "2Gi"}}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	type avail struct{ available, capacity int64 }
	for i, want := range []struct {
		hugePages       int64
		aware, kubelet6 avail
	}{
		// 10Gi − (4Gi + 1Gi) of 60Gi − 5Gi.
		{5 * gi, avail{5 * gi, 55 * gi}, avail{10 * gi, 60 * gi}},
		// Carried over; 3Gi is not more than 5Gi: 0, of the 57Gi working set.
		{5 * gi, avail{0, 57 * gi}, avail{3 * gi, 60 * gi}},
		{2 * gi, avail{1 * gi, 58 * gi}, avail{3 * gi, 60 * gi}},
		// {} clears them.
		{0, avail{3 * gi, 60 * gi}, avail{3 * gi, 60 * gi}},
		// No memory.available to adjust.
		{2 * gi, avail{}, avail{}},
	} {
		st := sc.Steps[i]
		if st.HugePages != want.hugePages {
			t.Errorf("step %d: hugepages %d, want %d", i, st.HugePages, want.hugePages)
		}
		for _, v := range []struct {
			aware bool
			want  avail
		}{{true, want.aware}, {false, want.kubelet6}} {
			obs := st.ObservationsFor(v.aware)
			o := obs[signals.MemoryAvailable]
			if got := (avail{o.Available, o.Capacity}); got != v.want {
				t.Errorf("step %d, hugepage-aware %v: memory.available %+v, want %+v", i, v.aware, got, v.want)
			}
			if v.aware && len(st.Observations) > 0 && obs[signals.PIDAvailable] != st.Observations[signals.PIDAvailable] {
				t.Errorf("step %d: pid.available changed: %+v", i, obs[signals.PIDAvailable])
			}
		}
		// What the snapshot wrote stays as written.
		if o := st.Observations[signals.MemoryAvailable]; len(st.Observations) > 0 && o.Capacity != 60*gi {
			t.Errorf("step %d: Observations changed: %+v", i, o)
		}
	}
}

func TestReadHugePagesSingleMoment(t *testing.T) {
	sc, err := Read(strings.NewReader(`{"observations": {"memory.available": {"available": "2Gi", "capacity": "16Gi"}},
	  "hugepages": {"hugepages-2Mi": "1Gi"}}`))
	if err != nil {
		t.Fatal(err)
	}
	o := sc.Steps[0].ObservationsFor(true)[signals.MemoryAvailable]
	if sc.Steps[0].HugePages != gi || o.Available != gi || o.Capacity != 15*gi {
		t.Errorf("got hugepages %d, memory.available %d of %d; want 1Gi, 1Gi of 15Gi", sc.Steps[0].HugePages, o.Available, o.Capacity)
	}
}

func TestReadHugePagesRejects(t *testing.T) {
	mem := `"observations": {"memory.available": {"available": "2Gi", "capacity": "16Gi"}}`
	for _, tc := range []struct{ name, body, want string }{
		{"no hugepages- prefix", `{` + mem + `, "hugepages": {"1Gi": "2Gi"}}`,
			`steps[0].hugepages["1Gi"]: want hugepages-<page size> as the node's capacity names it`},
		{"page size not a quantity", `{` + mem + `, "hugepages": {"hugepages-big": "2Gi"}}`, `steps[0].hugepages["hugepages-big"]: want hugepages-<page size>`},
		{"zero page size", `{` + mem + `, "hugepages": {"hugepages-0": "0"}}`, `steps[0].hugepages["hugepages-0"]: want hugepages-<page size>`},
		{"part of a page", `{` + mem + `, "hugepages": {"hugepages-1Gi": "1536Mi"}}`, `steps[0].hugepages["hugepages-1Gi"]: 1536Mi is not a whole number of 1Gi pages`},
		{"negative", `{` + mem + `, "hugepages": {"hugepages-2Mi": "-2Mi"}}`, `quantity "-2Mi" is negative`},
		{"garbage", `{` + mem + `, "hugepages": {"hugepages-2Mi": "lots"}}`, `quantity "lots"`},
		{"not a map", `{` + mem + `, "hugepages": "4Gi"}`, "decode"},
		{"overflow", `{` + mem + `, "hugepages": {"hugepages-1Gi": "8388607Ti", "hugepages-2Mi": "8388607Ti"}}`, "the hugepages add up to more than"},
		{"top level with steps", `{"hugepages": {"hugepages-2Mi": "2Mi"}, "steps": [{"at": "0s", "observations": {}}]}`,
			"give either steps or top-level observations, pods and hugepages, not both"},
		{"no capacity left", `{"observations": {"memory.available": {"available": "2Gi", "capacity": "2Gi"}}, "hugepages": {"hugepages-1Gi": "2Gi"}}`,
			`steps[0].observations["memory.available"] with hugepages: memory.available: hugepage capacity 2147483648 covers all of available 2147483648, with no working set`},
		{"bad step later", `{"steps": [{"at": "0s", "observations": {}}, {"at": "1s", "observations": {}, "hugepages": {"hugepages-1Gi": "1Mi"}}]}`,
			`steps[1].hugepages["hugepages-1Gi"]: 1Mi is not a whole number of 1Gi pages`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := Read(strings.NewReader(tc.body))
			if err == nil {
				t.Fatalf("got %+v, want an error", sc)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %q, want it to hold %q", err, tc.want)
			}
		})
	}
}
