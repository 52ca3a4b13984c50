package cri

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/signals"
)

// maxDepth bounds the directories a walk holds open at once: the top and
// each directory on the way down to the one being read, an fd and a
// direntBufSize buffer each (at most 256 fds and 1 MiB). A directory
// nested deeper than maxDepth-1 levels below the top fails the walk with
// errTooDeep, as one past the entry cap fails with errTooMany: a tree that
// deep is not measured, rather than measured at the cost of the agent's
// fds (a unit may well run with LimitNOFILE=1024).
const maxDepth = 256

// direntBufSize is the buffer getdents(2) fills with one batch of a
// directory's entries: about 128 entries of short names.
const direntBufSize = 4096

// errTooDeep says a walk stopped at maxDepth.
var errTooDeep = errors.New("too deep")

// walk sums the usage below dir as du -x does, fd by fd: it opens dir
// O_NOFOLLOW, stats each entry relative to its directory's fd without
// following symlinks, and enters a subdirectory with openat(O_NOFOLLOW)
// from its parent's fd, so a subdirectory the pod swaps for a symlink is
// never followed, and one on another filesystem is neither counted nor
// entered. Entries are read in batches of direntBufSize and counted as
// they are read, so a walk past maxEntries fails with errTooMany having
// held no more than one batch per open directory. It returns the entries
// it counted (the top included), also when it fails.
func walk(ctx context.Context, dir string, maxEntries int) (signals.FsUsage, int, error) {
	w := walker{ctx: ctx, maxEntries: maxEntries}
	u, err := w.walk(dir)
	if err != nil {
		return signals.FsUsage{}, w.entries, fmt.Errorf("usage of %s: %w", dir, err)
	}
	return u, w.entries, nil
}

type walker struct {
	ctx        context.Context
	maxEntries int
	entries    int
	// stack holds the open directories, the top first.
	stack []dirReader
	// bufs are the batch buffers by depth, reused from one directory
	// to the next at the same depth.
	bufs [][]byte
}

func (w *walker) walk(dir string) (signals.FsUsage, error) {
	var u signals.FsUsage
	fd, err := openDir(unix.AT_FDCWD, dir)
	if err != nil {
		return u, fmt.Errorf("open: %w", err)
	}
	var top unix.Stat_t
	if err := unix.Fstat(fd, &top); err != nil {
		unix.Close(fd)
		return u, fmt.Errorf("stat: %w", err)
	}
	w.push(fd, "")
	defer func() {
		for _, d := range w.stack {
			unix.Close(d.fd)
		}
	}()
	if w.entries = 1; w.entries > w.maxEntries {
		return u, fmt.Errorf("%w: more than %d", errTooMany, w.maxEntries)
	}
	u.Inodes, u.Bytes = 1, top.Blocks*512
	// Files with more than one link, counted once (all are on top.Dev).
	seen := map[uint64]bool{}
	for len(w.stack) > 0 {
		d := &w.stack[len(w.stack)-1]
		name, err := d.next()
		if err != nil {
			return u, fmt.Errorf("read directory %s: %w", w.path(""), err)
		}
		if name == "" {
			unix.Close(d.fd)
			w.stack = w.stack[:len(w.stack)-1]
			continue
		}
		if w.entries++; w.entries > w.maxEntries {
			return u, fmt.Errorf("%w: more than %d", errTooMany, w.maxEntries)
		}
		if w.entries%64 == 0 {
			if err := w.ctx.Err(); err != nil {
				return u, err
			}
		}
		var st unix.Stat_t
		err = ignoringEINTR(func() error { return unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) })
		if errors.Is(err, unix.ENOENT) {
			continue // removed since read
		}
		if err != nil {
			return u, fmt.Errorf("stat %s: %w", w.path(name), err)
		}
		if st.Dev != top.Dev {
			continue // another filesystem mounted here
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if !isDir && st.Nlink > 1 {
			if seen[st.Ino] {
				continue
			}
			seen[st.Ino] = true
		}
		u.Inodes++
		u.Bytes += st.Blocks * 512
		if !isDir {
			continue
		}
		if len(w.stack) >= maxDepth {
			return u, fmt.Errorf("%w: %s is more than %d levels down", errTooDeep, w.path(name), maxDepth-1)
		}
		fd, err := openDir(d.fd, name)
		switch {
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ENOENT):
			// Swapped for a symlink or a file, or removed, since its
			// stat: it counts as the directory it was, with nothing
			// below it. Not an error: a live tree changes under a walk,
			// and what it held then is what was there.
			continue
		case err != nil:
			return u, fmt.Errorf("open %s: %w", w.path(name), err)
		}
		var got unix.Stat_t
		if err := unix.Fstat(fd, &got); err != nil {
			unix.Close(fd)
			return u, fmt.Errorf("stat %s: %w", w.path(name), err)
		}
		if got.Dev != top.Dev || got.Ino != st.Ino {
			// Another directory by now (renamed in), or a
			// filesystem mounted since: nothing below it counts.
			unix.Close(fd)
			continue
		}
		w.push(fd, name)
	}
	return u, nil
}

