package thresholds

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/evictd/evictd/signals"
)

// pass is one call to Evaluate: the time of the pass and the observations,
// each given as signal → available (capacity 1000), observed at obsAt (the
// pass time when zero).
type pass struct {
	at    time.Duration // since t0
	avail map[signals.Signal]int64
	obsAt time.Duration // since t0; -1 means the zero time
}

func (p pass) now() time.Time { return t0.Add(p.at) }

func (p pass) observations() signals.Observations {
	at := p.now()
	switch {
	case p.obsAt < 0:
		at = time.Time{}
	case p.obsAt > 0:
		at = t0.Add(p.obsAt)
	}
	obs := make(signals.Observations, len(p.avail))
	for s, a := range p.avail {
		obs[s] = obsOf(s, a, 1000, at)
	}
	return obs
}

// keys names thresholds compactly: "memory.available" or
// "memory.available/soft".
func keys(ths []Threshold) []string {
	out := []string{}
	for _, th := range ths {
		s := string(th.Signal)
		if th.Soft {
			s += "/soft"
		}
		out = append(out, s)
	}
	return out
}

func hardTh(sig signals.Signal, v int64) Threshold {
	return Threshold{Signal: sig, Value: Value{Quantity: qty(fmt.Sprint(v))}}
}

func softTh(sig signals.Signal, v int64, grace time.Duration) Threshold {
	th := hardTh(sig, v)
	th.Soft, th.GracePeriod = true, grace
	return th
}

func withReclaim(th Threshold, v int64) Threshold {
	th.MinReclaim = &Value{Quantity: qty(fmt.Sprint(v))}
	return th
}

// want is what a pass should find; nil slices mean "none".
type want struct {
	met, reclaiming, waiting, actionable, stale, missing []string
	first                                                map[string]time.Duration // key name → since t0
}

func checkEval(t *testing.T, i int, ev Evaluation, w want) {
	t.Helper()
	for _, c := range []struct {
		name      string
		got, want []string
	}{
		{"Met", keys(ev.Met), w.met},
		{"Reclaiming", keys(ev.Reclaiming), w.reclaiming},
		{"Waiting", keys(ev.Waiting), w.waiting},
		{"Actionable", keys(ev.Actionable), w.actionable},
		{"Stale", keys(ev.Stale), w.stale},
		{"Missing", keys(ev.Missing), w.missing},
	} {
		if c.want == nil {
			c.want = []string{}
		}
		if !slices.Equal(c.got, c.want) {
			t.Errorf("pass %d: %s: got %q, want %q", i, c.name, c.got, c.want)
		}
	}
	if w.first != nil {
		got := map[string]time.Duration{}
		for k, at := range ev.FirstObservedAt {
			name := string(k.Signal)
			if k.Soft {
				name += "/soft"
			}
			got[name] = at.Sub(t0)
		}
		if fmt.Sprint(got) != fmt.Sprint(w.first) {
			t.Errorf("pass %d: FirstObservedAt: got %v, want %v", i, got, w.first)
		}
	}
}

const (
	mem    = signals.MemoryAvailable
	alloc  = signals.AllocatableMemoryAvailable
	nodefs = signals.NodeFsAvailable
	inodes = signals.NodeFsInodesFree
	pids   = signals.PIDAvailable
)

