package evict

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
)

// PodCache reads the node's pods from an informer's cache, without a
// request to the API server. internal/podsource.Source implements it.
type PodCache interface {
	// CachedPod returns the pod of that namespace and name as the cache
	// holds it, and whether the cache holds one. The pod is the cache's:
	// the Evicter never modifies it.
	CachedPod(namespace, name string) (*v1.Pod, bool)
}

// podWatch follows one pod in the cache through an eviction.
//
// The cache lags the API server. It applies the API server's changes in
// their order, so once it has held the pod (its UID), the pod missing
// from it, or another pod of the same name in its place, can only come
// from the pod's deletion: the pod is gone. Until it has held the pod,
// neither says anything (the cache may not have caught up with the pod's
// creation, or another pod of the same name may be an older one it has
// not seen deleted yet), so the pod is not counted gone and the wait's
// timeout says why. Evict notes whether the cache holds the pod before it
// issues the eviction: the pods it is asked to evict are listed from the
// same cache, so it has held them, and the wait ends as soon as the cache
// sees the pod go. A pod the cache missed entirely (created and deleted
// while its watch was down) costs a wait of Config.CleanupTimeout, never
// an early end.
type podWatch struct {
	pods            PodCache
	namespace, name string
	uid             types.UID
	seen            bool // the cache has held the pod
}

// watch starts following p, noting whether the cache holds it now.
func (e *Evicter) watch(p *signals.Pod) *podWatch {
	w := &podWatch{pods: e.cfg.Pods, namespace: p.Namespace, name: p.Name, uid: types.UID(p.UID)}
	w.look()
	return w
}

// look reads the pod from the cache once and tells whether it is gone
// (not in the cache or replaced there after the cache held it, or
// finished) and, if not, in what state it is, for the timeout message.
func (w *podWatch) look() (bool, string) {
	pod, ok := w.pods.CachedPod(w.namespace, w.name)
	switch {
	case ok && pod.UID == w.uid:
		w.seen = true
	case !ok && w.seen:
		return true, "gone"
	case !ok:
		return false, "not in evictd's pod cache, which has not held it yet (it lags the API server)"
	case w.seen:
		return true, "replaced"
	default:
		return false, fmt.Sprintf("not in evictd's pod cache, which holds another pod of the same name (UID %s) and has not held this one yet (it lags the API server)", pod.UID)
	}
	switch {
	case terminal(pod):
		return true, "finished"
	case pod.DeletionTimestamp == nil:
		return false, "not terminating"
	}
	return false, fmt.Sprintf("terminating since %s with a grace period of %ds",
		pod.DeletionTimestamp.UTC().Format(time.RFC3339), ptr.Deref(pod.DeletionGracePeriodSeconds, 0))
}

// waitGone looks at the pod in Config.Pods, the informer's cache of the
// node's pods, every Config.PollInterval until it is gone (see podWatch),
// for at most Config.CleanupTimeout by the injected clock; no look is a
// request to the API server. It returns nil when the pod is gone, an
// error wrapping decide.ErrNotGoneInTime with what the last look saw when
// it is not, and ctx's error when ctx ends first.
func (e *Evicter) waitGone(ctx context.Context, w *podWatch) error {
	deadline := e.cfg.Clock.Now().Add(e.cfg.CleanupTimeout)
	for {
		gone, state := w.look()
		if gone {
			return nil
		}
		left := deadline.Sub(e.cfg.Clock.Now())
		if left <= 0 {
			return fmt.Errorf("%w (waited %s; the pod is %s)", decide.ErrNotGoneInTime, e.cfg.CleanupTimeout, state)
		}
		t := e.cfg.Clock.NewTimer(min(e.cfg.PollInterval, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("stopped waiting for the pod to go (it is %s): %w", state, ctx.Err())
		case <-t.C():
		}
	}
}
