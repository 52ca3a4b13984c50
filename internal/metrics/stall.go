package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/signals"
)

// newStallGauge is evictd_memory_pressure_stall_ratio: the kernel's memory
// PSI averages as ratios (Prometheus' base unit, 0.355 for 35.5%), one
// series per PSI line (kind some or full) and window (10s, 60s, 300s). It
// is exported whether or not a threshold is set on the stall signals.
func newStallGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "evictd_memory_pressure_stall_ratio",
		Help: "Share of time, averaged over the window, in which some task (kind=some) or every non-idle task (kind=full) of the node was stalled waiting for memory (PSI, /proc/pressure/memory), at the last observation.",
	}, []string{"kind", "window"})
}

// setStall exports a stall signal's reading and reports whether sig was
// one; any other signal is left to the caller.
func (m *Metrics) setStall(sig signals.Signal, stall, capacity int64) bool {
	kind, window, ok := sig.StallLabels()
	if !ok {
		return false
	}
	if capacity > 0 {
		m.stall.WithLabelValues(kind, window).Set(float64(stall) / float64(capacity))
	}
	return true
}

// forgetStall deletes a stall signal's series; any other signal has none.
func (m *Metrics) forgetStall(sig signals.Signal) {
	if kind, window, ok := sig.StallLabels(); ok {
		m.stall.Delete(prometheus.Labels{"kind": kind, "window": window})
	}
}

// thresholdValue is a threshold as evictd_threshold exports it: a stall
// threshold (in 1/signals.StallScale) as a ratio, any other as is.
func thresholdValue(sig signals.Signal, value int64) float64 {
	if sig.Stall() {
		return float64(value) / signals.StallScale
	}
	return float64(value)
}
