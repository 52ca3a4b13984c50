package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/evictd/evictd/signals"
)

// MemorySource observes memory.available as kubelet 1.37 computes it from
// cAdvisor's root container: MemTotal minus the working set of the root
// cgroup, less the node's hugepage capacity (HugepageAwareEviction,
// signals.HugepageAware); with Config.DisableHugepageAwareEviction, as
// kubelet 1.36 computes it, without the hugepages.
//
// From the same reads it computes memory.available by the other formulas
// too (signals.MemoryShadows), which MemoryShadows returns until the next
// Observe.
type MemorySource struct {
	meminfo       string
	hugepageAware bool
	cgroups       *cgroups

	mu      sync.Mutex
	shadows signals.MemoryShadows
}

// NewMemorySource reads MemTotal and the hugepage capacity from
// cfg.ProcRoot and the root cgroup under cfg.CgroupMount.
func NewMemorySource(cfg Config) (*MemorySource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cg, err := newCgroups(cfg)
	if err != nil {
		return nil, err
	}
	return &MemorySource{
		meminfo:       filepath.Join(cfg.ProcRoot, "meminfo"),
		hugepageAware: !cfg.DisableHugepageAwareEviction,
		cgroups:       cg,
	}, nil
}

// Observe reads memory.available, stamped with now. MemTotal and the
// hugepage capacity come from one read of the meminfo file, at every
// pass: a pool resized while evictd runs counts from the next pass. The
// other formulas are computed from the same reads, and kept for
// MemoryShadows; a formula that cannot be computed is an error of its
// own shadow, never of the observation.
func (s *MemorySource) Observe(ctx context.Context, now time.Time) ([]signals.Observation, error) {
	o, reads, err := s.observe(ctx, now)
	shadows := signals.MemoryShadows{Time: now, InForce: s.inForce()}
	if err == nil {
		shadows.Shadows = memoryShadows(reads, o)
	}
	s.mu.Lock()
	s.shadows = shadows
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return []signals.Observation{o}, nil
}

// MemoryShadows returns memory.available by every formula the node has,
// as the last Observe computed it.
func (s *MemorySource) MemoryShadows() signals.MemoryShadows {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shadows
}

// inForce is the formula Observe's observation follows.
func (s *MemorySource) inForce() signals.MemoryFormula {
	if s.hugepageAware {
		return signals.FormulaWorkingSet137
	}
	return signals.FormulaWorkingSet136
}

// observe reads memory.available by the formula in force, and returns
// what it read for the other formulas.
func (s *MemorySource) observe(ctx context.Context, now time.Time) (signals.Observation, memoryReads, error) {
	fail := func(err error) (signals.Observation, memoryReads, error) {
		return signals.Observation{}, memoryReads{}, fmt.Errorf("%s: %w", signals.MemoryAvailable, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	meminfo, err := os.ReadFile(s.meminfo)
	if err != nil {
		return fail(fmt.Errorf("read %s: %w", s.meminfo, err))
	}
	capacity, err := parseMemTotal(s.meminfo, meminfo)
	if err != nil {
		return fail(err)
	}
	var hugePages int64
	if s.hugepageAware {
		if hugePages, err = parseHugetlb(s.meminfo, meminfo); err != nil {
			return fail(err)
		}
	}
	v, err := s.cgroups.version()
	if err != nil {
		return fail(err)
	}
	ws, err := s.cgroups.memoryCgroup(v, nil).WorkingSet()
	if err != nil {
		return fail(fmt.Errorf("root cgroup working set: %w", err))
	}
	o := signals.Observation{
		Signal: signals.MemoryAvailable,
		// The kubelet subtracts in uint64; a working set above MemTotal
		// (which cannot happen on a sane node) reads as nothing left.
		Available: max(capacity-ws, 0),
		Capacity:  capacity,
		Time:      now,
	}
	if o, err = signals.HugepageAware(o, hugePages); err != nil {
		return signals.Observation{}, memoryReads{}, err
	}
	reads := memoryReads{
		file: s.meminfo, meminfo: meminfo, memTotal: capacity, workingSet: ws,
		inForce: s.inForce(), now: now,
	}
	return o, reads, nil
}
