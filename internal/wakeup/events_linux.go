package wakeup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// FileEvents watches a cgroup v2 file that the kernel notifies on change
// (kernfs_notify: memory.events, cgroup.events): poll on an open file reports
// POLLPRI|POLLERR once its content changed since the file was last read.
// Run re-reads the file at each notification and wakes when changed says
// the content moved.
type FileEvents struct {
	path    string
	changed func(prev, cur []byte) bool
}

// NewMemoryEvents watches dir's memory.events: a wake-up at every high, max,
// oom or oom_kill event of the cgroup (dir is a cgroup v2 directory; the
// root cgroup has no memory.events).
func NewMemoryEvents(dir string) *FileEvents {
	path := filepath.Join(dir, "memory.events")
	return NewFileEvents(path, func(prev, cur []byte) bool { return eventsChanged(path, prev, cur) })
}

// NewFileEvents watches path; changed compares two readings.
func NewFileEvents(path string, changed func(prev, cur []byte) bool) *FileEvents {
	return &FileEvents{path: path, changed: changed}
}

// Path is the file watched.
func (f *FileEvents) Path() string { return f.path }

// Run watches the file until ctx is done.
func (f *FileEvents) Run(ctx context.Context, wake func()) error {
	fd, err := unix.Open(f.path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return wrapPath("open", f.path, err)
	}
	defer unix.Close(fd)
	// Reading syncs the file's event count: poll reports only later changes.
	prev, err := readAt0(fd)
	if err != nil {
		return wrapPath("read", f.path, err)
	}
	return watchPri(ctx, fd, "watch "+f.path, func(ready []unix.EpollEvent) error {
		if len(ready) == 0 {
			return nil
		}
		cur, err := readAt0(fd)
		if err != nil {
			return wrapPath("read", f.path, err)
		}
		if f.changed(prev, cur) {
			wake()
		}
		prev = cur
		return nil
	})
}

// watchPri waits for POLLPRI on fd (a cgroup or pressure file's change or
// trigger) until ctx ends, calling handle with each batch of ready events;
// an error from handle, or from waiting (prefixed with what), ends it.
func watchPri(ctx context.Context, fd int, what string, handle func(ready []unix.EpollEvent) error) error {
	w, err := newWaiter()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer w.close()
	if err := w.add(fd, unix.EPOLLPRI, 0); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	stop := context.AfterFunc(ctx, w.stop)
	defer stop()
	buf := make([]unix.EpollEvent, 2)
	for {
		ready, stopped, err := w.wait(buf)
		if stopped {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := handle(ready); err != nil {
			return err
		}
	}
}

// readAt0 reads the whole file from its start.
func readAt0(fd int) ([]byte, error) {
	if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
		return nil, err
	}
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
}
