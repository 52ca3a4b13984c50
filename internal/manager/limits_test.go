package manager

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

func TestHourWindow(t *testing.T) {
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type op struct {
		record    bool // record an eviction at now; otherwise ask
		now       time.Duration
		wantFull  bool
		wantCount int
		wantNext  time.Duration // since t0, when full
	}
	tests := []struct {
		name  string
		limit int
		ops   []op
	}{{
		name:  "no cap",
		limit: 0,
		ops: []op{
			{record: true, now: 0}, {record: true, now: 0}, {record: true, now: 0},
			{now: time.Second, wantFull: false, wantCount: 3},
		},
	}, {
		name:  "full at the cap, free again exactly an hour after the oldest",
		limit: 2,
		ops: []op{
			{record: true, now: 0},
			{now: time.Second, wantFull: false, wantCount: 1},
			{record: true, now: 10 * time.Minute},
			{now: 10 * time.Minute, wantFull: true, wantCount: 2, wantNext: time.Hour},
			{now: time.Hour - time.Nanosecond, wantFull: true, wantCount: 2, wantNext: time.Hour},
			{now: time.Hour, wantFull: false, wantCount: 1},
			{now: 70 * time.Minute, wantFull: false, wantCount: 0},
		},
	}, {
		name:  "a clock stepped back moves the window with it: never free early, never stuck for the step",
		limit: 1,
		ops: []op{
			{record: true, now: 5 * time.Hour},
			{now: 5*time.Hour + 20*time.Minute, wantFull: true, wantCount: 1, wantNext: 6 * time.Hour},
			// Stepped back by 5h (measured: 5h20m, less the real time
			// between the two readings): 20 minutes of the hour have run
			// at most, 40 remain from now at least.
			{now: 0, wantFull: true, wantCount: 1, wantNext: 40 * time.Minute},
			{now: 40*time.Minute - time.Nanosecond, wantFull: true, wantCount: 1, wantNext: 40 * time.Minute},
			{now: 40 * time.Minute, wantFull: false, wantCount: 0},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := hourWindow{limit: tt.limit}
			for i, o := range tt.ops {
				now := at(o.now)
				if o.record {
					w.record(now)
					continue
				}
				if got := w.full(now); got != o.wantFull {
					t.Errorf("op %d at %s: full = %v, want %v", i, o.now, got, o.wantFull)
				}
				if got := w.count(now); got != o.wantCount {
					t.Errorf("op %d at %s: count = %d, want %d", i, o.now, got, o.wantCount)
				}
				if o.wantFull {
					if got := w.nextAllowed(now); !got.Equal(at(o.wantNext)) {
						t.Errorf("op %d at %s: next allowed at %s, want %s", i, o.now, got.Sub(t0), o.wantNext)
					}
				}
			}
		})
	}
}

func TestTokenBucket(t *testing.T) {
	type op struct {
		now      time.Duration
		want     bool
		wantNext time.Duration // since t0, after the take
	}
	tests := []struct {
		name  string
		qps   float64
		burst int
		ops   []op
	}{{
		name: "no limit", qps: 0, burst: 0,
		ops: []op{{0, true, 0}, {0, true, 0}, {0, true, 0}, {0, true, 0}},
	}, {
		name: "burst at once, then one per 1/qps", qps: 0.1, burst: 2,
		ops: []op{
			{0, true, 0}, {0, true, 10 * time.Second}, {0, false, 10 * time.Second},
			{9 * time.Second, false, 10 * time.Second},
			{10 * time.Second, true, 20 * time.Second},
			// Tokens do not pile up beyond the burst.
			{time.Hour, true, time.Hour}, {time.Hour, true, time.Hour + 10*time.Second}, {time.Hour, false, time.Hour + 10*time.Second},
		},
	}, {
		name: "a clock stepped back earns no token for the step", qps: 0.1, burst: 1,
		ops: []op{
			{time.Hour, true, time.Hour + 10*time.Second},
			{0, false, 10 * time.Second},
			{5 * time.Second, false, 10 * time.Second},
			{10 * time.Second, true, 20 * time.Second},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTokenBucket(tt.qps, tt.burst)
			for i, o := range tt.ops {
				now := t0.Add(o.now)
				if got := b.take(now); got != o.want {
					t.Errorf("op %d at %s: take = %v, want %v", i, o.now, got, o.want)
				}
				if got := b.next(now); !got.Equal(t0.Add(o.wantNext)) {
					t.Errorf("op %d at %s: next token at %s, want %s", i, o.now, got.Sub(t0), o.wantNext)
				}
			}
		})
	}
}

