package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
)

// Result is what became of one eviction request of a pass.
type Result string

// The results of an eviction request.
const (
	// ResultEvicted: issued, and the pod went within the Evicter's wait.
	ResultEvicted Result = "evicted"
	// ResultTerminating: issued; the pod had not gone when the wait ended.
	ResultTerminating Result = "terminating"
	// ResultStoppedLocally: the API server did not answer; the pod's
	// containers were stopped through the runtime and the eviction is owed.
	ResultStoppedLocally Result = "stopped-locally"
	// ResultStoppedStandalone: with no API server (standalone), the pod's
	// containers were killed through the runtime; nothing is owed.
	ResultStoppedStandalone Result = "stopped-standalone"
	// ResultNotActed: with no API server, evictd could not carry out the
	// eviction alone; nothing was done.
	ResultNotActed Result = "not-acted"
	// ResultGone: the API server says the pod was already gone.
	ResultGone Result = "gone"
	// ResultPDBBlocked: a PodDisruptionBudget refused the eviction.
	ResultPDBBlocked Result = "pdb-blocked"
	// ResultFailed: the eviction failed; Err says why.
	ResultFailed Result = "failed"
	// ResultDryRun: --dry-run; nothing was done.
	ResultDryRun Result = "dry-run"
	// ResultWithheld: a limit held the eviction back; Why says which.
	ResultWithheld Result = "withheld"
)

// Attempt is the outcome of one eviction request.
type Attempt struct {
	Request decide.Request
	Result  Result
	// Err is the Evicter's error, for every result but evicted, dry-run
	// and withheld.
	Err error
	// Why says, for a withheld request, which limit held it and until
	// when.
	Why string
	// Started and Ended are when the Evicter was asked and when it
	// returned; zero when it was not asked.
	Started, Ended time.Time
}

// Issued reports whether the attempt counts as an eviction for the
// hourly cap: issued to the API server, or stopped on the node.
func (a Attempt) Issued() bool {
	return a.Result == ResultEvicted || a.Result == ResultTerminating || a.Result == ResultStoppedLocally ||
		a.Result == ResultStoppedStandalone
}

// String is the attempt as the pass's status shows it.
func (a Attempt) String() string {
	ref := a.Request.Pod.Ref()
	switch a.Result {
	case ResultTerminating:
		return "evicted " + ref + " (still terminating)"
	case ResultStoppedLocally:
		return "stopped locally " + ref + " (eviction owed)"
	case ResultStoppedStandalone:
		return "stopped locally " + ref + " (standalone: no API server)"
	case ResultNotActed:
		return "would evict " + ref + " (" + a.Err.Error() + ")"
	case ResultFailed:
		return "failed " + ref + ": " + a.Err.Error()
	case ResultWithheld:
		return a.Why
	}
	return string(a.Result) + " " + ref
}

// Acted is what acting on one pass's decision gave, in order.
type Acted struct {
	Attempts []Attempt
	// Why says why nothing was attempted (an eviction in flight), or that
	// no candidate could be evicted.
	Why string
}

// String is the pass's result in its status: the attempts, then why.
func (a Acted) String() string {
	parts := make([]string, 0, len(a.Attempts)+1)
	for _, at := range a.Attempts {
		parts = append(parts, at.String())
	}
	if a.Why != "" {
		parts = append(parts, a.Why)
	}
	return strings.Join(parts, "; ")
}

