package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
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

const mi = int64(1) << 20

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// script is a memory source whose available amount the test sets; a pass
// may be held inside it by the test.
type script struct {
	mu        sync.Mutex
	available int64
	hold      chan struct{} // when non-nil, Observe says so on entered and waits for hold to close
	entered   chan struct{}
	age       time.Duration // how old the observation is at the time of the pass
}

func (s *script) set(available int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.available = available
}

func (s *script) Observe(ctx context.Context, now time.Time) ([]signals.Observation, error) {
	s.mu.Lock()
	hold, entered, avail, age := s.hold, s.entered, s.available, s.age
	s.mu.Unlock()
	if hold != nil {
		entered <- struct{}{}
		<-hold
	}
	return []signals.Observation{{Signal: signals.MemoryAvailable, Available: avail, Capacity: 10240 * mi, Time: now.Add(-age)}}, nil
}

type fixedPods []signals.Pod

func (p fixedPods) Pods(context.Context) ([]signals.Pod, error) { return p, nil }

func (fixedPods) InFlight() []decide.InFlight { return nil }

type fixedStats map[string]signals.PodStats

func (s fixedStats) PodStats(context.Context, time.Time, []signals.Pod, signals.PodStatsKinds) (map[string]signals.PodStats, error) {
	return s, nil
}

// recorder is an Evicter that remembers what it was asked to do and can be
// told to fail, for all pods or for some.
type recorder struct {
	mu       sync.Mutex
	requests []decide.Request
	err      error
	errFor   map[string]error
}

func (r *recorder) Evict(_ context.Context, req decide.Request) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, req)
	if err, ok := r.errFor[req.Pod.Name]; ok {
		return err
	}
	return r.err
}

func (r *recorder) evicted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for _, req := range r.requests {
		names = append(names, req.Pod.Name)
	}
	return names
}

type harness struct {
	t      *testing.T
	clock  *clocktesting.FakeClock
	src    *script
	ev     *recorder
	pub    *publisher
	reg    *prometheus.Registry
	m      *Manager
	passes chan *Status
	cancel context.CancelFunc
	done   chan error
}

func mustParse(t *testing.T, s thresholds.Settings) []thresholds.Threshold {
	t.Helper()
	p, err := thresholds.Parse(s)
	if err != nil {
		t.Fatalf("parse thresholds: %v", err)
	}
	return p.Thresholds
}

func newHarness(t *testing.T, dryRun bool, ths []thresholds.Threshold) *harness {
	t.Helper()
	return newHarnessWith(t, dryRun, ths, defaultPods(), defaultStats())
}

// newHarnessWith is newHarness with the test's own pods and stats.
func newHarnessWith(t *testing.T, dryRun bool, ths []thresholds.Threshold, pods fixedPods, stats fixedStats) *harness {
	t.Helper()
	return newHarnessTuned(t, dryRun, ths, pods, stats, nil)
}

