package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// PodSource lists the pods running on this node, and evictd's evictions
// still in flight there.
type PodSource interface {
	Pods(ctx context.Context) ([]signals.Pod, error)
	// InFlight returns the pods evictd evicted that are still
	// terminating: deletion requested, not finished, with a
	// DisruptionTarget condition of reason DisruptionTargetReason. Nil
	// when it cannot tell (no API server, or before the first list).
	InFlight() []decide.InFlight
}

// Relister is a PodSource that can list its pods afresh: the loop asks for
// it when the API server says a pod the source still lists is gone, the
// sign of a cache behind the API server (internal/podsource.Source).
type Relister interface {
	Relist(reason string)
}

// PodStatsSource reads the usage of the given pods, keyed by pod UID: the
// kinds asked for, and no more (a pass that ranks no pod asks for disk
// usage alone, which the local-storage limits need). Pods it could not
// measure are left out and rank first. The pods listed are those still
// running: a source that keeps something per pod drops what it kept for
// the others.
type PodStatsSource interface {
	PodStats(ctx context.Context, now time.Time, pods []signals.Pod, kinds signals.PodStatsKinds) (map[string]signals.PodStats, error)
}

// Evicter carries out one eviction. It returns when the pod is gone or a
// bounded wait has passed, so that the next pass sees the effect. An error
// that wraps ErrDisruptionBudget means a PodDisruptionBudget refused it.
type Evicter interface {
	Evict(ctx context.Context, r decide.Request) error
}

// StatusPublisher receives the node's pressure after every pass. Publish
// must not block: the publisher keeps the latest report and writes it on
// its own schedule (at once on a transition, as a heartbeat otherwise),
// retrying while the API server is away.
type StatusPublisher interface {
	Publish(now time.Time, pressures []decide.PressureReport)
}

// Config holds the loop's own settings.
type Config struct {
	// HousekeepingInterval is the time between two passes when nothing
	// wakes the loop earlier (--housekeeping-interval, 10s by default).
	// Required.
	HousekeepingInterval time.Duration
	// StuckAfter is how long after the last pass ended the loop counts as
	// stuck, and Ready fails (config.Durations.StuckAfter: three
	// housekeeping intervals, 30s by default). Required.
	StuckAfter time.Duration
	// DryRun decides and reports but acts on nothing.
	DryRun  bool
	Decider decide.DeciderConfig
	// MaxEvictionWait is the longest an Evicter may take to return (its
	// bounded wait for the pod to go, plus its requests); a pass that runs
	// longer than StuckAfter plus this makes the loop unready. Default 60s.
	MaxEvictionWait time.Duration
	// MaxEvictionsPerHour caps the evictions issued (evicted, or stopped
	// locally) in any sliding hour (--max-evictions-per-hour); once
	// reached, no pod is evicted until the oldest of them is an hour old.
	// 0 means no cap.
	MaxEvictionsPerHour int
	// LocalStorageEvictionQPS and LocalStorageEvictionBurst rate-limit the
	// evictions of a local-storage pass, the one kind of pass that may
	// evict several pods: Burst at once, then one more every 1/QPS
	// seconds (--local-storage-eviction-qps, --local-storage-eviction-burst).
	// A QPS of 0 means no limit.
	LocalStorageEvictionQPS   float64
	LocalStorageEvictionBurst int
	// CleanupTimeout bounds the wait for an eviction in flight: a pod
	// evictd evicted holds back the next eviction until it has gone, or
	// until this long after its deletionTimestamp (the deletion plus its
	// grace period). Set it to the Evicter's bound on its own wait
	// (evict.Config.CleanupTimeout; cmd/evictd gives both
	// config.Durations.CleanupTimeout). Default 30s, the kubelet's
	// podCleanupTimeout.
	CleanupTimeout time.Duration
}

