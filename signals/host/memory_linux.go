package host

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/evictd/evictd/signals"
)

// MemorySource observes memory.available: MemTotal minus the working set of
// the root cgroup, as the kubelet computes it from cAdvisor's root container.
type MemorySource struct {
	meminfo string
	cgroups *cgroups
}

// NewMemorySource reads MemTotal from cfg.ProcRoot and the root cgroup
// under cfg.CgroupMount.
func NewMemorySource(cfg Config) (*MemorySource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cg, err := newCgroups(cfg)
	if err != nil {
		return nil, err
	}
	return &MemorySource{meminfo: filepath.Join(cfg.ProcRoot, "meminfo"), cgroups: cg}, nil
}

// Observe reads memory.available, stamped with now.
func (s *MemorySource) Observe(ctx context.Context, now time.Time) ([]signals.Observation, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", signals.MemoryAvailable, err)
	}
	capacity, err := readMemTotal(s.meminfo)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", signals.MemoryAvailable, err)
	}
	v, err := s.cgroups.version()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", signals.MemoryAvailable, err)
	}
	ws, err := s.cgroups.memoryCgroup(v, nil).WorkingSet()
	if err != nil {
		return nil, fmt.Errorf("%s: root cgroup working set: %w", signals.MemoryAvailable, err)
	}
	return []signals.Observation{{
		Signal: signals.MemoryAvailable,
		// The kubelet subtracts in uint64; a working set above MemTotal
		// (which cannot happen on a sane node) reads as nothing left.
		Available: max(capacity-ws, 0),
		Capacity:  capacity,
		Time:      now,
	}}, nil
}
