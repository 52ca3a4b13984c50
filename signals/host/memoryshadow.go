package host

import (
	"fmt"
	"time"

	"github.com/evictd/evictd/signals"
)

// memoryReads are what one Observe of the memory source read, which every
// formula of memory.available shares: the meminfo file's content (read
// once), its MemTotal, the root cgroup's working set.
type memoryReads struct {
	file       string // the meminfo file's path, which errors name
	meminfo    []byte
	memTotal   int64
	workingSet int64
	inForce    signals.MemoryFormula
	now        time.Time
}

// memoryShadows computes memory.available by every formula the node has,
// in signals.MemoryFormulas order, from r and inForce, the observation by
// the formula in force (r.inForce), which is its own shadow as it is. A
// formula that cannot be computed (a garbled or missing meminfo line of
// its own) holds the error, naming the file and the value; the others
// are unaffected. There is no swap-aware shadow while SwapTotal is 0.
func memoryShadows(r memoryReads, inForce signals.Observation) []signals.MemoryShadow {
	var out []signals.MemoryShadow
	for _, f := range signals.MemoryFormulas() {
		if f == r.inForce {
			out = append(out, signals.MemoryShadow{Formula: f, Observation: inForce})
			continue
		}
		o, ok, err := r.formula(f, inForce)
		if !ok {
			continue
		}
		if err == nil {
			err = o.Check()
		}
		if err != nil {
			out = append(out, signals.MemoryShadow{Formula: f, Err: fmt.Errorf("%s by %s: %w", signals.MemoryAvailable, f, err)})
			continue
		}
		out = append(out, signals.MemoryShadow{Formula: f, Observation: o})
	}
	return out
}

// formula computes memory.available by f; ok is false when f does not
// exist on the node (swap-aware without swap).
func (r memoryReads) formula(f signals.MemoryFormula, inForce signals.Observation) (o signals.Observation, ok bool, err error) {
	ws136 := signals.Observation{
		Signal:    signals.MemoryAvailable,
		Available: max(r.memTotal-r.workingSet, 0),
		Capacity:  r.memTotal,
		Time:      r.now,
	}
	switch f {
	case signals.FormulaWorkingSet136:
		return ws136, true, nil
	case signals.FormulaWorkingSet137:
		hugePages, err := parseHugetlb(r.file, r.meminfo)
		if err != nil {
			return o, true, err
		}
		o, err = signals.HugepageAware(ws136, hugePages)
		return o, true, err
	case signals.FormulaMemAvailable:
		o, err = r.memAvailable()
		return o, true, err
	case signals.FormulaSwapAware:
		return r.swapAware(inForce)
	}
	return o, false, nil
}

// memAvailable is MemAvailable out of MemTotal. A kernel before 3.14
// writes no MemAvailable line: an error of this formula.
func (r memoryReads) memAvailable() (signals.Observation, error) {
	v, ok, err := parseMeminfoKB(r.file, r.meminfo, "MemAvailable")
	switch {
	case err != nil:
		return signals.Observation{}, err
	case !ok:
		return signals.Observation{}, fmt.Errorf("parse %s: no MemAvailable line (a kernel before 3.14?)", r.file)
	case v > r.memTotal:
		return signals.Observation{}, fmt.Errorf("parse %s: MemAvailable %d bytes is above MemTotal %d bytes", r.file, v, r.memTotal)
	}
	return signals.Observation{Signal: signals.MemoryAvailable, Available: v, Capacity: r.memTotal, Time: r.now}, nil
}

// swapAware is the observation in force with swap counted as memory:
// SwapFree added to its available, SwapTotal to its capacity, so that the
// swap in use (SwapTotal − SwapFree, the pages swapped out) counts as
// used. ok is false while SwapTotal is 0 (no swap on).
func (r memoryReads) swapAware(inForce signals.Observation) (o signals.Observation, ok bool, err error) {
	total, found, err := parseMeminfoKB(r.file, r.meminfo, "SwapTotal")
	switch {
	case err != nil:
		return o, true, err
	case !found || total == 0:
		// Every kernel writes SwapTotal, 0 without swap; a file without
		// it (a test tree, a container's made-up meminfo) has no swap to
		// tell of.
		return o, false, nil
	}
	free, found, err := parseMeminfoKB(r.file, r.meminfo, "SwapFree")
	switch {
	case err != nil:
		return o, true, err
	case !found:
		return o, true, fmt.Errorf("parse %s: SwapTotal %d bytes but no SwapFree line", r.file, total)
	case free > total:
		return o, true, fmt.Errorf("parse %s: SwapFree %d bytes is above SwapTotal %d bytes", r.file, free, total)
	}
	o = inForce
	o.Available = signals.AddSat(o.Available, free)
	o.Capacity = signals.AddSat(o.Capacity, total)
	return o, true, nil
}
