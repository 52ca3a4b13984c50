package thresholds

import (
	"time"

	"github.com/evictd/evictd/signals"
)

// PressureState is one kind of node pressure after a pass: what the node
// condition and taint for it should say.
type PressureState struct {
	// Active is true while a threshold of this kind is met, ignoring grace
	// periods and counting minimum reclaim, and until the transition period
	// has passed since that was last so.
	Active bool
	// Changed is true when Active differs from the previous pass (or, on
	// the first pass, when it is true): the pass at which to emit an event.
	Changed bool
	// Since is when Active last changed: the condition's
	// lastTransitionTime. Zero while the pressure has never been active.
	Since time.Time
	// LastObservedAt is the last pass at which a threshold of this kind was
	// met; zero if none ever was. Active holds until LastObservedAt plus
	// the transition period.
	LastObservedAt time.Time
}

// Evaluation is what one pass of Tracker.Evaluate found. The slices hold
// copies of the thresholds passed in, in their order, except Actionable.
type Evaluation struct {
	// Met are the thresholds met now, ignoring grace periods: those whose
	// threshold exceeds the available amount, and those that had satisfied
	// their grace period on the previous pass and have not yet recovered
	// past threshold + minimum reclaim (reference §3 steps 7–8).
	Met []Threshold
	// Reclaiming are the thresholds in Met only because of minimum reclaim:
	// available is at or above the threshold, but below threshold + minimum
	// reclaim.
	Reclaiming []Threshold
	// Waiting are the thresholds in Met whose grace period has not elapsed.
	Waiting []Threshold
	// Actionable are the thresholds in Met whose grace period has elapsed and
	// whose observation is fresh: what to evict for, most urgent first
	// (SortByPriority: memory, then disk, then PIDs; hard before soft).
	Actionable []Threshold
	// Stale are the thresholds in Met whose grace period has elapsed but
	// whose observation is not fresh: its time has not advanced since the
	// previous pass (or is zero), or it is older than the maximum
	// observation age. They count for pressure, never for eviction.
	Stale []Threshold
	// Local are the stall thresholds whose stall is above their value but
	// local (signals.Observation.Local: not corroborated as the node's),
	// which are therefore not met: stall is not shortage. They set no
	// pressure and evict nothing; a grace period under way restarts.
	Local []Threshold
	// Missing are the thresholds whose signal has no observation this pass.
	// As in the kubelet they count as not met: they observe no pressure
	// (an active one is still held for the transition period) and their
	// grace timer restarts.
	Missing []Threshold
	// FirstObservedAt holds, for each threshold in Met, when it was first
	// met without interruption. The map belongs to the caller.
	FirstObservedAt map[Key]time.Time
	// Pressure holds the state of every kind of node pressure.
	Pressure map[signals.Pressure]PressureState
}

// GraceEnds returns when th (a threshold in Met) satisfies its grace period,
// and false when th is not in Met.
func (e Evaluation) GraceEnds(th Threshold) (time.Time, bool) {
	at, ok := e.FirstObservedAt[th.Key()]
	if !ok {
		return time.Time{}, false
	}
	return at.Add(th.GracePeriod), true
}

// IsMet reports whether the threshold of key is in Met: met now, or held
// for its minimum reclaim. Its leaving Met is the relief the flight
// records and evictd_pressure_relief_seconds measure.
func (e Evaluation) IsMet(key Key) bool {
	for _, th := range e.Met {
		if th.Key() == key {
			return true
		}
	}
	return false
}

// Tracker carries threshold state from one pass to the next: when each
// threshold was first met, which ones had satisfied their grace period (for
// minimum reclaim), when each pressure was last observed, and the time of
// each signal's previous observation. It is owned by one goroutine, the
// loop's, and has no lock.
type Tracker struct {
	transitionPeriod  time.Duration
	maxObservationAge time.Duration

	firstObservedAt map[Key]time.Time
	graceMet        map[Key]bool
	pressure        map[signals.Pressure]PressureState
	lastObserved    map[signals.Signal]time.Time
	// lastNow is the time of the previous pass; a pass before it means
	// the clock stepped back.
	lastNow time.Time
}