func TestTrackerThresholds(t *testing.T) {
	tests := []struct {
		name   string
		ths    []Threshold
		maxAge time.Duration
		passes []pass
		want   []want
	}{{
		name:   "hard thresholds act at once; equal to the threshold is not met",
		ths:    []Threshold{hardTh(mem, 100)},
		passes: []pass{{at: 0, avail: map[signals.Signal]int64{mem: 100}}, {at: 10 * time.Second, avail: map[signals.Signal]int64{mem: 99}}},
		want: []want{
			{first: map[string]time.Duration{}},
			{met: []string{"memory.available"}, actionable: []string{"memory.available"}, first: map[string]time.Duration{"memory.available": 10 * time.Second}},
		},
	}, {
		name: "a soft threshold waits for its grace period, measured from first met",
		ths:  []Threshold{softTh(nodefs, 100, time.Minute)},
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{nodefs: 50}},
			{at: 30 * time.Second, avail: map[signals.Signal]int64{nodefs: 50}},
			{at: 59 * time.Second, avail: map[signals.Signal]int64{nodefs: 50}},
			{at: 60 * time.Second, avail: map[signals.Signal]int64{nodefs: 50}},
		},
		want: []want{
			{met: []string{"nodefs.available/soft"}, waiting: []string{"nodefs.available/soft"}, first: map[string]time.Duration{"nodefs.available/soft": 0}},
			{met: []string{"nodefs.available/soft"}, waiting: []string{"nodefs.available/soft"}, first: map[string]time.Duration{"nodefs.available/soft": 0}},
			{met: []string{"nodefs.available/soft"}, waiting: []string{"nodefs.available/soft"}, first: map[string]time.Duration{"nodefs.available/soft": 0}},
			{met: []string{"nodefs.available/soft"}, actionable: []string{"nodefs.available/soft"}, first: map[string]time.Duration{"nodefs.available/soft": 0}},
		},
	}, {
		name: "dipping out for one pass restarts the grace period",
		ths:  []Threshold{softTh(nodefs, 100, time.Minute)},
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{nodefs: 50}},
			{at: 50 * time.Second, avail: map[signals.Signal]int64{nodefs: 100}},
			{at: 60 * time.Second, avail: map[signals.Signal]int64{nodefs: 50}},
			{at: 119 * time.Second, avail: map[signals.Signal]int64{nodefs: 50}},
			{at: 120 * time.Second, avail: map[signals.Signal]int64{nodefs: 50}},
		},
		want: []want{
			{met: []string{"nodefs.available/soft"}, waiting: []string{"nodefs.available/soft"}, first: map[string]time.Duration{"nodefs.available/soft": 0}},
			{first: map[string]time.Duration{}},
			{met: []string{"nodefs.available/soft"}, waiting: []string{"nodefs.available/soft"}, first: map[string]time.Duration{"nodefs.available/soft": 60 * time.Second}},
			{met: []string{"nodefs.available/soft"}, waiting: []string{"nodefs.available/soft"}, first: map[string]time.Duration{"nodefs.available/soft": 60 * time.Second}},
			{met: []string{"nodefs.available/soft"}, actionable: []string{"nodefs.available/soft"}, first: map[string]time.Duration{"nodefs.available/soft": 60 * time.Second}},
		},
	}, {
		name: "a missing observation also restarts the grace period",
		ths:  []Threshold{softTh(nodefs, 100, time.Minute)},
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{nodefs: 50}},
			{at: 50 * time.Second, avail: map[signals.Signal]int64{}},
			{at: 60 * time.Second, avail: map[signals.Signal]int64{nodefs: 50}},
		},
		want: []want{
			{met: []string{"nodefs.available/soft"}, waiting: []string{"nodefs.available/soft"}},
			{missing: []string{"nodefs.available/soft"}, first: map[string]time.Duration{}},
			{met: []string{"nodefs.available/soft"}, waiting: []string{"nodefs.available/soft"}, first: map[string]time.Duration{"nodefs.available/soft": 60 * time.Second}},
		},
	}, {
		name: "hard and soft thresholds of one signal are tracked apart",
		ths:  []Threshold{hardTh(mem, 100), softTh(mem, 300, 30*time.Second)},
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{mem: 200}},
			{at: 10 * time.Second, avail: map[signals.Signal]int64{mem: 50}},
			{at: 30 * time.Second, avail: map[signals.Signal]int64{mem: 50}},
		},
		want: []want{
			{met: []string{"memory.available/soft"}, waiting: []string{"memory.available/soft"}},
			{met: []string{"memory.available", "memory.available/soft"}, actionable: []string{"memory.available"}, waiting: []string{"memory.available/soft"},
				first: map[string]time.Duration{"memory.available": 10 * time.Second, "memory.available/soft": 0}},
			{met: []string{"memory.available", "memory.available/soft"}, actionable: []string{"memory.available", "memory.available/soft"},
				first: map[string]time.Duration{"memory.available": 10 * time.Second, "memory.available/soft": 0}},
		},
	}, {
		name: "a soft threshold with a 0s grace period acts at once",
		ths:  []Threshold{softTh(pids, 100, 0)},
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{pids: 10}},
		},
		want: []want{{met: []string{"pid.available/soft"}, actionable: []string{"pid.available/soft"}}},
	}, {
		name: "minimum reclaim holds a threshold until threshold + reclaim is available",
		ths:  []Threshold{withReclaim(hardTh(mem, 100), 50)},
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{mem: 90}},
			{at: 10 * time.Second, avail: map[signals.Signal]int64{mem: 100}},
			{at: 20 * time.Second, avail: map[signals.Signal]int64{mem: 149}},
			{at: 30 * time.Second, avail: map[signals.Signal]int64{mem: 150}},
			{at: 40 * time.Second, avail: map[signals.Signal]int64{mem: 120}},
		},
		want: []want{
			{met: []string{"memory.available"}, actionable: []string{"memory.available"}},
			{met: []string{"memory.available"}, reclaiming: []string{"memory.available"}, actionable: []string{"memory.available"},
				first: map[string]time.Duration{"memory.available": 0}},
			{met: []string{"memory.available"}, reclaiming: []string{"memory.available"}, actionable: []string{"memory.available"}},
			{first: map[string]time.Duration{}},
			// Back above the threshold, below threshold + reclaim, but no
			// longer under pressure: not met.
			{first: map[string]time.Duration{}},
		},
	}, {
		name: "minimum reclaim applies only once the grace period was satisfied",
		ths:  []Threshold{withReclaim(softTh(nodefs, 100, time.Minute), 50)},
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{nodefs: 90}},
			{at: 10 * time.Second, avail: map[signals.Signal]int64{nodefs: 120}},
			{at: 20 * time.Second, avail: map[signals.Signal]int64{nodefs: 90}},
			{at: 80 * time.Second, avail: map[signals.Signal]int64{nodefs: 90}},
			{at: 90 * time.Second, avail: map[signals.Signal]int64{nodefs: 120}},
		},
		want: []want{
			{met: []string{"nodefs.available/soft"}, waiting: []string{"nodefs.available/soft"}},
			{},
			{met: []string{"nodefs.available/soft"}, waiting: []string{"nodefs.available/soft"}},
			{met: []string{"nodefs.available/soft"}, actionable: []string{"nodefs.available/soft"}},
			{met: []string{"nodefs.available/soft"}, reclaiming: []string{"nodefs.available/soft"}, actionable: []string{"nodefs.available/soft"},
				first: map[string]time.Duration{"nodefs.available/soft": 20 * time.Second}},
		},
	}, {
		name: "the same observation time twice is stale the second time",
		ths:  []Threshold{hardTh(mem, 100)},
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{mem: 50}},
			{at: 10 * time.Second, avail: map[signals.Signal]int64{mem: 50}, obsAt: time.Nanosecond},
			{at: 20 * time.Second, avail: map[signals.Signal]int64{mem: 50}, obsAt: time.Nanosecond},
			{at: 30 * time.Second, avail: map[signals.Signal]int64{mem: 50}, obsAt: 30 * time.Second},
		},
		want: []want{
			{met: []string{"memory.available"}, actionable: []string{"memory.available"}},
			{met: []string{"memory.available"}, actionable: []string{"memory.available"}},
			{met: []string{"memory.available"}, stale: []string{"memory.available"}},
			{met: []string{"memory.available"}, actionable: []string{"memory.available"}},
		},
	}, {
		name: "an observation older than the previous one is stale",
		ths:  []Threshold{hardTh(mem, 100)},
		passes: []pass{
			{at: 10 * time.Second, avail: map[signals.Signal]int64{mem: 50}},
			{at: 20 * time.Second, avail: map[signals.Signal]int64{mem: 50}, obsAt: 5 * time.Second},
		},
		want: []want{
			{met: []string{"memory.available"}, actionable: []string{"memory.available"}},
			{met: []string{"memory.available"}, stale: []string{"memory.available"}},
		},
	}, {
		name: "an old observation that comes back after a gap is still stale",
		ths:  []Threshold{hardTh(mem, 100)},
		passes: []pass{
			{at: 10 * time.Second, avail: map[signals.Signal]int64{mem: 50}},
			{at: 20 * time.Second, avail: map[signals.Signal]int64{}},
			{at: 30 * time.Second, avail: map[signals.Signal]int64{mem: 50}, obsAt: 10 * time.Second},
		},
		want: []want{
			{met: []string{"memory.available"}, actionable: []string{"memory.available"}},
			{missing: []string{"memory.available"}},
			{met: []string{"memory.available"}, stale: []string{"memory.available"}},
		},
	}, {
		name: "an observation without a time is never fresh",
		ths:  []Threshold{hardTh(mem, 100)},
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{mem: 50}, obsAt: -1},
		},
		want: []want{{met: []string{"memory.available"}, stale: []string{"memory.available"}}},
	}, {
		name:   "an observation older than the maximum age is stale",
		ths:    []Threshold{hardTh(mem, 100), hardTh(pids, 100)},
		maxAge: 30 * time.Second,
		passes: []pass{
			{at: 60 * time.Second, avail: map[signals.Signal]int64{mem: 50, pids: 50}, obsAt: 30 * time.Second},
			{at: 90 * time.Second, avail: map[signals.Signal]int64{mem: 50, pids: 50}, obsAt: 59 * time.Second},
		},
		want: []want{
			{met: []string{"memory.available", "pid.available"}, actionable: []string{"memory.available", "pid.available"}},
			{met: []string{"memory.available", "pid.available"}, stale: []string{"memory.available", "pid.available"}},
		},
	}, {
		name: "stale thresholds are never actionable but keep minimum reclaim going",
		ths:  []Threshold{withReclaim(hardTh(mem, 100), 100)},
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{mem: 50}},
			{at: 10 * time.Second, avail: map[signals.Signal]int64{mem: 150}, obsAt: time.Nanosecond},
			{at: 20 * time.Second, avail: map[signals.Signal]int64{mem: 150}, obsAt: time.Nanosecond},
			{at: 30 * time.Second, avail: map[signals.Signal]int64{mem: 150}},
		},
		want: []want{
			{met: []string{"memory.available"}, actionable: []string{"memory.available"}},
			{met: []string{"memory.available"}, reclaiming: []string{"memory.available"}, actionable: []string{"memory.available"}},
			{met: []string{"memory.available"}, reclaiming: []string{"memory.available"}, stale: []string{"memory.available"}},
			{met: []string{"memory.available"}, reclaiming: []string{"memory.available"}, actionable: []string{"memory.available"}},
		},
	}, {
		name: "missing observations are reported, not met",
		ths:  []Threshold{hardTh(mem, 100), hardTh(nodefs, 100), softTh(nodefs, 200, time.Minute)},
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{nodefs: 50}},
			{at: 10 * time.Second, avail: nil},
		},
		want: []want{
			{met: []string{"nodefs.available", "nodefs.available/soft"}, actionable: []string{"nodefs.available"}, waiting: []string{"nodefs.available/soft"}, missing: []string{"memory.available"}},
			{missing: []string{"memory.available", "nodefs.available", "nodefs.available/soft"}, first: map[string]time.Duration{}},
		},
	}, {
		name: "actionable thresholds come memory first, then disk, then PIDs",
		ths: []Threshold{
			hardTh(pids, 100), softTh(inodes, 100, 0), hardTh(nodefs, 100), softTh(mem, 100, 0), hardTh(alloc, 100), hardTh(mem, 100),
		},
		passes: []pass{{at: 0, avail: map[signals.Signal]int64{mem: 1, alloc: 1, nodefs: 1, inodes: 1, pids: 1}}},
		want: []want{{
			met:        []string{"pid.available", "nodefs.inodesFree/soft", "nodefs.available", "memory.available/soft", "allocatableMemory.available", "memory.available"},
			actionable: []string{"memory.available", "memory.available/soft", "allocatableMemory.available", "nodefs.available", "nodefs.inodesFree/soft", "pid.available"},
		}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.passes) != len(tt.want) {
				t.Fatalf("test has %d passes and %d wants", len(tt.passes), len(tt.want))
			}
			tr := NewTracker(5*time.Minute, tt.maxAge)
			for i, p := range tt.passes {
				checkEval(t, i, tr.Evaluate(p.now(), tt.ths, p.observations()), tt.want[i])
			}
		})
	}
}

