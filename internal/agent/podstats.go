package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	disk.stale, disk.log = r.met.SetDiskStatsStale, r.log
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
// old at most), and at once when a pass has a pod that no refresh was
// asked about yet. A refresh may take at most deadline (maxAge). What a
// refresh measured replaces what there was, pod by pod, whether it ended
// or was cut by its deadline: a pod it did not measure (a walk cut by
// the pod's own time budget in internal/cri, or not reached before the
// deadline) keeps its previous stats with their own Time, so a slow
// neighbour never leaves a pod ranked as one without stats; a pod no
// longer listed is dropped. A pod never measured at all has no disk
// stats, and ranks as the runtime's being down makes it rank: that is
// the kubelet's ranking of a pod it could not measure.
//
// get counts the listed pods whose stats are older than maxAge+deadline
// (about two refreshes), or that have been listed that long without any,
// in evictd_pod_disk_stats_stale_pods, and warns once for each pod when
// it goes stale (again only after it has had fresh stats since). The
// directories behind the stats are walked at most once per
// --volume-stats-agg-period by internal/cri.
type diskCache struct {
	maxAge, deadline time.Duration
	clock            clock.Clock
	// failed is called for every refresh that fails.
	failed func()
	// stale, when set, is given the number of stale pods at every get.
	stale func(int)
	// log warns of the pods whose stats go stale.
	log *slog.Logger
	// kick asks run for a refresh now.
	kick chan struct{}

	mu sync.Mutex
	// pods and src are those of the latest pass.
	pods []signals.Pod
	src  diskSource
	// asked holds the UIDs of the pods the last refresh was asked for.
	asked map[string]bool
	// stats is nil until a refresh has ended; err is the last
	// refresh's.
	stats map[string]signals.PodStats
	err   error
	// listed holds the pods of the latest pass: when each was first
	// listed, and whether it was warned of as stale.
	listed map[string]*listing
}

// listing is what diskCache remembers of a listed pod.
type listing struct {
	since  time.Time
	warned bool
}

// diskSource is what diskCache reads: *cri.DiskStats. It may leave pods
// out of its answer (not measured), which keep their stats.
type diskSource interface {
	PodStats(ctx context.Context, now time.Time, pods []signals.Pod) (map[string]signals.PodStats, error)
}

// errDiskPending is get's error until the first refresh ends.
var errDiskPending = errors.New("pod disk stats: not gathered yet (the first refresh is under way)")

func newDiskCache(maxAge time.Duration, clk clock.Clock, failed func()) *diskCache {
	return &diskCache{maxAge: maxAge, deadline: maxAge, clock: clk, failed: failed, kick: make(chan struct{}, 1),
		log: slog.New(slog.DiscardHandler), listed: map[string]*listing{}}
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
		} else if !c.asked[p.UID] {
			// Left out by the last refresh (its walk cut): the next
			// scheduled one tries again, not one at every pass.
			lacking = true
		}
	}
	c.markStale(now, pods)
	if lacking {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	if c.stats == nil {
		return out, errDiskPending
	}
	return out, c.err
}

// markStale counts the pods whose stats (or lack of them) are older than
// maxAge+deadline at now, warns once of each that goes stale, and
// forgets the pods no longer listed; c.mu is held.
func (c *diskCache) markStale(now time.Time, pods []signals.Pod) {
	bound := c.maxAge + c.deadline
	seen := make(map[string]bool, len(pods))
	stale := 0
	for i := range pods {
		p := &pods[i]
		seen[p.UID] = true
		l := c.listed[p.UID]
		if l == nil {
			l = &listing{since: now}
			c.listed[p.UID] = l
		}
		st, measured := c.stats[p.UID]
		since := l.since
		if measured {
			since = st.Time
		}
		// A clock gone back makes nothing old.
		age := now.Sub(since)
		if age <= bound {
			l.warned = false
			continue
		}
		stale++
		if !l.warned {
			l.warned = true
			if measured {
				c.log.Warn("pod disk stats stale: the walks of its log and volume directories have not finished; it is ranked on older stats",
					"pod", p.Ref(), "uid", p.UID, "age", age.Round(time.Second), "bound", bound)
			} else {
				c.log.Warn("pod without disk stats: the walks of its log and volume directories have not finished since it was listed; it ranks as a pod without stats",
					"pod", p.Ref(), "uid", p.UID, "listedFor", age.Round(time.Second), "bound", bound)
			}
		}
	}
	for uid := range c.listed {
		if !seen[uid] {
			delete(c.listed, uid)
		}
	}
	if c.stale != nil {
		c.stale(stale)
	}
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

// refresh reads the stats of the latest pass's pods, within deadline,
// and keeps what it read: the pods it measured get their new stats, the
// others listed keep their previous ones.
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
	merged := make(map[string]signals.PodStats, len(pods))
	asked := make(map[string]bool, len(pods))
	for _, p := range pods {
		asked[p.UID] = true
		if st, ok := stats[p.UID]; ok {
			merged[p.UID] = st
		} else if st, ok := c.stats[p.UID]; ok {
			merged[p.UID] = st
		}
	}
	c.stats, c.asked, c.err = merged, asked, err
	if cut {
		c.err = fmt.Errorf("pod disk stats: a refresh ran past its deadline (%s); the pods it did not measure keep their stats: %w", c.deadline, err)
	}
}
