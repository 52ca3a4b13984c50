package signals

import "time"

// MemoryFormula names one way of computing memory.available. evictd acts on
// one of them (the formula in force: kubelet 1.37's, or 1.36's with
// HugepageAwareEviction off) and computes the others alongside, from the
// same reads, as shadows that are exported and never acted on.
type MemoryFormula string

// The formulas of memory.available (docs/METRICS.md, "Shadow
// memory.available"). Each yields an available amount out of a capacity,
// as an Observation of MemoryAvailable, so that a threshold compares with
// it as with the one in force.
const (
	// FormulaWorkingSet136 is kubelet 1.36's: available = MemTotal − the
	// root cgroup's working set (0 at least); capacity = MemTotal.
	FormulaWorkingSet136 MemoryFormula = "working-set-1.36"
	// FormulaWorkingSet137 is kubelet 1.37's: FormulaWorkingSet136 less
	// the node's hugepage capacity (HugepageAware).
	FormulaWorkingSet137 MemoryFormula = "working-set-1.37"
	// FormulaMemAvailable is the kernel's estimate: available =
	// MemAvailable of /proc/meminfo; capacity = MemTotal.
	FormulaMemAvailable MemoryFormula = "memavailable"
	// FormulaSwapAware counts swap as memory, where swap is on (SwapTotal
	// > 0): available = the formula in force's available + SwapFree;
	// capacity = its capacity + SwapTotal. The working set's pages in swap
	// (SwapTotal − SwapFree) are thereby counted as used, the free swap as
	// available, as KEP-2400 proposes ("the pods' accessible swap as
	// additional memory capacity"), with every byte of swap taken as
	// accessible.
	FormulaSwapAware MemoryFormula = "swap-aware"
)

// MemoryFormulas lists every formula in the order evictd reports them.
func MemoryFormulas() []MemoryFormula {
	return []MemoryFormula{FormulaWorkingSet136, FormulaWorkingSet137, FormulaMemAvailable, FormulaSwapAware}
}

// MemoryShadow is memory.available by one formula at one pass: an
// observation of MemoryAvailable, or the error that kept this formula,
// and this formula alone, from being computed.
type MemoryShadow struct {
	Formula     MemoryFormula
	Observation Observation
	Err         error
}

// MemoryShadows are memory.available by every formula that exists on the
// node (no FormulaSwapAware without swap), computed at one pass from the
// reads of the observation in force.
type MemoryShadows struct {
	// Time is the pass's, the now the source observed at; zero before the
	// first pass.
	Time time.Time
	// InForce is the formula evictd acts on, whose observation is the
	// memory.available the thresholds are compared with.
	InForce MemoryFormula
	// Shadows holds one entry per formula, in MemoryFormulas order, the
	// one in force included; none when the reads the formulas share (the
	// meminfo file, MemTotal, the root cgroup's working set) failed.
	Shadows []MemoryShadow
}
