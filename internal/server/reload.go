package server

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// reloadInterval is how often, at most, the server looks at whether its
// certificate, key or token file changed: a stat of each file on the first
// handshake or guarded request after the interval, nothing in between. A
// rotated file is in use within this long of the next connection.
const reloadInterval = 2 * time.Second

// stamp tells one version of a file from another: a rotation that renames
// a new file into place (the kubelet's atomic writer for projected
// volumes, cert-manager's CSI driver, install(1)) changes the inode; one
// that rewrites the file in place changes its size or its times.
type stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

// stamps returns the stamp of each file, after symlinks.
func stamps(files []string) ([]stamp, error) {
	out := make([]stamp, len(files))
	for i, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil, fmt.Errorf("stat %s: no inode", f)
		}
		out[i] = stamp{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
	}
	return out, nil
}

// reloading holds a value loaded from files (a certificate and its key, a
// token) and loads it again when one of them changes. A load that fails,
// a rotation caught half-written or a file with the wrong mode, keeps the
// last good value and warns once per version of the files: a bad rotation
// must never leave the endpoints without TLS or without their token. The
// first load, in newReloading, has no last good value and fails.
type reloading[T any] struct {
	what  string   // for the log: "TLS certificate and key", "bearer token"
	files []string // the files load reads
	load  func() (T, error)
	clock clock.PassiveClock
	log   *slog.Logger

	mu      sync.Mutex
	val     T
	stamps  []stamp   // of the files as last seen; nil when they could not be stat'ed
	checked time.Time // when the files were last looked at
}

func newReloading[T any](what string, files []string, load func() (T, error), clk clock.PassiveClock, log *slog.Logger) (*reloading[T], error) {
	r := &reloading[T]{what: what, files: files, load: load, clock: clk, log: log}
	// Stamps first: a change during the load is caught by the next look.
	st, err := stamps(files)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if r.val, err = load(); err != nil {
		return nil, err
	}
	r.stamps, r.checked = st, clk.Now()
	return r, nil
}

// get returns the value, first loading it again if the files changed since
// the last look, at most one look per reloadInterval.
func (r *reloading[T]) get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if now.Sub(r.checked) < reloadInterval {
		return r.val
	}
	r.checked = now
	st, err := stamps(r.files)
	if err != nil {
		// Between a remove and a rename, say. Warn once; the next
		// look that finds the files reloads them.
		if r.stamps != nil {
			r.log.Warn("cannot look at the "+r.what+" files; serving with the last good ones", "files", r.files, "err", err)
		}
		r.stamps = nil
		return r.val
	}
	if slices.Equal(st, r.stamps) {
		return r.val
	}
	r.stamps = st
	v, err := r.load()
	if err != nil {
		r.log.Warn("the "+r.what+" changed but cannot be used; serving with the last good one", "files", r.files, "err", err)
		return r.val
	}
	r.val = v
	r.log.Info("reloaded the "+r.what, "files", r.files)
	return r.val
}