// events records the node events it is given.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) Warn(reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, reason+": "+message)
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

func TestLoopHourlyCap(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	ev := &events{}
	h := newHarnessTuned(t, false, ths, defaultPods(), defaultStats(), func(c *Config, d *Deps) {
		c.MaxEvictionsPerHour = 2
		d.Events = ev
	})
	h.next("start")
	h.src.set(50 * mi)
	// Each pass sees a fresh observation: the clock moves one interval a
	// pass. The fake pod never goes, so each pass evicts it again.
	for i := range 2 {
		if st := h.tick(); !strings.HasPrefix(st.Result, "evicted") {
			t.Fatalf("eviction %d: result %q, want evicted", i+1, st.Result)
		}
		h.next("wake") // the same observation again: stale, nothing done
	}
	first := t0.Add(10 * time.Second)
	st := h.tick()
	wantResult := "withheld default/hog (cap of 2 evictions per hour reached; next eviction allowed at 2026-03-01T13:00:10Z)"
	if st.Result != wantResult {
		t.Fatalf("third eviction: result %q, want %q", st.Result, wantResult)
	}
	if len(h.ev.evicted()) != 2 {
		t.Fatalf("evicted %v, want two evictions", h.ev.evicted())
	}
	if got := st.Limits; got.MaxEvictionsPerHour != 2 || got.EvictionsInLastHour != 2 || !got.CapReached ||
		got.NextEvictionAllowed == nil || !got.NextEvictionAllowed.Equal(first.Add(time.Hour)) {
		t.Errorf("status limits: got %+v, want cap 2, 2 in the last hour, reached, next at %s", got, first.Add(time.Hour))
	}
	for range 3 {
		if st := h.tick(); !strings.HasPrefix(st.Result, "withheld") {
			t.Fatalf("while capped: result %q, want withheld", st.Result)
		}
	}
	got := ev.list()
	wantEvent := "EvictionCapReached: evictd reached its cap of 2 evictions per hour (--max-evictions-per-hour) and withholds every eviction until 2026-03-01T13:00:10Z; withheld: default/hog for memory.available"
	if len(got) != 1 || got[0] != wantEvent {
		t.Fatalf("events: got %q, want one: %q", got, wantEvent)
	}
	if n := testutil.ToFloat64(counter(t, h.reg, "evictd_eviction_cap_reached_total")); n != 1 {
		t.Errorf("evictd_eviction_cap_reached_total: got %v, want 1", n)
	}
	if n := testutil.ToFloat64(counter(t, h.reg, "evictd_evictions_withheld_total", "reason", "hourly-cap")); n != 4 {
		t.Errorf("evictd_evictions_withheld_total{reason=hourly-cap}: got %v, want 4", n)
	}
	if n := gauge(t, h, "evictd_evictions_in_last_hour"); n != 2 {
		t.Errorf("evictd_evictions_in_last_hour: got %v, want 2", n)
	}

	// An hour after each eviction its slot is free again; the cap is
	// reached anew, and reported anew.
	h.clock.SetTime(first.Add(time.Hour))
	for i := range 2 {
		var st *Status
		if i == 0 {
			st = h.next("tick")
		} else {
			st = h.tick()
		}
		if !strings.HasPrefix(st.Result, "evicted") {
			t.Fatalf("an hour after eviction %d: result %q; want evicted", i+1, st.Result)
		}
		h.next("wake")
	}
	if st := h.tick(); !strings.HasPrefix(st.Result, "withheld") {
		t.Fatalf("cap reached again: result %q, want withheld", st.Result)
	}
	if got := ev.list(); len(got) != 2 {
		t.Errorf("events: got %d, want 2 (one per reach)", len(got))
	}
	if n := testutil.ToFloat64(counter(t, h.reg, "evictd_eviction_cap_reached_total")); n != 2 {
		t.Errorf("evictd_eviction_cap_reached_total: got %v, want 2", n)
	}
}

