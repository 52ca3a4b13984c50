package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/evictd/evictd/signals"
)

// MemoryPressureSource observes the six memory.pressure.* stall signals of
// the whole node from the kernel's PSI: <ProcRoot>/pressure/memory, or, on a
// kernel whose /proc has no pressure directory but whose cgroup v2 root has
// the file, <CgroupMount>/memory.pressure (the root cgroup's pressure is the
// node's). A missing or garbled file is an error for all six signals.
//
// Beside each reading it reads what corroborates the stall as the node's
// (see corroborate.go): <ProcRoot>/vmstat's pgscan_kswapd and pgscan_direct,
// and the kubepods cgroup's memory.events.local (cgroup v2) or memory.failcnt
// (cgroup v1). A stall observation is Local when none of them rose over its
// averaging window. These files are read strictly too: one that cannot be
// read or parsed is an error for all six signals, never a corroborated
// stall; a kubepods cgroup that does not exist yet corroborates nothing.
type MemoryPressureSource struct {
	proc    string
	vmstat  string
	cgroups *cgroups

	mu      sync.Mutex
	history stallHistory
}

// NewMemoryPressureSource reads cfg.ProcRoot's pressure/memory, or the
// root cgroup's memory.pressure under cfg.CgroupMount on cgroup v2, and
// what corroborates a stall: cfg.ProcRoot's vmstat and the kubepods cgroup
// under cfg.CgroupMount and cfg.CgroupRoot.
func NewMemoryPressureSource(cfg Config) (*MemoryPressureSource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cg, err := newCgroups(cfg)
	if err != nil {
		return nil, err
	}
	return &MemoryPressureSource{
		proc:    filepath.Join(cfg.ProcRoot, "pressure", "memory"),
		vmstat:  filepath.Join(cfg.ProcRoot, "vmstat"),
		cgroups: cg,
	}, nil
}

// Observe reads the six stall averages, stamped with now, each Local or
// not from the reclaim counts over its window.
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
	counts, err := s.reclaimCounts(now)
	if err != nil {
		return fail(fmt.Errorf("what corroborates a stall as the node's: %w", err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]signals.Observation, 0, len(stalls))
	for _, sig := range signals.All() {
		if v, ok := stalls[sig]; ok {
			local, _ := s.history.local(sig.StallWindow(), counts)
			out = append(out, signals.Observation{Signal: sig, Available: v, Capacity: signals.StallScale, Time: now, Local: local})
		}
	}
	s.history.add(counts)
	return out, nil
}

// reclaimCounts reads the node's reclaim scans from vmstat and kubepods'
// own limit events: memory.events.local high + max on cgroup v2,
// memory.failcnt on v1.
func (s *MemoryPressureSource) reclaimCounts(now time.Time) (reclaimCounts, error) {
	c := reclaimCounts{at: now}
	b, err := os.ReadFile(s.vmstat)
	if err != nil {
		return c, fmt.Errorf("read %s: %w", s.vmstat, err)
	}
	if c.nodeScan, err = parseVMStatScan(s.vmstat, b); err != nil {
		return c, err
	}
	v, err := s.cgroups.version()
	if err != nil {
		return c, err
	}
	dir := s.cgroups.memoryDir(v, s.cgroups.kubepods)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return c, nil // no pods yet: nothing of theirs reached a limit
	} else if err != nil {
		return c, fmt.Errorf("kubepods cgroup: %w", err)
	}
	if v == cgroupV2 {
		file := filepath.Join(dir, "memory.events.local")
		b, err := os.ReadFile(file)
		if err != nil {
			return c, fmt.Errorf("read %s: %w", file, err)
		}
		c.limit, err = parseEventsLocal(file, b)
		c.known = err == nil
		return c, err
	}
	c.limit, err = readCount(filepath.Join(dir, "memory.failcnt"))
	c.known = err == nil
	return c, err
}
