package wakeup

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// waiter blocks in epoll_wait on a few file descriptors until one is ready
// or stop is called. Each watched fd carries a tag, returned when it is
// ready, so that a caller can tell an fd from a later one that reused its
// number. One goroutine calls wait; add, del and stop may be called from
// others.
type waiter struct {
	epfd   int
	stopfd int // an eventfd that stop writes to

	mu     sync.Mutex
	closed bool
}

// stopTag is the tag of the stop eventfd; callers' tags must differ.
const stopTag = -1

func newWaiter() (*waiter, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	stopfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	w := &waiter{epfd: epfd, stopfd: stopfd}
	if err := w.add(stopfd, unix.EPOLLIN, stopTag); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// add watches fd for events, reported with tag.
func (w *waiter) add(fd int, events uint32, tag int32) error {
	ev := unix.EpollEvent{Events: events, Fd: tag}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl add fd %d: %w", fd, err)
	}
	return nil
}

// del stops watching fd. Closing fd also does, once no other descriptor
// refers to its file.
func (w *waiter) del(fd int) error {
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, fd, nil); err != nil {
		return fmt.Errorf("epoll_ctl del fd %d: %w", fd, err)
	}
	return nil
}

// wait blocks until a watched fd is ready or stop is called. It returns the
// ready events (Fd holds the tag), and stopped once stop was called.
func (w *waiter) wait(buf []unix.EpollEvent) (ready []unix.EpollEvent, stopped bool, err error) {
	for {
		n, err := unix.EpollWait(w.epfd, buf, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("epoll_wait: %w", err)
		}
		for _, ev := range buf[:n] {
			if ev.Fd == stopTag {
				return nil, true, nil
			}
		}
		return buf[:n], false, nil
	}
}

// stop makes wait return stopped, now and at every later call. Safe to call
// more than once and after close.
func (w *waiter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	var one [8]byte
	one[0] = 1 // eventfd counters are host-endian; 1 is nonzero either way
	_, _ = unix.Write(w.stopfd, one[:])
}

// close releases the epoll and stop descriptors.
func (w *waiter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	unix.Close(w.stopfd)
	unix.Close(w.epfd)
}

// drainEventfd reads a non-blocking eventfd's counter, returning 0 when it
// was not signalled.
func drainEventfd(fd int) (uint64, error) {
	var buf [8]byte
	for {
		n, err := unix.Read(fd, buf[:])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return 0, nil
		case err != nil:
			return 0, err
		case n != 8:
			return 0, fmt.Errorf("eventfd read %d bytes, want 8", n)
		}
		var v uint64
		for i := 7; i >= 0; i-- {
			v = v<<8 | uint64(buf[i])
		}
		return v, nil
	}
}