// NewTracker returns a Tracker with no history. transitionPeriod is
// --eviction-pressure-transition-period (the kubelet's default is 5m; a
// negative value counts as 0). maxObservationAge > 0 also makes an
// observation older than that at the time of the pass stale; 0 turns that
// check off.
func NewTracker(transitionPeriod, maxObservationAge time.Duration) *Tracker {
	return &Tracker{
		transitionPeriod:  max(transitionPeriod, 0),
		maxObservationAge: max(maxObservationAge, 0),
		firstObservedAt:   make(map[Key]time.Time),
		graceMet:          make(map[Key]bool),
		pressure:          make(map[signals.Pressure]PressureState, len(signals.Pressures())),
		lastObserved:      make(map[signals.Signal]time.Time),
	}
}

// Evaluate runs steps 7 to 15 of the kubelet's synchronize (reference §3)
// for the pass at now, and remembers what the next pass needs:
//
//  1. thresholds met now, ignoring grace periods;
//  2. plus the thresholds that had satisfied their grace period last pass
//     and are still met with their minimum reclaim added;
//  3. first-observed times: kept for thresholds still met, now for new ones,
//     forgotten for the others (so a threshold that stops being met for one
//     pass restarts its grace period);
//  4. pressures: observed now when any of their thresholds is met, active
//     until the transition period has passed since last observed;
//  5. thresholds whose grace period has elapsed (hard ones at once);
//  6. of those, the ones whose observation is fresh are actionable: its
//     time is after the previous pass's observation of that signal (the
//     kubelet's thresholdsUpdatedStats) and, with a maximum observation age,
//     not older than that at now.
//
// Evaluate does not modify ths or obs.
//
// A now before the previous pass's means the clock stepped back; see
// stepBack for how the remembered times follow it.
func (t *Tracker) Evaluate(now time.Time, ths []Threshold, obs signals.Observations) Evaluation {
	if !t.lastNow.IsZero() && now.Before(t.lastNow) {
		t.stepBack(now, t.lastNow.Sub(now))
	}
	t.lastNow = now
	ev := Evaluation{
		FirstObservedAt: make(map[Key]time.Time, len(t.firstObservedAt)+1),
		Pressure:        make(map[signals.Pressure]PressureState, len(signals.Pressures())),
		Met:             make([]Threshold, 0, len(ths)),
	}
	for _, th := range ths {
		o, ok := obs[th.Signal]
		switch {
		case !ok:
			ev.Missing = append(ev.Missing, th)
		case setAside(th, o):
			ev.Local = append(ev.Local, th)
		case isMet(th, o, false):
			ev.Met = append(ev.Met, th)
		case t.graceMet[th.Key()] && isMet(th, o, true):
			ev.Met = append(ev.Met, th)
			ev.Reclaiming = append(ev.Reclaiming, th)
		}
	}

	for _, th := range ev.Met {
		at, ok := t.firstObservedAt[th.Key()]
		if !ok {
			at = now
		}
		ev.FirstObservedAt[th.Key()] = at
	}
	for k := range t.firstObservedAt {
		if _, ok := ev.FirstObservedAt[k]; !ok {
			delete(t.firstObservedAt, k)
		}
	}
	for k, at := range ev.FirstObservedAt {
		t.firstObservedAt[k] = at
	}

	for _, p := range signals.Pressures() {
		ev.Pressure[p] = t.updatePressure(p, now, ev.Met)
	}

	// Waiting, Actionable and Stale split Met: one array holds all three.
	n := len(ev.Met)
	split := make([]Threshold, 3*n)
	ev.Waiting, ev.Actionable, ev.Stale = split[:0:n], split[n:n:2*n], split[2*n:2*n]
	clear(t.graceMet)
	for _, th := range ev.Met {
		if !graceElapsed(th, ev.FirstObservedAt[th.Key()], now) {
			ev.Waiting = append(ev.Waiting, th)
			continue
		}
		t.graceMet[th.Key()] = true
		if t.fresh(now, th.Signal, obs[th.Signal]) {
			ev.Actionable = append(ev.Actionable, th)
		} else {
			ev.Stale = append(ev.Stale, th)
		}
	}
	SortByPriority(ev.Actionable)

	// Remember each signal's latest observation time. A signal missing from
	// this pass keeps its previous time, so an old reading that comes back
	// later is still recognised as old. A time after now (before a clock
	// step) is not kept: it would make every reading until the clock
	// catches up with it look old.
	for sig, o := range obs {
		if !o.Time.After(now) {
			t.lastObserved[sig] = o.Time
		}
	}
	return ev
}