// push makes fd, the directory name in the one on top of the stack, the
// directory read next.
func (w *walker) push(fd int, name string) {
	depth := len(w.stack)
	if depth == len(w.bufs) {
		w.bufs = append(w.bufs, make([]byte, direntBufSize))
	}
	w.stack = append(w.stack, dirReader{fd: fd, name: name, buf: w.bufs[depth]})
}

// path is name in the directory on top of the stack, below the top, for
// errors.
func (w *walker) path(name string) string {
	parts := make([]string, 0, len(w.stack)+1)
	for _, d := range w.stack[1:] {
		parts = append(parts, d.name)
	}
	return filepath.Join(append(parts, name)...)
}

// openDir opens the directory name in dirfd (or the working directory,
// unix.AT_FDCWD) without following a symlink: a symlink fails with ELOOP,
// anything else that is not a directory with ENOTDIR.
func openDir(dirfd int, name string) (int, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	return fd, err
}

func ignoringEINTR(f func() error) error {
	for {
		if err := f(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// dirReader reads the entries of an open directory a batch at a time.
type dirReader struct {
	fd   int
	name string
	buf  []byte
	// buf[pos:end] are the entries of the batch not yet returned.
	pos, end int
}

// The layout of struct linux_dirent64, which getdents64(2) fills buf
// with: d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1), then
// d_name, NUL-terminated and padded to d_reclen.
const (
	direntReclen = 16
	direntName   = 19
)

// next returns the name of the directory's next entry ("." and ".."
// left out), reading the next batch when this one is used up, and "" at
// the end. A directory removed while read ends early.
func (d *dirReader) next() (string, error) {
	for {
		if d.pos >= d.end {
			var n int
			err := ignoringEINTR(func() (err error) {
				n, err = unix.Getdents(d.fd, d.buf)
				return err
			})
			if errors.Is(err, unix.ENOENT) || n <= 0 && err == nil {
				return "", nil
			}
			if err != nil {
				return "", err
			}
			d.pos, d.end = 0, n
		}
		rec := d.buf[d.pos:d.end]
		if len(rec) < direntName {
			return "", fmt.Errorf("short directory entry (%d bytes)", len(rec))
		}
		reclen := int(binary.NativeEndian.Uint16(rec[direntReclen:]))
		if reclen < direntName || reclen > len(rec) {
			return "", fmt.Errorf("bad directory entry length %d", reclen)
		}
		d.pos += reclen
		name := rec[direntName:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if binary.NativeEndian.Uint64(rec) == 0 || string(name) == "." || string(name) == ".." || len(name) == 0 {
			continue
		}
		return string(name), nil
	}
}
