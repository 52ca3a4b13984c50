package cri

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/evictd/evictd/signals"
)

// DefaultMaxAge is how long a directory's measured usage is reused; the
// kubelet's volumeStatsAggPeriod is 1 minute.
const DefaultMaxAge = 10 * time.Second

// DefaultMaxEntries caps the entries one directory walk visits; a directory
// with more is not measured (an error), rather than measured slowly or short.
const DefaultMaxEntries = 1_000_000

// maxCached bounds the number of directories whose usage is kept.
const maxCached = 4096

// errTooMany says a walk stopped at its entry cap.
var errTooMany = errors.New("too many entries")

// dirUsage measures directories as du -x does: allocated blocks
// (st_blocks*512) and inodes of every entry on the directory's filesystem,
// hard links counted once, symlinks not followed (see walk). Results,
// errors included, are reused for maxAge. It is safe for concurrent use.
type dirUsage struct {
	maxAge     time.Duration
	maxEntries int

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	at    time.Time
	usage signals.FsUsage
	err   error
}

func newDirUsage(maxAge time.Duration, maxEntries int) *dirUsage {
	if maxAge <= 0 {
		maxAge = DefaultMaxAge
	}
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	return &dirUsage{maxAge: maxAge, maxEntries: maxEntries, cache: map[string]cached{}}
}

// usage returns dir's usage as of now, from the cache when measured less
// than maxAge before now. A missing directory wraps fs.ErrNotExist.
func (d *dirUsage) usage(ctx context.Context, now time.Time, dir string) (signals.FsUsage, error) {
	d.mu.Lock()
	if c, ok := d.cache[dir]; ok && now.Sub(c.at) < d.maxAge && !now.Before(c.at) {
		d.mu.Unlock()
		return c.usage, c.err
	}
	d.mu.Unlock()

	u, _, err := walk(ctx, dir, d.maxEntries)
	if ctx.Err() != nil {
		return u, err // not a property of the directory: not cached
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.cache) >= maxCached {
		d.evict(now)
	}
	d.cache[dir] = cached{at: now, usage: u, err: err}
	return u, err
}

// evict drops expired entries, or all when none has expired; d.mu is held.
func (d *dirUsage) evict(now time.Time) {
	for dir, c := range d.cache {
		if now.Sub(c.at) >= d.maxAge || now.Before(c.at) {
			delete(d.cache, dir)
		}
	}
	if len(d.cache) >= maxCached {
		clear(d.cache)
	}
}
