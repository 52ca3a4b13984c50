package manager

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
)

// The loop's world: its settings, its connections, and every interface it
// declares for the adapters internal/agent hands it.

// Config holds the loop's own settings.
type Config struct {
	// HousekeepingInterval is the time between two passes when nothing
	// wakes the loop earlier (--housekeeping-interval, 10s by default).
	// Required.
	HousekeepingInterval time.Duration
	// StuckAfter is how long after the last pass ended the loop counts as
	// stuck, and Ready fails (config.Durations.StuckAfter: three
	// housekeeping intervals, 30s by default). Required.
	StuckAfter time.Duration
	// DryRun decides and reports but acts on nothing.
	DryRun  bool
	Decider decide.DeciderConfig
	// MaxEvictionWait is the longest an Evicter may take to return (its
	// bounded wait for the pod to go, plus its requests); a pass that runs
	// longer than StuckAfter plus this makes the loop unready. Default 60s.
	MaxEvictionWait time.Duration
	// MaxEvictionsPerHour caps the evictions issued (evicted, or stopped
	// locally) in any sliding hour (--max-evictions-per-hour); once
	// reached, no pod is evicted until the oldest of them is an hour old.
	// 0 means no cap.
	MaxEvictionsPerHour int
	// LocalStorageEvictionQPS and LocalStorageEvictionBurst rate-limit the
	// evictions of a local-storage pass, the one kind of pass that may
	// evict several pods: Burst at once, then one more every 1/QPS
	// seconds (--local-storage-eviction-qps, --local-storage-eviction-burst).
	// A QPS of 0 means no limit.
	LocalStorageEvictionQPS   float64
	LocalStorageEvictionBurst int
	// CleanupTimeout bounds the wait for an eviction in flight: a pod
	// evictd evicted holds back the next eviction until it has gone, or
	// until this long after its deletionTimestamp (the deletion plus its
	// grace period). Set it to the Evicter's bound on its own wait
	// (evict.Config.CleanupTimeout; cmd/evictd gives both
	// config.Durations.CleanupTimeout). Default 30s, the kubelet's
	// podCleanupTimeout.
	CleanupTimeout time.Duration
}

// Deps are the loop's connections to the world. Clock, Sources, Pods,
// Stats and Metrics are required; a nil Evicter means evictd has no way
// to act (standalone mode) and behaves as in dry-run.
type Deps struct {
	Clock   clock.WithTicker
	Sources []signals.Source
	Pods    PodSource
	Stats   PodStatsSource
	Evicter Evicter
	// Status, when set, is told the node's pressures after every pass.
	Status StatusPublisher
	// Reclaimer, when set, frees dead containers and unused images before
	// a pod is evicted for a disk signal.
	Reclaimer Reclaimer
	Metrics   *metrics.Metrics
	Log       *slog.Logger
	// AfterPass, when set, is called by the loop after each pass with the
	// status it published, once the pass's deadline timer is set (main
	// uses it to tell systemd it is ready).
	AfterPass func(*Status)
	// Events, when set, receives the node events of the loop's own (the
	// eviction cap reached).
	Events NodeEvents
	// Wakeups, when set, is given every pass's observations, from which
	// it re-arms the kernel notifiers and the fast poll.
	Wakeups Rearmer
	// Recorder, when set, is given every pass once it has acted (the
	// flight recorder, internal/recorder).
	Recorder Recorder
	// Shadows, when set, gives memory.available by the other formulas
	// after each pass's observations, which the loop exports (shadow.go).
	Shadows MemoryShadows
	// OOMKills, when set, gives the kernel's OOM kill counts, which the
	// loop reads once per housekeeping interval, exports and posts as
	// node events (oomkills.go).
	OOMKills OOMKillCounter
	// DiskReleased, when set, says whether the disk a pod used is
	// released: its directory under the kubelet's root dir is gone. A
	// pod evicted for a disk signal holds back the next disk eviction
	// until it is, as the kubelet waits for an evicted pod's cleanup, or
	// for at most the cleanup timeout: the pod's object can be gone
	// (evictd deletes it itself once its containers are stopped) before
	// its volumes are, and a pass in between would see the disk still
	// full and evict another pod for nothing.
	DiskReleased func(uid string) bool
	// LocalStorage, when set, says before each pass whether the pods over
	// their own local-storage limits are left to the kubelet
	// (--local-storage-eviction auto, decided from the node); unset, the
	// Decider's configuration says it once for all.
	LocalStorage LocalStorageAgent
}

