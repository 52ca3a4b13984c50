package manager

import (
	"time"

	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// MemoryShadows gives memory.available as the last observation computed it
// by every formula the node has (signals/host.MemorySource): shadows the
// loop exports and counts, and never acts on. The source computes them in
// its Observe, within the pass, so the loop reads them after collecting
// the observations, on its own goroutine.
type MemoryShadows interface {
	MemoryShadows() signals.MemoryShadows
}

// shadowState is what the loop keeps of the shadows between passes.
type shadowState struct {
	// lastErr is the last error of each formula, so that each is said once.
	lastErr map[signals.MemoryFormula]string
}

// exportShadows exports memory.available by every formula of this pass's
// observation, and counts each formula not in force that would have met a
// memory.available threshold while the observation in force met none:
// thresholds.Met on both, without minimum reclaim, so that a percentage
// is taken of each formula's own capacity. Shadows from another pass than
// this one (the source did not observe) are not exported, nor is any
// formula counted while memory.available could not be read.
func (m *Manager) exportShadows(now time.Time, obs signals.Observations) {
	if m.deps.Shadows == nil {
		return
	}
	if m.shadow.lastErr == nil {
		m.shadow.lastErr = map[signals.MemoryFormula]string{}
	}
	met := m.deps.Metrics
	sh := m.deps.Shadows.MemoryShadows()
	if !sh.Time.Equal(now) {
		sh.Shadows = nil
	}
	// Met leaves out the thresholds of signals without an observation:
	// given memory.available alone, it weighs its thresholds alone.
	ths := m.decider.Thresholds()
	metBy := func(o signals.Observation) bool {
		return len(thresholds.Met(ths, signals.Observations{signals.MemoryAvailable: o}, false)) > 0
	}
	inForce, read := obs[signals.MemoryAvailable]
	inForceMet := read && metBy(inForce)
	seen := map[signals.MemoryFormula]bool{}
	for _, s := range sh.Shadows {
		seen[s.Formula] = true
		m.sayShadowErr(s.Formula, s.Err)
		if s.Err != nil {
			met.ForgetMemoryShadow(s.Formula)
			continue
		}
		met.SetMemoryShadow(s.Formula, s.Observation.Available, s.Observation.Capacity)
		if s.Formula != sh.InForce && read {
			met.CountMemoryShadowPass(s.Formula, metBy(s.Observation) && !inForceMet)
		}
	}
	for _, f := range signals.MemoryFormulas() {
		if !seen[f] {
			m.sayShadowErr(f, nil)
			met.ForgetMemoryShadow(f)
		}
	}
}

// sayShadowErr logs a formula's error when it changes, and once when it
// clears.
func (m *Manager) sayShadowErr(f signals.MemoryFormula, err error) {
	last := m.shadow.lastErr[f]
	m.warnOnChange(&last, err, "memory.available by another formula could not be computed; only its shadow is missing")
	m.shadow.lastErr[f] = last
}
