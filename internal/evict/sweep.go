package evict

import (
	"context"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
)

// PodLister is a PodCache that also lists the node's pods it holds.
// internal/podsource.Source implements it. With it, Run deletes the pods
// an eviction left Failed (sweep).
type PodLister interface {
	CachedPods() []*v1.Pod
}

// sweepRetry is how long the sweep leaves a pod it could not delete before
// it tries again.
const sweepRetry = 30 * time.Second

// sweepLoop runs sweep each time the pod cache takes in a change, until ctx
// is done: the first time once the cache has listed the node's pods.
func (e *Evicter) sweepLoop(ctx context.Context, notifier ChangeNotifier, lister PodLister) {
	tried := map[types.UID]time.Time{}
	stopped := map[types.UID]bool{}
	for {
		changed := notifier.Changed()
		e.sweep(ctx, lister, tried)
		next := e.stopOverdue(ctx, lister, stopped)
		var wake <-chan time.Time
		var t clock.Timer
		if !next.IsZero() {
			t = e.cfg.Clock.NewTimer(max(next.Sub(e.cfg.Clock.Now()), 0))
			wake = t.C()
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-wake:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// overdueSlack is how long after an eviction's grace period the sweep
// waits before it stops the containers of a pod left Failed itself: the
// kubelet, or the Evicter's own stop, has had that long.
const overdueSlack = time.Second

// stopOverdue stops through Config.StopLocally, with a grace period of 1 s,
// the containers of the pods an eviction wrote Failed whose containers
// still run past the eviction's grace period (EvictedAnnotation) and
// overdueSlack, that no eviction under way in this evictd handles: the
// pods of an evictd stopped or killed mid-eviction, whose own stop would
// have come then. The kubelet gives such a pod its own
// terminationGracePeriodSeconds, which for a hard eviction's 1 s may be
// minutes. Each pod is stopped once (stopped), in the background. It
// returns when the next such stop is due, zero for none.
//
// The annotation's value is written by evictd, but a pod's owner may
// change it: at worst the owner's own pod is stopped sooner, or left to
// the kubelet and the grace period its spec gives it.
func (e *Evicter) stopOverdue(ctx context.Context, lister PodLister, stopped map[types.UID]bool) time.Time {
	if e.cfg.StopLocally == nil {
		return time.Time{}
	}
	now := e.cfg.Clock.Now()
	var next time.Time
	seen := map[types.UID]bool{}
	for _, pod := range lister.CachedPods() {
		seen[pod.UID] = true
		due, ok := overdueAt(pod)
		if !ok || stopped[pod.UID] {
			continue
		}
		if e.busy(pod.UID) {
			continue
		}
		if due.After(now) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		stopped[pod.UID] = true
		p := &signals.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)}
		log := e.log.With("pod", p.Ref(), "uid", p.UID)
		log.Info("an evicted pod's containers still run past its eviction's grace period; stopping them through the runtime", "due", due)
		go func() {
			if err := e.cfg.StopLocally(ctx, p, 1); err != nil {
				log.Warn("could not stop the evicted pod's containers through the runtime; the kubelet will", "err", err)
			}
		}()
	}
	for uid := range stopped {
		if !seen[uid] {
			delete(stopped, uid)
		}
	}
	return next
}

// overdueAt is when the sweep is to stop the containers of pod, an
// eviction's that still runs: its eviction's time, grace period and
// overdueSlack by EvictedAnnotation; false for a pod that is not one
// (not Failed with evictd's condition and a container running, being
// deleted, or an annotation of another form).
func overdueAt(pod *v1.Pod) (time.Time, bool) {
	if pod.Status.Phase != v1.PodFailed || pod.DeletionTimestamp != nil || !kubeclient.ContainersRunning(pod) || !evictdTarget(pod) {
		return time.Time{}, false
	}
	at, grace, ok := parseEvicted(pod.Annotations[EvictedAnnotation])
	if !ok {
		return time.Time{}, false
	}
	return at.Add(grace + overdueSlack), true
}

// sweep deletes, from the pods the cache holds, those an eviction left in
// phase Failed with evictd's DisruptionTarget condition, not deleted, whose
// containers the kubelet reports stopped: an eviction whose containers took
// longer to stop than evictd waited (finish), or one an evictd stopped or
// killed mid-eviction left. No eviction under way (Evict, or a completion
// of Run) is touched. A pod whose delete fails is tried again after
// sweepRetry (tried holds when each was tried).
func (e *Evicter) sweep(ctx context.Context, lister PodLister, tried map[types.UID]time.Time) {
	now := e.cfg.Clock.Now()
	for _, pod := range lister.CachedPods() {
		if !leftFailed(pod) {
			continue
		}
		if e.busy(pod.UID) {
			continue
		}
		if at, ok := tried[pod.UID]; ok && now.Sub(at) < sweepRetry {
			continue
		}
		tried[pod.UID] = now
		log := e.log.With("pod", pod.Namespace+"/"+pod.Name, "uid", pod.UID)
		err := e.deletePod(ctx, pod, 1, "")
		switch {
		case err == nil:
			log.Info("deleted an evicted pod whose containers have stopped")
			delete(tried, pod.UID)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			delete(tried, pod.UID)
		default:
			e.apiError(metrics.APIPodDelete)
			log.Warn("could not delete an evicted pod whose containers have stopped; trying again later", "err", err, "retryIn", sweepRetry)
		}
	}
	for uid, at := range tried {
		if now.Sub(at) > 10*sweepRetry {
			delete(tried, uid) // gone long since
		}
	}
}

// leftFailed reports a pod an eviction by evictd left Failed with its
// containers stopped: phase Failed, evictd's True DisruptionTarget
// condition, not being deleted, no container running. Only the pod's
// status says so, which its node and evictd write, not its owner.
func leftFailed(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodFailed && pod.DeletionTimestamp == nil && !kubeclient.ContainersRunning(pod) && evictdTarget(pod)
}

// evictdTarget reports whether the pod carries evictd's True
// DisruptionTarget condition.
func evictdTarget(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			return c.Status == v1.ConditionTrue && c.Reason == decide.DisruptionTargetReason
		}
	}
	return false
}

// startSweep starts sweepLoop when Config.Pods can list and notify, and
// returns a channel closed once it has returned (at once when it is not
// started).
func (e *Evicter) startSweep(ctx context.Context, log *slog.Logger) <-chan struct{} {
	done := make(chan struct{})
	notifier, ok1 := e.cfg.Pods.(ChangeNotifier)
	lister, ok2 := e.cfg.Pods.(PodLister)
	if !ok1 || !ok2 {
		log.Debug("the pod cache cannot list or notify: evicted pods left Failed are not swept")
		close(done)
		return done
	}
	go func() {
		defer close(done)
		e.sweepLoop(ctx, notifier, lister)
	}()
	return done
}

// busy reports whether an eviction of this evictd is under way for the pod
// with uid (Evict, or a completion of Run).
func (e *Evicter) busy(uid types.UID) bool {
	_, evicting := e.evicting.Load(uid)
	_, marked := e.marked.Load(uid)
	return evicting || marked
}