func TestTrackerPressure(t *testing.T) {
	const period = 5 * time.Minute
	ths := []Threshold{hardTh(mem, 100), softTh(nodefs, 100, time.Hour), withReclaim(hardTh(pids, 100), 100)}
	type state struct {
		active, changed bool
		since, last     time.Duration // since t0; -1 for the zero time
	}
	tests := []struct {
		name   string
		passes []pass
		// want[i] is the pressure state after pass i.
		want []map[signals.Pressure]state
	}{{
		name: "set at once, held for exactly the transition period, then released",
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{mem: 500}},
			{at: 10 * time.Second, avail: map[signals.Signal]int64{mem: 50}},
			{at: 20 * time.Second, avail: map[signals.Signal]int64{mem: 500}},
			{at: 10*time.Second + period - time.Nanosecond, avail: map[signals.Signal]int64{mem: 500}},
			{at: 10*time.Second + period, avail: map[signals.Signal]int64{mem: 500}},
			{at: 20*time.Second + period, avail: map[signals.Signal]int64{mem: 500}},
		},
		want: []map[signals.Pressure]state{
			{signals.MemoryPressure: {false, false, -1, -1}},
			{signals.MemoryPressure: {true, true, 10 * time.Second, 10 * time.Second}},
			{signals.MemoryPressure: {true, false, 10 * time.Second, 10 * time.Second}},
			{signals.MemoryPressure: {true, false, 10 * time.Second, 10 * time.Second}},
			{signals.MemoryPressure: {false, true, 10*time.Second + period, 10 * time.Second}},
			{signals.MemoryPressure: {false, false, 10*time.Second + period, 10 * time.Second}},
		},
	}, {
		name: "being met again during the hold extends it",
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{mem: 50}},
			{at: 4 * time.Minute, avail: map[signals.Signal]int64{mem: 50}},
			{at: 6 * time.Minute, avail: map[signals.Signal]int64{mem: 500}},
			{at: 9 * time.Minute, avail: map[signals.Signal]int64{mem: 500}},
		},
		want: []map[signals.Pressure]state{
			{signals.MemoryPressure: {true, true, 0, 0}},
			{signals.MemoryPressure: {true, false, 0, 4 * time.Minute}},
			{signals.MemoryPressure: {true, false, 0, 4 * time.Minute}},
			{signals.MemoryPressure: {false, true, 9 * time.Minute, 4 * time.Minute}},
		},
	}, {
		name: "a soft threshold sets its pressure before its grace period",
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{nodefs: 50}},
		},
		want: []map[signals.Pressure]state{
			{signals.DiskPressure: {true, true, 0, 0}, signals.MemoryPressure: {false, false, -1, -1}, signals.PIDPressure: {false, false, -1, -1}},
		},
	}, {
		name: "minimum reclaim keeps the pressure observed",
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{pids: 50}},
			{at: 4 * time.Minute, avail: map[signals.Signal]int64{pids: 150}},
			{at: 8 * time.Minute, avail: map[signals.Signal]int64{pids: 199}},
			{at: 9 * time.Minute, avail: map[signals.Signal]int64{pids: 200}},
			{at: 13 * time.Minute, avail: map[signals.Signal]int64{pids: 200}},
		},
		want: []map[signals.Pressure]state{
			{signals.PIDPressure: {true, true, 0, 0}},
			{signals.PIDPressure: {true, false, 0, 4 * time.Minute}},
			{signals.PIDPressure: {true, false, 0, 8 * time.Minute}},
			{signals.PIDPressure: {true, false, 0, 8 * time.Minute}},
			{signals.PIDPressure: {false, true, 13 * time.Minute, 8 * time.Minute}},
		},
	}, {
		name: "a missing observation does not release the pressure early",
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{mem: 50}},
			{at: time.Minute, avail: nil},
			{at: period, avail: nil},
		},
		want: []map[signals.Pressure]state{
			{signals.MemoryPressure: {true, true, 0, 0}},
			{signals.MemoryPressure: {true, false, 0, 0}},
			{signals.MemoryPressure: {false, true, period, 0}},
		},
	}}
	at := func(d time.Duration) time.Time {
		if d < 0 {
			return time.Time{}
		}
		return t0.Add(d)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(period, 0)
			for i, p := range tt.passes {
				ev := tr.Evaluate(p.now(), ths, p.observations())
				if len(ev.Pressure) != 3 {
					t.Errorf("pass %d: got %d pressures, want all 3", i, len(ev.Pressure))
				}
				for kind, w := range tt.want[i] {
					got := ev.Pressure[kind]
					want := PressureState{Active: w.active, Changed: w.changed, Since: at(w.since), LastObservedAt: at(w.last)}
					if got != want {
						t.Errorf("pass %d: %s: got %+v, want %+v", i, kind, got, want)
					}
					if ev.Pressure[kind].Active != w.active {
						t.Errorf("pass %d: Pressure[%s].Active: got %v, want %v", i, kind, !w.active, w.active)
					}
				}
			}
		})
	}
}