// newHarnessTuned is newHarnessWith whose configuration and connections
// tune may change before the loop starts.
func newHarnessTuned(t *testing.T, dryRun bool, ths []thresholds.Threshold, pods fixedPods, stats fixedStats, tune func(*Config, *Deps)) *harness {
	t.Helper()
	h := &harness{
		t: t, clock: clocktesting.NewFakeClock(t0), src: &script{available: 4096 * mi},
		ev: &recorder{}, pub: &publisher{}, reg: prometheus.NewRegistry(), passes: make(chan *Status, 16), done: make(chan error, 1),
	}
	cfg := Config{
		HousekeepingInterval: 10 * time.Second,
		StuckAfter:           30 * time.Second,
		DryRun:               dryRun,
		Decider:              decide.DeciderConfig{Thresholds: ths, TransitionPeriod: 5 * time.Minute, MaxPodGracePeriodSeconds: 20},
	}
	deps := Deps{
		Clock: h.clock, Sources: []signals.Source{h.src}, Pods: pods, Stats: stats,
		Evicter: h.ev, Status: h.pub, Metrics: metrics.New(h.reg), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		AfterPass: func(st *Status) { h.passes <- st },
	}
	if tune != nil {
		tune(&cfg, &deps)
	}
	m, err := New(cfg, deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.m = m
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- m.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	// Drain passes so a loop blocked on reporting one can see ctx.Done.
	for {
		select {
		case err := <-h.done:
			if err != nil {
				h.t.Errorf("Run returned %v, want nil", err)
			}
			return
		case <-h.passes:
		}
	}
}

// next waits for the loop's next pass. The timeout only turns a hang into
// a failure; the loop is driven by the fake clock alone.
func (h *harness) next(wantTrigger string) *Status {
	h.t.Helper()
	select {
	case st := <-h.passes:
		if st.Trigger != wantTrigger {
			h.t.Fatalf("pass trigger: got %q, want %q", st.Trigger, wantTrigger)
		}
		return st
	case <-time.After(10 * time.Second):
		h.t.Fatalf("no pass (want trigger %q)", wantTrigger)
		return nil
	}
}

// tick advances the fake clock one housekeeping interval and waits for the
// pass it causes.
func (h *harness) tick() *Status {
	h.t.Helper()
	h.clock.Step(10 * time.Second)
	return h.next("tick")
}

func TestLoopSoftThresholdWaitsForGraceThenEvicts(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{
		Hard:            map[string]string{"memory.available": "100Mi"},
		Soft:            map[string]string{"memory.available": "1Gi"},
		SoftGracePeriod: map[string]string{"memory.available": "30s"},
	})
	h := newHarness(t, false, ths)

	st := h.next("start")
	if st.Decision.Outcome != decide.OutcomeNone || st.Pressures["memory"] {
		t.Fatalf("at start with 4Gi free: got outcome %s pressure %v, want none and no pressure", st.Decision.Outcome, st.Pressures["memory"])
	}

	h.src.set(800 * mi) // below the soft threshold only
	for i, want := range []bool{false, false, false, true} {
		st = h.tick()
		if !st.Pressures["memory"] {
			t.Fatalf("tick %d: memory pressure not set as soon as the soft threshold is met", i)
		}
		if got := st.Decision.Outcome == decide.OutcomeEvict; got != want {
			t.Fatalf("tick %d (%s after crossing): evict = %v, want %v (reason %q)", i, time.Duration(i)*10*time.Second, got, want, st.Decision.Reason)
		}
	}
	if got := h.ev.evicted(); len(got) != 1 || got[0] != "hog" {
		t.Fatalf("evicted %v, want [hog]", got)
	}
	d := h.ev.requests[0]
	if d.GracePeriod != 20 || d.Hard {
		t.Errorf("soft eviction grace period: got %d (hard=%v), want 20 (min of max-pod-grace 20 and the default 30)", d.GracePeriod, d.Hard)
	}
	// A successful eviction wakes the loop for an immediate pass.
	h.next("wake")
	if got := testutil.ToFloat64(counter(t, h.reg, "evictd_evictions_total", "eviction_signal", "memory.available", "result", "evicted")); got != 1 {
		t.Errorf("evictd_evictions_total{result=evicted}: got %v, want 1", got)
	}
}

// A grace period ending between two ticks gets a pass of its own, so a soft
// eviction is not late by up to a housekeeping interval.
func TestLoopPassAtTheEndOfAGracePeriod(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{
		Soft:            map[string]string{"memory.available": "1Gi"},
		SoftGracePeriod: map[string]string{"memory.available": "15s"},
	})
	h := newHarness(t, false, ths)
	h.next("start")
	h.src.set(800 * mi)
	if st := h.tick(); st.Decision.Outcome == decide.OutcomeEvict { // met at t0+10s
		t.Fatalf("evicted at once, before the grace period")
	}
	if st := h.tick(); st.Decision.Outcome == decide.OutcomeEvict { // t0+20s: 10 s of 15
		t.Fatalf("evicted after 10 s of a 15 s grace period")
	}
	h.clock.Step(5 * time.Second) // t0+25s: the grace period ends
	if st := h.next("deadline"); st.Decision.Outcome != decide.OutcomeEvict {
		t.Fatalf("at the end of the grace period: outcome %s (%s), want an eviction", st.Decision.Outcome, st.Decision.Reason)
	}
	if got := h.ev.evicted(); len(got) != 1 || got[0] != "hog" {
		t.Fatalf("evicted %v, want [hog]", got)
	}
}

