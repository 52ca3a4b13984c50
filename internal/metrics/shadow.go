package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/signals"
)

// memoryFormulas are the formula label's values: the ways of computing
// memory.available (signals.MemoryFormula), the one in force among them.
var memoryFormulas = []value[signals.MemoryFormula]{
	{v: signals.FormulaWorkingSet136, means: "MemTotal minus the root cgroup's working set, kubelet 1.36's"},
	{v: signals.FormulaWorkingSet137, means: "the same less the hugepage capacity, kubelet 1.37's"},
	{v: signals.FormulaMemAvailable, means: "MemAvailable of /proc/meminfo out of MemTotal"},
	{v: signals.FormulaSwapAware, means: "the formula in force plus SwapFree, out of its capacity plus SwapTotal; only where swap is on"},
}

// memoryShadow is the shadow memory.available families: the reading and
// capacity by every formula, and the passes in which a formula not in
// force would have met a memory.available threshold.
type memoryShadow struct {
	available *prometheus.GaugeVec
	capacity  *prometheus.GaugeVec
	met       *prometheus.CounterVec
}

func newMemoryShadow() memoryShadow {
	return memoryShadow{
		available: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "evictd_memory_shadow_available_bytes",
			Help: "memory.available at the last pass by each formula the node has: " + listed(memoryFormulas) + ". Only the formula in force (the one equal to evictd_signal_available_bytes{signal=\"memory.available\"}) is acted on. Removed while a formula cannot be computed.",
		}, []string{"formula"}),
		capacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "evictd_memory_shadow_capacity_bytes",
			Help: "The capacity of memory.available at the last pass by each formula, what a percentage threshold is taken of: " + listed(memoryFormulas) + ".",
		}, []string{"formula"}),
		met: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evictd_memory_shadow_threshold_met_passes_total",
			Help: "Passes in which memory.available by the formula would have met a memory.available threshold in force (hard or soft, a percentage of the formula's capacity) while the formula in force met none. Formulas: " + listed(memoryFormulas) + "; a series for each formula not in force from the first pass that computes it.",
		}, []string{"formula"}),
	}
}

// SetMemoryShadow exports memory.available by formula f.
func (m *Metrics) SetMemoryShadow(f signals.MemoryFormula, available, capacity int64) {
	if m == nil {
		return
	}
	m.shadow.available.WithLabelValues(string(f)).Set(float64(available))
	m.shadow.capacity.WithLabelValues(string(f)).Set(float64(capacity))
}

// ForgetMemoryShadow deletes f's reading and capacity, for a formula that
// could not be computed at this pass; its count of passes stays.
func (m *Metrics) ForgetMemoryShadow(f signals.MemoryFormula) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"formula": string(f)}
	m.shadow.available.Delete(l)
	m.shadow.capacity.Delete(l)
}

// CountMemoryShadowPass counts a pass of formula f, not the one in force:
// its series is created at 0, and met adds one.
func (m *Metrics) CountMemoryShadowPass(f signals.MemoryFormula, met bool) {
	if m == nil {
		return
	}
	c := m.shadow.met.WithLabelValues(string(f))
	if met {
		c.Inc()
	}
}
