package main

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/snapshot"
	"github.com/evictd/evictd/ranking"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// The model of the kubelet's eviction manager that `evictd simulate
// --kubelet` replays a snapshot through (docs/SNAPSHOT.md, "Kubelet
// counterfactual"). What it follows of the kubelet (v1.36,
// pkg/kubelet/eviction/eviction_manager.go and helpers.go):
//
//   - synchronize runs at housekeeping ticks and, with
//     kernelMemcgNotification (cgroup v1 only), when memory usage crosses a
//     memory threshold; it reads the snapshot's step at or before the
//     moment, as stale as the kubelet's own stats;
//   - thresholds are evaluated as evictd evaluates them (thresholds.Tracker
//     is the kubelet's steps 7 to 15: grace periods, minimum reclaim, an
//     observation that has not advanced since the previous sync acts on
//     nothing), without evictd's maximum observation age and without the
//     memory pressure stall thresholds, which the kubelet does not have;
//   - pods are ranked by the kubelet's own keys, not evictd's (kubeletRank);
//   - the grace period is the kubelet's immediateEvictionGracePeriodSeconds
//     (1 s) for a hard threshold, min(--eviction-max-pod-grace-period, the
//     pod's own) for a soft one, never below the pod worker's floor of 1 s;
//   - the message is the kubelet's (decide.EvictionMessage).
//
// Not modelled: node-level reclaim before a disk eviction (what image and
// container garbage collection would free is not in a snapshot: it is taken
// to free too little) and local-storage limit evictions (the same on both
// sides: see the per-step output).

// The measured latencies the model adds, from docs/BENCHMARKS.md, "Side by
// side on a real node", on cgroup v1 at 800 MiB/s, medians of 20 runs.
const (
	// kubeletMemcgLatency is the kubelet's crossing → decision with
	// kernelMemcgNotification: 11 ms ("crossing → eviction issued",
	// kubelet-memcg, 800 MiB/s; 10 and 13 ms at 50 and 200 MiB/s).
	kubeletMemcgLatency = 11 * time.Millisecond
	// kubeletStopTime is the kubelet's decision → the pod's SIGTERM: 19 ms
	// (14.5, 16 and 19 ms median at 50, 200 and 800 MiB/s).
	kubeletStopTime = 19 * time.Millisecond
	// evictdStopTime is evictd's decision → the pod's SIGTERM with the
	// hard-eviction local stop: 28.6 ms (23.5, 25.2 and 28.6 ms median at
	// 50, 200 and 800 MiB/s), rounded up.
	evictdStopTime = 29 * time.Millisecond
)

// kubeletTrigger says what woke the kubelet's synchronize.
type kubeletTrigger string

const (
	triggerTick  kubeletTrigger = "housekeeping"
	triggerMemcg kubeletTrigger = "memcg notification"
)

// kubeletSync is one run of the kubelet's synchronize.
type kubeletSync struct {
	At time.Duration
	// Step is the snapshot step it reads.
	Step    int
	Trigger kubeletTrigger
}

// kubeletOutcome is what the kubelet did in one replay.
type kubeletOutcome struct {
	// Noticed is true once a sync found a threshold met (grace periods
	// ignored): its node condition would be set.
	Noticed   bool
	NoticedAt time.Duration
	NoticedBy kubeletTrigger
	// Evicted is true when a sync chose a pod; the rest describe it.
	Evicted     bool
	EvictedAt   time.Duration
	EvictedBy   kubeletTrigger
	Threshold   thresholds.Threshold
	Step        int
	Victim      string
	GracePeriod int64
	Message     string
	// Reason says why nothing was evicted when Evicted is false.
	Reason string
}

// kubeletModel is what a replay of the kubelet needs.
type kubeletModel struct {
	Steps []snapshot.Step
	// Thresholds are the kubelet's: the configured ones, containerfs
	// derived, no stall signal.
	Thresholds []thresholds.Threshold
	// HugepageAware is kubelet 1.37's memory.available; false is 1.36's.
	HugepageAware    bool
	Layout           signals.FsLayout
	TransitionPeriod time.Duration
	MaxPodGrace      int64
	Housekeeping     time.Duration
	Memcg            bool
	// Reads are a flight record's fast-poll readings between the steps,
	// which time the race more finely than its passes.
	Reads []availRead
}

// availRead is one fast-poll reading of a memory signal, at its offset
// from the first step.
type availRead struct {
	sig             signals.Signal
	at              time.Duration
	avail, capacity int64
}

