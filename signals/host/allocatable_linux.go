package host

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/evictd/evictd/signals"
)

// AllocatableSource observes allocatableMemory.available: the memory limit
// of the pods' parent cgroup (kubepods or kubepods.slice under the cgroup
// root) minus that cgroup's working set. When kubepods has no limit the
// capacity is MemTotal minus the reserved memory.
//
// A missing kubepods cgroup is an error at every Observe, so the signal is
// missing (never zero) until the kubelet or runtime creates it; the source
// itself is always built, so it starts reporting as soon as kubepods exists.
type AllocatableSource struct {
	meminfo  string
	reserved int64
	cgroups  *cgroups
}

// NewAllocatableSource reads the kubepods cgroup that cfg names and, when it
// has no limit, MemTotal from cfg.ProcRoot.
func NewAllocatableSource(cfg Config) (*AllocatableSource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cg, err := newCgroups(cfg)
	if err != nil {
		return nil, err
	}
	return &AllocatableSource{
		meminfo:  filepath.Join(cfg.ProcRoot, "meminfo"),
		reserved: cfg.ReservedMemory,
		cgroups:  cg,
	}, nil
}

// Observe reads allocatableMemory.available, stamped with now.
func (s *AllocatableSource) Observe(ctx context.Context, now time.Time) ([]signals.Observation, error) {
	fail := func(err error) ([]signals.Observation, error) {
		return nil, fmt.Errorf("%s: %w", signals.AllocatableMemoryAvailable, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	v, err := s.cgroups.version()
	if err != nil {
		return fail(err)
	}
	kubepods := s.cgroups.memoryCgroup(v, s.cgroups.kubepods)
	capacity, limited, err := memoryLimit(v, kubepods.Dir)
	if err != nil {
		return fail(fmt.Errorf("kubepods cgroup: %w", err))
	}
	if !limited {
		total, err := readMemTotal(s.meminfo)
		if err != nil {
			return fail(err)
		}
		capacity = total - s.reserved
		if capacity <= 0 {
			return fail(fmt.Errorf("kubepods cgroup %s has no memory limit and reserved memory %d leaves nothing of MemTotal %d", kubepods.Dir, s.reserved, total))
		}
	}
	ws, err := kubepods.WorkingSet()
	if err != nil {
		return fail(fmt.Errorf("kubepods cgroup working set: %w", err))
	}
	return []signals.Observation{{
		Signal:    signals.AllocatableMemoryAvailable,
		Available: max(capacity-ws, 0),
		Capacity:  capacity,
		Time:      now,
	}}, nil
}
