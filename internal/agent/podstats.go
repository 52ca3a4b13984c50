package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/cri"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
)

// podStats merges the pods' cgroup usage (memory, PIDs), read afresh by
// the passes that rank pods by it, with their disk usage from the runtime
// and the pods' directories, which diskCache gathers in the background: no
// pass waits for it.
type podStats struct {
	cgroups cgroupStats
	r       *runtimeConn
	disk    *diskCache
	fresh   *freshReads
}

// cgroupStats is what podStats reads the pods' cgroups with:
// *host.PodStatsReader. It is called every pass, to read the kinds asked
// for (none when no threshold ranks pods) and to forget the pods gone.
type cgroupStats interface {
	Read(ctx context.Context, pods []signals.Pod, now time.Time, kinds signals.PodStatsKinds) (map[string]signals.PodStats, error)
}

// newPodStats refreshes the disk stats every diskMaxAge
// (config.Durations.DiskStatsMaxAge) once the returned podStats's
// disk.run is running.
func newPodStats(cgroups cgroupStats, r *runtimeConn, diskMaxAge time.Duration) podStats {
	disk := newDiskCache(diskMaxAge, clock.RealClock{}, func() { r.met.IncRuntimeError(metrics.RuntimePodDiskStats) })
	return podStats{cgroups: cgroups, r: r, disk: disk, fresh: newFreshReads(diskMaxAge)}
}

func (s podStats) PodStats(ctx context.Context, now time.Time, pods []signals.Pod, kinds signals.PodStatsKinds) (map[string]signals.PodStats, error) {
	stats, err := s.cgroups.Read(ctx, pods, now, kinds)
	if !kinds.Has(signals.PodDisk) {
		return stats, err
	}
	p := s.r.parts.Load()
	if p == nil {
		s.r.met.IncRuntimeError(metrics.RuntimePodDiskStats)
		return stats, errors.Join(err, s.r.notConnected())
	}
	disk, derr := s.disk.get(now, pods, p.disk)
	// A pass that reads no pod cgroup (idle, or ranking by disk) reads
	// afresh the disk stats of the pods that have just started, which the
	// background refresh has not seen whole, each at most once per
	// refresh interval (freshReads); one that ranks by memory or task
	// count never waits for the runtime.
	if p.pending != nil && kinds&(signals.PodMemory|signals.PodProcesses) == 0 {
		if todo := s.fresh.due(now, pods, disk); len(todo) > 0 {
			var perr error
			disk, perr = p.pending.FillPending(ctx, now, todo, disk)
			derr = errors.Join(derr, perr)
		}
	}
	return cri.MergeDisk(stats, disk), errors.Join(err, derr)
}

// pendingSource is what reads the pending pods' disk stats afresh:
// *cri.DiskStats.
type pendingSource interface {
	FillPending(ctx context.Context, now time.Time, pods []signals.Pod, disk map[string]signals.PodStats) (map[string]signals.PodStats, error)
}

// freshReads bounds the passes' fresh reads of pending pods' disk stats
// (cri.Pending: a pod just started, its writable layer or log directory
// not yet there): a pod is read at most once per interval, the background
// refresh's, and at most cri.MaxPending pods in one pass. Every fresh read
// is CRI calls a pass waits for (up to cri.DefaultPendingDeadline); a pod
// that stays pending (a log directory that never appears) would otherwise
// be read at every pass, at the fast poll's 4 per second near a memory
// threshold, and pile calls on a busy runtime that the eviction's own stop
// then waits behind.
type freshReads struct {
	interval time.Duration
	mu       sync.Mutex
	asked    map[string]time.Time
}

func newFreshReads(interval time.Duration) *freshReads {
	return &freshReads{interval: interval, asked: map[string]time.Time{}}
}

// due returns the pods of pods whose disk stats are pending in disk and
// that were not read afresh within the interval before now, and counts
// them read at now. Pods no longer listed are forgotten.
func (f *freshReads) due(now time.Time, pods []signals.Pod, disk map[string]signals.PodStats) []signals.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	listed := make(map[string]bool, len(pods))
	var todo []signals.Pod
	for i := range pods {
		p := &pods[i]
		listed[p.UID] = true
		st, ok := disk[p.UID]
		if ok && !cri.Pending(p, &st) {
			continue
		}
		if at, was := f.asked[p.UID]; was && now.Sub(at) < f.interval {
			continue
		}
		if len(todo) < cri.MaxPending {
			todo = append(todo, *p)
			f.asked[p.UID] = now
		}
	}
	for uid := range f.asked {
		if !listed[uid] {
			delete(f.asked, uid)
		}
	}
	return todo
}

