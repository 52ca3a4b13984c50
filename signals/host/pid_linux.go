package host

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/evictd/evictd/signals"
)

// PIDSource observes pid.available: min(pid_max, threads-max) minus the
// number of tasks on the system, as the kubelet's pidlimit package does.
type PIDSource struct {
	procRoot string
}

// NewPIDSource reads cfg.ProcRoot's sys/kernel/pid_max,
// sys/kernel/threads-max and loadavg.
func NewPIDSource(cfg Config) (*PIDSource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &PIDSource{procRoot: cfg.ProcRoot}, nil
}

// Observe reads pid.available, stamped with now.
func (s *PIDSource) Observe(ctx context.Context, now time.Time) ([]signals.Observation, error) {
	fail := func(err error) ([]signals.Observation, error) {
		return nil, fmt.Errorf("%s: %w", signals.PIDAvailable, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	pidMax, err := readCount(filepath.Join(s.procRoot, "sys", "kernel", "pid_max"))
	if err != nil {
		return fail(err)
	}
	threadsMax, err := readCount(filepath.Join(s.procRoot, "sys", "kernel", "threads-max"))
	if err != nil {
		return fail(err)
	}
	capacity := min(pidMax, threadsMax)
	if capacity == 0 {
		return fail(fmt.Errorf("pid_max %d, threads-max %d: no capacity", pidMax, threadsMax))
	}
	running, err := readTotalTasks(filepath.Join(s.procRoot, "loadavg"))
	if err != nil {
		return fail(err)
	}
	return []signals.Observation{{
		Signal:    signals.PIDAvailable,
		Available: capacity - running,
		Capacity:  capacity,
		Time:      now,
	}}, nil
}
