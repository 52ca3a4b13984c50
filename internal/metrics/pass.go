package metrics

import (
	"time"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
)

// Pass is what the loop reports of one pass once it has ended.
type Pass struct {
	Trigger Trigger
	// Duration is the pass's time: observe, decide, act.
	Duration time.Duration
	// EvictionsInLastHour are the evictions issued in the sliding hour
	// before the end of the pass, the count --max-evictions-per-hour caps.
	EvictionsInLastHour int
}

// ObservePass records a pass: evictd_passes_total by trigger,
// evictd_pass_duration_seconds and evictd_evictions_in_last_hour.
func (m *Metrics) ObservePass(p Pass) {
	if m == nil {
		return
	}
	m.passes.WithLabelValues(string(p.Trigger)).Inc()
	m.passDur.Observe(seconds(p.Duration))
	m.lastHour.Set(float64(p.EvictionsInLastHour))
}

// Decision is a pass's decision about a starved signal.
type Decision struct {
	Signal  signals.Signal
	Outcome decide.Outcome // one of the outcomes in labels.go
	// At is when the decision was taken. Observed, when set, is the time
	// of the observation it rests on, and FirstMet, when set, when its
	// threshold was first observed met; the loop sets them for a pod
	// chosen.
	At, Observed, FirstMet time.Time
}

// ObserveDecision counts d in evictd_decisions_total and records, when
// known, how old its observation was (evictd_stats_age_seconds) and how
// long after the threshold was first met it came
// (evictd_detection_latency_seconds).
func (m *Metrics) ObserveDecision(d Decision) {
	if m == nil {
		return
	}
	sig := string(d.Signal)
	m.decisions.WithLabelValues(sig, string(d.Outcome)).Inc()
	if !d.Observed.IsZero() {
		m.statsAge.WithLabelValues(sig).Observe(seconds(d.At.Sub(d.Observed)))
	}
	if !d.FirstMet.IsZero() {
		m.detection.WithLabelValues(sig).Observe(seconds(d.At.Sub(d.FirstMet)))
	}
}

// ObserveReclaim records what one kind of node-level reclaim did:
// evictd_reclaim_total by kind and result (ReclaimFailed when a.Err is
// set), and what it freed in evictd_reclaimed_bytes_total (nothing added
// for a negative or zero amount: the filesystem filled up meanwhile; the
// kind's series exists from its first reclaim on).
func (m *Metrics) ObserveReclaim(a decide.ReclaimAction) {
	if m == nil {
		return
	}
	result := ReclaimOK
	if a.Err != nil {
		result = ReclaimFailed
	}
	m.reclaims.WithLabelValues(string(a.Kind), string(result)).Inc()
	m.reclaimed.WithLabelValues(string(a.Kind)).Add(float64(max(a.FreedBytes, 0)))
}