// Deps are the loop's connections to the world. Clock, Sources, Pods,
// Stats and Metrics are required; a nil Evicter means evictd has no way
// to act (standalone mode) and behaves as in dry-run.
type Deps struct {
	Clock   clock.WithTicker
	Sources []signals.Source
	Pods    PodSource
	Stats   PodStatsSource
	Evicter Evicter
	// Status, when set, is told the node's pressures after every pass.
	Status StatusPublisher
	// Reclaimer, when set, frees dead containers and unused images before
	// a pod is evicted for a disk signal.
	Reclaimer Reclaimer
	Metrics   *metrics.Metrics
	Log       *slog.Logger
	// AfterPass, when set, is called by the loop after each pass with the
	// status it published, once the pass's deadline timer is set (main
	// uses it to tell systemd it is ready).
	AfterPass func(*Status)
	// Events, when set, receives the node events of the loop's own (the
	// eviction cap reached).
	Events NodeEvents
	// Wakeups, when set, is given every pass's observations, from which
	// it re-arms the kernel notifiers and the fast poll.
	Wakeups Rearmer
}

// Rearmer re-arms wake-up sources from a pass's observations; Update must
// not block.
type Rearmer interface {
	Update(obs signals.Observations)
}

// Manager is evictd's loop. Run owns every piece of mutable state; other
// goroutines only Wake it or read the Status it publishes.
type Manager struct {
	cfg     Config
	deps    Deps
	decider *decide.Decider
	wake    chan struct{}
	status  atomic.Pointer[Status]
	// passStarted is the start of the pass under way in Unix nanoseconds,
	// 0 between passes; Ready reads it from other goroutines.
	passStarted atomic.Int64

	// Owned by Run.
	lastEvaluation thresholds.Evaluation
	lastReason     string
	lastObsErr     string
	lastPodsErr    string
	// hour counts the evictions of the last hour; capHit is true from the
	// pass where the cap withholds an eviction until the window has room
	// again, so that each reach is reported once.
	hour   hourWindow
	capHit bool
	// bucket rate-limits local-storage evictions.
	bucket *tokenBucket
	// lastStatsErr is the last pod stats error, by the kinds of stats the
	// pass read: an idle pass, which reads disk usage alone, neither
	// repeats nor clears what a pass that read the pods' cgroups said.
	lastStatsErr map[signals.PodStatsKinds]string
	// lastReclaimErr and lastRecollectErr are reclaimFirst's.
	lastReclaimErr   string
	lastRecollectErr string
	// settleUntil, when set, is the end of the wait after a reclaim that
	// removed something and still left a disk threshold met (reclaim.go).
	settleUntil time.Time
	pressures   map[signals.Pressure]bool
	// lastInFlight are the evictions in flight the last pass saw;
	// waitingFor is the UID of the pod the last withheld eviction waited
	// for, so that each wait is said once; overdueSaid are the pods whose
	// wait has ended and been said; seenGone are the pods the Evicter saw
	// go, which the pod source's cache may still hold for a moment.
	lastInFlight []decide.InFlight
	waitingFor   string
	overdueSaid  map[string]bool
	seenGone     map[string]time.Time
	// reportedGone are the pods the API server said were gone (not found,
	// replaced, finished, terminating) while the pod source's cache still
	// listed them, by UID, with when it said so (see leaveOutReportedGone).
	reportedGone map[string]time.Time
}

// New checks the configuration and returns a Manager ready to Run.
func New(cfg Config, deps Deps) (*Manager, error) {
	switch {
	case cfg.HousekeepingInterval <= 0:
		return nil, fmt.Errorf("housekeeping interval %s must be positive", cfg.HousekeepingInterval)
	case cfg.StuckAfter <= 0:
		return nil, fmt.Errorf("manager: StuckAfter %s must be positive", cfg.StuckAfter)
	case deps.Clock == nil || deps.Pods == nil || deps.Stats == nil || deps.Metrics == nil || deps.Log == nil:
		return nil, errors.New("manager: clock, pod source, pod stats source, metrics and logger are required")
	case cfg.MaxEvictionsPerHour < 0:
		return nil, fmt.Errorf("maximum evictions per hour %d must not be negative", cfg.MaxEvictionsPerHour)
	case cfg.LocalStorageEvictionQPS < 0 || cfg.LocalStorageEvictionQPS != cfg.LocalStorageEvictionQPS:
		return nil, fmt.Errorf("local-storage eviction rate %v must be a non-negative number", cfg.LocalStorageEvictionQPS)
	case cfg.LocalStorageEvictionQPS > 0 && cfg.LocalStorageEvictionBurst < 1:
		return nil, fmt.Errorf("local-storage eviction burst %d must be at least 1 when the rate is set", cfg.LocalStorageEvictionBurst)
	}
	if deps.Evicter == nil {
		cfg.DryRun = true
	}
	if cfg.MaxEvictionWait <= 0 {
		cfg.MaxEvictionWait = 60 * time.Second
	}
	if cfg.CleanupTimeout <= 0 {
		cfg.CleanupTimeout = decide.DefaultCleanupTimeout
	}
	return &Manager{
		cfg:          cfg,
		deps:         deps,
		decider:      decide.NewDecider(cfg.Decider),
		wake:         make(chan struct{}, 1),
		pressures:    map[signals.Pressure]bool{},
		overdueSaid:  map[string]bool{},
		seenGone:     map[string]time.Time{},
		reportedGone: map[string]time.Time{},
		lastStatsErr: map[signals.PodStatsKinds]string{},
		hour:         hourWindow{limit: cfg.MaxEvictionsPerHour},
		bucket:       newTokenBucket(cfg.LocalStorageEvictionQPS, cfg.LocalStorageEvictionBurst),
	}, nil
}

