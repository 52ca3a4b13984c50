package cri

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/evictd/evictd/signals"
)

// DefaultMaxAge is how long a directory's measured usage is reused; the
// kubelet's volumeStatsAggPeriod is 1 minute.
const DefaultMaxAge = 10 * time.Second

// DefaultMaxEntries caps the entries of one pod's log and volume
// directories together; a pod with more has those past the cap not
// measured (an error), rather than measured slowly or short.
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
	maxAge time.Duration
	// maxEntries is the budget of one pod's directories, together.
	maxEntries int

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	at    time.Time
	usage signals.FsUsage
	// entries is what the walk counted; limit is the cap it had.
	entries, limit int
	err            error
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

// usage returns dir's usage as of now and its entries (the directory
// itself, everything below it), from the cache when measured less than
// maxAge before now. It fails with errTooMany past limit entries, the
// caller's budget (all of it spent), and errTooDeep past maxDepth levels.
// A missing directory wraps fs.ErrNotExist, and is not cached.
func (d *dirUsage) usage(ctx context.Context, now time.Time, dir string, limit int) (signals.FsUsage, int, error) {
	d.mu.Lock()
	if c, ok := d.cache[dir]; ok && now.Sub(c.at) < d.maxAge && !now.Before(c.at) {
		switch {
		case errors.Is(c.err, errTooMany) && limit <= c.limit, c.err == nil && c.entries > limit:
			d.mu.Unlock()
			return signals.FsUsage{}, limit, fmt.Errorf("usage of %s: %w: more than %d", dir, errTooMany, limit)
		case !errors.Is(c.err, errTooMany):
			d.mu.Unlock()
			return c.usage, c.entries, c.err
		}
		// Too many for a smaller budget than this one: walked again.
	}
	d.mu.Unlock()

	u, n, err := walk(ctx, dir, limit)
	if ctx.Err() != nil {
		return u, n, err // not a property of the directory: not cached
	}
	if errors.Is(err, fs.ErrNotExist) {
		// Not made yet, as a container's log directory until the
		// container is created: looked for again at the next call, not
		// missing for maxAge after the container has started.
		return u, n, err
	}
	if errors.Is(err, errTooMany) {
		n = limit
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.cache) >= maxCached {
		d.evict(now)
	}
	d.cache[dir] = cached{at: now, usage: u, entries: n, limit: limit, err: err}
	return u, n, err
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