func TestTrackerZeroTransitionPeriod(t *testing.T) {
	// With no transition period the pressure follows the thresholds
	// exactly; it is still set on the pass that meets one.
	for _, period := range []time.Duration{0, -time.Minute} {
		tr := NewTracker(period, 0)
		ths := []Threshold{hardTh(mem, 100)}
		p1 := pass{at: 0, avail: map[signals.Signal]int64{mem: 50}}
		p2 := pass{at: time.Nanosecond, avail: map[signals.Signal]int64{mem: 500}}
		if ev := tr.Evaluate(p1.now(), ths, p1.observations()); !ev.Pressure[signals.MemoryPressure].Active {
			t.Errorf("period %v, met: got no pressure, want memory pressure", period)
		}
		if ev := tr.Evaluate(p2.now(), ths, p2.observations()); ev.Pressure[signals.MemoryPressure].Active {
			t.Errorf("period %v, no longer met: got memory pressure, want none", period)
		}
	}
}

func TestTrackerGraceEnds(t *testing.T) {
	tr := NewTracker(time.Minute, 0)
	soft := softTh(nodefs, 100, 90*time.Second)
	other := hardTh(mem, 100)
	p := pass{at: 10 * time.Second, avail: map[signals.Signal]int64{nodefs: 50, mem: 500}}
	ev := tr.Evaluate(p.now(), []Threshold{soft, other}, p.observations())
	if got, ok := ev.GraceEnds(soft); !ok || !got.Equal(t0.Add(100*time.Second)) {
		t.Errorf("GraceEnds(soft): got %v, %v; want %v, true", got, ok, t0.Add(100*time.Second))
	}
	if got, ok := ev.GraceEnds(other); ok {
		t.Errorf("GraceEnds(not met): got %v, true; want false", got)
	}
}