func TestLoopHardThresholdEvictsAtOnceAndPressureOutlastsIt(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	h := newHarness(t, false, ths)
	h.next("start")

	h.src.set(50 * mi)
	st := h.tick()
	if st.Decision.Outcome != decide.OutcomeEvict || st.Decision.GracePeriod != 1 || st.Decision.Pod.Name != "hog" {
		t.Fatalf("hard threshold: got %s of %v with grace %d, want evict hog with grace 1", st.Decision.Outcome, st.Decision.Pod, st.Decision.GracePeriod)
	}
	h.next("wake")

	// Relief: the condition stays for the transition period (5m), then clears.
	h.src.set(4096 * mi)
	for elapsed := 10 * time.Second; elapsed <= 5*time.Minute+10*time.Second; elapsed += 10 * time.Second {
		st = h.tick()
		want := elapsed < 5*time.Minute
		if st.Pressures["memory"] != want {
			t.Fatalf("%s after relief: memory pressure %v, want %v", elapsed, st.Pressures["memory"], want)
		}
	}
	if n := len(h.ev.evicted()); n != 1 {
		t.Errorf("evictions: got %d, want 1", n)
	}
}

func TestLoopSoftEvictionMovesOnWhenABudgetRefuses(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{
		Soft:            map[string]string{"memory.available": "1Gi"},
		SoftGracePeriod: map[string]string{"memory.available": "10s"},
	})
	h := newHarness(t, false, ths)
	h.ev.errFor = map[string]error{"hog": fmt.Errorf("evict default/hog: %w", decide.ErrDisruptionBudget)}
	h.next("start")
	h.src.set(800 * mi)
	h.tick()       // met, grace starts
	st := h.tick() // grace over
	if got, want := strings.Join(h.ev.evicted(), ","), "hog,calm"; got != want {
		t.Fatalf("eviction attempts: got %s, want %s", got, want)
	}
	if want := "pdb-blocked default/hog; evicted default/calm"; st.Result != want {
		t.Errorf("result: got %q, want %q", st.Result, want)
	}
	// Each request, fallbacks too, carries the decision's time, from which
	// the Evicter measures the issue latency.
	for _, r := range h.ev.requests {
		if !r.Decided.Equal(h.clock.Now()) || !r.Decided.Equal(st.Decision.Time) {
			t.Errorf("request for %s: Decided %v, want the decision's time %v", r.Pod.Name, r.Decided, st.Decision.Time)
		}
	}
	if got := testutil.ToFloat64(counter(t, h.reg, "evictd_evictions_not_issued_total", "eviction_signal", "memory.available", "reason", "pdb-blocked")); got != 1 {
		t.Errorf("evictd_evictions_not_issued_total{reason=pdb-blocked}: got %v, want 1", got)
	}
}

func TestLoopGoneAndLingeringPods(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	for _, tc := range []struct {
		err        error
		wantResult string
		wantCount  float64
	}{
		{fmt.Errorf("evict default/hog: %w", decide.ErrNotGoneInTime), "evicted default/hog (still terminating)", 1},
	} {
		t.Run(tc.wantResult, func(t *testing.T) {
			h := newHarness(t, false, ths)
			h.ev.err = tc.err
			h.next("start")
			h.src.set(50 * mi)
			st := h.tick()
			if st.Result != tc.wantResult {
				t.Errorf("result: got %q, want %q", st.Result, tc.wantResult)
			}
			if got := testutil.ToFloat64(counter(t, h.reg, "evictd_evictions_total", "eviction_signal", "memory.available", "result", "evicted")); got != tc.wantCount {
				t.Errorf("evictions counted: got %v, want %v", got, tc.wantCount)
			}
			h.next("wake") // the loop looks again at once
		})
	}
}

