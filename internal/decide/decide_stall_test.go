package decide

import (
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/ranking"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// A stall threshold is a memory threshold: it sets memory pressure, and the
// victim is the one memory.available would pick (over its request first,
// then priority, then usage above request), not the biggest pod.
func TestDecideStall(t *testing.T) {
	parse := func(t *testing.T, s thresholds.Settings) []thresholds.Threshold {
		t.Helper()
		p, err := thresholds.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return p.Thresholds
	}
	hard := thresholds.Settings{Hard: map[string]string{"memory.pressure.full.avg10": ">20"}}
	soft := thresholds.Settings{
		Hard:            map[string]string{},
		Soft:            map[string]string{"memory.pressure.some.avg60": ">10"},
		SoftGracePeriod: map[string]string{"memory.pressure.some.avg60": "30s"},
	}
	stall := func(sig signals.Signal, v int64, memAvail int64) signals.Observations {
		return signals.Observations{
			sig:                     {Signal: sig, Available: v, Capacity: signals.StallScale, Time: t0},
			signals.MemoryAvailable: {Signal: signals.MemoryAvailable, Available: memAvail, Capacity: 10240 * mi, Time: t0},
		}
	}
	local := func(obs signals.Observations, sig signals.Signal) signals.Observations {
		o := obs[sig]
		o.Local = true
		obs[sig] = o
		return obs
	}
	// big is Guaranteed-like: large but within its request; over is a
	// smaller burstable pod well above its request; disk-hog uses much
	// disk and little memory.
	pods := []signals.Pod{
		{Namespace: "default", Name: "big", UID: "big", QOS: signals.Burstable, MemoryRequest: 4096 * mi},
		{Namespace: "default", Name: "over", UID: "over", QOS: signals.Burstable, MemoryRequest: 128 * mi,
			Containers: []signals.Container{{Name: "app", MemoryRequest: 128 * mi}}},
		{Namespace: "kube-system", Name: "etcd", UID: "etcd", QOS: signals.Burstable, Static: true},
	}
	usage := map[string]signals.PodStats{
		"big":  {UID: "big", MemoryWorkingSet: i64(4000 * mi)},
		"over": {UID: "over", MemoryWorkingSet: i64(600 * mi), Containers: []signals.ContainerStats{{Name: "app", MemoryWorkingSet: i64(600 * mi)}}},
		"etcd": {UID: "etcd", MemoryWorkingSet: i64(8000 * mi)},
	}
	for _, tc := range []struct {
		name         string
		s            thresholds.Settings
		obs          signals.Observations
		wantOutcome  Outcome
		wantPod      string
		wantPressure bool
		wantReason   string
	}{
		{"below the threshold: informs only", hard, stall(signals.MemoryPressureFullAvg10, 1999, 8000*mi), OutcomeNone, "", false, "no threshold met"},
		{"at the threshold is not above", hard, stall(signals.MemoryPressureFullAvg10, 2000, 8000*mi), OutcomeNone, "", false, "no threshold met"},
		{"above: memory pressure, the pod over its request goes", hard, stall(signals.MemoryPressureFullAvg10, 3550, 8000*mi), OutcomeEvict, "over", true,
			"hard threshold memory.pressure.full.avg10>20% met; default/over ranks first"},
		{"another window does not count", hard, stall(signals.MemoryPressureFullAvg60, 9000, 8000*mi), OutcomeNone, "", false, "no threshold met"},
		{"soft: pressure at once, eviction after the grace period", soft, stall(signals.MemoryPressureSomeAvg60, 1500, 8000*mi), OutcomeNone, "", true,
			"memory.pressure.some.avg60>10% met since"},
		{"above but local: no pressure, no eviction, the reason says so", hard, local(stall(signals.MemoryPressureFullAvg10, 9900, 8000*mi), signals.MemoryPressureFullAvg10), OutcomeNone, "", false,
			"no threshold met: the memory stall is above memory.pressure.full.avg10>20% but local"},
		{"soft above but local: no pressure, no grace period", soft, local(stall(signals.MemoryPressureSomeAvg60, 1500, 8000*mi), signals.MemoryPressureSomeAvg60), OutcomeNone, "", false,
			"stall is not shortage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecider(DeciderConfig{Thresholds: parse(t, tc.s), TransitionPeriod: time.Minute})
			dec := d.Decide(t0, tc.obs, pods, usage)
			if dec.Outcome != tc.wantOutcome {
				t.Fatalf("outcome: got %s, want %s (reason %q)", dec.Outcome, tc.wantOutcome, dec.Reason)
			}
			var got string
			if dec.Pod != nil {
				got = dec.Pod.Name
			}
			if got != tc.wantPod {
				t.Errorf("pod: got %q, want %q (candidates %v)", got, tc.wantPod, dec.Candidates)
			}
			if !strings.Contains(dec.Reason, tc.wantReason) {
				t.Errorf("reason: got %q, want it to contain %q", dec.Reason, tc.wantReason)
			}
			if p := dec.Evaluation.Pressure[signals.MemoryPressure].Active; p != tc.wantPressure {
				t.Errorf("memory pressure: got %v, want %v", p, tc.wantPressure)
			}
			for _, p := range []signals.Pressure{signals.DiskPressure, signals.PIDPressure} {
				if dec.Evaluation.Pressure[p].Active {
					t.Errorf("%s pressure from a stall threshold", p)
				}
			}
			if dec.Pod == nil {
				return
			}
			if dec.GracePeriod != 1 || !dec.Hard {
				t.Errorf("got grace %d hard %v, want a hard eviction with grace 1", dec.GracePeriod, dec.Hard)
			}
			want := "The node was low on resource: memory. Threshold: memory.pressure.full.avg10>20%, observed: 35.5% stalled. " +
				"Container app was using 600Mi, request is 128Mi, has larger consumption of memory. "
			if dec.Message != want {
				t.Errorf("message:\ngot  %q\nwant %q", dec.Message, want)
			}
			if dec.Annotations["starved_resource"] != "memory" {
				t.Errorf("starved_resource: got %q, want memory", dec.Annotations["starved_resource"])
			}
			reports := PressureReports(dec.Evaluation, tc.obs)
			if want := "threshold memory.pressure.full.avg10>20% is met: stall 35.5% of the time"; reports[0].Message != want {
				t.Errorf("condition message: got %q, want %q", reports[0].Message, want)
			}
		})
	}
}

