package snapshot

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/evictd/evictd/signals"
)

// FuzzSnapshot reads arbitrary bytes as a snapshot. Whatever the bytes,
// Read returns an error, the same one on a second reading, or a scenario
// whose every figure is in range: steps in increasing time, observations
// with 0 <= available <= capacity, pods with distinct UIDs and non-negative
// requests and usage, hugepages that only ever take from memory.available.
// Seeds: examples/*.json and edge cases.
func FuzzSnapshot(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := Read(bytes.NewReader(data))
		sc2, err2 := Read(bytes.NewReader(data))
		if err != nil {
			if sc != nil {
				t.Fatalf("error %q with a scenario", err)
			}
			if err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("the same snapshot read twice: error %q, then %v", err, err2)
			}
			return
		}
		if err2 != nil || !reflect.DeepEqual(sc, sc2) {
			t.Fatalf("the same snapshot read twice: a scenario, then %v", err2)
		}
		if len(sc.Steps) == 0 {
			t.Fatal("a scenario without steps")
		}
		for i, st := range sc.Steps {
			if st.At < 0 || (i > 0 && st.At <= sc.Steps[i-1].At) || !st.Time.Equal(Epoch.Add(st.At)) {
				t.Fatalf("step %d at %s (time %s) after %v", i, st.At, st.Time, sc.Steps[max(i-1, 0)].At)
			}
			if st.HugePages < 0 {
				t.Fatalf("step %d: hugepages %d", i, st.HugePages)
			}
			for _, obs := range []signals.Observations{st.Observations, st.ObservationsFor(true)} {
				for sig, o := range obs {
					if err := o.Check(); err != nil || o.Signal != sig || o.Available < 0 || o.Available > o.Capacity {
						t.Fatalf("step %d: observation %+v (%v)", i, o, err)
					}
				}
			}
			if a, b := st.ObservationsFor(true)[signals.MemoryAvailable], st.Observations[signals.MemoryAvailable]; a.Available > b.Available || a.Capacity > b.Capacity ||
				a.Capacity-a.Available != b.Capacity-b.Available {
				t.Fatalf("step %d: memory.available %+v with hugepages, %+v without", i, a, b)
			}
			uids := map[string]bool{}
			for _, p := range st.Pods {
				if p.Name == "" || p.Namespace == "" || p.UID == "" || uids[p.UID] {
					t.Fatalf("step %d: pod %+v: no name, namespace or UID, or a UID seen before", i, p)
				}
				uids[p.UID] = true
				if p.MemoryRequest < 0 || p.EphemeralStorageRequest < 0 || p.EphemeralStorageLimit < 0 {
					t.Fatalf("step %d: pod %s: negative request or limit: %+v", i, p.Ref(), p)
				}
				if r := p.PodLevelMemoryRequest; r != nil && (r.Bytes < 0 || r.Text == "") {
					t.Fatalf("step %d: pod %s: pod-level memory request %+v", i, p.Ref(), *r)
				}
				for _, c := range p.Containers {
					if c.MemoryRequest < 0 || c.EphemeralStorageRequest < 0 || c.EphemeralStorageLimit < 0 {
						t.Fatalf("step %d: pod %s container %s: negative request or limit", i, p.Ref(), c.Name)
					}
				}
				if g := p.TerminationGracePeriodSeconds; g != nil && *g < 0 {
					t.Fatalf("step %d: pod %s: grace period %d", i, p.Ref(), *g)
				}
			}
			for uid, ps := range st.Stats {
				if !uids[uid] {
					t.Fatalf("step %d: stats for pod %s, which is not in the step", i, uid)
				}
				checkStats(t, uid, ps)
			}
		}
	})
}

func checkStats(t *testing.T, uid string, ps signals.PodStats) {
	t.Helper()
	neg := func(p *int64) bool { return p != nil && *p < 0 }
	negFs := func(u *signals.FsUsage) bool { return u != nil && (u.Bytes < 0 || u.Inodes < 0) }
	if neg(ps.MemoryWorkingSet) || neg(ps.Processes) {
		t.Fatalf("pod %s: negative usage: memory %v, processes %v", uid, ps.MemoryWorkingSet, ps.Processes)
	}
	for _, c := range ps.Containers {
		if neg(c.MemoryWorkingSet) || negFs(c.Rootfs) || negFs(c.Logs) {
			t.Fatalf("pod %s container %s: negative usage", uid, c.Name)
		}
	}
	for name, v := range ps.Volumes {
		if v.Bytes < 0 || v.Inodes < 0 {
			t.Fatalf("pod %s volume %s: negative usage %+v", uid, name, v)
		}
	}
}
