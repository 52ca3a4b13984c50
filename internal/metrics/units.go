package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/signals"
)

// unit is what a signal's quantity counts: evictd exports each signal's
// reading and thresholds in the families of its unit, so that no sum or
// panel ever adds bytes to inodes.
type unit string

// The units of the signals.
const (
	unitBytes  unit = "bytes"
	unitInodes unit = "inodes"
	unitPIDs   unit = "pids"
	// unitRatio is the stall signals': their reading goes to
	// evictd_memory_pressure_stall_ratio, their thresholds to
	// evictd_threshold_ratio.
	unitRatio unit = "ratio"
)

// units lists the units in the order New registers their families.
var units = []unit{unitBytes, unitInodes, unitPIDs, unitRatio}

// unitOf is sig's unit, from what evicting a pod frees for it.
func unitOf(sig signals.Signal) unit {
	if sig.Stall() {
		return unitRatio
	}
	switch sig.Resource() {
	case signals.ResourceInodes:
		return unitInodes
	case signals.ResourcePIDs:
		return unitPIDs
	default:
		return unitBytes
	}
}

// signalsIn lists the signals whose unit is u, in signals.All's order.
func signalsIn(u unit) []signals.Signal {
	var out []signals.Signal
	for _, s := range signals.All() {
		if unitOf(s) == u {
			out = append(out, s)
		}
	}
	return out
}

// signalList writes the signals of u as HELP lists them.
func signalList(u unit) string {
	var parts []string
	for _, s := range signalsIn(u) {
		parts = append(parts, string(s))
	}
	return strings.Join(parts, ", ")
}

// unitGauges are the families of one unit: the reading and capacity of its
// signals (none for unitRatio, whose reading is the stall ratio) and their
// thresholds.
type unitGauges struct {
	available, capacity, threshold *prometheus.GaugeVec
}

// newUnitGauges creates the families of every unit:
// evictd_signal_available_<unit>, evictd_signal_capacity_<unit> and
// evictd_threshold_<unit>, each HELP naming the signals it carries.
func newUnitGauges() map[unit]*unitGauges {
	what := map[unit]string{
		unitBytes:  "in bytes",
		unitInodes: "in inodes",
		unitPIDs:   "in process IDs",
		unitRatio:  "as a stall ratio (0-1)",
	}
	out := map[unit]*unitGauges{}
	for _, u := range units {
		list := signalList(u)
		g := &unitGauges{
			threshold: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Name: "evictd_threshold_" + string(u),
				Help: "Eviction threshold " + what[u] + " (percentages resolved against capacity), by signal: " + list + "; and kind: hard, soft. " + thresholdMeaning(u),
			}, []string{"signal", "kind"}),
		}
		if u != unitRatio {
			g.available = prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Name: "evictd_signal_available_" + string(u),
				Help: "Amount of the signal's resource available at the last observation, " + what[u] + ", by signal: " + list + ".",
			}, []string{"signal"})
			g.capacity = prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Name: "evictd_signal_capacity_" + string(u),
				Help: "Capacity of the signal's resource at the last observation, " + what[u] + ", by signal: " + list + ".",
			}, []string{"signal"})
		}
		out[u] = g
	}
	return out
}

// thresholdMeaning says when a threshold of unit u is met.
func thresholdMeaning(u unit) string {
	if u == unitRatio {
		return "The node is under pressure while the signal's evictd_memory_pressure_stall_ratio (memory.pressure.<kind>.avg<window>) is above it."
	}
	return "The node is under pressure while evictd_signal_available_" + string(u) + " (matched on signal) is below it."
}

// registerUnits puts the unit families on reg, sharing collectors already
// there.
func (m *Metrics) registerUnits(reg prometheus.Registerer, errs *[]error) {
	for _, u := range units {
		g := m.byUnit[u]
		if g.available != nil {
			g.available = registerOrShare(reg, g.available, errs)
			g.capacity = registerOrShare(reg, g.capacity, errs)
		}
		g.threshold = registerOrShare(reg, g.threshold, errs)
	}
}

// setUnitObservation exports a reading of a signal that is not a stall
// signal in its unit's families.
func (m *Metrics) setUnitObservation(sig signals.Signal, available, capacity int64) {
	g := m.byUnit[unitOf(sig)]
	if g.available == nil {
		return
	}
	g.available.WithLabelValues(string(sig)).Set(float64(available))
	g.capacity.WithLabelValues(string(sig)).Set(float64(capacity))
}

// forgetUnit deletes sig's series from its unit's families.
func (m *Metrics) forgetUnit(sig signals.Signal) {
	g := m.byUnit[unitOf(sig)]
	l := prometheus.Labels{"signal": string(sig)}
	if g.available != nil {
		g.available.Delete(l)
		g.capacity.Delete(l)
	}
	g.threshold.DeletePartialMatch(l)
}