// TestLoopPodReportedGone: the API server says the chosen pod is gone
// while the pod cache still lists it (a cache behind after an outage).
// The loop does not decide again at once, leaves the pod out while the
// cache lists it, for at most reportedGoneMemory, and forgets it once the
// cache agrees.
func TestLoopPodReportedGone(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	pods := &switchPods{pods: defaultPods()}
	h := newHarnessTuned(t, false, ths, nil, defaultStats(), func(_ *Config, d *Deps) { d.Pods = pods })
	h.ev.errFor = map[string]error{"hog": fmt.Errorf("evict default/hog: %w", decide.ErrPodGone)}
	h.next("start")
	h.src.set(50 * mi)
	if st := h.tick(); st.Result != "gone default/hog" {
		t.Fatalf("result: got %q, want %q", st.Result, "gone default/hog")
	}
	if got := testutil.ToFloat64(counter(t, h.reg, "evictd_evictions_total", "eviction_signal", "memory.available", "result", "evicted")); got != 0 {
		t.Errorf("evictions counted: got %v, want 0", got)
	}
	if got := pods.relisted(); got != 1 {
		t.Errorf("relists asked of the pod source: %d, want 1 (its cache is behind the API server)", got)
	}
	select {
	case st := <-h.passes:
		t.Fatalf("a pass (%s) right after the pod was reported gone, want none before the next tick", st.Trigger)
	case <-time.After(200 * time.Millisecond):
	}
	// The next tick ranks without the hog: the calm pod goes.
	if st := h.tick(); st.Result != "evicted default/calm" {
		t.Errorf("result: got %q, want the next pod evicted, not the one reported gone", st.Result)
	}
	h.next("wake") // an eviction looks again at once
	// The cache still lists the hog (only the hog now): it stays left out
	// until reportedGoneMemory has passed since the report.
	pods.set(defaultPods()[:1])
	h.ev.errFor = nil
	for i := 0; i < 3; i++ {
		if st := h.tick(); strings.Contains(st.Result, "hog") {
			t.Fatalf("%s after the report: result %q, want the hog left out", h.clock.Since(t0.Add(10*time.Second)), st.Result)
		}
	}
	h.clock.Step(reportedGoneMemory - 40*time.Second)
	if st := h.next("tick"); st.Result != "evicted default/hog" {
		t.Errorf("result %s after the report: got %q, want the hog ranked again", reportedGoneMemory, st.Result)
	}
	h.next("wake")

	// Once the cache agrees (the pod is not listed), the report is
	// forgotten at once: a pod of that UID listed again is ranked.
	h.ev.errFor = map[string]error{"hog": fmt.Errorf("evict default/hog: %w", decide.ErrPodGone)}
	if st := h.tick(); st.Result != "gone default/hog" {
		t.Fatalf("result: got %q, want %q", st.Result, "gone default/hog")
	}
	pods.set(nil)
	h.tick()
	pods.set(defaultPods()[:1])
	h.ev.errFor = nil
	if st := h.tick(); st.Result != "evicted default/hog" {
		t.Errorf("result once the cache agreed and listed it again: got %q, want the hog evicted", st.Result)
	}
}

// switchPods is a pod source whose pods the test changes, and which
// counts the relists asked of it.
type switchPods struct {
	mu      sync.Mutex
	pods    fixedPods
	relists []string
}

func (p *switchPods) Relist(reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.relists = append(p.relists, reason)
}

func (p *switchPods) relisted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.relists)
}

func (p *switchPods) set(pods fixedPods) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pods = pods
}

func (p *switchPods) Pods(context.Context) ([]signals.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.pods), nil
}

func (*switchPods) InFlight() []decide.InFlight { return nil }

func TestLoopHardEvictionHasNoFallback(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	h := newHarness(t, false, ths)
	h.ev.errFor = map[string]error{"hog": fmt.Errorf("evict default/hog: %w", decide.ErrDisruptionBudget)}
	h.next("start")
	h.src.set(50 * mi)
	h.tick()
	if got := strings.Join(h.ev.evicted(), ","); got != "hog" {
		t.Fatalf("eviction attempts: got %s, want only hog (the Evicter deletes on refusal for hard thresholds)", got)
	}
}

func TestLoopPublishesPressure(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	h := newHarness(t, true, ths)
	h.next("start")
	h.src.set(50 * mi)
	h.tick()
	got := h.pub.last()
	if len(got) != 3 {
		t.Fatalf("published %d reports, want 3", len(got))
	}
	mem := got[0]
	if mem.Pressure != signals.MemoryPressure || !mem.Active || !mem.Changed || !mem.Since.Equal(t0.Add(10*time.Second)) {
		t.Errorf("memory report: got %+v, want active, changed, since %s", mem, t0.Add(10*time.Second))
	}
	if want := "threshold memory.available<100Mi is met: available 50Mi of 10Gi"; mem.Message != want {
		t.Errorf("memory message: got %q, want %q", mem.Message, want)
	}
	if got[1].Active || got[2].Active {
		t.Errorf("disk/pid reports active: %+v %+v", got[1], got[2])
	}
}

