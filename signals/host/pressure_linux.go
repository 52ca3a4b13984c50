package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/evictd/evictd/signals"
)

// MemoryPressureSource observes the six memory.pressure.* stall signals of
// the whole node from the kernel's PSI: <ProcRoot>/pressure/memory, or, on a
// kernel whose /proc has no pressure directory but whose cgroup v2 root has
// the file, <CgroupMount>/memory.pressure (the root cgroup's pressure is the
// node's). A missing or garbled file is an error for all six signals.
type MemoryPressureSource struct {
	proc    string
	cgroups *cgroups
}

// NewMemoryPressureSource reads cfg.ProcRoot's pressure/memory, or the
// root cgroup's memory.pressure under cfg.CgroupMount on cgroup v2.
func NewMemoryPressureSource(cfg Config) (*MemoryPressureSource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cg, err := newCgroups(cfg)
	if err != nil {
		return nil, err
	}
	return &MemoryPressureSource{proc: filepath.Join(cfg.ProcRoot, "pressure", "memory"), cgroups: cg}, nil
}

// Observe reads the six stall averages, stamped with now.
func (s *MemoryPressureSource) Observe(ctx context.Context, now time.Time) ([]signals.Observation, error) {
	fail := func(err error) ([]signals.Observation, error) {
		return nil, fmt.Errorf("memory.pressure.*: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	file := s.proc
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		if v, verr := s.cgroups.version(); verr == nil && v == cgroupV2 {
			file = filepath.Join(s.cgroups.mount, "memory.pressure")
			b, err = os.ReadFile(file)
		}
	}
	if err != nil {
		return fail(fmt.Errorf("read %s (is PSI enabled in the kernel?): %w", file, err))
	}
	stalls, err := parsePSI(file, b)
	if err != nil {
		return fail(err)
	}
	out := make([]signals.Observation, 0, len(stalls))
	for _, sig := range signals.All() {
		if v, ok := stalls[sig]; ok {
			out = append(out, signals.Observation{Signal: sig, Available: v, Capacity: signals.StallScale, Time: now})
		}
	}
	return out, nil
}
