package evict

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
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

// ChangeNotifier is a PodCache that says when it takes in a change:
// Changed returns a channel closed at the next one. The wait for an
// evicted pod then looks at once rather than at its next poll.
type ChangeNotifier interface {
	Changed() <-chan struct{}
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
	// last is the pod as the last look found it in the cache, nil when
	// the cache did not hold it (this UID).
	last *v1.Pod
	// remarks counts the times evictd's DisruptionTarget condition or
	// terminal status was written again during the wait (see waitGone).
	remarks int
	// ownTerminal is true when evictd wrote the pod's terminal status
	// itself: its phase Failed then says nothing of its containers.
	ownTerminal bool
	// succeeded is true once the wait has seen the kubelet report the
	// pod Succeeded despite that status.
	succeeded bool
}

// watch starts following p, noting whether the cache holds it now.
func (e *Evicter) watch(p *signals.Pod) *podWatch {
	w := &podWatch{pods: e.cfg.Pods, namespace: p.Namespace, name: p.Name, uid: types.UID(p.UID)}
	w.look()
	return w
}

// look reads the pod from the cache once and tells whether it is gone
// (not in the cache or replaced there after the cache held it, or
// finished) and, if not, in what state it is, for the timeout message. A
// pod whose terminal status evictd wrote itself (ownTerminal) has
// finished only once the kubelet has removed it: its phase was Failed
// before its containers stopped.
func (w *podWatch) look() (bool, string) {
	pod, ok := w.pods.CachedPod(w.namespace, w.name)
	w.last = nil
	switch {
	case ok && pod.UID == w.uid:
		w.seen = true
		w.last = pod
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
	case terminal(pod) && !w.ownTerminal:
		return true, "finished"
	case terminal(pod) && removedByKubelet(pod) && len(pod.Finalizers) > 0:
		// Deleted with grace 0, once its containers stopped (evictd's
		// delete of a pod in phase Failed, or the kubelet's last act for
		// a pod), and held by a finalizer (a Job's) that is not the
		// node's to remove. Without one, the object is about to go.
		return true, "finished and removed, held by finalizers"
	case pod.DeletionTimestamp == nil:
		return false, "not terminating"
	}
	return false, fmt.Sprintf("terminating since %s with a grace period of %ds",
		pod.DeletionTimestamp.UTC().Format(time.RFC3339), ptr.Deref(pod.DeletionGracePeriodSeconds, 0))
}

// maxRemarks bounds how many times one eviction's wait writes evictd's
// DisruptionTarget condition or terminal status again, so that evictd
// never keeps up a write fight with another writer.
const maxRemarks = 3

// waitGone looks at the pod in Config.Pods, the informer's cache of the
// node's pods, every Config.PollInterval until it is gone (see podWatch),
// for at most Config.CleanupTimeout by the injected clock; no look is a
// request to the API server. It returns nil when the pod is gone, an
// error wrapping decide.ErrNotGoneInTime with what the last look saw when
// it is not, and ctx's error when ctx ends first.
//
// A look that finds what evictd wrote written over writes it again
// (rewrite). After an eviction through the Eviction API (when the
// terminal status could not be written) the kubelet does that to
// evictd's DisruptionTarget condition: it started
// terminating the pod from the copy the deletion brought, which carried
// the API server's own condition (evictd's came a moment later), and
// writes that condition back with the pod's final phase; once the phase
// is final the kubelet no longer writes the condition. The kubelet
// deletes the pod some tens to hundreds of milliseconds after that write
// (once its volumes and cgroup are gone): a cache that notifies its
// changes (ChangeNotifier) has the wait look at once, otherwise the
// looks, mere cache reads, come every PollInterval (100 ms by default).
func (e *Evicter) waitGone(ctx context.Context, log *slog.Logger, w *podWatch, r decide.Request) error {
	deadline := e.cfg.Clock.Now().Add(e.cfg.CleanupTimeout)
	notifier, _ := w.pods.(ChangeNotifier)
	w.ownTerminal = e.ownTerminal(w.uid)
	for {
		var changed <-chan struct{}
		if notifier != nil {
			changed = notifier.Changed() // before the look: no change missed between them
		}
		gone, state := w.look()
		e.rewrite(ctx, log, w, r)
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
		case <-changed:
			t.Stop()
		}
	}
}

// lastOr is the pod as the last look found it, or pod when the cache did
// not hold it.
func (w *podWatch) lastOr(pod *v1.Pod) *v1.Pod {
	if w.last != nil {
		return w.last
	}
	return pod
}