// The stall signal's victim is the same as memory.available's on the same pods.
func TestStallRanksAsMemory(t *testing.T) {
	pods := []signals.Pod{
		{Namespace: "default", Name: "a", UID: "a", QOS: signals.BestEffort, Priority: 10},
		{Namespace: "default", Name: "b", UID: "b", QOS: signals.Burstable, MemoryRequest: 10 * mi},
		{Namespace: "default", Name: "c", UID: "c", QOS: signals.BestEffort},
	}
	usage := map[string]signals.PodStats{
		"a": {UID: "a", MemoryWorkingSet: i64(900 * mi)},
		"b": {UID: "b", MemoryWorkingSet: i64(500 * mi)},
		"c": {UID: "c", MemoryWorkingSet: i64(100 * mi)},
	}
	names := func(cs []ranking.Candidate) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Pod.Name)
		}
		return strings.Join(out, ",")
	}
	mem := names(ranking.Rank(signals.MemoryAvailable, signals.SingleFs, pods, usage))
	for _, sig := range signals.All() {
		if !sig.Stall() {
			continue
		}
		if got := names(ranking.Rank(sig, signals.SingleFs, pods, usage)); got != mem {
			t.Errorf("%s ranks %s, memory.available ranks %s", sig, got, mem)
		}
	}
}