// Wake asks for a pass as soon as possible. It never blocks; wake-ups that
// arrive while one is pending are merged, so a burst gives one pass.
func (m *Manager) Wake() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Thresholds are the thresholds in force.
func (m *Manager) Thresholds() []thresholds.Threshold { return m.decider.Thresholds() }

// Status returns what the last pass saw and decided (nil before the first).
func (m *Manager) Status() *Status { return m.status.Load() }

// Ready reports an error until a pass has completed, and when the loop
// looks stuck: the last pass ended more than StuckAfter ago, or the pass
// under way (which may wait for an evicted pod to go) has run longer than
// that plus the longest wait an eviction may take.
func (m *Manager) Ready() error {
	st := m.status.Load()
	if st == nil {
		return errors.New("no pass has completed yet")
	}
	limit := m.cfg.StuckAfter
	if started := m.passStarted.Load(); started != 0 {
		age := m.deps.Clock.Since(time.Unix(0, started))
		if age > limit+m.cfg.MaxEvictionWait {
			return fmt.Errorf("the pass under way started %s ago", age.Round(time.Second))
		}
		return nil
	}
	if age := m.deps.Clock.Since(st.Time); age > limit {
		return fmt.Errorf("last pass was %s ago", age.Round(time.Second))
	}
	return nil
}

// Run makes a pass at once, then one per housekeeping interval and one per
// wake-up, until ctx is done.
func (m *Manager) Run(ctx context.Context) error {
	ticker := m.deps.Clock.NewTicker(m.cfg.HousekeepingInterval)
	defer ticker.Stop()
	// due fires when a soft threshold's grace period or a pressure's
	// transition period ends before the next tick, so the eviction or the
	// cleared condition is not late by up to a housekeeping interval.
	var due clock.Timer
	defer func() {
		if due != nil {
			due.Stop()
		}
	}()
	schedule := func() {
		if due != nil {
			due.Stop()
			due = nil
		}
		if at, ok := m.nextDeadline(); ok {
			due = m.deps.Clock.NewTimer(max(at.Sub(m.deps.Clock.Now()), 0))
		}
	}
	dueC := func() <-chan time.Time {
		if due == nil {
			return nil
		}
		return due.C()
	}
	// AfterPass is called once the next deadline is set, so that whoever
	// it tells of the pass (a test moving a fake clock) finds the timer in
	// place.
	after := func() {
		schedule()
		if m.deps.AfterPass != nil {
			m.deps.AfterPass(m.status.Load())
		}
	}
	m.pass(ctx, metrics.TriggerStart)
	after()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
			m.pass(ctx, metrics.TriggerTick)
		case <-m.wake:
			m.pass(ctx, metrics.TriggerWake)
		case <-dueC():
			due = nil
			m.pass(ctx, metrics.TriggerDeadline)
		}
		after()
	}
}

