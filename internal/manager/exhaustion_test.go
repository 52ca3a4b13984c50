package manager

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// shiftingPods is a pod source and a stats source whose pods the test
// removes.
type shiftingPods struct {
	mu    sync.Mutex
	pods  fixedPods
	stats fixedStats
}

func (s *shiftingPods) Pods(context.Context) ([]signals.Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]signals.Pod(nil), s.pods...), nil
}

func (*shiftingPods) InFlight() []decide.InFlight { return nil }

func (s *shiftingPods) PodStats(_ context.Context, _ time.Time, pods []signals.Pod, _ signals.PodStatsKinds) (map[string]signals.PodStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]signals.PodStats{}
	for _, p := range pods {
		if st, ok := s.stats[p.UID]; ok {
			out[p.UID] = st
		}
	}
	return out, nil
}

func (s *shiftingPods) remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range s.pods {
		if p.Name == name {
			s.pods = append(s.pods[:i:i], s.pods[i+1:]...)
			return
		}
	}
}

// hookEvicter calls after once each eviction is done.
type hookEvicter struct {
	Evicter
	after func()
}

func (e hookEvicter) Evict(ctx context.Context, r decide.Request) error {
	err := e.Evicter.Evict(ctx, r)
	e.after()
	return err
}

// histogram reads the count and sum of a histogram series.
func histogram(t *testing.T, reg *prometheus.Registry, name string, labels ...string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	return 0, 0
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestLoopTimeToExhaustion: with --eviction-time-to-exhaustion, the fast
// poll's readings of memory falling at 800Mi/s wake the loop once they
// say memory runs out within the release estimate (1s, none measured) and
// the margin (500ms), and the pass evicts as the hard threshold would,
// before it is met, saying so in its decision and its metric. The
// victim's release then feeds the estimate, and a later crossing's
// relief is measured. Without the flag the same readings decide nothing.
func TestLoopTimeToExhaustion(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "500Mi"}})
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			src := &shiftingPods{pods: defaultPods(), stats: defaultStats()}
			// killed is what an eviction does to memory, from the loop's
			// goroutine.
			var killed func()
			logs := &logBuffer{}
			h := newHarnessTuned(t, false, ths, nil, nil, func(c *Config, d *Deps) {
				d.Log = slog.New(slog.NewTextHandler(logs, nil))
				c.Decider.Exhaustion = decide.ExhaustionConfig{Enabled: on, Margin: 500 * time.Millisecond}
				d.Pods, d.Stats = src, src
				d.Evicter = hookEvicter{d.Evicter, func() { killed() }}
			})
			// The victim killed, memory comes back, and the fast poll's
			// reading says so.
			killed = func() {
				h.src.set(3000 * mi)
				h.m.Read(signals.Observation{Signal: signals.MemoryAvailable, Available: 3000 * mi, Capacity: 10240 * mi, Time: h.clock.Now()})
			}
			h.next("start")
			// The start pass's reading, 4096Mi, out of the window.
			h.clock.Step(5 * time.Second)
			// The fast poll's readings, 100ms apart: 1500Mi, 1420Mi, ...
			// The fifth, 1180Mi, runs out in 1.475s.
			for i := range 5 {
				avail := (1500 - 80*int64(i)) * mi
				h.src.set(avail)
				h.m.Read(signals.Observation{Signal: signals.MemoryAvailable, Available: avail, Capacity: 10240 * mi, Time: h.clock.Now()})
				if i < 4 {
					h.clock.Step(100 * time.Millisecond)
				}
			}
			if !on {
				st := h.tick()
				if st.Decision.Outcome != decide.OutcomeNone || st.Decision.Predicted != nil || len(h.ev.evicted()) != 0 {
					t.Fatalf("off: got %s (%s), evicted %v, want none", st.Decision.Outcome, st.Decision.Reason, h.ev.evicted())
				}
				if n := len(counterFamilies(t, h.reg, "evictd_predicted_evictions_total")); n != 0 {
					t.Errorf("off: %d evictd_predicted_evictions_total series, want none", n)
				}
				return
			}
			st := h.next("wake")
			dec := st.Decision
			if dec.Outcome != decide.OutcomeEvict || dec.Pod.Name != "hog" || dec.Predicted == nil || !dec.Hard || dec.GracePeriod != 1 {
				t.Fatalf("got %s of %v (hard %v, grace %d, predicted %v): %s; want hog evicted hard, predicted",
					dec.Outcome, dec.Pod, dec.Hard, dec.GracePeriod, dec.Predicted, dec.Reason)
			}
			if got, want := dec.Predicted.TimeLeft.Round(time.Millisecond), 1475*time.Millisecond; got != want {
				t.Errorf("time left: got %s, want %s", got, want)
			}
			const words = "memory.available predicted to run out in 1.475s at 800Mi/s; threshold memory.available<500Mi not met yet"
			if !strings.Contains(dec.Reason, words) || !strings.HasSuffix(h.ev.requests[0].Message, words+".") || !h.ev.requests[0].Hard {
				t.Errorf("reason %q, request %+v: want both to say %q", dec.Reason, h.ev.requests[0], words)
			}
			if got := logs.lines("msg=decision", "outcome=evict", "predicted=\""+words+"\"", "releaseEstimate=1s", "margin=500ms"); len(got) != 1 {
				t.Errorf("decision log lines saying it was predicted: got %q", got)
			}
			if st.Pressures["memory"] {
				t.Error("a prediction set memory pressure: the condition is the threshold's")
			}
			if got := testutil.ToFloat64(counter(t, h.reg, "evictd_predicted_evictions_total", "signal", "memory.available")); got != 1 {
				t.Errorf("evictd_predicted_evictions_total: got %v, want 1", got)
			}
			if st := h.next("wake"); st.Decision.Outcome != decide.OutcomeNone { // the eviction's: hog still listed
				t.Fatalf("after the eviction: got %s (%s), want none", st.Decision.Outcome, st.Decision.Reason)
			}

			// hog goes 250ms after the decision: its release.
			src.remove("hog")
			h.clock.Step(250 * time.Millisecond)
			h.m.Wake()
			h.next("wake")
			if n, sum := histogram(t, h.reg, "evictd_eviction_release_seconds", "signal", "memory.available"); n != 1 || sum != 0.25 {
				t.Errorf("evictd_eviction_release_seconds: got %d releases summing %vs, want 1 of 0.25s", n, sum)
			}
			if got := gauge(t, h, "evictd_eviction_release_estimate_seconds"); got != 0.25 {
				t.Errorf("evictd_eviction_release_estimate_seconds: got %v, want 0.25", got)
			}

			// The threshold met, then relieved a tick later.
			killed = func() {}
			h.src.set(400 * mi)
			if st := h.tick(); st.Decision.Outcome != decide.OutcomeEvict || st.Decision.Predicted != nil {
				t.Fatalf("threshold met: got %s, predicted %v, want an eviction not predicted", st.Decision.Outcome, st.Decision.Predicted)
			}
			h.next("wake")
			h.src.set(4096 * mi)
			h.tick()
			if n, sum := histogram(t, h.reg, "evictd_pressure_relief_seconds", "signal", "memory.available", "kind", "hard"); n != 1 || sum != 10 {
				t.Errorf("evictd_pressure_relief_seconds: got %d reliefs summing %vs, want 1 of 10s", n, sum)
			}
		})
	}
}