// publisher records the reports it is given.
type publisher struct {
	mu      sync.Mutex
	reports [][]decide.PressureReport
}

func (p *publisher) Publish(_ time.Time, r []decide.PressureReport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reports = append(p.reports, r)
}

func (p *publisher) last() []decide.PressureReport {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reports[len(p.reports)-1]
}

func TestLoopDryRunActsOnNothing(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	h := newHarness(t, true, ths)
	h.next("start")
	h.src.set(50 * mi)
	st := h.tick()
	if st.Decision.Outcome != decide.OutcomeEvict || st.Result != "dry-run" {
		t.Fatalf("dry run: got outcome %s result %q, want evict / dry-run", st.Decision.Outcome, st.Result)
	}
	if got := h.ev.evicted(); len(got) != 0 {
		t.Fatalf("dry run called the evicter for %v", got)
	}
	if got := testutil.ToFloat64(counter(t, h.reg, "evictd_evictions_not_issued_total", "eviction_signal", "memory.available", "reason", "dry-run")); got != 1 {
		t.Errorf("evictd_evictions_not_issued_total{reason=dry-run}: got %v, want 1", got)
	}
}

func TestLoopFailedEvictionIsCountedAndReported(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	h := newHarness(t, false, ths)
	h.ev.err = errors.New("the API server said no")
	h.next("start")
	h.src.set(50 * mi)
	st := h.tick()
	if !strings.Contains(st.Result, "the API server said no") {
		t.Fatalf("result: got %q, want the evicter's error", st.Result)
	}
	if got := testutil.ToFloat64(counter(t, h.reg, "evictd_evictions_not_issued_total", "eviction_signal", "memory.available", "reason", "failed")); got != 1 {
		t.Errorf("evictd_evictions_not_issued_total{reason=failed}: got %v, want 1", got)
	}
}

// TestLoopCountsEachResultInOneFamily checks where each result of the
// Evicter counts: an eviction issued in evictd_evictions_total, one that
// was not in evictd_evictions_not_issued_total, never both; a pod already
// gone in neither.
func TestLoopCountsEachResultInOneFamily(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	for _, tc := range []struct {
		name              string
		err               error
		issued, notIssued string // the result or reason counted; "" for none
	}{
		{"evicted", nil, "evicted", ""},
		{"issued, still terminating", fmt.Errorf("x: %w", decide.ErrNotGoneInTime), "evicted", ""},
		{"stopped locally, owed", fmt.Errorf("x: %w", decide.ErrStoppedLocally), "stopped-locally", ""},
		{"stopped standalone", decide.ErrStoppedStandalone, "stopped-locally", ""},
		{"not acted standalone", fmt.Errorf("%w: soft", decide.ErrNotActed), "", "not-acted"},
		{"failed", errors.New("no"), "", "failed"},
		{"already gone", fmt.Errorf("x: %w", decide.ErrPodGone), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, false, ths)
			h.ev.err = tc.err
			h.next("start")
			h.src.set(50 * mi)
			h.tick()
			h.stop()
			got := counterSeries(t, h.reg)
			var issued, notIssued []string
			for s, v := range got {
				switch {
				case v == 0:
				case strings.HasPrefix(s, "evictd_evictions_total{"):
					issued = append(issued, s)
				case strings.HasPrefix(s, "evictd_evictions_not_issued_total{"):
					notIssued = append(notIssued, s)
				}
			}
			var wantIssued, wantNotIssued []string
			if tc.issued != "" {
				wantIssued = []string{`evictd_evictions_total{eviction_signal="memory.available",result="` + tc.issued + `",signal="memory.available"}`}
			}
			if tc.notIssued != "" {
				wantNotIssued = []string{`evictd_evictions_not_issued_total{eviction_signal="memory.available",reason="` + tc.notIssued + `"}`}
			}
			if !slices.Equal(issued, wantIssued) || !slices.Equal(notIssued, wantNotIssued) {
				t.Errorf("counted %v and %v, want %v and %v", issued, notIssued, wantIssued, wantNotIssued)
			}
		})
	}
}