func TestLoopHourlyCapCountsOnlyIssuedEvictions(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	for _, tc := range []struct {
		err       error
		wantCount int
	}{
		{nil, 1},
		{fmt.Errorf("x: %w", decide.ErrNotGoneInTime), 1},
		{fmt.Errorf("x: %w", decide.ErrStoppedLocally), 1},
		{decide.ErrStoppedStandalone, 1},
		{fmt.Errorf("%w: a soft threshold's eviction needs the API server", decide.ErrNotActed), 0},
		{fmt.Errorf("x: %w", decide.ErrPodGone), 0},
		{fmt.Errorf("x: %w", decide.ErrDisruptionBudget), 0},
		{fmt.Errorf("the API server said no"), 0},
	} {
		t.Run(fmt.Sprint(tc.err), func(t *testing.T) {
			h := newHarnessTuned(t, false, ths, defaultPods(), defaultStats(), func(c *Config, _ *Deps) { c.MaxEvictionsPerHour = 5 })
			h.ev.err = tc.err
			h.next("start")
			h.src.set(50 * mi)
			if st := h.tick(); st.Limits.EvictionsInLastHour != tc.wantCount {
				t.Errorf("evictions in the last hour: got %d, want %d (result %q)", st.Limits.EvictionsInLastHour, tc.wantCount, st.Result)
			}
		})
	}
}

// TestLoopStandaloneResults checks what a standalone stop and an
// eviction standalone evictd cannot carry out become: a stop is counted
// as stopped-locally and said to owe nothing; the other counts no
// eviction and says why.
func TestLoopStandaloneResults(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	for _, tc := range []struct {
		err        error
		wantResult string
		wantCount  float64
	}{
		{decide.ErrStoppedStandalone, "stopped locally default/hog (standalone: no API server)", 1},
		{fmt.Errorf("%w: no", decide.ErrNotActed), "would evict default/hog (standalone: not carried out: no)", 0},
	} {
		t.Run(tc.wantResult, func(t *testing.T) {
			h := newHarnessTuned(t, false, ths, defaultPods(), defaultStats(), nil)
			h.ev.err = tc.err
			h.next("start")
			h.src.set(50 * mi)
			if st := h.tick(); st.Result != tc.wantResult {
				t.Errorf("result %q, want %q", st.Result, tc.wantResult)
			}
			c := counter(t, h.reg, "evictd_evictions_total", "signal", "memory.available", "result", "stopped-locally")
			if got := testutil.ToFloat64(c); got != tc.wantCount {
				t.Errorf("evictd_evictions_total{stopped-locally} %v, want %v", got, tc.wantCount)
			}
		})
	}
}

func TestLoopDryRunIgnoresTheCap(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	h := newHarnessTuned(t, true, ths, defaultPods(), defaultStats(), func(c *Config, _ *Deps) { c.MaxEvictionsPerHour = 1 })
	h.next("start")
	h.src.set(50 * mi)
	for range 3 {
		if st := h.tick(); st.Result != "dry-run" || st.Limits.EvictionsInLastHour != 0 {
			t.Fatalf("dry run: result %q, %d in the last hour; want dry-run and 0", st.Result, st.Limits.EvictionsInLastHour)
		}
	}
}

