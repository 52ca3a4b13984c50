package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// Manager is evictd's loop. Run owns every piece of mutable state; other
// goroutines only Wake it or read the Status it publishes.
type Manager struct {
	cfg     Config
	deps    Deps
	decider *decide.Decider
	wake    chan struct{}
	// snaps are the requests for a snapshot of now (Snapshot).
	snaps  chan snapRequest
	status atomic.Pointer[Status]
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
	// releasing are the pods evicted for a disk signal whose directory
	// the kubelet has not removed yet (Deps.DiskReleased), by UID.
	releasing map[string]decide.InFlight
	// reportedGone are the pods the API server said were gone (not found,
	// replaced, finished, terminating) while the pod source's cache still
	// listed them, by UID, with when it said so (see leaveOutReportedGone).
	reportedGone map[string]time.Time
	// acted are the pods evictd stopped through the runtime or saw go
	// (see leaveOutActedWithoutStats), by UID, with when.
	acted map[string]time.Time
	// shadow is exportShadows' (shadow.go).
	shadow shadowState
	// lastObs are the last pass's observations, for Snapshot.
	lastObs signals.Observations
	// tte is time to exhaustion's, and the release and relief times'
	// (exhaustion.go).
	tte exhaustionState
	// oom is countOOMKills' (oomkills.go).
	oom oomState
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
	m := &Manager{
		cfg:          cfg,
		deps:         deps,
		decider:      decide.NewDecider(cfg.Decider),
		wake:         make(chan struct{}, 1),
		snaps:        make(chan snapRequest),
		pressures:    map[signals.Pressure]bool{},
		overdueSaid:  map[string]bool{},
		seenGone:     map[string]time.Time{},
		releasing:    map[string]decide.InFlight{},
		reportedGone: map[string]time.Time{},
		acted:        map[string]time.Time{},
		lastStatsErr: map[signals.PodStatsKinds]string{},
		hour:         hourWindow{limit: cfg.MaxEvictionsPerHour},
		bucket:       newTokenBucket(cfg.LocalStorageEvictionQPS, cfg.LocalStorageEvictionBurst),
		tte:          newExhaustionState(),
	}
	// The series the alerts need before the first eviction: for every
	// signal evictd can evict for here, the thresholds' and the
	// local-storage limits'.
	for _, sig := range evictionSignals(m.decider.Thresholds()) {
		deps.Metrics.InitEvictions(sig, cfg.DryRun)
	}
	// And those the dashboard needs: a threshold's decisions (a pass
	// over the local-storage limits counts its evictions only).
	for _, th := range m.decider.Thresholds() {
		deps.Metrics.InitDecisions(th.Signal, cfg.DryRun)
	}
	if cfg.Decider.Exhaustion.Enabled {
		for _, th := range m.decider.Thresholds() {
			if decide.Exhaustible(th) {
				deps.Metrics.InitPredicted(th.Signal)
			}
		}
	}
	return m, nil
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
		case req := <-m.snaps:
			req.reply <- m.snapshot(ctx, req.convert)
			continue
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
	var took passTook
	took.collect = m.deps.Clock.Since(start)
	m.warnOnChange(&m.lastObsErr, err, "some signals could not be read; they cannot trigger an eviction")
	signals.DeriveContainerFs(obs, m.cfg.Decider.Layout)
	pods, err := m.deps.Pods.Pods(ctx)
	took.pods = m.deps.Clock.Since(start)
	m.warnOnChange(&m.lastPodsErr, err, "could not list pods")
	pods = m.leaveOutReportedGone(pods, start)
	inFlight := m.notGone(m.deps.Pods.InFlight(), start)
	m.lastInFlight = inFlight
	// The thresholds first, from the node's observations alone: the pods'
	// usage is read only when a threshold ranks them, and then only the
	// usage that ranks them (Decider.Needs); disk usage, which the
	// local-storage limits need, every pass.
	if m.deps.LocalStorage != nil {
		m.decider.SetLocalStorageByKubelet(m.deps.LocalStorage.ByKubelet())
	}
	ev := m.decider.Evaluate(start, obs)
	// Time to exhaustion may act on a hard memory threshold not met yet
	// (exhaustion.go): the pass then reads and ranks as if it were.
	pred := m.predict(start, ev, obs)
	acting := ev
	if pred != nil {
		acting = pred.Apply(ev)
	}
	kinds := m.decider.Needs(acting)
	var stats map[string]signals.PodStats
	var statsErr error
	if len(pods) > 0 {
		stats, statsErr = m.deps.Stats.PodStats(ctx, start, pods, kinds)
	}
	took.stats = m.deps.Clock.Since(start)
	pods = m.leaveOutActedWithoutStats(pods, stats, m.decider.RankNeeds(acting), start)
	last := m.lastStatsErr[kinds]
	m.warnOnChange(&last, statsErr, "some pod stats could not be read; those pods rank first")
	m.lastStatsErr[kinds] = last

	dec := m.decider.DecidePredicted(start, ev, pred, obs, pods, stats)
	if !m.cfg.DryRun {
		dec = m.reclaimFirst(ctx, dec)
	}
	took.decide = m.deps.Clock.Since(start)
	m.lastEvaluation = dec.Evaluation
	m.export(start, obs, dec)
	m.exportShadows(start, obs)
	m.logDecision(dec, took)
	if m.deps.Status != nil {
		m.deps.Status.Publish(start, decide.PressureReports(dec.Evaluation, obs))
	}
	m.lastObs = obs
	result := m.act(ctx, dec, inFlight)
	// The wake-ups are re-armed after acting, not before: re-arming a
	// memcg notifier registers an eventfd through cgroup.event_control
	// and reads memory.stat, and a hard eviction's signal need not wait
	// for it (about half a millisecond at the median on the real node,
	// docs/BENCHMARKS.md). The levels do
	// not depend on the pass's available memory, only on the thresholds,
	// the capacity and the inactive page cache read now; a wake-up the
	// loop would get during act is taken after it anyway, and an issued
	// eviction runs the next pass at once.
	if m.deps.Wakeups != nil {
		m.deps.Wakeups.Update(obs)
	}
	m.followExhaustion(start, obs, dec, result, pods, stats, kinds)
	if countsOOMKills(trigger) {
		m.countOOMKills(ctx, start)
	}

	st := newStatus(start, string(trigger), m.cfg.DryRun, obs, m.decider.Thresholds(), dec, result.String(), len(pods))
	now := m.deps.Clock.Now()
	st.Limits = m.limits(now)
	st.InFlight = m.inFlightStatus(inFlight, now)
	m.status.Store(st)
	met.ObservePass(metrics.Pass{Trigger: trigger, Duration: m.deps.Clock.Since(start), EvictionsInLastHour: st.Limits.EvictionsInLastHour})
	if m.deps.Recorder != nil {
		m.deps.Recorder.Record(PassRecord{Time: start, Trigger: trigger, DryRun: m.cfg.DryRun, Obs: obs, Pods: pods, Stats: stats,
			LocalStorageByKubelet: m.decider.LocalStorageByKubelet(), Decision: dec, Acted: result})
	}
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

// passTook is how long a pass had run when each of its stages ended,
// from its start: the node's signals read, the pods listed, the pods'
// usage read, the decision made (reclaim included). A decision to evict
// logs it, so that a slow one shows where its time went.
type passTook struct {
	collect, pods, stats, decide time.Duration
}

// String is the stages' ends in milliseconds, e.g.
// "signals=0.41ms pods=0.45ms stats=0.98ms decided=1.02ms".
func (t passTook) String() string {
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 2, 64) + "ms"
	}
	return "signals=" + ms(t.collect) + " pods=" + ms(t.pods) + " stats=" + ms(t.stats) + " decided=" + ms(t.decide)
}

// logDecision writes one Info line when the decision or its reason changes,
// and a Debug line otherwise, so a steady node does not fill the journal.
func (m *Manager) logDecision(dec decide.Decision, took passTook) {
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
		args = append(args, "pod", dec.Pod.Ref(), "gracePeriodSeconds", dec.GracePeriod, "observedAt", dec.Time, "took", took)
	}
	if p := dec.Predicted; p != nil {
		args = append(args, "predicted", p.Words(), "releaseEstimate", p.Release, "margin", p.Margin)
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
		met.SetStallLocal(s, o.Local)
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

// evictionSignals are the signals evictd can evict for with ths in force:
// the thresholds' signals, once each, and the local-storage limits'
// pseudo-signals.
func evictionSignals(ths []thresholds.Threshold) []signals.Signal {
	var out []signals.Signal
	for _, th := range ths {
		if !slices.Contains(out, th.Signal) {
			out = append(out, th.Signal)
		}
	}
	return append(out, decide.LocalStorageSignals()...)
}