// kubeletThresholds are ths as the kubelet would hold them: containerfs
// derived for layout, the memory pressure stall thresholds (evictd's own)
// left out.
func kubeletThresholds(ths []thresholds.Threshold, layout signals.FsLayout) []thresholds.Threshold {
	var out []thresholds.Threshold
	for _, th := range thresholds.DeriveContainerFs(ths, layout) {
		if !th.Signal.Stall() {
			out = append(out, th)
		}
	}
	return out
}

// stepAt is the index of the last step at or before at, -1 when at is
// before the first.
func stepAt(steps []snapshot.Step, at time.Duration) int {
	i, found := slices.BinarySearchFunc(steps, at, func(s snapshot.Step, at time.Duration) int { return cmp.Compare(s.At, at) })
	if found {
		return i
	}
	return i - 1
}

// firstMet is the index of the first step where one of ths is met, ignoring
// grace periods, on memory.available as hugepageAware says; -1 if none.
func firstMet(steps []snapshot.Step, ths []thresholds.Threshold, hugepageAware bool) int {
	for i, s := range steps {
		if len(thresholds.Met(ths, s.ObservationsFor(hugepageAware), false)) > 0 {
			return i
		}
	}
	return -1
}

// ticks are the housekeeping ticks at phase + k·every that read a step:
// from the first at or after the first step to the first after the last
// (which reads the last step).
func ticks(steps []snapshot.Step, phase, every time.Duration) []kubeletSync {
	if len(steps) == 0 || every <= 0 {
		return nil
	}
	first, last := steps[0].At, steps[len(steps)-1].At
	t := phase
	if t < first {
		t += (first - t + every - 1) / every * every
	} else {
		t -= (t - first) / every * every
	}
	var out []kubeletSync
	for ; ; t += every {
		out = append(out, kubeletSync{At: t, Step: stepAt(steps, t), Trigger: triggerTick})
		if t > last {
			return out
		}
	}
}

// memcgSyncs are the syncs kernelMemcgNotification adds: one at each
// crossing of a memory.available or allocatableMemory.available threshold
// (the kubelet registers a notifier for each), latency after it. The sync
// reads the first step that shows the threshold met: the kubelet reads
// fresh stats when notified, and that step is the snapshot's nearest record
// of them.
func memcgSyncs(steps []snapshot.Step, ths []thresholds.Threshold, hugepageAware bool, latency time.Duration) []kubeletSync {
	var out []kubeletSync
	for _, th := range ths {
		if th.Signal != signals.MemoryAvailable && th.Signal != signals.AllocatableMemoryAvailable {
			continue
		}
		pts := availPoints(steps, th.Signal, hugepageAware)
		for i := 1; i < len(pts); i++ {
			if !pts[i-1].ok || !pts[i].ok || pointMet(th, pts[i-1]) || !pointMet(th, pts[i]) {
				continue
			}
			at := interpolate(pts[i-1], pts[i], thresholds.Quantity(th.Value, pts[i].capacity)) + latency
			step := i
			if at >= pts[i].at {
				step = stepAt(steps, at)
			}
			out = append(out, kubeletSync{At: at, Step: step, Trigger: triggerMemcg})
		}
	}
	return out
}

// schedule merges housekeeping ticks and memcg syncs in time order.
func schedule(tick, memcg []kubeletSync) []kubeletSync {
	all := append(slices.Clone(tick), memcg...)
	slices.SortStableFunc(all, func(a, b kubeletSync) int { return cmp.Compare(a.At, b.At) })
	return all
}

