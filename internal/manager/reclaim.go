package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// reclaimFirst runs node-level reclaim for a disk decision and observes
// again. When every threshold is clear with its minimum reclaim (the
// kubelet's rule, which checks all thresholds, not only the one acted on),
// the decision becomes OutcomeReclaimed. When reclaim removed something and
// a threshold is still met, the decision becomes OutcomeReclaimSettling
// until decide.ReclaimSettle has passed; the pass after that reclaims and decides
// again, and evicts if a threshold is still met, without another wait, so
// a runtime that always has something to remove cannot hold evictions off.
func (m *Manager) reclaimFirst(ctx context.Context, dec decide.Decision) decide.Decision {
	if m.deps.Reclaimer == nil || dec.Outcome != decide.OutcomeEvict && dec.Outcome != decide.OutcomeNoEvictablePod {
		m.settleUntil = time.Time{}
		return dec
	}
	if !decide.Reclaims(dec.Signal) {
		m.settleUntil = time.Time{}
		return dec
	}
	mayWait := true
	if !m.settleUntil.IsZero() {
		if now := m.deps.Clock.Now(); now.Before(m.settleUntil) {
			return settling(dec, m.settleUntil)
		}
		m.settleUntil, mayWait = time.Time{}, false
	}
	log := m.deps.Log.With("signal", dec.Signal)
	actions, err := m.deps.Reclaimer.Reclaim(ctx, dec.Signal, m.cfg.Decider.Layout)
	errs := []error{err}
	for _, a := range actions {
		if a.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.Kind, a.Err))
		}
		m.deps.Metrics.ObserveReclaim(a)
		if a.Err == nil || a.Removed > 0 || a.FreedBytes != 0 {
			log.Info("reclaimed", "kind", a.Kind, "removed", a.Removed, "freedBytes", a.FreedBytes)
		}
	}
	// A runtime that stays down fails every pass under disk pressure: say
	// it once, and again when it changes or clears; the metric counts each.
	m.warnOnChange(&m.lastReclaimErr, errors.Join(errs...), "node-level reclaim failed")
	now := m.deps.Clock.Now()
	obs, err := signals.Collect(ctx, now, m.deps.Sources)
	m.warnOnChange(&m.lastRecollectErr, err, "some signals could not be read after reclaim")
	signals.DeriveContainerFs(obs, m.cfg.Decider.Layout)
	if o, ok := obs[dec.Signal]; !ok || o.Time.Before(now) {
		// Without a fresh reading of the starved signal, reclaim cannot be
		// shown to have been enough: keep the decision.
		return dec
	}
	if still := thresholds.Met(m.decider.Thresholds(), obs, true); len(still) > 0 {
		if removed(actions) > 0 && mayWait {
			m.settleUntil = now.Add(decide.ReclaimSettle)
			log.Info("reclaim removed some, but not yet enough; deciding again once the runtime has had time to free their space",
				"stillMet", thresholds.Format(still[0]), "removed", removed(actions), "at", m.settleUntil.UTC().Format(time.RFC3339))
			return settling(dec, m.settleUntil)
		}
		log.Info("reclaim was not enough; evicting", "stillMet", thresholds.Format(still[0]))
		return dec
	}
	dec.Outcome = decide.OutcomeReclaimed
	dec.Reason = fmt.Sprintf("node-level reclaim brought %s back above its threshold and minimum reclaim at %s; no pod evicted",
		dec.Signal, now.Format(time.RFC3339))
	dec.Pod, dec.Fallbacks, dec.Message, dec.Annotations, dec.GracePeriod = nil, nil, "", nil, 0
	return dec
}

// settling turns a disk decision into OutcomeReclaimSettling until until.
func settling(dec decide.Decision, until time.Time) decide.Decision {
	dec.Outcome = decide.OutcomeReclaimSettling
	dec.Reason = fmt.Sprintf("node-level reclaim removed containers, sandboxes or images and %s is still met; the runtime may not have freed their space yet, so no pod is evicted before %s",
		dec.Signal, until.UTC().Format(time.RFC3339))
	dec.Pod, dec.Fallbacks, dec.Message, dec.Annotations, dec.GracePeriod = nil, nil, "", nil, 0
	return dec
}

// removed counts what reclaim removed, of every kind.
func removed(actions []decide.ReclaimAction) int {
	n := 0
	for _, a := range actions {
		n += a.Removed
	}
	return n
}