// act carries out an eviction decision, or reports what it would have done.
// An eviction by evictd still in flight withholds it, in dry-run too (see
// withheldInFlight). For a soft threshold a PodDisruptionBudget refusal
// moves on to the next pod in rank order; a hard threshold has no
// fallbacks, because its Evicter puts the node first. At most one pod is
// evicted per pass.
func (m *Manager) act(ctx context.Context, dec decide.Decision, inFlight []decide.InFlight) Acted {
	met := m.deps.Metrics
	if dec.Outcome == decide.OutcomeLocalStorage {
		return m.actLocalStorage(ctx, dec)
	}
	if dec.Outcome != decide.OutcomeEvict {
		if dec.Signal != "" {
			met.ObserveDecision(metrics.Decision{Signal: dec.Signal, Outcome: dec.Outcome, At: dec.Time})
		}
		return Acted{}
	}
	reqs := dec.Requests()
	met.ObserveDecision(m.chosen(dec))
	if reqs[0].Signal.Pressure() == signals.DiskPressure {
		inFlight = append(inFlight, m.stillReleasing(m.deps.Clock.Now())...)
	}
	if why, withheld := m.withheldInFlight(reqs[0], inFlight, m.deps.Clock.Now()); withheld {
		return Acted{Why: why}
	}
	if m.cfg.DryRun {
		m.report(Attempt{Request: reqs[0], Result: ResultDryRun})
		return Acted{Why: "dry-run"}
	}
	var acted Acted
	for _, req := range reqs {
		if why, capped := m.capped(req); capped {
			acted.Attempts = append(acted.Attempts, Attempt{Request: req, Result: ResultWithheld, Why: why})
			return acted
		}
		a := m.report(m.evict(ctx, req))
		acted.Attempts = append(acted.Attempts, a)
		if a.Result == ResultPDBBlocked {
			continue // the next pod in rank order
		}
		if a.Issued() {
			if req.Signal.Pressure() == signals.DiskPressure && m.deps.DiskReleased != nil {
				now := m.deps.Clock.Now()
				m.releasing[req.Pod.UID] = decide.InFlight{Namespace: req.Pod.Namespace, Name: req.Pod.Name, UID: req.Pod.UID, DeletionTimestamp: now}
			}
			// The pod is going: look again at once rather than an
			// interval on.
			m.Wake()
		}
		return acted
	}
	acted.Why = "no pod could be evicted"
	return acted
}

// stillReleasing returns the pods evicted for a disk signal whose disk is
// not released yet at now, as evictions in flight since their eviction
// (so waited for at most the cleanup timeout), and forgets the others.
func (m *Manager) stillReleasing(now time.Time) []decide.InFlight {
	var out []decide.InFlight
	for uid, f := range m.releasing {
		if m.deps.DiskReleased(uid) || !now.Before(f.DeletionTimestamp.Add(m.cfg.CleanupTimeout)) {
			delete(m.releasing, uid)
			continue
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b decide.InFlight) int { return strings.Compare(a.UID, b.UID) })
	return out
}