func TestLoopLocalStorageRateLimit(t *testing.T) {
	var pods fixedPods
	stats := fixedStats{}
	for i := 1; i <= 4; i++ {
		name := fmt.Sprintf("w%d", i)
		pods = append(pods, signals.Pod{Namespace: "default", Name: name, UID: "u-" + name, QOS: signals.Burstable,
			EphemeralStorageLimit: 100 * mi, Containers: []signals.Container{{Name: "app"}}})
		stats["u-"+name] = signals.PodStats{UID: "u-" + name, Time: t0, Containers: []signals.ContainerStats{
			{Name: "app", Rootfs: &signals.FsUsage{Bytes: 200 * mi, Inodes: 1}, Logs: &signals.FsUsage{Bytes: mi, Inodes: 1}}}}
	}
	h := newHarnessTuned(t, false, nil, pods, stats, func(c *Config, _ *Deps) {
		c.LocalStorageEvictionQPS, c.LocalStorageEvictionBurst = 0.1, 2
	})
	st := h.next("start")
	want := "evicted default/w1; evicted default/w2; " +
		"rate-limited default/w3 (next local-storage eviction at 2026-03-01T12:00:10Z); " +
		"rate-limited default/w4 (next local-storage eviction at 2026-03-01T12:00:10Z)"
	if st.Result != want {
		t.Fatalf("first pass: result %q, want %q", st.Result, want)
	}
	// The evictions wake the loop; with no token left that pass evicts
	// nothing and does not wake it again.
	if st := h.next("wake"); strings.Contains(st.Result, "evicted") {
		t.Fatalf("pass without tokens: result %q, want only rate-limited pods", st.Result)
	}
	if st := h.tick(); !strings.HasPrefix(st.Result, "evicted default/w1; rate-limited default/w2") {
		t.Fatalf("a token later: result %q, want one eviction", st.Result)
	}
	h.next("wake")
	if got := len(h.ev.evicted()); got != 3 {
		t.Errorf("evictions: got %d, want 3", got)
	}
	if n := testutil.ToFloat64(counter(t, h.reg, "evictd_evictions_withheld_total", "reason", "rate-limit")); n != 2+4+3+4 {
		t.Errorf("evictd_evictions_withheld_total{reason=rate-limit}: got %v, want %d", n, 2+4+3+4)
	}
}

// TestLoopNeverEvictsOnStaleObservations: an observation older than the
// maximum age (twice the housekeeping interval in evictd) evicts nothing.
func TestLoopNeverEvictsOnStaleObservations(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	for _, tc := range []struct {
		age       time.Duration
		wantEvict bool
	}{
		{0, true},
		{20 * time.Second, true},
		{20*time.Second + time.Nanosecond, false},
		{time.Minute, false},
		{24 * time.Hour, false},
	} {
		t.Run(tc.age.String(), func(t *testing.T) {
			h := newHarnessTuned(t, false, ths, defaultPods(), defaultStats(), func(c *Config, _ *Deps) {
				c.Decider.MaxObservationAge = 2 * c.HousekeepingInterval
			})
			h.next("start")
			h.src.mu.Lock()
			h.src.age = tc.age
			h.src.mu.Unlock()
			h.tick() // a first reading that old, nothing met
			h.src.set(50 * mi)
			st := h.tick()
			if got := len(h.ev.evicted()) > 0; got != tc.wantEvict {
				t.Fatalf("observation %s old: evicted = %v, want %v (reason %q)", tc.age, got, tc.wantEvict, st.Decision.Reason)
			}
			if !tc.wantEvict && !strings.Contains(st.Decision.Reason, "not fresh") {
				t.Errorf("reason: got %q, want it to say the observation is not fresh", st.Decision.Reason)
			}
		})
	}
}