func TestTrackerOwnsItsState(t *testing.T) {
	tr := NewTracker(time.Minute, 0)
	ths := []Threshold{softTh(nodefs, 100, time.Minute)}
	p1 := pass{at: 0, avail: map[signals.Signal]int64{nodefs: 50}}
	ev := tr.Evaluate(p1.now(), ths, p1.observations())
	// A caller scribbling on the result must not move the grace timer.
	ev.FirstObservedAt[ths[0].Key()] = t0.Add(-time.Hour)
	ev.Pressure[signals.DiskPressure] = PressureState{}
	p2 := pass{at: 30 * time.Second, avail: map[signals.Signal]int64{nodefs: 50}}
	ev = tr.Evaluate(p2.now(), ths, p2.observations())
	if got := keys(ev.Actionable); len(got) != 0 {
		t.Errorf("got actionable %q after 30s of a 1m grace period, want none", got)
	}
	if got := ev.Pressure[signals.DiskPressure]; !got.Active || got.Changed {
		t.Errorf("got disk pressure %+v, want active and unchanged", got)
	}
}

func TestTrackerNeverPanics(t *testing.T) {
	tr := NewTracker(time.Minute, time.Second)
	weird := []Threshold{
		{},
		{Signal: "no.such.signal", Value: Value{Percentage: 0.5}},
		{Signal: mem, MinReclaim: &Value{}},
		{Signal: nodefs, Value: pct(-1)},
	}
	obs := signals.Observations{
		"":             {},
		"no.such":      {Available: -1},
		mem:            {Available: -5, Capacity: -10},
		nodefs:         {Signal: pids, Available: 1, Capacity: 1, Time: t0},
		"no.such.more": {Time: t0.Add(time.Hour)},
	}
	for i := range 3 {
		_ = tr.Evaluate(t0.Add(time.Duration(i)*time.Second), weird, obs)
		_ = tr.Evaluate(time.Time{}, nil, nil)
	}
}