// rewrite writes again what another writer wrote over, as the last look
// found the pod (at most maxRemarks times in all):
//   - evictd's terminal status, when the pod reads a phase not yet
//     terminal in a version newer than evictd's write: the kubelet's
//     periodic status reconciliation wrote the status it had cached back
//     before it took in evictd's. The kubelet keeps Failed only if the
//     pod it syncs reads Failed when its containers have stopped
//     (terminal.go);
//   - evictd's DisruptionTarget condition, when another reason replaced
//     it (after the Eviction API, when the terminal status could not be
//     written).
//
// A pod the kubelet reports Succeeded despite evictd's status is not
// written over (deploy/policy.yaml would refuse it, and a Job may have
// counted it already): a warning says so, once.
func (e *Evicter) rewrite(ctx context.Context, log *slog.Logger, w *podWatch, r decide.Request) {
	p := w.last
	if p == nil {
		return
	}
	if w.ownTerminal && p.Status.Phase == v1.PodSucceeded && !w.succeeded {
		w.succeeded = true
		log.Warn("the kubelet reported the evicted pod Succeeded: its containers exited 0 before the kubelet saw evictd's terminal status (a Job counts the pod as a success)")
		return
	}
	if w.remarks >= maxRemarks || !e.writtenOver(p) {
		return
	}
	switch {
	case w.ownTerminal && !terminal(p):
		w.remarks++
		log.Debug("the pod's terminal status was written over; writing evictd's again", "phase", p.Status.Phase, "remark", w.remarks)
		if _, err := e.markEvicted(ctx, p, r.Message, false, 0); err != nil && !apierrors.IsNotFound(err) {
			e.apiError(metrics.APIPodPatchStatus)
			log.Warn("could not write the pod's terminal status again", "err", err)
		}
	case foreignDisruptionTarget(p):
		w.remarks++
		log.Debug("the pod's DisruptionTarget condition was written over; setting evictd's again",
			"phase", p.Status.Phase, "remark", w.remarks)
		e.markDisruptionTarget(ctx, log, p, r.Message, false)
	}
}

// writtenOver reports whether pod, as the cache holds it, is newer than
// the version evictd's own condition write returned: only then was a
// foreign condition written over evictd's. An older one is the cache not
// yet caught up (the Eviction API's condition, before evictd's patch came
// through the watch). Without a recorded write, or with resourceVersions
// that do not compare (an API server whose versions are not the
// integers Kubernetes now promises), it says yes, and the wait sets the
// condition again as it would anyway.
func (e *Evicter) writtenOver(pod *v1.Pod) bool {
	m, ok := e.marked.Load(pod.UID)
	if !ok {
		return true
	}
	cmp, err := resourceversion.CompareResourceVersion(pod.ResourceVersion, m.(mark).rv)
	return err != nil || cmp > 0
}

// foreignDisruptionTarget reports whether pod carries a DisruptionTarget
// condition with another reason than evictd's.
func foreignDisruptionTarget(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			return c.Reason != decide.DisruptionTargetReason
		}
	}
	return false
}

// tornDown waits, after evictd has deleted the pod of r itself, until
// Config.SandboxReady reports no ready sandbox of it (the kubelet has
// torn the pod down), looking every PollInterval and at most
// CleanupTimeout by the injected clock. The kubelet removes a pod it
// deletes only once it has torn it down; a Failed pod the API server
// removes at once, and the next pass would find the space of its exited
// containers still held. An error of the runtime or the bound ends the
// wait with a line in the log: the pass that follows then sees what is
// still held, as it would have.
func (e *Evicter) tornDown(ctx context.Context, log *slog.Logger, r decide.Request) {
	if e.cfg.SandboxReady == nil {
		return
	}
	deadline := e.cfg.Clock.Now().Add(e.cfg.CleanupTimeout)
	for {
		ready, err := e.cfg.SandboxReady(ctx, r.Pod.UID)
		switch {
		case err != nil:
			log.Info("could not ask the runtime whether the evicted pod's sandbox is stopped; not waiting for it", "err", err)
			return
		case !ready:
			return
		case !e.cfg.Clock.Now().Before(deadline):
			log.Warn("the evicted pod is gone but the kubelet has not stopped its sandbox yet; deciding again without waiting for it", "waited", e.cfg.CleanupTimeout)
			return
		}
		t := e.cfg.Clock.NewTimer(e.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}
