package host

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// A pass under pressure reads the same few files of every pod cgroup, pass
// after pass. PodStatsReader keeps them open and reads them with pread at
// offset 0: one system call per file and pass instead of the open, fcntl,
// epoll_ctl, fstat, read, read and close of os.ReadFile. cgroup files are
// made by the kernel at read time (kernfs), so a read at offset 0 of a
// file kept open sees its figures now. A file whose cgroup was removed
// reads ENODEV (ENOENT on some kernels): it is closed and opened again by
// name once, which fails if the cgroup is gone and finds it if the cgroup
// was made again.

// maxKeptFiles bounds the pod cgroup files PodStatsReader keeps open: two
// per pod ranked by memory and two per container of it, one per pod ranked
// by task count, so 2048 keep every file of a 300-pod node of two
// containers a pod ranked by memory open; past the bound the others are
// opened and closed at each read. Each open cgroup file holds a page of
// kernel memory for its read buffer once read.
const maxKeptFiles = 2048

// reservedFiles are the descriptors left to the rest of evictd under
// RLIMIT_NOFILE (its endpoints' connections, the wake-up sources, volume
// walks: about 100; systemd/evictd.service sets LimitNOFILE=1024).
const reservedFiles = 512

// initialReadBuffer is the read buffer's first size; a cgroup v2
// memory.stat is 1.5–3 KiB. maxReadSize is the largest file read.
const (
	initialReadBuffer = 8 << 10
	maxReadSize       = 1 << 20
)

// keptFileLimit is how many pod cgroup files may be kept open: the soft
// RLIMIT_NOFILE less reservedFiles, at most maxKeptFiles.
func keptFileLimit() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return int(min(max(int64(lim.Cur)-reservedFiles, 0), maxKeptFiles))
}

// keptFile is one cgroup file, its descriptor -1 while it is not open.
type keptFile struct {
	path string
	fd   int
}

func newKeptFile(path string) keptFile { return keptFile{path: path, fd: -1} }

// files is PodStatsReader's set of kept-open files and the read buffer
// they share. It belongs to the goroutine holding the reader's lock.
type files struct {
	open, max int
	buf       []byte
}

// read returns f's content, read at offset 0 through its kept descriptor,
// opening it first when it is not open; it is valid until the next read.
// When max files are open already, f is opened, read and closed. A read
// that fails with ENOENT or ENODEV (the cgroup was removed) closes f and
// opens it again once; any other failure closes it.
func (fl *files) read(f *keptFile) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		keep := true
		if f.fd < 0 {
			fd, err := unix.Open(f.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", f.path, &fs.PathError{Op: "open", Path: f.path, Err: err})
			}
			f.fd = fd
			if keep = fl.open < fl.max; keep {
				fl.open++
			}
		}
		b, err := fl.pread(f.fd)
		if err == nil && keep {
			return b, nil
		}
		if keep {
			fl.close(f)
		} else {
			_ = unix.Close(f.fd)
			f.fd = -1
		}
		if err == nil {
			return b, nil
		}
		if attempt == 0 && (errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT)) {
			continue
		}
		return nil, fmt.Errorf("read %s: %w", f.path, &fs.PathError{Op: "pread", Path: f.path, Err: err})
	}
}

// pread reads the whole file open at fd from offset 0 into the shared
// buffer, growing it as needed. A read shorter than asked ends the file:
// a regular file reads short only at its end, and kernfs fills a read
// from the whole text it made for it.
func (fl *files) pread(fd int) ([]byte, error) {
	if fl.buf == nil {
		fl.buf = make([]byte, initialReadBuffer)
	}
	n := 0
	for {
		if n == len(fl.buf) {
			if len(fl.buf) >= maxReadSize {
				return nil, fmt.Errorf("file larger than %d bytes", maxReadSize)
			}
			fl.buf = append(fl.buf, make([]byte, len(fl.buf))...)
		}
		m, err := unix.Pread(fd, fl.buf[n:], int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		n += m
		if m == 0 || n < len(fl.buf) {
			return fl.buf[:n], nil
		}
	}
}

// close closes f if it is open and kept.
func (fl *files) close(f *keptFile) {
	if f.fd < 0 {
		return
	}
	_ = unix.Close(f.fd)
	f.fd = -1
	fl.open--
}
