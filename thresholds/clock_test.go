package thresholds

import (
	"testing"
	"time"

	"github.com/evictd/evictd/signals"
)

// TestTrackerClockStepsBack replays passes whose time goes backwards, as
// when the wall clock is stepped back and the times carry no monotonic
// reading. Grace periods must never end early, a new reading must still
// count, and a reading from before the step must not.
func TestTrackerClockStepsBack(t *testing.T) {
	tests := []struct {
		name   string
		ths    []Threshold
		passes []pass
		want   []want
	}{{
		name: "a soft threshold keeps the time it had run and never acts early",
		ths:  []Threshold{softTh(mem, 100, time.Minute)},
		passes: []pass{
			{at: 0, avail: map[signals.Signal]int64{mem: 50}},
			{at: 30 * time.Second, avail: map[signals.Signal]int64{mem: 50}},
			// The clock steps back 20 s (or more, less the real time
			// between the passes): 30 s have run, counted as no more.
			{at: 10 * time.Second, avail: map[signals.Signal]int64{mem: 50}},
			{at: 39 * time.Second, avail: map[signals.Signal]int64{mem: 50}},
			{at: 40 * time.Second, avail: map[signals.Signal]int64{mem: 50}},
		},
		want: []want{
			{met: []string{"memory.available/soft"}, waiting: []string{"memory.available/soft"}, first: map[string]time.Duration{"memory.available/soft": 0}},
			{met: []string{"memory.available/soft"}, waiting: []string{"memory.available/soft"}, first: map[string]time.Duration{"memory.available/soft": 0}},
			{met: []string{"memory.available/soft"}, waiting: []string{"memory.available/soft"}, first: map[string]time.Duration{"memory.available/soft": -20 * time.Second}},
			{met: []string{"memory.available/soft"}, waiting: []string{"memory.available/soft"}, first: map[string]time.Duration{"memory.available/soft": -20 * time.Second}},
			{met: []string{"memory.available/soft"}, actionable: []string{"memory.available/soft"}, first: map[string]time.Duration{"memory.available/soft": -20 * time.Second}},
		},
	}, {
		name: "a step back by hours does not hold a soft threshold for hours",
		ths:  []Threshold{softTh(mem, 100, time.Minute)},
		passes: []pass{
			{at: 5 * time.Hour, avail: map[signals.Signal]int64{mem: 50}},
			{at: 5*time.Hour + 30*time.Second, avail: map[signals.Signal]int64{mem: 50}},
			{at: 40 * time.Second, avail: map[signals.Signal]int64{mem: 50}},
			{at: 70 * time.Second, avail: map[signals.Signal]int64{mem: 50}},
		},
		want: []want{
			{met: []string{"memory.available/soft"}, waiting: []string{"memory.available/soft"}},
			{met: []string{"memory.available/soft"}, waiting: []string{"memory.available/soft"}},
			{met: []string{"memory.available/soft"}, waiting: []string{"memory.available/soft"}, first: map[string]time.Duration{"memory.available/soft": 10 * time.Second}},
			{met: []string{"memory.available/soft"}, actionable: []string{"memory.available/soft"}, first: map[string]time.Duration{"memory.available/soft": 10 * time.Second}},
		},
	}, {
		name: "a hard threshold acts on the first reading after the step",
		ths:  []Threshold{hardTh(mem, 100)},
		passes: []pass{
			{at: time.Hour, avail: map[signals.Signal]int64{mem: 50}},
			{at: time.Hour + 10*time.Second, avail: map[signals.Signal]int64{mem: 50}},
			{at: 0, avail: map[signals.Signal]int64{mem: 50}},
			{at: 10 * time.Second, avail: map[signals.Signal]int64{mem: 50}},
		},
		want: []want{
			{met: []string{"memory.available"}, actionable: []string{"memory.available"}},
			{met: []string{"memory.available"}, actionable: []string{"memory.available"}},
			{met: []string{"memory.available"}, actionable: []string{"memory.available"}},
			{met: []string{"memory.available"}, actionable: []string{"memory.available"}},
		},
	}, {
		name: "a reading from before the step, stamped after now, is stale",
		ths:  []Threshold{hardTh(mem, 100)},
		passes: []pass{
			{at: time.Hour, avail: map[signals.Signal]int64{mem: 50}},
			{at: 10 * time.Second, avail: map[signals.Signal]int64{mem: 50}, obsAt: time.Hour},
			{at: 20 * time.Second, avail: map[signals.Signal]int64{mem: 50}, obsAt: time.Hour},
			{at: 30 * time.Second, avail: map[signals.Signal]int64{mem: 50}},
		},
		want: []want{
			{met: []string{"memory.available"}, actionable: []string{"memory.available"}},
			{met: []string{"memory.available"}, stale: []string{"memory.available"}},
			{met: []string{"memory.available"}, stale: []string{"memory.available"}},
			{met: []string{"memory.available"}, actionable: []string{"memory.available"}},
		},
	}, {
		name: "minimum reclaim carries over the step",
		ths:  []Threshold{withReclaim(hardTh(mem, 100), 100)},
		passes: []pass{
			{at: time.Hour, avail: map[signals.Signal]int64{mem: 50}},
			{at: 0, avail: map[signals.Signal]int64{mem: 150}},
			{at: 10 * time.Second, avail: map[signals.Signal]int64{mem: 200}},
		},
		want: []want{
			{met: []string{"memory.available"}, actionable: []string{"memory.available"}},
			{met: []string{"memory.available"}, reclaiming: []string{"memory.available"}, actionable: []string{"memory.available"}},
			{},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(5*time.Minute, 20*time.Second)
			for i, p := range tt.passes {
				checkEval(t, i, tr.Evaluate(p.now(), tt.ths, p.observations()), tt.want[i])
			}
		})
	}
}

// TestTrackerPressureClockStepsBack checks that a step back neither ends a
// transition period early nor holds it for the length of the step.
func TestTrackerPressureClockStepsBack(t *testing.T) {
	const period = 5 * time.Minute
	ths := []Threshold{hardTh(mem, 100)}
	tr := NewTracker(period, 0)
	steps := []struct {
		at         time.Duration
		avail      int64
		wantActive bool
		wantLast   time.Duration // since t0
		wantSince  time.Duration // since t0
	}{
		{2 * time.Hour, 50, true, 2 * time.Hour, 2 * time.Hour},
		{2*time.Hour + time.Minute, 500, true, 2 * time.Hour, 2 * time.Hour},
		// Stepped back 2h: the minute of hold already run counts, the
		// step does not; 4 minutes of hold remain from now.
		{0, 500, true, -time.Minute, -time.Minute},
		{4*time.Minute - time.Nanosecond, 500, true, -time.Minute, -time.Minute},
		{4 * time.Minute, 500, false, -time.Minute, 4 * time.Minute},
	}
	for i, s := range steps {
		p := pass{at: s.at, avail: map[signals.Signal]int64{mem: s.avail}}
		got := tr.Evaluate(p.now(), ths, p.observations()).Pressure[signals.MemoryPressure]
		if got.Active != s.wantActive || !got.LastObservedAt.Equal(t0.Add(s.wantLast)) || !got.Since.Equal(t0.Add(s.wantSince)) {
			t.Errorf("pass %d at %s: got active %v, last observed %s, since %s; want %v, %s, %s", i, s.at,
				got.Active, got.LastObservedAt.Sub(t0), got.Since.Sub(t0), s.wantActive, s.wantLast, s.wantSince)
		}
	}
}