// diskCache gathers the pods' disk stats in the background and hands a
// pass the last ones without waiting. Gathering them asks the runtime for
// every container's stats (containerd's ListContainerStats calls every
// container's shim: at a hundred pods, hundreds of milliseconds) and walks
// every pod's log and volume directories (on a slow or crowded
// filesystem, seconds); a pass woken by memory pressure must wait for
// neither, nor for a lock held across them.
//
// run refreshes the stats for the pods of the latest pass maxAge after
// the last refresh ended (config.Durations.DiskStatsMaxAge: nine tenths
// of the housekeeping interval, so a tick finds stats about an interval
// old at most), and at once when a pass has a pod the stats lack. A
// refresh may take at most deadline (maxAge); one cut off keeps the
// stats before it and reports the error. get returns the stats of the
// last refresh that finished, errors included: a pod they lack (new since,
// or every pod before the first refresh ends) has no disk stats in that
// pass, and ranks as the runtime's being down makes it rank. The
// directories behind the stats are walked at most once per
// --volume-stats-agg-period by internal/cri.
type diskCache struct {
	maxAge, deadline time.Duration
	clock            clock.Clock
	// failed is called for every refresh that fails.
	failed func()
	// kick asks run for a refresh now.
	kick chan struct{}

	mu sync.Mutex
	// pods and src are those of the latest pass.
	pods []signals.Pod
	src  diskSource
	// at is when the refresh that gave stats began; stats is nil until
	// a refresh has ended; err is the last refresh's.
	at    time.Time
	stats map[string]signals.PodStats
	err   error
}

// diskSource is what diskCache reads: *cri.DiskStats.
type diskSource interface {
	PodStats(ctx context.Context, now time.Time, pods []signals.Pod) (map[string]signals.PodStats, error)
}

// errDiskPending is get's error until the first refresh ends.
var errDiskPending = errors.New("pod disk stats: not gathered yet (the first refresh is under way)")

func newDiskCache(maxAge time.Duration, clk clock.Clock, failed func()) *diskCache {
	return &diskCache{maxAge: maxAge, deadline: maxAge, clock: clk, failed: failed, kick: make(chan struct{}, 1)}
}

// get returns the last stats of pods, taken at now, and remembers pods
// and src for the next refresh. It never waits for one.
func (c *diskCache) get(now time.Time, pods []signals.Pod, src diskSource) (map[string]signals.PodStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods, c.src = slices.Clone(pods), src
	out := make(map[string]signals.PodStats, len(pods))
	lacking := false
	for _, p := range pods {
		if st, ok := c.stats[p.UID]; ok {
			out[p.UID] = st
		} else {
			lacking = true
		}
	}
	if lacking {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	if c.stats == nil {
		return out, errDiskPending
	}
	err := c.err
	if age := now.Sub(c.at); age > c.maxAge+c.deadline {
		err = errors.Join(err, fmt.Errorf("pod disk stats are %s old: no refresh has ended within its deadline (%s) since", age.Round(time.Second), c.deadline))
	}
	return out, err
}

// run refreshes the stats until ctx is done; it returns nil.
func (c *diskCache) run(ctx context.Context) error {
	timer := c.clock.NewTimer(c.maxAge)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.kick:
			if !timer.Stop() {
				select {
				case <-timer.C():
				default:
				}
			}
		case <-timer.C():
		}
		c.refresh(ctx)
		timer.Reset(c.maxAge)
	}
}

// refresh reads the stats of the latest pass's pods, within deadline.
func (c *diskCache) refresh(ctx context.Context) {
	c.mu.Lock()
	pods, src := c.pods, c.src
	c.mu.Unlock()
	if src == nil {
		return
	}
	start := c.clock.Now()
	rctx, cancel := context.WithTimeout(ctx, c.deadline)
	stats, err := src.PodStats(rctx, start, pods)
	cut := err != nil && rctx.Err() != nil
	cancel()
	if ctx.Err() != nil {
		return // stopping
	}
	if err != nil && c.failed != nil {
		c.failed()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cut && c.stats != nil {
		c.err = fmt.Errorf("pod disk stats: a refresh ran past its deadline (%s); the stats before it are kept: %w", c.deadline, err)
		return
	}
	if stats == nil {
		stats = map[string]signals.PodStats{}
	}
	c.at, c.stats, c.err = start, stats, err
}