// LocalStorageAgent says whether the kubelet evicts the pods over their
// own local-storage limits, so that evictd leaves them to it.
type LocalStorageAgent interface {
	ByKubelet() bool
}

// PodSource lists the pods running on this node, and evictd's evictions
// still in flight there.
type PodSource interface {
	Pods(ctx context.Context) ([]signals.Pod, error)
	// InFlight returns the pods evictd evicted that are still
	// terminating: deletion requested, not finished, with a
	// DisruptionTarget condition of reason DisruptionTargetReason. Nil
	// when it cannot tell (no API server, or before the first list).
	InFlight() []decide.InFlight
}

// Relister is a PodSource that can list its pods afresh: the loop asks for
// it when the API server says a pod the source still lists is gone, the
// sign of a cache behind the API server (internal/podsource.Source).
type Relister interface {
	Relist(reason string)
}

// PodStatsSource reads the usage of the given pods, keyed by pod UID: the
// kinds asked for, and no more (a pass that ranks no pod asks for disk
// usage alone, which the local-storage limits need). Pods it could not
// measure are left out and rank first. The pods listed are those still
// running: a source that keeps something per pod drops what it kept for
// the others.
type PodStatsSource interface {
	PodStats(ctx context.Context, now time.Time, pods []signals.Pod, kinds signals.PodStatsKinds) (map[string]signals.PodStats, error)
}

// Evicter carries out one eviction. It returns when the pod is gone or a
// bounded wait has passed, so that the next pass sees the effect. An error
// that wraps ErrDisruptionBudget means a PodDisruptionBudget refused it.
type Evicter interface {
	Evict(ctx context.Context, r decide.Request) error
}

// StatusPublisher receives the node's pressure after every pass. Publish
// must not block: the publisher keeps the latest report and writes it on
// its own schedule (at once on a transition, as a heartbeat otherwise),
// retrying while the API server is away.
type StatusPublisher interface {
	Publish(now time.Time, pressures []decide.PressureReport)
}

// Reclaimer frees node-level resources (dead containers and sandboxes,
// unused images) for a disk signal, in the order the layout calls for,
// before any pod is evicted for that signal.
type Reclaimer interface {
	Reclaim(ctx context.Context, sig signals.Signal, layout signals.FsLayout) ([]decide.ReclaimAction, error)
}

// NodeEvents posts events on this node. Warn must not block: the sink
// queues the event and sends it on its own.
type NodeEvents interface {
	Warn(reason, message string)
}

// OOMKillCounter reads the kernel's OOM kill counts
// (signals/host.OOMKillReader): two small files, which the loop reads
// once per housekeeping interval.
type OOMKillCounter interface {
	OOMKills(ctx context.Context, now time.Time) (signals.OOMKills, error)
}

// Rearmer re-arms wake-up sources from a pass's observations; Update must
// not block.
type Rearmer interface {
	Update(obs signals.Observations)
}

// Recorder keeps what the passes saw and writes a record of each decision
// to evict. Record is called by the loop after the pass has acted and
// must not block: it may hold on to p's observations, but not to its pods
// and stats, which it must copy if it keeps them.
type Recorder interface {
	Record(p PassRecord)
}

// PassRecord is one pass as the flight recorder sees it.
type PassRecord struct {
	Time    time.Time
	Trigger metrics.Trigger
	DryRun  bool
	Obs     signals.Observations
	Pods    []signals.Pod
	Stats   map[string]signals.PodStats
	// LocalStorageByKubelet says whether the pass left the pods over their
	// own local-storage limits to the kubelet.
	LocalStorageByKubelet bool
	// Decision is the pass's decision, its Evaluation included.
	Decision decide.Decision
	Acted    Acted
}
