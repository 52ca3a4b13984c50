package wakeup

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// MemcgThreshold is a cgroup v1 memory threshold notification: an eventfd
// registered through the cgroup's cgroup.event_control on its
// memory.usage_in_bytes at a usage level, which the kernel signals whenever
// usage crosses the level, up or down. Set re-arms it at another level.
//
// Unlike the kubelet's notifier, which waits in epoll with a 10s timeout and
// runs a pass per event, Run blocks until an event, Set or Close, and hands
// events to a wake callback that merges them.
type MemcgThreshold struct {
	dir string

	mu     sync.Mutex
	efd    int   // the armed eventfd, -1 when disarmed
	gen    int32 // tag of efd in the waiter, changed at every arming
	level  int64
	w      *waiter // set while Run runs
	closed bool
}

// NewMemcgThreshold returns a disarmed notifier on the cgroup v1 memory
// cgroup directory dir (the controller's mount for the root cgroup).
func NewMemcgThreshold(dir string) *MemcgThreshold {
	return &MemcgThreshold{dir: dir, efd: -1}
}

// armedLevel is the armed usage level in bytes, 0 when disarmed.
func (n *MemcgThreshold) armedLevel() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.efd < 0 {
		return 0
	}
	return n.level
}

// Set arms the notifier at level bytes of usage: a new eventfd is
// registered first, then the old one closed (which unregisters it), so no
// crossing goes unwatched. Setting the armed level again does nothing; a
// level of 0 or less disarms (such a threshold is met at any usage). On
// error the previous arming stays.
func (n *MemcgThreshold) Set(level int64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("memcg notifier on %s: %w", n.dir, errClosed)
	}
	if level <= 0 {
		n.disarmLocked()
		return nil
	}
	if n.efd >= 0 && level == n.level {
		return nil
	}
	efd, err := registerMemcgThreshold(n.dir, level)
	if err != nil {
		return err
	}
	gen := (n.gen + 1) & 0x7fffffff
	if n.w != nil {
		if err := n.w.add(efd, unix.EPOLLIN, gen); err != nil {
			unix.Close(efd)
			return err
		}
	}
	n.disarmLocked()
	n.efd, n.gen, n.level = efd, gen, level
	return nil
}

// disarmLocked closes the armed eventfd; the kernel then drops the
// registration. Closing also takes it out of the waiter's epoll set.
func (n *MemcgThreshold) disarmLocked() {
	if n.efd < 0 {
		return
	}
	unix.Close(n.efd)
	n.efd, n.level = -1, 0
}

// Close disarms the notifier for good and makes Run return.
func (n *MemcgThreshold) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	n.disarmLocked()
	if n.w != nil {
		n.w.stop()
	}
	return nil
}

// Run calls wake at each crossing of the armed level until ctx is done or
// Close is called (also before Run), then disarms and closes the notifier.
func (n *MemcgThreshold) Run(ctx context.Context, wake func()) error {
	w, err := newWaiter()
	if err != nil {
		return fmt.Errorf("memcg notifier on %s: %w", n.dir, err)
	}
	defer w.close()
	n.mu.Lock()
	switch {
	case n.closed: // Close before Run: nothing to watch
		n.mu.Unlock()
		return nil
	case n.w != nil:
		err = fmt.Errorf("memcg notifier on %s: already running", n.dir)
	case n.efd >= 0:
		err = w.add(n.efd, unix.EPOLLIN, n.gen)
	}
	if err != nil {
		n.mu.Unlock()
		return err
	}
	n.w = w
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.w = nil
		n.closed = true
		n.disarmLocked()
		n.mu.Unlock()
	}()
	stop := context.AfterFunc(ctx, w.stop)
	defer stop()

	buf := make([]unix.EpollEvent, 4)
	for {
		ready, stopped, err := w.wait(buf)
		if stopped {
			return nil
		}
		if err != nil {
			return fmt.Errorf("memcg notifier on %s: %w", n.dir, err)
		}
		fired := false
		n.mu.Lock()
		for _, ev := range ready {
			// An event of an eventfd closed by Set since is stale.
			if n.efd < 0 || ev.Fd != n.gen {
				continue
			}
			v, err := drainEventfd(n.efd)
			if err != nil {
				n.mu.Unlock()
				return fmt.Errorf("memcg notifier on %s: read eventfd: %w", n.dir, err)
			}
			fired = fired || v > 0
		}
		n.mu.Unlock()
		if fired {
			wake()
		}
	}
}

// registerMemcgThreshold returns a non-blocking eventfd the kernel signals
// when dir's memory.usage_in_bytes crosses level, registered by writing
// "<eventfd> <fd of memory.usage_in_bytes> <level>" to cgroup.event_control
// (Documentation/admin-guide/cgroup-v1/memory.rst, "Memory thresholds").
func registerMemcgThreshold(dir string, level int64) (int, error) {
	usage := filepath.Join(dir, "memory.usage_in_bytes")
	watchfd, err := unix.Open(usage, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, wrapPath("open", usage, err)
	}
	defer unix.Close(watchfd)
	control := filepath.Join(dir, "cgroup.event_control")
	ctlfd, err := unix.Open(control, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, wrapPath("open", control, err)
	}
	defer unix.Close(ctlfd)
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, fmt.Errorf("eventfd: %w", err)
	}
	line := strconv.Itoa(efd) + " " + strconv.Itoa(watchfd) + " " + strconv.FormatInt(level, 10)
	if _, err := unix.Write(ctlfd, []byte(line)); err != nil {
		unix.Close(efd)
		return -1, fmt.Errorf("arm threshold %d on %s: write %q to %s: %w", level, usage, line, control, err)
	}
	return efd, nil
}

// memcgAvailable reports whether dir supports memcg threshold notifications.
func memcgAvailable(dir string) error {
	for _, f := range []string{"memory.usage_in_bytes", "cgroup.event_control"} {
		p := filepath.Join(dir, f)
		if err := unix.Access(p, unix.R_OK); err != nil {
			return wrapPath("access", p, err)
		}
	}
	return nil
}