// replay runs the kubelet's synchronize at every sync until the first
// eviction.
func (m kubeletModel) replay(syncs []kubeletSync) kubeletOutcome {
	tr := thresholds.NewTracker(m.TransitionPeriod, 0)
	var out kubeletOutcome
	out.Reason = "no threshold met at any of its syncs"
	for _, s := range syncs {
		if s.Step < 0 {
			continue
		}
		step := m.Steps[s.Step]
		now := snapshot.Epoch.Add(s.At)
		obs := step.ObservationsFor(m.HugepageAware)
		if s.Trigger == triggerMemcg {
			// Read when notified: fresh at the sync.
			obs = maps.Clone(obs)
			for sig, o := range obs {
				o.Time = now
				obs[sig] = o
			}
		}
		ev := tr.Evaluate(now, m.Thresholds, obs)
		if len(ev.Met) > 0 && !out.Noticed {
			out.Noticed, out.NoticedAt, out.NoticedBy = true, s.At, s.Trigger
			out.Reason = "a threshold met, but not acted on by the last step"
		}
		if len(ev.Actionable) == 0 {
			continue
		}
		th := ev.Actionable[0]
		cands := kubeletRank(th.Signal, m.Layout, step.Pods, step.Stats)
		i := slices.IndexFunc(cands, func(c ranking.Candidate) bool { return !kubeletCritical(c.Pod) })
		if i < 0 {
			out.Reason = thresholds.Format(th) + " met, but every pod is critical or there are none: the kubelet evicts none"
			continue
		}
		c := cands[i]
		msg, _ := decide.EvictionMessage(th, obs[th.Signal], c)
		out.Evicted, out.EvictedAt, out.EvictedBy = true, s.At, s.Trigger
		out.Threshold, out.Step, out.Victim, out.Message = th, s.Step, c.Pod.Ref(), msg
		out.GracePeriod = kubeletGracePeriod(th, c.Pod, m.MaxPodGrace)
		out.Reason = ""
		return out
	}
	return out
}

// kubeletWindow is when the kubelet would notice and act, at the two
// extremes of its ticks' unknown phase.
type kubeletWindow struct {
	// FirstMet is the index of the first step showing a kubelet threshold
	// met, -1 if none.
	FirstMet int
	// Earliest has a tick land on that step; Latest has the tick before
	// it come just before it, so the next is an interval later.
	Earliest, Latest kubeletOutcome
}

// run replays the kubelet at both phases.
func (m kubeletModel) run() kubeletWindow {
	w := kubeletWindow{FirstMet: firstMet(m.Steps, m.Thresholds, m.HugepageAware)}
	var memcg []kubeletSync
	if m.Memcg {
		memcg = memcgSyncs(m.Steps, m.Thresholds, m.HugepageAware, kubeletMemcgLatency)
	}
	if w.FirstMet < 0 {
		none := kubeletOutcome{Reason: "no threshold of the kubelet's is met at any step"}
		w.Earliest, w.Latest = none, none
		return w
	}
	at := m.Steps[w.FirstMet].At
	w.Earliest = m.replay(schedule(ticks(m.Steps, at, m.Housekeeping), memcg))
	w.Latest = m.replay(schedule(ticks(m.Steps, at-time.Nanosecond, m.Housekeeping), memcg))
	return w
}

// kubeletCritical is the kubelet's IsCriticalPod: static, mirror, or of a
// system-critical priority. (evictd's "spared" pods are its own.)
func kubeletCritical(p *signals.Pod) bool {
	return p.Static || p.Mirror || p.Priority >= signals.SystemCriticalPriority
}

// kubeletGracePeriod is the grace period the kubelet's eviction gives pod:
// immediateEvictionGracePeriodSeconds (1) for a hard threshold; for a soft
// one min(--eviction-max-pod-grace-period, the pod's own); the pod worker
// never gives less than 1 s (calculateEffectiveGracePeriod), a negative
// flag included.
func kubeletGracePeriod(th thresholds.Threshold, pod *signals.Pod, maxPodGrace int64) int64 {
	if th.Hard() {
		return 1
	}
	own := int64(30)
	if pod.TerminationGracePeriodSeconds != nil {
		own = *pod.TerminationGracePeriodSeconds
	}
	return max(min(maxPodGrace, own), 1)
}

// kubeletRankBy is how the kubelet's rank function for a signal orders pods.
type kubeletRankBy int

const (
	kubeletByPriority kubeletRankBy = iota
	kubeletByMemory                 // rankMemoryPressure
	kubeletByDisk                   // rankDiskPressureFunc, bytes
	kubeletByInodes                 // rankDiskPressureFunc, inodes
	kubeletByPIDs                   // rankPIDPressure
)

func kubeletRankFor(sig signals.Signal, layout signals.FsLayout) kubeletRankBy {
	switch sig {
	case signals.MemoryAvailable, signals.AllocatableMemoryAvailable:
		return kubeletByMemory
	case signals.PIDAvailable:
		return kubeletByPIDs
	}
	if !ranking.ByUsage(sig, layout) {
		return kubeletByPriority
	}
	switch sig {
	case signals.NodeFsInodesFree, signals.ImageFsInodesFree, signals.ContainerFsInodesFree:
		return kubeletByInodes
	case signals.NodeFsAvailable, signals.ImageFsAvailable, signals.ContainerFsAvailable:
		return kubeletByDisk
	}
	return kubeletByPriority
}

