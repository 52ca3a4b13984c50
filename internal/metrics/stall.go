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

// newStallLocalGauge is evictd_memory_pressure_stall_local: 1 while the
// last reading of a stall average was local (not corroborated as the
// node's: no reclaim for the node, kubepods at no limit of its own, over its
// window), so its thresholds are not met; 0 while it was the node's.
func newStallLocalGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "evictd_memory_pressure_stall_local",
		Help: "1 when the last reading of the memory stall average (kind, window) was local: over its window the kernel reclaimed no memory for the node as a whole (/proc/vmstat pgscan_kswapd + pgscan_direct) and kubepods reached no limit of its own (memory.events.local high/max, or memory.failcnt on cgroup v1), so cgroups held at their own limits stalled and no stall threshold is met on it; 0 when the stall was the node's.",
	}, []string{"kind", "window"})
}

// SetStallLocal exports whether sig's last reading was a local stall; any
// other signal is ignored.
func (m *Metrics) SetStallLocal(sig signals.Signal, local bool) {
	if m == nil {
		return
	}
	kind, window, ok := sig.StallLabels()
	if !ok {
		return
	}
	v := 0.0
	if local {
		v = 1
	}
	m.locality.WithLabelValues(kind, window).Set(v)
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
		m.locality.Delete(prometheus.Labels{"kind": kind, "window": window})
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