// updatePressure records the pass at now for the pressure p and returns
// its new state.
func (t *Tracker) updatePressure(p signals.Pressure, now time.Time, met []Threshold) PressureState {
	st := t.pressure[p]
	observed := false
	for _, th := range met {
		if th.Signal.Pressure() == p {
			observed = true
			break
		}
	}
	if observed {
		st.LastObservedAt = now
	}
	// Met now is always active, even with a zero transition period (where
	// the kubelet's `now - last < period` would never be true).
	active := observed || (!st.LastObservedAt.IsZero() && now.Sub(st.LastObservedAt) < t.transitionPeriod)
	st.Changed = active != st.Active
	if st.Changed {
		st.Since = now
	}
	st.Active = active
	t.pressure[p] = st
	return st
}

// stepBack moves the remembered times back by the step, as measured from
// the previous pass (back), so that the durations measured across it count
// no time for the step: the grace periods and the transition periods
// already under way keep what they had run and run on from now, never
// ending early, since the measured step is never less than the real one
// (the real time between the two passes is in it).
//
// Observations taken before the step cannot be ordered against those taken
// after it by their times, so the previous observation times that now
// precedes are forgotten: the first reading after the step is fresh, and a
// reading from before the step, whose time is after now, is stale (see
// fresh).
//
// With Go's monotonic clock readings (time.Now) a wall-clock step does not
// move now backwards at all; this is for times without them: a fake clock,
// a snapshot, times that went through a serialisation.
func (t *Tracker) stepBack(now time.Time, back time.Duration) {
	for k, at := range t.firstObservedAt {
		t.firstObservedAt[k] = at.Add(-back)
	}
	for p, st := range t.pressure {
		if !st.LastObservedAt.IsZero() {
			st.LastObservedAt = st.LastObservedAt.Add(-back)
		}
		if !st.Since.IsZero() {
			st.Since = st.Since.Add(-back)
		}
		t.pressure[p] = st
	}
	for sig, at := range t.lastObserved {
		if at.After(now) {
			delete(t.lastObserved, sig)
		}
	}
}

// graceElapsed reports whether th, met since first, has satisfied its grace
// period at now. Thresholds without a grace period act at once, whatever
// the clock says.
func graceElapsed(th Threshold, first, now time.Time) bool {
	return th.GracePeriod <= 0 || now.Sub(first) >= th.GracePeriod
}

// fresh reports whether o, the observation of sig, may trigger an
// eviction. An observation stamped after now is not: it was taken before
// the clock stepped back (or by a clock ahead of the loop's), and its age
// cannot be known.
func (t *Tracker) fresh(now time.Time, sig signals.Signal, o signals.Observation) bool {
	if o.Time.IsZero() || o.Time.After(now) {
		return false
	}
	if prev, ok := t.lastObserved[sig]; ok && !o.Time.After(prev) {
		return false
	}
	return t.maxObservationAge == 0 || now.Sub(o.Time) <= t.maxObservationAge
}