// BenchmarkEvaluate is one pass over a dozen thresholds with every signal
// observed and about half the thresholds met.
func BenchmarkEvaluate(b *testing.B) {
	p, err := Parse(Settings{
		Hard: map[string]string{
			"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
			"imagefs.available": "15%", "imagefs.inodesFree": "5%", "pid.available": "1k",
		},
		Soft:                   map[string]string{"memory.available": "500Mi", "nodefs.available": "15%", "imagefs.available": "20%"},
		SoftGracePeriod:        map[string]string{"memory.available": "1m", "nodefs.available": "1m", "imagefs.available": "1m"},
		MinimumReclaim:         map[string]string{"memory.available": "200Mi", "nodefs.available": "1Gi"},
		EnforceNodeAllocatable: []string{"pods"},
	})
	if err != nil {
		b.Fatal(err)
	}
	ths := DeriveContainerFs(p.Thresholds, signals.SingleFs)
	if len(ths) < 12 {
		b.Fatalf("got %d thresholds, want at least a dozen", len(ths))
	}
	avail := map[signals.Signal]int64{
		mem: 80 << 20, alloc: 4 << 30, nodefs: 8 << 30, inodes: 1 << 20,
		signals.ImageFsAvailable: 40 << 30, signals.ImageFsInodesFree: 50 << 10,
		signals.ContainerFsAvailable: 8 << 30, signals.ContainerFsInodesFree: 1 << 20, pids: 500,
	}
	capacity := map[signals.Signal]int64{
		mem: 16 << 30, alloc: 15 << 30, nodefs: 100 << 30, inodes: 6 << 20,
		signals.ImageFsAvailable: 200 << 30, signals.ImageFsInodesFree: 12 << 20,
		signals.ContainerFsAvailable: 100 << 30, signals.ContainerFsInodesFree: 6 << 20, pids: 4 << 20,
	}
	obs := make(signals.Observations, len(avail))
	tr := NewTracker(5*time.Minute, time.Minute)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		now := t0.Add(time.Duration(i) * 10 * time.Second)
		for s, a := range avail {
			obs[s] = obsOf(s, a, capacity[s], now)
		}
		ev := tr.Evaluate(now, ths, obs)
		if len(ev.Met) == 0 {
			b.Fatal("got no threshold met, want some")
		}
	}
}
