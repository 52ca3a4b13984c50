package manager

import (
	"sync"
	"time"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// Time to exhaustion's part of the loop: the memory readings the growth
// is fitted to, the victims whose memory is not released yet, the
// thresholds crossed and not yet relieved, and the release estimate
// (decide.ReleaseEstimate) those releases feed.

const (
	// releaseFollow is how long after the decision a victim is looked
	// for: one not seen released by then counts no release.
	releaseFollow = 2 * time.Minute
	// releasedShare: a victim whose working set is down to this share of
	// what it was at the decision has released its memory.
	releasedShare = 4
	// maxReads bounds the readings kept, whatever their rate: two
	// seconds of two signals read every 10 ms
	// (wakeup.ReadsEvery) are 400.
	maxReads = 1000
)

// exhaustionState is owned by the loop, except the readings, which the
// fast poll's goroutine adds to (Read).
type exhaustionState struct {
	mu sync.Mutex
	// reads are the memory signals' readings within twice the growth
	// window: the fast poll's and the passes' observations.
	reads []signals.Observation
	// foreseen is, by signal, whether the fast poll's last reading
	// predicted exhaustion; the loop is woken when it starts to.
	foreseen map[signals.Signal]bool
	// release is the estimate in force, for Read.
	release time.Duration

	// Owned by the loop.
	estimate  decide.ReleaseEstimate
	releasing map[string]releasing
	crossed   map[thresholds.Key]time.Time
}

// releasing is a victim whose memory is not released yet.
type releasing struct {
	signal  signals.Signal
	decided time.Time
	// workingSet is its working set at the decision, -1 unknown.
	workingSet int64
}

func newExhaustionState() exhaustionState {
	return exhaustionState{
		foreseen:  map[signals.Signal]bool{},
		release:   decide.DefaultRelease,
		releasing: map[string]releasing{},
		crossed:   map[thresholds.Key]time.Time{},
	}
}

// memorySignal reports whether time to exhaustion reads sig.
func memorySignal(sig signals.Signal) bool {
	return sig == signals.MemoryAvailable || sig == signals.AllocatableMemoryAvailable
}

// Read takes one reading of the fast poll (wakeup.MemoryConfig.Reads),
// from its goroutine, while time to exhaustion is on; it never blocks on
// the loop. A reading that starts to predict exhaustion for a hard
// threshold not met yet wakes the loop, whose pass decides.
func (m *Manager) Read(o signals.Observation) {
	cfg := m.decider.Exhaustion()
	if !cfg.Enabled || !memorySignal(o.Signal) {
		return
	}
	t := &m.tte
	t.mu.Lock()
	t.keep(o.Time, o)
	_, foresees := decide.Predict(cfg, o.Time, m.decider.Thresholds(), thresholds.Evaluation{},
		signals.Observations{o.Signal: o}, t.reads, t.release)
	was := t.foreseen[o.Signal]
	t.foreseen[o.Signal] = foresees
	t.mu.Unlock()
	if foresees && !was {
		m.Wake()
	}
}

// keep adds the reading o at now and drops those older than twice the
// growth window, and the oldest beyond maxReads. Called with mu held.
func (t *exhaustionState) keep(now time.Time, o signals.Observation) {
	t.reads = append(t.reads, o)
	cut := 0
	for cut < len(t.reads) && (now.Sub(t.reads[cut].Time) > 2*decide.DefaultGrowthWindow || len(t.reads)-cut > maxReads) {
		cut++
	}
	if cut > 0 {
		t.reads = append(t.reads[:0], t.reads[cut:]...)
	}
}

// predict adds the pass's memory observations to the readings and says
// what time to exhaustion predicts at now, nil when nothing (or off).
func (m *Manager) predict(now time.Time, ev thresholds.Evaluation, obs signals.Observations) *decide.Prediction {
	if !m.decider.Exhaustion().Enabled {
		return nil
	}
	t := &m.tte
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, sig := range []signals.Signal{signals.MemoryAvailable, signals.AllocatableMemoryAvailable} {
		if o, ok := obs[sig]; ok {
			t.keep(now, o)
		}
	}
	return m.decider.Predict(now, ev, obs, t.reads, t.release)
}

// followExhaustion is the pass's bookkeeping after it acted: the
// releases and reliefs it sees, its victims to follow, and the predicted
// decision counted. kinds are the pod stats the pass read.
func (m *Manager) followExhaustion(now time.Time, obs signals.Observations, dec decide.Decision, acted Acted,
	pods []signals.Pod, stats map[string]signals.PodStats, kinds signals.PodStatsKinds) {
	t := &m.tte
	met := m.deps.Metrics
	listed := make(map[string]bool, len(pods))
	for _, p := range pods {
		listed[p.UID] = true
	}
	for uid, r := range t.releasing {
		if released(r, listed[uid], stats, uid, kinds) {
			met.ObserveRelease(r.signal, now.Sub(r.decided))
			t.estimate.Add(now.Sub(r.decided))
			delete(t.releasing, uid)
		} else if now.Sub(r.decided) > releaseFollow {
			delete(t.releasing, uid)
		}
	}
	for _, a := range acted.Attempts {
		if !a.Issued() || a.Request.Signal.Resource() != signals.ResourceMemory {
			continue
		}
		ws := int64(-1)
		if s, ok := stats[a.Request.Pod.UID]; ok && s.MemoryWorkingSet != nil {
			ws = *s.MemoryWorkingSet
		}
		t.releasing[a.Request.Pod.UID] = releasing{signal: a.Request.Signal, decided: a.Request.Decided, workingSet: ws}
	}

	ev := dec.Evaluation
	for _, th := range ev.Met {
		if _, ok := t.crossed[th.Key()]; !ok {
			at, ok := ev.FirstObservedAt[th.Key()]
			if !ok {
				at = now
			}
			t.crossed[th.Key()] = at
		}
	}
	for key, at := range t.crossed {
		if ev.IsMet(key) {
			continue
		}
		if _, ok := obs[key.Signal]; !ok {
			continue // no reading: not relieved, not met
		}
		kind := metrics.KindHard
		if key.Soft {
			kind = metrics.KindSoft
		}
		met.ObserveRelief(key.Signal, kind, now.Sub(at))
		delete(t.crossed, key)
	}

	if dec.Predicted != nil && dec.Outcome == decide.OutcomeEvict {
		met.IncPredicted(dec.Signal)
	}
	if m.decider.Exhaustion().Enabled {
		est := t.estimate.Estimate()
		met.SetReleaseEstimate(est)
		t.mu.Lock()
		t.release = est
		t.mu.Unlock()
	}
}

// released reports whether the victim r of pod uid has released its
// memory by this pass: the pod no longer listed, its cgroup gone from the
// memory stats the pass read, or its working set down to a
// releasedShare-th of what it was.
func released(r releasing, listed bool, stats map[string]signals.PodStats, uid string, kinds signals.PodStatsKinds) bool {
	if !listed {
		return true
	}
	if !kinds.Has(signals.PodMemory) || stats == nil {
		return false // the pass read no working set
	}
	s, ok := stats[uid]
	if !ok {
		return true
	}
	if s.MemoryWorkingSet == nil || r.workingSet <= 0 {
		return false
	}
	return *s.MemoryWorkingSet <= r.workingSet/releasedShare
}
