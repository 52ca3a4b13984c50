package evict

import (
	"context"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
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
	for {
		changed := notifier.Changed()
		e.sweep(ctx, lister, tried)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
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
		if _, busy := e.marked.Load(pod.UID); busy {
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
	if pod.Status.Phase != v1.PodFailed || pod.DeletionTimestamp != nil || running(pod) {
		return false
	}
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