// kubeletRank orders pods as the kubelet's rank function for sig does.
// ranking.Rank measures them (usage, request, stats); its order, evictd's,
// is replaced by the kubelet's, which has no QoS or DaemonSet rule:
//
//   - memory, disk bytes: pods without stats, then pods over their
//     request, first; then lower priority; then larger usage − request;
//   - inodes: the same, a pod's inode "request" being 0 (so any pod using
//     inodes is over it) and the ephemeral-storage request, in bytes,
//     subtracted from its inode count, as the kubelet does;
//   - PIDs: lower priority, then pods without stats, then more tasks.
//
// The kubelet's sort is not stable; ties here go by namespace/name and UID
// so that the replay is the same every time.
func kubeletRank(sig signals.Signal, layout signals.FsLayout, pods []signals.Pod, stats map[string]signals.PodStats) []ranking.Candidate {
	cands := ranking.Rank(sig, layout, pods, stats)
	by := kubeletRankFor(sig, layout)
	slices.SortStableFunc(cands, func(a, b ranking.Candidate) int { return kubeletCompare(by, &a, &b) })
	return cands
}

func kubeletCompare(by kubeletRankBy, a, b *ranking.Candidate) int {
	trueFirst := func(x, y bool) int {
		switch {
		case x == y:
			return 0
		case x:
			return -1
		}
		return 1
	}
	key := func(c *ranking.Candidate) int64 { return c.Usage - c.Request }
	if by == kubeletByInodes {
		key = func(c *ranking.Candidate) int64 { return c.Usage - max(c.Pod.EphemeralStorageRequest, 0) }
	}
	switch by {
	case kubeletByMemory, kubeletByDisk, kubeletByInodes:
		if c := trueFirst(!a.HasStats, !b.HasStats); c != 0 {
			return c
		}
		exceeds := func(c *ranking.Candidate) bool {
			if by == kubeletByInodes {
				return c.Usage > 0
			}
			return c.ExceedsRequest
		}
		if c := trueFirst(exceeds(a), exceeds(b)); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(a.Pod.Priority, b.Pod.Priority); c != 0 {
		return c
	}
	switch by {
	case kubeletByPIDs:
		if c := trueFirst(!a.HasStats, !b.HasStats); c != 0 {
			return c
		}
		fallthrough
	case kubeletByMemory, kubeletByDisk, kubeletByInodes:
		if a.HasStats && b.HasStats {
			if c := cmp.Compare(key(b), key(a)); c != 0 {
				return c
			}
		}
	}
	return cmp.Or(cmp.Compare(a.Pod.Namespace, b.Pod.Namespace), cmp.Compare(a.Pod.Name, b.Pod.Name), cmp.Compare(a.Pod.UID, b.Pod.UID))
}

// availPoint is one step's reading of a signal.
type availPoint struct {
	at                 time.Duration
	avail, capacity    int64
	ok                 bool
	hugePages          int64 // the step's hugepages, for memory.available
	hugepageAwareAvail int64 // avail less the hugepages (memory.available), else avail
}

// availPoints reads sig at every step, memory.available as hugepageAware
// says.
func availPoints(steps []snapshot.Step, sig signals.Signal, hugepageAware bool) []availPoint {
	pts := make([]availPoint, len(steps))
	for i, s := range steps {
		o, ok := s.ObservationsFor(hugepageAware)[sig]
		pts[i] = availPoint{at: s.At, avail: o.Available, capacity: o.Capacity, ok: ok, hugePages: s.HugePages, hugepageAwareAvail: o.Available}
		if ok && sig == signals.MemoryAvailable {
			pts[i].hugepageAwareAvail = s.ObservationsFor(true)[sig].Available
		}
	}
	return pts
}

func pointMet(th thresholds.Threshold, p availPoint) bool {
	return p.ok && thresholds.Quantity(th.Value, p.capacity) > p.avail
}

// interpolate is when available fell to q between a and b, in a straight
// line; a when it was already below q there, b when it never dropped.
func interpolate(a, b availPoint, q int64) time.Duration {
	drop := a.avail - b.avail
	switch {
	case a.avail <= q:
		return a.at
	case drop <= 0 || b.avail > q:
		return b.at
	}
	frac := float64(a.avail-q) / float64(drop)
	return a.at + time.Duration(frac*float64(b.at-a.at))
}

// growth is how fast available fell from a to b, bytes per second
// (negative when it rose).
func growth(a, b availPoint) float64 {
	dt := (b.at - a.at).Seconds()
	if dt <= 0 {
		return 0
	}
	return float64(a.avail-b.avail) / dt
}

// runsOut is when memory would run out going on from p at rate bytes per
// second: when memory.available less the hugepages (what the kernel has
// left) reaches 0. false when memory use is not growing.
func runsOut(p availPoint, rate float64) (time.Duration, bool) {
	if rate <= 0 {
		return 0, false
	}
	left := max(p.hugepageAwareAvail, 0)
	return p.at + time.Duration(float64(left)/rate*float64(time.Second)), true
}

// memoryRace is the timeline of a memory threshold's crossing.
type memoryRace struct {
	Threshold thresholds.Threshold
	// Before and After are the readings (the steps', and a record's
	// fast-poll reads between them) bracketing the crossing, BeforeAt and
	// AfterAt their times; Before is -1 when the threshold is met from
	// the first reading (the rate then comes from the first two).
	Before, After     int
	BeforeAt, AfterAt time.Duration
	CrossingAt        time.Duration
	// Growth is memory use's growth, the drop of available, in bytes per
	// second between the bracketing steps.
	Growth float64
	// RunsOut is true when memory would run out, at RunsOutAt.
	RunsOut   bool
	RunsOutAt time.Duration
}

// findMemoryRace finds, of the memory thresholds of ths, the one crossed
// first (hard ones first on a tie) and the timeline around its crossing.
func findMemoryRace(steps []snapshot.Step, ths []thresholds.Threshold, hugepageAware bool, reads ...availRead) (memoryRace, bool) {
	var best memoryRace
	found := false
	for _, th := range ths {
		if th.Signal != signals.MemoryAvailable && th.Signal != signals.AllocatableMemoryAvailable {
			continue
		}
		pts := availPoints(steps, th.Signal, hugepageAware)
		for _, rd := range reads {
			if rd.sig == th.Signal {
				pts = append(pts, availPoint{at: rd.at, avail: rd.avail, capacity: rd.capacity, ok: true, hugepageAwareAvail: rd.avail})
			}
		}
		slices.SortStableFunc(pts, func(a, b availPoint) int { return cmp.Compare(a.at, b.at) })
		r, ok := raceFor(pts, th)
		if !ok {
			continue
		}
		if !found || r.CrossingAt < best.CrossingAt || (r.CrossingAt == best.CrossingAt && th.Hard() && !best.Threshold.Hard()) {
			best, found = r, true
		}
	}
	return best, found
}

// raceFor is the timeline of th's first crossing on pts.
func raceFor(pts []availPoint, th thresholds.Threshold) (memoryRace, bool) {
	r := memoryRace{Threshold: th, Before: -1}
	for i, p := range pts {
		if !pointMet(th, p) {
			continue
		}
		r.After, r.AfterAt = i, p.at
		a, b := i-1, i
		if i == 0 || !pts[i-1].ok {
			r.CrossingAt = p.at
			a, b = i, i+1
		} else {
			r.Before, r.BeforeAt = i-1, pts[i-1].at
			r.CrossingAt = interpolate(pts[a], pts[b], thresholds.Quantity(th.Value, p.capacity))
		}
		if b < len(pts) && pts[a].ok && pts[b].ok {
			r.Growth = growth(pts[growthFrom(pts, a, b)], pts[b])
			r.RunsOutAt, r.RunsOut = runsOut(pts[b], r.Growth)
		}
		return r, true
	}
	return r, false
}

// minGrowthSpan is the least time the growth at a crossing is measured
// over when the readings allow it: the fast poll hands on a reading at most
// every 10 ms (wakeup.ReadsEvery), but the one that meets a threshold at
// once, and a pass's step is stamped when the pass began, before it read;
// two readings microseconds apart across a 1 MiB step would make a growth
// of tens of GiB/s.
const minGrowthSpan = 10 * time.Millisecond

// growthFrom is the reading the growth up to pts[b] is measured from: the
// newest usable one at or before a at least minGrowthSpan before b, a
// when there is none.
func growthFrom(pts []availPoint, a, b int) int {
	for i := a; i >= 0; i-- {
		if !pts[i].ok {
			break
		}
		if pts[b].at-pts[i].at >= minGrowthSpan {
			return i
		}
	}
	return a
}