// counterFamilies lists the series of a family.
func counterFamilies(t *testing.T, reg *prometheus.Registry, name string) []*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

// TestReleased: when a pass counts a victim's memory released.
func TestReleased(t *testing.T) {
	ws := func(v int64) fixedStats { return fixedStats{"u": {UID: "u", MemoryWorkingSet: signals.Int64(v)}} }
	at900 := releasing{signal: signals.MemoryAvailable, decided: t0, workingSet: 900 * mi}
	for _, tc := range []struct {
		name   string
		r      releasing
		listed bool
		stats  fixedStats
		kinds  signals.PodStatsKinds
		want   bool
	}{
		{"no longer listed", at900, false, nil, 0, true},
		{"cgroup gone from the memory stats", at900, true, fixedStats{}, signals.PodMemory, true},
		{"no working set read this pass", at900, true, fixedStats{}, signals.PodDisk, false},
		{"no stats at all (an error)", at900, true, nil, signals.PodMemory, false},
		{"down to a quarter", at900, true, ws(225 * mi), signals.PodMemory, true},
		{"down by half only", at900, true, ws(450 * mi), signals.PodMemory, false},
		{"working set at the decision unknown", releasing{workingSet: -1}, true, ws(0), signals.PodMemory, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stats map[string]signals.PodStats
			if tc.stats != nil {
				stats = tc.stats
			}
			if got := released(tc.r, tc.listed, stats, "u", tc.kinds); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