// TestLoopClockStepsBack steps the fake clock back an hour in the middle of
// a run: a hard threshold still evicts on the next fresh reading, a soft
// one keeps the grace it had run and does not act early, the cap is not
// freed by the step, and the loop stays ready.
func TestLoopClockStepsBack(t *testing.T) {
	t.Run("hard threshold", func(t *testing.T) {
		ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
		h := newHarness(t, false, ths)
		h.next("start")
		h.src.set(50 * mi)
		h.tick()
		h.next("wake")
		h.clock.SetTime(t0.Add(10*time.Second - time.Hour))
		h.m.Wake()
		st := h.next("wake")
		if st.Decision.Outcome != decide.OutcomeEvict || !strings.HasPrefix(st.Result, "evicted") {
			t.Fatalf("after the step: outcome %s result %q (%s), want an eviction", st.Decision.Outcome, st.Result, st.Decision.Reason)
		}
		if err := h.m.Ready(); err != nil {
			t.Errorf("Ready after the step: %v", err)
		}
		if n := gauge(t, h, "evictd_signal_observation_age_seconds"); n < 0 {
			t.Errorf("observation age: got %v, want it not negative", n)
		}
	})
	t.Run("soft threshold", func(t *testing.T) {
		ths := mustParse(t, thresholds.Settings{
			Soft:            map[string]string{"memory.available": "1Gi"},
			SoftGracePeriod: map[string]string{"memory.available": "30s"},
		})
		h := newHarness(t, false, ths)
		h.next("start")
		h.src.set(800 * mi)
		h.tick() // t0+10s: met
		h.tick() // t0+20s: 10 s of 30
		h.clock.SetTime(t0.Add(20*time.Second - time.Hour))
		h.m.Wake()
		if st := h.next("wake"); st.Decision.Outcome == decide.OutcomeEvict {
			t.Fatalf("right after the step: evicted with 10 s of a 30 s grace period run")
		}
		h.clock.Step(19 * time.Second)
		h.m.Wake()
		if st := h.next("wake"); st.Decision.Outcome == decide.OutcomeEvict {
			t.Fatalf("29 s of 30 run: evicted early")
		}
		h.clock.Step(time.Second) // the grace period ends: the deadline timer fires
		if st := h.next("deadline"); st.Decision.Outcome != decide.OutcomeEvict {
			t.Fatalf("30 s of 30 run: outcome %s (%s), want an eviction", st.Decision.Outcome, st.Decision.Reason)
		}
	})
	t.Run("hourly cap", func(t *testing.T) {
		ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
		h := newHarnessTuned(t, false, ths, defaultPods(), defaultStats(), func(c *Config, _ *Deps) { c.MaxEvictionsPerHour = 1 })
		h.next("start")
		h.src.set(50 * mi)
		h.tick() // evicts at t0+10s
		h.next("wake")
		back := t0.Add(10*time.Second - time.Hour)
		h.clock.SetTime(back)
		h.m.Wake()
		st := h.next("wake")
		if !strings.HasPrefix(st.Result, "withheld") {
			t.Fatalf("after the step: result %q, want withheld", st.Result)
		}
		if next := st.Limits.NextEvictionAllowed; next == nil || next.Before(back.Add(time.Hour)) {
			t.Errorf("next eviction allowed at %v, want no earlier than an hour after the step", next)
		}
	})
}

// defaultPods are a BestEffort memory hog and a Burstable pod within its
// request, with defaultStats.
func defaultPods() fixedPods {
	return fixedPods{
		{Namespace: "default", Name: "hog", UID: "u-hog", QOS: signals.BestEffort},
		{Namespace: "default", Name: "calm", UID: "u-calm", QOS: signals.Burstable, MemoryRequest: 512 * mi},
	}
}

func defaultStats() fixedStats {
	return fixedStats{
		"u-hog":  {UID: "u-hog", Time: t0, MemoryWorkingSet: signals.Int64(900 * mi)},
		"u-calm": {UID: "u-calm", Time: t0, MemoryWorkingSet: signals.Int64(100 * mi)},
	}
}

// gauge reads the first series of a gauge family.
func gauge(t *testing.T, h *harness, name string) float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s series", name)
	return 0
}
