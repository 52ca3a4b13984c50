package manager

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// diskScript is a nodefs source whose free space the test sets.
type diskScript struct {
	mu   sync.Mutex
	free int64
}

func (d *diskScript) set(v int64) { d.mu.Lock(); d.free = v; d.mu.Unlock() }

func (d *diskScript) Observe(_ context.Context, now time.Time) ([]signals.Observation, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return []signals.Observation{{Signal: signals.NodeFsAvailable, Available: d.free, Capacity: 1000 * mi, Time: now}}, nil
}

// freeing is a Reclaimer that frees a set amount on the scripted disk,
// saying it removed removed containers.
type freeing struct {
	disk    *diskScript
	to      int64
	removed int
	mu      sync.Mutex
	calls   []signals.Signal
}

func (f *freeing) Reclaim(_ context.Context, sig signals.Signal, _ signals.FsLayout) ([]decide.ReclaimAction, error) {
	f.mu.Lock()
	f.calls = append(f.calls, sig)
	f.mu.Unlock()
	f.disk.mu.Lock()
	before := f.disk.free
	f.disk.mu.Unlock()
	f.disk.set(f.to)
	return []decide.ReclaimAction{{Kind: "containers", Removed: f.removed, FreedBytes: f.to - before}}, nil
}

func (f *freeing) called() []signals.Signal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]signals.Signal(nil), f.calls...)
}

func TestReclaimBeforeEvicting(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{
		Hard:           map[string]string{"nodefs.available": "100Mi"},
		MinimumReclaim: map[string]string{"nodefs.available": "50Mi"},
	})
	for _, tc := range []struct {
		name      string
		reclaimTo int64
		removed   int
		// want is the outcome of each pass, decide.ReclaimSettle apart.
		want        []decide.Outcome
		wantEvicted int
	}{
		{"reclaim clears threshold and minimum reclaim", 200 * mi, 3, []decide.Outcome{decide.OutcomeReclaimed}, 0},
		{"reclaim clears the threshold but not the minimum reclaim", 120 * mi, 3, []decide.Outcome{decide.OutcomeReclaimSettling, decide.OutcomeEvict}, 1},
		{"reclaim removes some but frees nothing yet", 50 * mi, 3, []decide.Outcome{decide.OutcomeReclaimSettling, decide.OutcomeEvict}, 1},
		{"reclaim removes nothing", 50 * mi, 0, []decide.Outcome{decide.OutcomeEvict}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk := &diskScript{free: 50 * mi}
			rec := &freeing{disk: disk, to: tc.reclaimTo, removed: tc.removed}
			ev := &recorder{}
			reg := prometheus.NewRegistry()
			passes := make(chan *Status, 4)
			pod := signals.Pod{Namespace: "default", Name: "writer", UID: "u1", QOS: signals.BestEffort,
				Containers: []signals.Container{{Name: "app"}}}
			stats := fixedStats{"u1": {UID: "u1", Containers: []signals.ContainerStats{{Name: "app",
				Rootfs: &signals.FsUsage{Bytes: 40 * mi, Inodes: 10}, Logs: &signals.FsUsage{Bytes: mi, Inodes: 1}}}}}
			clk := clocktesting.NewFakeClock(t0)
			m, err := New(Config{HousekeepingInterval: 10 * time.Second, StuckAfter: 30 * time.Second, Decider: decide.DeciderConfig{Thresholds: ths, TransitionPeriod: time.Minute}},
				Deps{
					Clock: clk, Sources: []signals.Source{disk},
					Pods: fixedPods{pod}, Stats: stats, Evicter: ev, Reclaimer: rec,
					Metrics: metrics.New(reg), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
					AfterPass: func(st *Status) { passes <- st },
				})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- m.Run(ctx) }()
			var got []decide.Outcome
			for i := range tc.want {
				if i > 0 {
					// The settling wait's end, before the next tick.
					clk.Step(decide.ReclaimSettle)
				}
				st := <-passes
				got = append(got, st.Decision.Outcome)
				if st.Decision.Outcome != tc.want[i] {
					t.Errorf("pass %d: outcome %s, want %s (%s)", i+1, st.Decision.Outcome, tc.want[i], st.Decision.Reason)
				}
			}
			cancel()
			for {
				select {
				case <-passes:
					continue
				case <-done:
				}
				break
			}
			if calls := rec.called(); len(calls) != len(tc.want) || calls[0] != signals.NodeFsAvailable {
				t.Errorf("reclaim calls: got %v, want one for nodefs.available in each of the %d passes", calls, len(tc.want))
			}
			if got := len(ev.evicted()); got != tc.wantEvicted {
				t.Errorf("evictions: got %d, want %d", got, tc.wantEvicted)
			}
			if tc.reclaimTo > 50*mi {
				if got := testutil.ToFloat64(counter(t, reg, "evictd_reclaimed_bytes_total", "kind", "containers")); got != float64(tc.reclaimTo-50*mi) {
					t.Errorf("reclaimed bytes: got %v, want %d", got, tc.reclaimTo-50*mi)
				}
			}
		})
	}
}

