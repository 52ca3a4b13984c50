package wakeup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// PSITrigger is a pressure stall trigger (Documentation/accounting/psi.rst)
// on a pressure file: /proc/pressure/memory for the whole machine, or a
// cgroup v2 cgroup's memory.pressure. The kernel raises POLLPRI on the file
// at most once per window while the stall exceeds the trigger's.
type PSITrigger struct {
	path string
	spec PSISpec
}

// NewPSITrigger checks spec and returns a trigger on path, armed by Run.
func NewPSITrigger(path string, spec PSISpec) (*PSITrigger, error) {
	if err := spec.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &PSITrigger{path: path, spec: spec}, nil
}

// Run writes the trigger to the pressure file and calls wake each time the
// kernel signals it, until ctx is done; closing the file removes the
// trigger. The kernel accepts a window that is not a multiple of 2s only
// from a process with CAP_SYS_RESOURCE.
func (p *PSITrigger) Run(ctx context.Context, wake func()) error {
	fd, err := p.arm()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return watchPri(ctx, fd, "PSI trigger on "+p.path, func(ready []unix.EpollEvent) error {
		for _, ev := range ready {
			// POLLERR: the trigger is gone with its cgroup.
			if ev.Events&unix.EPOLLERR != 0 {
				return fmt.Errorf("PSI trigger on %s: the kernel reports an error on the file (cgroup removed?)", p.path)
			}
			if ev.Events&unix.EPOLLPRI != 0 {
				wake()
			}
		}
		return nil
	})
}

// arm opens the pressure file and writes the trigger. The kernel's
// psi_write overwrites the last byte written with a NUL, so the trigger is
// written with a terminating NUL, as psi.rst's example does.
func (p *PSITrigger) arm() (int, error) {
	fd, err := unix.Open(p.path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, wrapPath("open", p.path, err)
	}
	spec := p.spec.String()
	for {
		_, err = unix.Write(fd, append([]byte(spec), 0))
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		hint := ""
		if errors.Is(err, unix.EINVAL) && p.spec.Window%(2*time.Second) != 0 {
			hint = " (without CAP_SYS_RESOURCE the window must be a multiple of 2s)"
		}
		return -1, fmt.Errorf("write PSI trigger %q to %s: %w%s", spec, p.path, err, hint)
	}
	return fd, nil
}