// actLocalStorage evicts every pod over its own local-storage limit, as
// the kubelet does, one request per pod, or reports them in dry-run. An
// eviction in flight withholds none of them: each pod is evicted for its
// own use of its own limit, which another pod's termination does not
// change.
func (m *Manager) actLocalStorage(ctx context.Context, dec decide.Decision) Acted {
	var acted Acted
	limited, issued := 0, 0
	for _, req := range dec.LocalStorageRequests() {
		if m.cfg.DryRun {
			acted.Attempts = append(acted.Attempts, m.report(Attempt{Request: req, Result: ResultDryRun}))
			continue
		}
		if why, capped := m.capped(req); capped {
			acted.Attempts = append(acted.Attempts, Attempt{Request: req, Result: ResultWithheld, Why: why})
			continue
		}
		if now := m.deps.Clock.Now(); !m.bucket.take(now) {
			m.deps.Metrics.IncWithheld(metrics.WithheldRateLimit)
			limited++
			acted.Attempts = append(acted.Attempts, Attempt{Request: req, Result: ResultWithheld,
				Why: fmt.Sprintf("rate-limited %s (next local-storage eviction at %s)", req.Pod.Ref(), m.bucket.next(now).UTC().Format(time.RFC3339))})
			continue
		}
		acted.Attempts = append(acted.Attempts, m.report(m.evict(ctx, req)))
		issued++
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
	return acted
}

// evict asks the Evicter to carry out req and says what became of it; the
// hourly cap and the wait for evicted pods take it into account.
func (m *Manager) evict(ctx context.Context, req decide.Request) Attempt {
	started := m.deps.Clock.Now()
	err := m.deps.Evicter.Evict(ctx, req)
	a := Attempt{Request: req, Err: err, Started: started, Ended: m.deps.Clock.Now()}
	m.recordGone(req, err)
	switch {
	case err == nil:
		a.Result = ResultEvicted
	case errors.Is(err, decide.ErrNotGoneInTime):
		a.Result = ResultTerminating
	case errors.Is(err, decide.ErrStoppedLocally):
		a.Result = ResultStoppedLocally
		m.acted[req.Pod.UID] = m.deps.Clock.Now()
	case errors.Is(err, decide.ErrStoppedStandalone):
		a.Result = ResultStoppedStandalone
	case errors.Is(err, decide.ErrNotActed):
		a.Result = ResultNotActed
	case errors.Is(err, decide.ErrPodGone):
		// The pod list was behind: nothing was evicted. The pod is left
		// out of the next passes until the cache agrees (or for
		// reportedGoneMemory), and the next decision comes with the next
		// tick, not at once: a cache that lags after an outage must not
		// make a decision a pass.
		a.Result = ResultGone
		m.reportedGone[req.Pod.UID] = m.deps.Clock.Now()
		if r, ok := m.deps.Pods.(Relister); ok {
			r.Relist("the API server says " + req.Pod.Ref() + " is gone, which the cache still lists")
		}
	case errors.Is(err, decide.ErrDisruptionBudget):
		a.Result = ResultPDBBlocked
	default:
		a.Result = ResultFailed
	}
	if a.Issued() {
		m.hour.record(m.deps.Clock.Now())
	}
	return a
}

// issuedAs is the evictd_evictions_total result of each attempt that
// issued an eviction (Attempt.Issued), and notIssuedFor the
// evictd_evictions_not_issued_total reason of each that did not; a pod
// already gone, or an attempt withheld (evictd_evictions_withheld_total),
// counts in neither.
var (
	issuedAs = map[Result]metrics.Result{
		ResultEvicted:           metrics.ResultEvicted,
		ResultTerminating:       metrics.ResultEvicted,
		ResultStoppedLocally:    metrics.ResultStoppedLocally,
		ResultStoppedStandalone: metrics.ResultStoppedLocally,
	}
	notIssuedFor = map[Result]metrics.NotIssued{
		ResultPDBBlocked: metrics.NotIssuedPDBBlocked,
		ResultFailed:     metrics.NotIssuedFailed,
		ResultDryRun:     metrics.NotIssuedDryRun,
		ResultNotActed:   metrics.NotIssuedNotActed,
	}
)

// report turns an attempt into its metric and its log line, the one place
// that does, and returns it.
func (m *Manager) report(a Attempt) Attempt {
	req := a.Request
	if r, ok := issuedAs[a.Result]; ok {
		m.deps.Metrics.IncEviction(req.Signal, r)
	} else if r, ok := notIssuedFor[a.Result]; ok {
		m.deps.Metrics.IncNotIssued(req.Signal, r)
	}
	log := m.deps.Log.With("signal", req.Signal, "pod", req.Pod.Ref(), "gracePeriodSeconds", req.GracePeriod)
	switch a.Result {
	case ResultEvicted:
		log.Info("evicted", "message", req.Message)
	case ResultTerminating:
		log.Warn("eviction issued; the pod has not gone yet", "err", a.Err)
	case ResultStoppedLocally:
		// The node comes first: its containers are stopped, the
		// eviction follows when the API server answers again.
		log.Warn("the API server did not answer; stopped the pod's containers through the runtime", "err", a.Err)
	case ResultStoppedStandalone:
		log.Warn("standalone, with no API server: killed the pod's containers through the runtime; the kubelet restarts them as the pod's restart policy says", "message", req.Message)
	case ResultNotActed:
		log.Warn("standalone, with no API server: would evict, but cannot alone", "message", req.Message, "err", a.Err)
	case ResultGone:
		log.Info("the API server says the pod is already gone; leaving it out until the pod cache agrees", "err", a.Err)
	case ResultPDBBlocked:
		log.Info("a PodDisruptionBudget refused the eviction; trying the next pod", "err", a.Err)
	case ResultFailed:
		log.Error("eviction failed", "err", a.Err)
	case ResultDryRun:
		log.Info("dry run: would evict", "message", req.Message)
	}
	return a
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