// While reclaim settles, a pass that comes sooner (a wake-up) neither
// reclaims again nor evicts; a disk decision that goes away ends the wait.
func TestReclaimSettlingHoldsOnlyItsWindow(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"nodefs.available": "100Mi"}})
	disk := &diskScript{free: 50 * mi}
	rec := &freeing{disk: disk, to: 50 * mi, removed: 2}
	ev := &recorder{}
	pod := signals.Pod{Namespace: "default", Name: "writer", UID: "u1", QOS: signals.BestEffort,
		Containers: []signals.Container{{Name: "app"}}}
	stats := fixedStats{"u1": {UID: "u1", Containers: []signals.ContainerStats{{Name: "app",
		Rootfs: &signals.FsUsage{Bytes: 40 * mi, Inodes: 10}, Logs: &signals.FsUsage{Bytes: mi, Inodes: 1}}}}}
	clk := clocktesting.NewFakeClock(t0)
	m, err := New(Config{HousekeepingInterval: 10 * time.Second, StuckAfter: 30 * time.Second, Decider: decide.DeciderConfig{Thresholds: ths, TransitionPeriod: time.Minute}},
		Deps{
			Clock: clk, Sources: []signals.Source{disk},
			Pods: fixedPods{pod}, Stats: stats, Evicter: ev, Reclaimer: rec,
			Metrics: metrics.New(prometheus.NewRegistry()), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	step := func(d time.Duration, want decide.Outcome, wantCalls, wantEvicted int) {
		t.Helper()
		clk.Step(d)
		m.pass(ctx, "wake")
		st := m.Status()
		if st.Decision.Outcome != want {
			t.Errorf("at +%s: outcome %s, want %s (%s)", clk.Since(t0), st.Decision.Outcome, want, st.Decision.Reason)
		}
		if n := len(rec.called()); n != wantCalls {
			t.Errorf("at +%s: %d reclaims, want %d", clk.Since(t0), n, wantCalls)
		}
		if n := len(ev.evicted()); n != wantEvicted {
			t.Errorf("at +%s: %d evictions, want %d", clk.Since(t0), n, wantEvicted)
		}
	}
	step(0, decide.OutcomeReclaimSettling, 1, 0)
	step(time.Second, decide.OutcomeReclaimSettling, 1, 0) // a wake-up within the window
	disk.set(500 * mi)
	step(time.Second, decide.OutcomeNone, 1, 0) // the space showed: the wait ends
	disk.set(50 * mi)
	rec.to = 50 * mi
	step(time.Second, decide.OutcomeReclaimSettling, 2, 0) // a new episode waits again
	step(decide.ReclaimSettle, decide.OutcomeEvict, 3, 1)  // and evicts once it has passed
}

func TestNoReclaimForMemory(t *testing.T) {
	rec := &freeing{disk: &diskScript{}}
	m, err := New(Config{HousekeepingInterval: time.Second, StuckAfter: 3 * time.Second}, Deps{
		Clock: clocktesting.NewFakeClock(t0), Pods: fixedPods{}, Stats: fixedStats{}, Evicter: &recorder{},
		Reclaimer: rec, Metrics: metrics.New(nil), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	pod := &signals.Pod{Name: "hog"}
	for _, sig := range []signals.Signal{signals.MemoryAvailable, signals.AllocatableMemoryAvailable, signals.PIDAvailable} {
		dec := m.reclaimFirst(context.Background(), decide.Decision{Outcome: decide.OutcomeEvict, Signal: sig, Pod: pod})
		if dec.Outcome != decide.OutcomeEvict || dec.Pod != pod {
			t.Errorf("%s: decision changed to %s", sig, dec.Outcome)
		}
	}
	if len(rec.calls) != 0 {
		t.Errorf("non-disk signals called reclaim %v", rec.calls)
	}
}