func TestLoopBurstOfWakeUpsGivesOnePass(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	h := newHarness(t, false, ths)
	h.next("start")

	// Hold the next pass inside the source while wake-ups pile up.
	release, entered := make(chan struct{}), make(chan struct{})
	h.src.mu.Lock()
	h.src.hold, h.src.entered = release, entered
	h.src.mu.Unlock()
	h.m.Wake()
	<-entered // the first wake-up's pass is under way
	for range 20 {
		h.m.Wake()
	}
	h.src.mu.Lock()
	h.src.hold = nil
	h.src.mu.Unlock()
	close(release)

	h.next("wake")
	// Any second wake pass would come before the tick's.
	h.next("wake")
	h.tick()
	if got := testutil.ToFloat64(counter(t, h.reg, "evictd_passes_total", "trigger", "wake")); got != 2 {
		t.Errorf("wake passes: got %v, want 2 (one in progress when the burst came, one after)", got)
	}
}

func TestReadyWhileAnEvictionWaits(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	h := newHarness(t, false, ths)
	h.next("start")
	// Hold the next pass inside its observation, as a long eviction wait
	// would hold it inside act.
	release, entered := make(chan struct{}), make(chan struct{})
	h.src.mu.Lock()
	h.src.hold, h.src.entered = release, entered
	h.src.mu.Unlock()
	h.clock.Step(10 * time.Second)
	<-entered
	h.clock.Step(40 * time.Second) // 40s into the pass: past 3 intervals, within 3 intervals + 60s
	if err := h.m.Ready(); err != nil {
		t.Errorf("40s into a pass: Ready() = %v, want nil", err)
	}
	h.clock.Step(55 * time.Second) // 95s into the pass: past 3 intervals + 60s
	if err := h.m.Ready(); err == nil || !strings.Contains(err.Error(), "under way") {
		t.Errorf("95s into a pass: Ready() = %v, want an error about the pass under way", err)
	}
	h.src.mu.Lock()
	h.src.hold = nil
	h.src.mu.Unlock()
	close(release)
	h.next("tick")
}

func TestReady(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{})
	h := newHarness(t, false, ths)
	h.next("start")
	if err := h.m.Ready(); err != nil {
		t.Fatalf("after the first pass: Ready() = %v, want nil", err)
	}
	h.stop()
	h.clock.Step(31 * time.Second)
	if err := h.m.Ready(); err == nil {
		t.Fatal("31s after the last pass with StuckAfter 30s: Ready() = nil, want an error")
	}
}

// TestNewRefusesZeroPeriods: internal/config guarantees both; a caller that
// leaves one out gets an error, not a ticker that panics or a loop that is
// never ready.
func TestNewRefusesZeroPeriods(t *testing.T) {
	deps := Deps{
		Clock: clocktesting.NewFakeClock(t0), Pods: fixedPods{}, Stats: fixedStats{},
		Metrics: metrics.New(nil), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"no housekeeping interval", Config{StuckAfter: time.Second}, "housekeeping interval 0s must be positive"},
		{"no StuckAfter", Config{HousekeepingInterval: time.Second}, "manager: StuckAfter 0s must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, deps)
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("got error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// counter finds one series of a metric vector by its label pairs.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := 0
			for _, lp := range m.GetLabel() {
				if want[lp.GetName()] == lp.GetValue() {
					match++
				}
			}
			if match == len(want) {
				v := m.GetCounter().GetValue()
				return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "found"}, func() float64 { return v })
			}
		}
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "missing"}, func() float64 { return 0 })
}

// rearmer records the observations each pass hands it, and what
// evictedBy said at each call when set.
type rearmer struct {
	mu        sync.Mutex
	got       []signals.Observations
	evictedBy func() []string
	evicted   [][]string
}

func (r *rearmer) Update(obs signals.Observations) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, obs)
	if r.evictedBy != nil {
		r.evicted = append(r.evicted, r.evictedBy())
	}
}

func (r *rearmer) last() (signals.Observations, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		return nil, 0
	}
	return r.got[len(r.got)-1], len(r.got)
}

