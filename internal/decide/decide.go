package decide

import (
	"fmt"
	"time"

	"github.com/evictd/evictd/ranking"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// Outcome is what a pass decided to do.
type Outcome string

// The outcomes of a pass.
const (
	// OutcomeNone: no threshold calls for an eviction now.
	OutcomeNone Outcome = "none"
	// OutcomeEvict: a pod was chosen.
	OutcomeEvict Outcome = "evict"
	// OutcomeNoEvictablePod: a threshold calls for an eviction but every
	// pod is critical, there are no pods, or no evictable pod has stats
	// for the signal.
	OutcomeNoEvictablePod Outcome = "none-evictable"
	// OutcomeLocalStorage: pods over their own local-storage limits are
	// evicted; as in the kubelet, no threshold eviction happens in the
	// same pass, though thresholds are still evaluated.
	OutcomeLocalStorage Outcome = "local-storage"
)

// hardEvictionGracePeriodSeconds is the grace period of a hard eviction, as
// in the kubelet: short, but never 0, which the API server would read as a
// forced deletion.
const hardEvictionGracePeriodSeconds = 1

// defaultTerminationGracePeriodSeconds is what the API server fills in for a
// pod that sets none.
const defaultTerminationGracePeriodSeconds = 30

// Decision is the outcome of one pass, with everything needed to act on it
// and to explain it.
type Decision struct {
	Time    time.Time `json:"time"`
	Outcome Outcome   `json:"outcome"`
	// Reason says why, in a sentence, for the decision log.
	Reason string `json:"reason"`
	// Signal, Threshold and Observation are the starved signal the pass
	// acted on, when any threshold was actionable.
	Signal      signals.Signal        `json:"signal,omitempty"`
	Threshold   *thresholds.Threshold `json:"-"`
	Observation *signals.Observation  `json:"observation,omitempty"`
	Pod         *signals.Pod          `json:"pod,omitempty"`
	Hard        bool                  `json:"hard,omitempty"`
	GracePeriod int64                 `json:"gracePeriodSeconds,omitempty"`
	Message     string                `json:"message,omitempty"`
	Annotations map[string]string     `json:"annotations,omitempty"`
	// Predicted, when set, says the threshold was not met: time to
	// exhaustion acted on it early (DecidePredicted).
	Predicted  *Prediction           `json:"predicted,omitempty"`
	Candidates []ranking.Candidate   `json:"-"`
	Evaluation thresholds.Evaluation `json:"-"`
	// Fallbacks are the next evictable pods in rank order, for a soft
	// threshold only: when a PodDisruptionBudget refuses the eviction of
	// Pod, the loop moves on to them. A hard threshold puts the node first
	// and has none.
	Fallbacks []Eviction `json:"-"`
	// LocalStorage lists the pods over their own local-storage limits,
	// one violation per pod, checked every pass before the thresholds;
	// when it is not empty the outcome is OutcomeLocalStorage.
	LocalStorage []Violation `json:"localStorage,omitempty"`
}

// Eviction is one pod to evict and how.
type Eviction struct {
	Pod         *signals.Pod
	GracePeriod int64
	// Message is the Evicted event's text and the DisruptionTarget
	// condition's message, in the kubelet's words.
	Message     string
	Annotations map[string]string
}

// Request is what an Evicter is asked to do.
type Request struct {
	Signal signals.Signal
	// Decided is the time of the decision (Decision.Time), from which the
	// Evicter measures evictd_eviction_issue_latency_seconds.
	Decided time.Time
	// Hard says the node comes first: if the Eviction API refuses, the
	// Evicter deletes the pod with the same grace period.
	Hard bool
	Eviction
}

// Requests lists the evictions to try, in order: the chosen pod, then the
// fallbacks. Empty unless the outcome is OutcomeEvict; the local-storage
// evictions are LocalStorageRequests.
func (d Decision) Requests() []Request {
	if d.Outcome != OutcomeEvict {
		return nil
	}
	reqs := []Request{{Signal: d.Signal, Decided: d.Time, Hard: d.Hard, Eviction: Eviction{Pod: d.Pod, GracePeriod: d.GracePeriod, Message: d.Message, Annotations: d.Annotations}}}
	for _, e := range d.Fallbacks {
		reqs = append(reqs, Request{Signal: d.Signal, Decided: d.Time, Hard: d.Hard, Eviction: e})
	}
	return reqs
}

// LocalStorageRequests lists the local-storage evictions, one per
// offending pod; all of them are to be carried out.
func (d Decision) LocalStorageRequests() []Request {
	reqs := make([]Request, 0, len(d.LocalStorage))
	for _, v := range d.LocalStorage {
		r := v.Request()
		r.Decided = d.Time
		reqs = append(reqs, r)
	}
	return reqs
}

// DeciderConfig is what a Decider needs to know of the settings.
type DeciderConfig struct {
	Thresholds []thresholds.Threshold
	// TransitionPeriod is --eviction-pressure-transition-period.
	TransitionPeriod time.Duration
	// MaxObservationAge drops thresholds whose observation is older (0 = off).
	MaxObservationAge time.Duration
	// MaxPodGracePeriodSeconds is --eviction-max-pod-grace-period; negative
	// defers to the pod's own terminationGracePeriodSeconds.
	MaxPodGracePeriodSeconds int64
	// Layout is the node's filesystem layout; it decides the containerfs
	// thresholds and which disk usage counts for which signal.
	Layout signals.FsLayout
	// Exhaustion turns time-to-exhaustion decisions on (Predict); off
	// by default.
	Exhaustion ExhaustionConfig
	// LocalStorageByKubelet leaves the pods over their own local-storage
	// limits to the kubelet, whose localStorageCapacityIsolation evicts
	// them on every pass: no local-storage decision, and no disk usage
	// read for it. False: evictd evicts them, as the kubelet would. The
	// loop may change it from pass to pass (SetLocalStorageByKubelet).
	LocalStorageByKubelet bool
}

// Decider turns observations, pods and pod stats into a Decision. It holds
// the state thresholds need from pass to pass and touches nothing outside
// itself, so the loop and `evictd simulate` share it.
type Decider struct {
	cfg        DeciderConfig
	thresholds []thresholds.Threshold
	tracker    *thresholds.Tracker
}

// NewDecider returns a Decider with no history.
func NewDecider(cfg DeciderConfig) *Decider {
	return &Decider{
		cfg:        cfg,
		thresholds: thresholds.DeriveContainerFs(cfg.Thresholds, cfg.Layout),
		tracker:    thresholds.NewTracker(cfg.TransitionPeriod, cfg.MaxObservationAge),
	}
}

// Thresholds are the thresholds in force, containerfs ones included.
func (d *Decider) Thresholds() []thresholds.Threshold { return d.thresholds }

// SetLocalStorageByKubelet says whether the decisions from now on leave
// the pods over their local-storage limits to the kubelet.
func (d *Decider) SetLocalStorageByKubelet(by bool) { d.cfg.LocalStorageByKubelet = by }

// LocalStorageByKubelet says whether the decisions leave the pods over
// their local-storage limits to the kubelet.
func (d *Decider) LocalStorageByKubelet() bool { return d.cfg.LocalStorageByKubelet }

// Exhaustion are the time-to-exhaustion settings.
func (d *Decider) Exhaustion() ExhaustionConfig { return d.cfg.Exhaustion }

// Predict is the package's Predict with the Decider's thresholds and
// settings: the prediction to decide with (DecidePredicted), or nil.
func (d *Decider) Predict(now time.Time, ev thresholds.Evaluation, obs signals.Observations, reads []signals.Observation, release time.Duration) *Prediction {
	p, ok := Predict(d.cfg.Exhaustion, now, d.thresholds, ev, obs, reads, release)
	if !ok {
		return nil
	}
	return &p
}

// Evaluate updates the thresholds' state with a new set of observations
// without deciding on pods; Decide calls it, and the loop uses it alone when
// it cannot list pods.
func (d *Decider) Evaluate(now time.Time, obs signals.Observations) thresholds.Evaluation {
	return d.tracker.Evaluate(now, d.thresholds, obs)
}

// Decide runs one pass's decision: evaluate thresholds; then, as the
// kubelet does before looking at them, find the pods over their own
// local-storage limits, which are evicted instead of any threshold victim;
// otherwise pick the starved signal (memory first), rank the pods for it
// and choose the first one that may be evicted.
func (d *Decider) Decide(now time.Time, obs signals.Observations, pods []signals.Pod, stats map[string]signals.PodStats) Decision {
	return d.DecideEvaluated(now, d.Evaluate(now, obs), obs, pods, stats)
}

// Needs says which pod stats a decision on ev reads, so that the loop reads
// no more: disk usage, for the local-storage limits checked every pass as
// the kubelet checks them, and, when a threshold is actionable, the usage
// that ranks pods for the first of them (ranking.StatsFor). A threshold
// met but not actionable (waiting for its grace period, stale, held for
// its minimum reclaim) ranks no pod, so it needs no more. With the limits
// left to the kubelet, a pass with nothing actionable reads nothing; one
// that evicts still reads what the runtime gives with the disk usage, the
// containers' own usage its message names.
func (d *Decider) Needs(ev thresholds.Evaluation) signals.PodStatsKinds {
	if d.cfg.LocalStorageByKubelet && len(ev.Actionable) == 0 {
		return 0
	}
	return signals.PodDisk | d.RankNeeds(ev)
}

// RankNeeds is the part of Needs that ranks pods for ev's first
// actionable threshold, none when no threshold is actionable: a pod
// without those ranks as a pod without stats.
func (d *Decider) RankNeeds(ev thresholds.Evaluation) signals.PodStatsKinds {
	if len(ev.Actionable) == 0 {
		return 0
	}
	return ranking.StatsFor(ev.Actionable[0].Signal, d.cfg.Layout)
}

// DecideEvaluated is Decide on ev, the evaluation Evaluate returned for
// now and obs: the loop evaluates first, reads the pod stats Needs(ev)
// names, then decides. Given stats of those kinds it decides as Decide
// does given every kind.
func (d *Decider) DecideEvaluated(now time.Time, ev thresholds.Evaluation, obs signals.Observations, pods []signals.Pod, stats map[string]signals.PodStats) Decision {
	return d.DecidePredicted(now, ev, nil, obs, pods, stats)
}

// DecidePredicted is DecideEvaluated with p, when not nil, acted on as
// if its threshold were met (Prediction.Apply): the same ranking and
// hard grace period, the decision marked Predicted and its reason and
// message saying so. The decision's Evaluation stays ev, as observed;
// the stats to read are Needs(p.Apply(ev)). Pods over their own
// local-storage limits still come first, unless left to the kubelet.
func (d *Decider) DecidePredicted(now time.Time, ev thresholds.Evaluation, p *Prediction, obs signals.Observations, pods []signals.Pod, stats map[string]signals.PodStats) Decision {
	if !d.cfg.LocalStorageByKubelet {
		if vs := localStorageViolations(pods, stats, d.cfg.Layout); len(vs) > 0 {
			return localStorageDecision(now, ev, vs)
		}
	}
	if p == nil {
		return d.decide(now, ev, ev, nil, obs, pods, stats)
	}
	return d.decide(now, ev, p.Apply(ev), p, obs, pods, stats)
}

// localStorageDecision is the decision of a pass that found pods over
// their local-storage limits.
func localStorageDecision(now time.Time, ev thresholds.Evaluation, vs []Violation) Decision {
	reason := fmt.Sprintf("%d pod(s) over their local-storage limits, evicted before any threshold: %s (%s)",
		len(vs), vs[0].Pod.Ref(), vs[0].Signal)
	if len(ev.Actionable) > 0 {
		reason += fmt.Sprintf("; threshold %s waits for the next pass", thresholds.Format(ev.Actionable[0]))
	}
	return Decision{Time: now, Outcome: OutcomeLocalStorage, Reason: reason, Evaluation: ev, LocalStorage: vs}
}

// decide decides on acting, the evaluation with p's threshold (when p is
// set) made actionable; the decision keeps ev, as observed.
func (d *Decider) decide(now time.Time, ev, acting thresholds.Evaluation, p *Prediction, obs signals.Observations, pods []signals.Pod, stats map[string]signals.PodStats) Decision {
	dec := Decision{Time: now, Outcome: OutcomeNone, Evaluation: ev}
	if len(acting.Actionable) == 0 {
		dec.Reason = noActionReason(ev)
		return dec
	}
	th := acting.Actionable[0]
	o := obs[th.Signal]
	dec.Signal, dec.Threshold, dec.Observation, dec.Hard = th.Signal, &th, &o, th.Hard()
	met := fmt.Sprintf("%s is met (%s)", thresholds.Format(th), observedRaw(th, o))
	if p != nil && p.Threshold.Key() == th.Key() {
		dec.Predicted = p
		met = fmt.Sprintf("time to exhaustion: %s (available %s, release estimate %s + margin %s)", p.Words(), quantity(o.Available, signals.ResourceMemory), p.Release, p.Margin)
	}

	dec.Candidates = ranking.Rank(th.Signal, d.cfg.Layout, pods, stats)
	c, ok := ranking.FirstEvictable(dec.Candidates)
	if !ok {
		dec.Outcome = OutcomeNoEvictablePod
		dec.Reason = fmt.Sprintf("%s but no pod may be evicted: %d pods, all critical or none", met, len(pods))
		return dec
	}
	if ranking.ByUsage(th.Signal, d.cfg.Layout) && !anyMeasured(dec.Candidates) {
		// Pods without stats rank first, but when no pod has any (the
		// runtime is down, the cgroups unreadable) the pick would rest on
		// priority and name alone: evict none rather than a pod chosen for
		// no reason. The condition and taint still protect the node.
		dec.Outcome = OutcomeNoEvictablePod
		dec.Reason = fmt.Sprintf("%s but no pod has stats for it, so none can be told to use it: evicting none", met)
		return dec
	}
	dec.Outcome = OutcomeEvict
	e := d.eviction(th, o, c)
	dec.Pod, dec.GracePeriod, dec.Message, dec.Annotations = e.Pod, e.GracePeriod, e.Message, e.Annotations
	kind := "hard"
	if !th.Hard() {
		kind = "soft"
		first := true
		for _, next := range dec.Candidates {
			if next.Skip != "" {
				continue
			}
			if first { // the chosen pod
				first = false
				continue
			}
			dec.Fallbacks = append(dec.Fallbacks, d.eviction(th, o, next))
		}
	}
	dec.Reason = fmt.Sprintf("%s threshold %s met; %s ranks first (%s)", kind, thresholds.Format(th), c.Pod.Ref(), c.Key)
	if dec.Predicted != nil {
		dec.Message += p.Words() + "."
		dec.Reason = fmt.Sprintf("%s; %s ranks first (%s)", met, c.Pod.Ref(), c.Key)
	}
	return dec
}

// anyMeasured reports whether an evictable candidate has stats.
func anyMeasured(cands []ranking.Candidate) bool {
	for _, c := range cands {
		if c.Skip == "" && c.HasStats {
			return true
		}
	}
	return false
}

func (d *Decider) eviction(th thresholds.Threshold, o signals.Observation, c ranking.Candidate) Eviction {
	msg, ann := evictionMessage(th, o, c)
	return Eviction{Pod: c.Pod, GracePeriod: gracePeriod(th, c.Pod, d.cfg.MaxPodGracePeriodSeconds), Message: msg, Annotations: ann}
}

// observedRaw compares o with th in raw units for the decision log:
// "available 80 < 100", or "stall 35.5% > 20%".
func observedRaw(th thresholds.Threshold, o signals.Observation) string {
	if th.Operator == thresholds.GreaterThan {
		return fmt.Sprintf("stall %s > %s", signals.FormatStall(o.Available), thresholds.FormatValue(th))
	}
	return fmt.Sprintf("available %d < %d", o.Available, thresholds.Quantity(th.Value, o.Capacity))
}

// noActionReason explains a pass that evicts nothing.
func noActionReason(ev thresholds.Evaluation) string {
	switch {
	case len(ev.Stale) > 0:
		return fmt.Sprintf("%s met but its observation is not fresh; waiting for a new one", thresholds.Format(ev.Stale[0]))
	case len(ev.Waiting) > 0:
		th := ev.Waiting[0]
		return fmt.Sprintf("%s met since %s; waiting for its grace period %s",
			thresholds.Format(th), ev.FirstObservedAt[th.Key()].Format(time.RFC3339), th.GracePeriod)
	case len(ev.Reclaiming) > 0:
		return fmt.Sprintf("%s held until minimum reclaim is reached", thresholds.Format(ev.Reclaiming[0]))
	case len(ev.Local) > 0:
		return fmt.Sprintf("no threshold met: the memory stall is above %s but local (over its window the node reclaimed nothing for itself and kubepods reached no limit of its own): stall is not shortage",
			thresholds.Format(ev.Local[0]))
	}
	return "no threshold met"
}

// gracePeriod is the termination grace period an eviction gives the pod:
// 1 s for hard thresholds; for soft ones the smaller of
// --eviction-max-pod-grace-period and the pod's own, or the pod's own when
// the flag is negative (as the kubelet's help text promises); never below 1.
func gracePeriod(th thresholds.Threshold, pod *signals.Pod, maxPodGrace int64) int64 {
	if th.Hard() {
		return hardEvictionGracePeriodSeconds
	}
	own := int64(defaultTerminationGracePeriodSeconds)
	if pod.TerminationGracePeriodSeconds != nil {
		own = *pod.TerminationGracePeriodSeconds
	}
	g := own
	if maxPodGrace >= 0 && maxPodGrace < own {
		g = maxPodGrace
	}
	return max(g, hardEvictionGracePeriodSeconds)
}