// nextDeadline returns the earliest moment, after the last pass and before
// the next tick, at which a decision changes with time alone: a waiting
// threshold's grace period ends, an active pressure's transition period
// ends, or the wait for an eviction in flight ends. Passes at those
// moments act on time instead of up to a housekeeping interval late.
func (m *Manager) nextDeadline() (time.Time, bool) {
	st := m.status.Load()
	if st == nil {
		return time.Time{}, false
	}
	ev := m.lastEvaluation
	var next time.Time
	consider := func(at time.Time) {
		if at.After(st.Time) && at.Before(st.Time.Add(m.cfg.HousekeepingInterval)) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	for _, th := range ev.Waiting {
		if at, ok := ev.GraceEnds(th); ok {
			consider(at)
		}
	}
	for _, ps := range ev.Pressure {
		if ps.Active && !ps.LastObservedAt.IsZero() {
			consider(ps.LastObservedAt.Add(m.cfg.Decider.TransitionPeriod))
		}
	}
	if !m.settleUntil.IsZero() {
		consider(m.settleUntil)
	}
	for _, f := range m.lastInFlight {
		consider(m.waitUntil(f, true))
		consider(m.waitUntil(f, false))
	}
	return next, !next.IsZero()
}

// pass is one observe → decide → act cycle.
func (m *Manager) pass(ctx context.Context, trigger metrics.Trigger) {
	met := m.deps.Metrics
	start := m.deps.Clock.Now()
	m.passStarted.Store(start.UnixNano())
	defer m.passStarted.Store(0)

	obs, err := signals.Collect(ctx, start, m.deps.Sources)
	m.warnOnChange(&m.lastObsErr, err, "some signals could not be read; they cannot trigger an eviction")
	signals.DeriveContainerFs(obs, m.cfg.Decider.Layout)
	pods, err := m.deps.Pods.Pods(ctx)
	m.warnOnChange(&m.lastPodsErr, err, "could not list pods")
	pods = m.leaveOutReportedGone(pods, start)
	inFlight := m.notGone(m.deps.Pods.InFlight(), start)
	m.lastInFlight = inFlight
	// The thresholds first, from the node's observations alone: the pods'
	// usage is read only when a threshold ranks them, and then only the
	// usage that ranks them (Decider.Needs); disk usage, which the
	// local-storage limits need, every pass.
	ev := m.decider.Evaluate(start, obs)
	kinds := m.decider.Needs(ev)
	var stats map[string]signals.PodStats
	var statsErr error
	if len(pods) > 0 {
		stats, statsErr = m.deps.Stats.PodStats(ctx, start, pods, kinds)
	}
	last := m.lastStatsErr[kinds]
	m.warnOnChange(&last, statsErr, "some pod stats could not be read; those pods rank first")
	m.lastStatsErr[kinds] = last

	dec := m.decider.DecideEvaluated(start, ev, obs, pods, stats)
	if !m.cfg.DryRun {
		dec = m.reclaimFirst(ctx, dec)
	}
	m.lastEvaluation = dec.Evaluation
	m.export(start, obs, dec)
	m.logDecision(dec)
	if m.deps.Status != nil {
		m.deps.Status.Publish(start, decide.PressureReports(dec.Evaluation, obs))
	}
	if m.deps.Wakeups != nil {
		m.deps.Wakeups.Update(obs)
	}
	result := m.act(ctx, dec, inFlight)

	st := newStatus(start, string(trigger), m.cfg.DryRun, obs, m.decider.Thresholds(), dec, result, len(pods))
	now := m.deps.Clock.Now()
	st.Limits = m.limits(now)
	st.InFlight = m.inFlightStatus(inFlight, now)
	m.status.Store(st)
	met.ObservePass(metrics.Pass{Trigger: trigger, Duration: m.deps.Clock.Since(start), EvictionsInLastHour: st.Limits.EvictionsInLastHour})
}

// warnOnChange logs err at Warn when it differs from the last one seen at
// this place, at Debug when it repeats, and at Info when it clears, so that a
// signal missing for hours is said once and not every pass.
func (m *Manager) warnOnChange(last *string, err error, msg string) {
	switch {
	case err == nil && *last != "":
		m.deps.Log.Info(msg+": resolved", "was", *last)
		*last = ""
	case err == nil:
	case err.Error() != *last:
		m.deps.Log.Warn(msg, "err", err)
		*last = err.Error()
	default:
		m.deps.Log.Debug(msg, "err", err)
	}
}

// act carries out an eviction decision, or reports what it would have done.
// An eviction by evictd still in flight withholds it, in dry-run too (see
// withheldInFlight). For a soft threshold a PodDisruptionBudget refusal
// moves on to the next pod in rank order; a hard threshold has no
// fallbacks, because its Evicter puts the node first. At most one pod is
// evicted per pass.
func (m *Manager) act(ctx context.Context, dec decide.Decision, inFlight []decide.InFlight) string {
	met := m.deps.Metrics
	if dec.Outcome == decide.OutcomeLocalStorage {
		return m.actLocalStorage(ctx, dec)
	}
	if dec.Outcome != decide.OutcomeEvict {
		if dec.Signal != "" {
			met.ObserveDecision(metrics.Decision{Signal: dec.Signal, Outcome: dec.Outcome, At: dec.Time})
		}
		return ""
	}
	reqs := dec.Requests()
	met.ObserveDecision(m.chosen(dec))
	if why, withheld := m.withheldInFlight(reqs[0], inFlight, m.deps.Clock.Now()); withheld {
		return why
	}
	if m.cfg.DryRun {
		met.IncEviction(dec.Signal, metrics.ResultDryRun)
		m.deps.Log.Info("dry run: would evict", "signal", dec.Signal, "pod", dec.Pod.Ref(),
			"gracePeriodSeconds", dec.GracePeriod, "message", dec.Message)
		return "dry-run"
	}
	var results []string
	for _, req := range reqs {
		if why, capped := m.capped(req); capped {
			return strings.Join(append(results, why), "; ")
		}
		log := m.deps.Log.With("signal", req.Signal, "pod", req.Pod.Ref(), "gracePeriodSeconds", req.GracePeriod)
		err := m.deps.Evicter.Evict(ctx, req)
		m.recordIssued(err)
		m.recordGone(req, err)
		switch {
		case err == nil:
			met.IncEviction(req.Signal, metrics.ResultEvicted)
			log.Info("evicted", "message", req.Message)
			// The pod is gone: look again at once rather than an interval on.
			m.Wake()
			return strings.Join(append(results, "evicted "+req.Pod.Ref()), "; ")
		case errors.Is(err, decide.ErrNotGoneInTime):
			// Issued: count it as an eviction, but say the pod lingers.
			met.IncEviction(req.Signal, metrics.ResultEvicted)
			log.Warn("eviction issued; the pod has not gone yet", "err", err)
			m.Wake()
			return strings.Join(append(results, "evicted "+req.Pod.Ref()+" (still terminating)"), "; ")
		case errors.Is(err, decide.ErrStoppedLocally):
			// The node comes first: its containers are stopped, the
			// eviction follows when the API server answers again.
			met.IncEviction(req.Signal, metrics.ResultStoppedLocally)
			log.Warn("the API server did not answer; stopped the pod's containers through the runtime", "err", err)
			m.Wake()
			return strings.Join(append(results, "stopped locally "+req.Pod.Ref()+" (eviction owed)"), "; ")
		case errors.Is(err, decide.ErrPodGone):
			// The pod list was behind: nothing was evicted. The pod is
			// left out of the next passes until the cache agrees (or for
			// reportedGoneMemory), and the next decision comes with the
			// next tick, not at once: a cache that lags after an outage
			// must not make a decision a pass.
			m.reportedGone[req.Pod.UID] = m.deps.Clock.Now()
			log.Info("the API server says the pod is already gone; leaving it out until the pod cache agrees", "err", err)
			if r, ok := m.deps.Pods.(Relister); ok {
				r.Relist("the API server says " + req.Pod.Ref() + " is gone, which the cache still lists")
			}
			return strings.Join(append(results, "gone "+req.Pod.Ref()), "; ")
		case errors.Is(err, decide.ErrDisruptionBudget):
			met.IncEviction(req.Signal, metrics.ResultPDBBlocked)
			log.Info("a PodDisruptionBudget refused the eviction; trying the next pod", "err", err)
			results = append(results, "pdb-blocked "+req.Pod.Ref())
		default:
			met.IncEviction(req.Signal, metrics.ResultFailed)
			log.Error("eviction failed", "err", err)
			return strings.Join(append(results, "failed "+req.Pod.Ref()+": "+err.Error()), "; ")
		}
	}
	return strings.Join(append(results, "no pod could be evicted"), "; ")
}

// actLocalStorage evicts every pod over its own local-storage limit, as
// the kubelet does, one request per pod, or reports them in dry-run. An
// eviction in flight withholds none of them: each pod is evicted for its
// own use of its own limit, which another pod's termination does not
// change.
func (m *Manager) actLocalStorage(ctx context.Context, dec decide.Decision) string {
	met := m.deps.Metrics
	var results []string
	limited, issued := 0, 0
	for _, req := range dec.LocalStorageRequests() {
		log := m.deps.Log.With("signal", req.Signal, "pod", req.Pod.Ref(), "gracePeriodSeconds", req.GracePeriod)
		if m.cfg.DryRun {
			met.IncEviction(req.Signal, metrics.ResultDryRun)
			log.Info("dry run: would evict", "message", req.Message)
			results = append(results, "dry-run "+req.Pod.Ref())
			continue
		}
		if why, capped := m.capped(req); capped {
			results = append(results, why)
			continue
		}
		if now := m.deps.Clock.Now(); !m.bucket.take(now) {
			met.IncWithheld(metrics.WithheldRateLimit)
			limited++
			results = append(results, fmt.Sprintf("rate-limited %s (next local-storage eviction at %s)",
				req.Pod.Ref(), m.bucket.next(now).UTC().Format(time.RFC3339)))
			continue
		}
		err := m.deps.Evicter.Evict(ctx, req)
		m.recordIssued(err)
		m.recordGone(req, err)
		issued++
		switch {
		case err == nil:
			met.IncEviction(req.Signal, metrics.ResultEvicted)
			log.Info("evicted", "message", req.Message)
			results = append(results, "evicted "+req.Pod.Ref())
		case errors.Is(err, decide.ErrNotGoneInTime):
			met.IncEviction(req.Signal, metrics.ResultEvicted)
			log.Warn("eviction issued; the pod has not gone yet", "err", err)
			results = append(results, "evicted "+req.Pod.Ref()+" (still terminating)")
		case errors.Is(err, decide.ErrPodGone):
			log.Info("the pod is already gone", "err", err)
			results = append(results, "gone "+req.Pod.Ref())
		default:
			met.IncEviction(req.Signal, metrics.ResultFailed)
			log.Error("eviction failed", "err", err)
			results = append(results, "failed "+req.Pod.Ref()+": "+err.Error())
		}
	}
	if limited > 0 {
		m.deps.Log.Info("local-storage evictions rate-limited; the pods are evicted in later passes",
			"withheld", limited, "qps", m.cfg.LocalStorageEvictionQPS, "burst", m.cfg.LocalStorageEvictionBurst)
	}
	if issued > 0 {
		// Look again at once: the thresholds' turn comes next pass. A
		// pass that a limit kept from evicting anything waits for the
		// next tick instead.
		m.Wake()
	}
	return strings.Join(results, "; ")
}

// logDecision writes one Info line when the decision or its reason changes,
// and a Debug line otherwise, so a steady node does not fill the journal.
func (m *Manager) logDecision(dec decide.Decision) {
	log := m.deps.Log
	for _, p := range signals.Pressures() {
		active := dec.Evaluation.Pressure[p].Active
		if active != m.pressures[p] {
			log.Info("node pressure changed", "pressure", p, "active", active)
			m.pressures[p] = active
		}
	}
	if dec.Outcome == decide.OutcomeNone && dec.Reason == m.lastReason {
		log.Debug("decision", "outcome", dec.Outcome, "reason", dec.Reason)
		return
	}
	m.lastReason = dec.Reason
	args := []any{"outcome", dec.Outcome, "reason", dec.Reason}
	if dec.Signal != "" {
		args = append(args, "signal", dec.Signal)
	}
	if dec.Pod != nil {
		// observedAt is the pass's time, at which the thresholds were
		// last known met: the transition period runs from it, not from
		// when the eviction is issued.
		args = append(args, "pod", dec.Pod.Ref(), "gracePeriodSeconds", dec.GracePeriod, "observedAt", dec.Time)
	}
	log.Info("decision", args...)
}

// export publishes the pass's observations, thresholds and pressures.
func (m *Manager) export(now time.Time, obs signals.Observations, dec decide.Decision) {
	met := m.deps.Metrics
	for _, s := range signals.All() {
		o, ok := obs[s]
		if !ok {
			met.ForgetObservation(s)
			continue
		}
		met.SetObservation(s, o.Available, o.Capacity)
		met.SetObservationAge(s, now.Sub(o.Time).Seconds())
	}
	ev := dec.Evaluation
	for _, th := range ev.Missing {
		met.IncSignalError(th.Signal)
	}
	metNow := map[thresholds.Key]bool{}
	for _, th := range ev.Met {
		metNow[th.Key()] = true
	}
	for _, th := range m.decider.Thresholds() {
		o, ok := obs[th.Signal]
		if !ok {
			continue
		}
		met.SetThreshold(th.Signal, metrics.KindOf(th), quantityOf(th, o), metNow[th.Key()])
	}
	for _, p := range signals.Pressures() {
		met.SetPressure(p, ev.Pressure[p].Active)
	}
}

// chosen is a decision to evict as the metrics record it: its outcome
// (metrics.OutcomeDryRun in dry-run), the age of its observation and the
// time since its threshold was first met.
func (m *Manager) chosen(dec decide.Decision) metrics.Decision {
	d := metrics.Decision{Signal: dec.Signal, Outcome: dec.Outcome, At: dec.Time}
	if m.cfg.DryRun {
		d.Outcome = metrics.OutcomeDryRun
	}
	if dec.Observation != nil {
		d.Observed = dec.Observation.Time
		if first, ok := dec.Evaluation.FirstObservedAt[dec.Threshold.Key()]; ok {
			d.FirstMet = first
		}
	}
	return d
}

// capped reports whether --max-evictions-per-hour withholds req now, with
// the pass's result for it. The first withheld eviction after the window
// had room counts a reach: a metric, a Warn log line and a Warning event
// on the node.
func (m *Manager) capped(req decide.Request) (string, bool) {
	now := m.deps.Clock.Now()
	if !m.hour.full(now) {
		m.capHit = false
		return "", false
	}
	met := m.deps.Metrics
	met.IncWithheld(metrics.WithheldHourlyCap)
	next := m.hour.nextAllowed(now).UTC().Format(time.RFC3339)
	if !m.capHit {
		m.capHit = true
		met.IncCapReached()
		msg := fmt.Sprintf("evictd reached its cap of %d evictions per hour (--max-evictions-per-hour) and withholds every eviction until %s; withheld: %s for %s",
			m.cfg.MaxEvictionsPerHour, next, req.Pod.Ref(), req.Signal)
		m.deps.Log.Warn("eviction cap reached; evictions are withheld", "cap", m.cfg.MaxEvictionsPerHour,
			"nextAllowed", next, "pod", req.Pod.Ref(), "signal", req.Signal)
		if m.deps.Events != nil {
			m.deps.Events.Warn(EventCapReached, msg)
		}
	} else {
		m.deps.Log.Debug("eviction withheld by the hourly cap", "pod", req.Pod.Ref(), "signal", req.Signal, "nextAllowed", next)
	}
	return fmt.Sprintf("withheld %s (cap of %d evictions per hour reached; next eviction allowed at %s)",
		req.Pod.Ref(), m.cfg.MaxEvictionsPerHour, next), true
}

// recordIssued counts, for the hourly cap, an Evict call whose eviction
// was issued: it returned nil, ErrNotGoneInTime or ErrStoppedLocally.
func (m *Manager) recordIssued(err error) {
	if err == nil || errors.Is(err, decide.ErrNotGoneInTime) || errors.Is(err, decide.ErrStoppedLocally) {
		m.hour.record(m.deps.Clock.Now())
	}
}

// limits reports the safety limits at now for the status and metrics, and
// ends a reach of the cap once the window has room again.
func (m *Manager) limits(now time.Time) LimitsStatus {
	n := m.hour.count(now)
	ls := LimitsStatus{MaxEvictionsPerHour: m.cfg.MaxEvictionsPerHour, EvictionsInLastHour: n}
	if m.hour.full(now) {
		ls.CapReached = true
		next := m.hour.nextAllowed(now)
		ls.NextEvictionAllowed = &next
	} else {
		m.capHit = false
	}
	return ls
}