// TestLoopRearmsWakeupsWithEachPassObservations: the wake-up sources get
// the observations the pass decided on, not a copy rebuilt from /status.
func TestLoopRearmsWakeupsWithEachPassObservations(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	r := &rearmer{}
	h := newHarnessTuned(t, true, ths, nil, nil, func(_ *Config, d *Deps) { d.Wakeups = r })
	h.next("start")
	h.src.set(50 * mi)
	h.tick()
	obs, n := r.last()
	if n != 2 {
		t.Fatalf("Update called %d times after 2 passes, want 2", n)
	}
	o, ok := obs[signals.MemoryAvailable]
	if !ok || o.Available != 50*mi || !o.Time.Equal(t0.Add(10*time.Second)) {
		t.Errorf("last Update's memory.available = %+v (present %v), want 50Mi at %s", o, ok, t0.Add(10*time.Second))
	}
}

// TestLoopRearmsAfterActing: the pass that evicts re-arms the wake-ups
// after the eviction, so that a hard eviction's stop signal does not wait
// for the kernel's notifier registration.
func TestLoopRearmsAfterActing(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	r := &rearmer{}
	h := newHarnessTuned(t, false, ths, defaultPods(), defaultStats(), func(_ *Config, d *Deps) { d.Wakeups = r })
	// The loop runs already: its start pass may re-arm before this, and
	// then has no entry.
	r.mu.Lock()
	r.evictedBy = h.ev.evicted
	r.mu.Unlock()
	h.next("start")
	r.mu.Lock()
	before := slices.Clone(r.evicted)
	r.mu.Unlock()
	h.src.set(50 * mi)
	if st := h.tick(); st.Result != "evicted default/hog" {
		t.Fatalf("result: got %q, want the hog evicted", st.Result)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// The eviction wakes the loop for a pass of its own, which may
	// have re-armed too by now.
	n := len(before)
	if n > 1 || (n == 1 && len(before[0]) != 0) || len(r.evicted) <= n || !slices.Equal(r.evicted[n], []string{"hog"}) {
		t.Errorf("pods evicted at each re-arming = %q (%d of them by the start pass's end), want none at the start's and the hog at the evicting pass's", r.evicted, n)
	}
}

// TestLoopActedPodWithoutStats: a pod evictd stopped through the runtime
// (the API server away) and whose cgroup has then gone, so that it has no
// stats, is left out of the ranking while the pod cache still lists it:
// the next pod is evicted, not the empty one again (which, without stats,
// would rank first). Once it has stats again (its containers restarted by
// the kubelet) it ranks as before.
func TestLoopActedPodWithoutStats(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	stats := &switchStats{stats: defaultStats()}
	h := newHarnessTuned(t, false, ths, defaultPods(), nil, func(_ *Config, d *Deps) { d.Stats = stats })
	h.ev.errFor = map[string]error{"hog": fmt.Errorf("x: %w", decide.ErrStoppedLocally)}
	h.next("start")
	h.src.set(50 * mi)
	if st := h.tick(); st.Result != "stopped locally default/hog (eviction owed)" {
		t.Fatalf("result: got %q, want the hog stopped locally", st.Result)
	}
	h.next("wake")
	h.ev.errFor = nil
	// Its disk stats are kept (the disk cache keeps a finished pod's),
	// its memory is gone with its cgroup.
	stats.set(fixedStats{
		"u-calm": defaultStats()["u-calm"],
		"u-hog":  {UID: "u-hog", Time: t0, Containers: []signals.ContainerStats{{Name: "app", Logs: &signals.FsUsage{Bytes: mi, Inodes: 1}}}},
	})
	if st := h.tick(); st.Result != "evicted default/calm" {
		t.Errorf("result with the stopped hog listed without stats: got %q, want the next pod evicted", st.Result)
	}
	h.next("wake")
	stats.set(defaultStats())
	if st := h.tick(); st.Result != "evicted default/hog" {
		t.Errorf("result with the hog's containers back: got %q, want the hog evicted", st.Result)
	}
}

// switchStats is a pod stats source whose stats the test changes.
type switchStats struct {
	mu    sync.Mutex
	stats fixedStats
}

func (s *switchStats) set(st fixedStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats = st
}

func (s *switchStats) PodStats(context.Context, time.Time, []signals.Pod, signals.PodStatsKinds) (map[string]signals.PodStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats, nil
}

func TestPassTookString(t *testing.T) {
	took := passTook{collect: 410 * time.Microsecond, pods: 450 * time.Microsecond, stats: 981 * time.Microsecond, decide: 1020 * time.Microsecond}
	if got, want := took.String(), "signals=0.41ms pods=0.45ms stats=0.98ms decided=1.02ms"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
