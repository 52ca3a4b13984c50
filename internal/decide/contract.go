package decide

import (
	"errors"
	"time"

	"github.com/evictd/evictd/signals"
)

// DisruptionTargetReason is the reason of the DisruptionTarget condition
// evictd puts on every pod it evicts. The Evicter writes it; the pod
// source finds evictd's evictions still in flight by it, also those of an
// evictd process that has since died.
const DisruptionTargetReason = "EvictionByEvictd"

// DefaultCleanupTimeout is the default of the loop's cleanup timeout, the
// kubelet's podCleanupTimeout.
const DefaultCleanupTimeout = 30 * time.Second

// InFlight is an eviction by evictd still under way: a pod of the node
// that carries evictd's DisruptionTarget condition and is terminating
// (deletion requested, not finished). It lives in the API server, so an
// evictd restarted while the pod terminates sees it too.
type InFlight struct {
	Namespace string
	Name      string
	UID       string
	// DeletionTimestamp is the pod's metadata.deletionTimestamp: the time
	// of the deletion plus its grace period, when the kubelet is to have
	// stopped the pod.
	DeletionTimestamp time.Time
	// DeletionGracePeriod is the pod's metadata.deletionGracePeriodSeconds,
	// the grace period its eviction gave it: DeletionTimestamp less it is
	// when the eviction was issued.
	DeletionGracePeriod time.Duration
}

// Ref is namespace/name.
func (f InFlight) Ref() string { return f.Namespace + "/" + f.Name }

// The errors an Evicter wraps so that the loop can tell what happened;
// the loop declares the Evicter, and the adapters that implement it import
// these from here.
var (
	// ErrDisruptionBudget: the API server refused the eviction because of
	// a PodDisruptionBudget. Nothing was done to the pod.
	ErrDisruptionBudget = errors.New("eviction refused by a PodDisruptionBudget")
	// ErrPodGone: there was nothing to evict (the pod was deleted, replaced,
	// finished or already terminating); no eviction was issued.
	ErrPodGone = errors.New("pod already gone")
	// ErrNotGoneInTime: the eviction was issued but the pod had not gone
	// when the bounded wait ended; the next pass decides again.
	ErrNotGoneInTime = errors.New("eviction issued but the pod has not gone in time")
	// ErrStoppedLocally: a hard eviction could not be issued because the
	// API server did not answer within --local-kill-after, so the pod's
	// containers were stopped on this node through the CRI instead; the
	// Evicter keeps trying to issue the eviction and completes it when the
	// API server is back.
	ErrStoppedLocally = errors.New("API server unreachable; the pod's containers were stopped through the runtime and the eviction is owed")
	// ErrStoppedStandalone: evictd runs with no API server (standalone,
	// --standalone-stop) and killed the pod's containers through the
	// CRI; nothing is owed, and the kubelet restarts them as the pod's
	// restart policy says.
	ErrStoppedStandalone = errors.New("no API server (standalone); the pod's containers were killed through the runtime")
	// ErrNotActed: evictd runs with no API server and cannot carry out
	// this eviction alone (a soft or disk threshold's); nothing was done.
	ErrNotActed = errors.New("standalone: not carried out")
)

// ReclaimKind is a kind of node-level reclaim, the kind label of
// evictd_reclaim_total and evictd_reclaimed_bytes_total.
type ReclaimKind string

// The kinds of node-level reclaim, as the reclaim package spells them.
const (
	// ReclaimContainers: dead containers and sandboxes.
	ReclaimContainers ReclaimKind = "containers"
	// ReclaimImages: unused images.
	ReclaimImages ReclaimKind = "images"
)

// Reclaims reports whether node-level reclaim runs before a pod is evicted
// for sig: for the disk signals, whose space and inodes dead containers
// and unused images hold.
func Reclaims(sig signals.Signal) bool { return sig.Pressure() == signals.DiskPressure }

// ReclaimSettle is the one settling time of node-level reclaim. The
// reclaimer watches a filesystem at most this long after it removed
// something, until its free space stops changing; and when the loop still
// finds a disk threshold met after a reclaim that removed something, it
// evicts for it only once this much more time has passed: containerd
// removes a deleted container's snapshot from disk in its garbage
// collector, which it runs after deletions at most once per 50 times its
// last run's length (its pause threshold, 2%), so seconds later on a busy
// node.
const ReclaimSettle = 5 * time.Second

// ReclaimAction is what one kind of reclaim did.
type ReclaimAction struct {
	Kind ReclaimKind
	// Removed counts the containers, sandboxes or images deleted.
	Removed int
	// FreedBytes is what the filesystem gained, measured with statfs
	// before and after (0 when nothing could be measured).
	FreedBytes int64
	Err        error
}

// OutcomeReclaimed: node-level reclaim brought every threshold, with its
// minimum reclaim, back; no pod is evicted.
const OutcomeReclaimed Outcome = "reclaim-sufficient"

// OutcomeReclaimSettling: node-level reclaim removed containers, sandboxes
// or images but the threshold is still met; the runtime may not have freed
// their space yet, so no pod is evicted before ReclaimSettle has passed.
const OutcomeReclaimSettling Outcome = "reclaim-settling"
