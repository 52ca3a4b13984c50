package evict

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/metrics"
)

// EvictedReason is the reason of an evicted pod's status, the kubelet's.
const EvictedReason = "Evicted"

// EvictedAnnotation is the annotation evictd sets, to the time of the
// eviction and its grace period ("2026-11-27T13:22:08.9Z grace=1s"), in
// the same write as an evicted pod's terminal status. It makes the kubelet
// take the write as an update of the pod, which it syncs at once, rather
// than as a status change, which it would write over at its next status
// reconciliation (see the comment below). An evictd restarted mid-eviction
// reads it (sweep): past the time and grace period, it stops the pod's
// containers through the runtime, as the evictd it replaced would have.
const EvictedAnnotation = "evictd.io/evicted"

// evictedValue is EvictedAnnotation's value for an eviction at at with a
// grace period of grace seconds.
func evictedValue(at time.Time, grace int64) string {
	return fmt.Sprintf("%s grace=%ds", at.UTC().Format(time.RFC3339Nano), grace)
}

// parseEvicted reads EvictedAnnotation's value: the eviction's time and
// grace period, false for any other value (an older evictd's time alone).
func parseEvicted(v string) (time.Time, time.Duration, bool) {
	at, rest, ok := strings.Cut(v, " grace=")
	if !ok {
		return time.Time{}, 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return time.Time{}, 0, false
	}
	d, err := time.ParseDuration(rest)
	if err != nil || d < 0 {
		return time.Time{}, 0, false
	}
	return t, d, true
}

// maxStatusTries bounds how many times one eviction writes the pod's
// terminal status and deletes it when the pod changed between the two
// (the delete's resourceVersion precondition failed).
const maxStatusTries = 3

// The terminal status of an eviction.
//
// The kubelet computes a pod's phase from its containers' exit codes: once
// they have all exited 0, Succeeded (restartPolicy Never or OnFailure, or
// any pod the kubelet is terminating). A program that exits 0 on SIGTERM,
// as well-behaved batch programs do, thus ends Succeeded when it is
// evicted through a deletion, and a Job counts it as a completion. The
// kubelet v1.36 reports such a pod Failed only when its status cache
// already holds Failed (its own eviction manager puts it there) or when
// the pod it syncs reads Failed from the API server ("pods are not allowed
// to transition out of terminal phases", pkg/kubelet generateAPIPodStatus).
// An agent outside the kubelet can do only the second, and only if the
// kubelet's copy of the pod reads Failed before the kubelet generates a
// status for the stopped containers; and the API server deletes a pod
// that reads Failed at once, whatever grace period the delete asks for.
//
// So an eviction is, in this order (e2e TestTerminalStatusOrder measured
// the orders):
//
//  1. for a soft threshold, the Eviction API in a dry run: the pod's
//     PodDisruptionBudgets' word, which the Eviction API no longer asks
//     for a pod that reads Failed;
//  2. markEvicted: phase Failed, reason Evicted, the eviction's message,
//     evictd's DisruptionTarget condition and EvictedAnnotation, in one
//     write. The kubelet syncs the pod at once from that copy, finds it
//     terminal and stops its containers with the pod's own grace period,
//     and every status it writes for it from then on reads Failed
//     (terminal, not yet deleted);
//  3. for a hard threshold, evictd's own stop through the CRI with grace
//     1 s (Config.StopLocally); for either, the wait (finish) until the
//     kubelet reports the containers stopped, at most the eviction's grace
//     period and a second;
//  4. finalDelete: the status written again (the kubelet clears the reason
//     and message of containers that exited 0: it keeps them only while
//     the phase it computes equals the one it cached) and the delete, with
//     the resourceVersion of that write as a precondition: the API server
//     removes the pod at once, its last state evictd's.

// markEvicted writes the pod's terminal status as the kubelet's eviction
// does (phase Failed, reason Evicted, message), with evictd's
// DisruptionTarget condition and, when annotate, EvictedAnnotation (with
// the eviction's grace period of grace seconds), by a
// strategic-merge patch of pods/status with the pod's UID as a
// precondition, and returns the resourceVersion the API server gave the
// pod. deploy/policy.yaml lets evictd's identity write that phase only
// from Pending or Running, or again over its own, and only beside its own
// condition.
func (e *Evicter) markEvicted(ctx context.Context, pod *v1.Pod, message string, annotate bool, grace int64) (string, error) {
	meta := map[string]any{"uid": pod.UID} // a precondition: never another pod's status
	if annotate {
		meta["annotations"] = map[string]string{EvictedAnnotation: evictedValue(e.cfg.Clock.Now(), grace)}
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": meta,
		"status": map[string]any{
			"phase":      v1.PodFailed,
			"reason":     EvictedReason,
			"message":    message,
			"conditions": []any{e.disruptionTarget(pod, message, !hasDisruptionTarget(pod))},
		},
	})
	if err != nil {
		return "", fmt.Errorf("build the terminal status patch: %w", err)
	}
	res := e.client.Core().Patch(types.StrategicMergePatchType).Namespace(pod.Namespace).Resource("pods").Name(pod.Name).
		SubResource("status").MaxRetries(0).Body(patch).Do(ctx)
	if err := res.Error(); err != nil {
		return "", fmt.Errorf("write the terminal status: %w", err)
	}
	var written v1.Pod
	if err := res.Into(&written); err != nil {
		return "", fmt.Errorf("read the answer to the terminal status write: %w", err)
	}
	if written.UID != pod.UID || written.ResourceVersion == "" || written.Status.Phase != v1.PodFailed {
		return "", fmt.Errorf("the answer to the terminal status write is pod UID %q, resourceVersion %q, phase %q; want UID %s, a resourceVersion and phase Failed",
			written.UID, written.ResourceVersion, written.Status.Phase, pod.UID)
	}
	e.marked.Store(pod.UID, mark{rv: written.ResourceVersion, terminal: true})
	return written.ResourceVersion, nil
}

// disruptionTarget is evictd's DisruptionTarget condition for pod as a
// patch element: the transition time set to now when transition is true.
func (e *Evicter) disruptionTarget(pod *v1.Pod, message string, transition bool) map[string]any {
	cond := map[string]any{
		"type":    string(v1.DisruptionTarget),
		"status":  string(v1.ConditionTrue),
		"reason":  decide.DisruptionTargetReason,
		"message": message,
	}
	if transition {
		cond["lastTransitionTime"] = metav1.NewTime(e.cfg.Clock.Now())
	}
	if pod.Generation > 0 {
		cond["observedGeneration"] = pod.Generation
	}
	return cond
}

// markTerminal writes the pod's terminal status (markEvicted, annotated)
// and returns how the eviction was issued: "status", to be finished by
// finish; or, when the status cannot be written, as evictd evicted before
// (the delete or the Eviction API has been sent, and the wait is the
// only step left):
//   - the API server does not answer (apiServerAway): the error, for the
//     caller to retry (a hard threshold's reach, the loop's next pass);
//   - it refuses the write (a deploy/policy.yaml older than this evictd,
//     say): evictd's DisruptionTarget condition alone and, for a hard
//     threshold, the delete ("delete"), for a soft one the Eviction API,
//     which consults the pod's PodDisruptionBudgets again ("eviction"). A
//     warning says that the kubelet may then report the pod Succeeded;
//   - the pod finished meanwhile (the kubelet's word stands): the
//     condition and the delete.
func (e *Evicter) markTerminal(ctx context.Context, log *slog.Logger, r decide.Request, pod *v1.Pod) (string, error) {
	if evictedByEvictd(pod) {
		// Written by an earlier attempt whose delete did not follow.
		e.marked.Store(pod.UID, mark{rv: pod.ResourceVersion, terminal: true})
		return "status", nil
	}
	if terminal(pod) {
		log.Warn("the kubelet reported the pod finished before evictd could write its terminal status; deleting it as it is", "phase", pod.Status.Phase)
		return e.deleteMarked(ctx, log, r, pod)
	}
	_, err := e.markEvicted(ctx, pod, r.Message, true, r.GracePeriod)
	switch {
	case err == nil:
		return "status", nil
	case ctx.Err() != nil:
		// evictd is stopping, and the write may have landed: the pod is
		// deleted, so that no Failed pod is left behind (as finish does).
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), owedAttempt)
		derr := e.deletePod(dctx, pod, r.GracePeriod, "")
		cancel()
		if derr != nil && !apierrors.IsNotFound(derr) {
			log.Warn("stopping: could not delete the pod whose terminal status was being written; it may stay Failed", "err", derr)
		}
		return "", fmt.Errorf("stopped while writing the terminal status (deleted the pod): %w", ctx.Err())
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("%w: went away before the eviction", decide.ErrPodGone)
	case apiServerAway(err):
		e.apiError(metrics.APIPodPatchStatus)
		return "", err
	}
	e.apiError(metrics.APIPodPatchStatus)
	log.Warn("could not write the pod's terminal status (phase Failed, reason Evicted); evicting with the DisruptionTarget condition alone: the kubelet may report a program that exits 0 Succeeded", "err", err)
	if !r.Hard {
		return e.evictMarked(ctx, log, r, pod)
	}
	return e.deleteMarked(ctx, log, r, pod)
}

// finish waits, reading the pod cache as waitGone does, until the kubelet
// reports the pod's containers stopped, or the local stop has returned,
// then deletes the pod (finalDelete), and returns nil; a pod gone
// meanwhile is no error. Meanwhile it writes again what the kubelet wrote
// over (rewrite).
//
// The kubelet gives the pod its own terminationGracePeriodSeconds, which
// may be longer than the eviction's: once the eviction's grace period has
// passed with a container still running, evictd stops the containers
// itself through the runtime with a grace period of 1 s
// (Config.StopLocally, when set), as the deletion with that grace period
// had the kubelet do before. The wait is bounded by the grace period and
// 2 s, and by Config.CleanupTimeout, by the injected clock: past the bound
// the error wraps decide.ErrNotGoneInTime and the pod stays as it is,
// Failed, its containers stopping, which internal/podsource counts as an
// eviction in flight; Run deletes it once the kubelet reports them
// stopped (sweep). When ctx ends first (evictd stopping), the pod is
// deleted, which has the kubelet stop its containers within 2 s, so that
// no Failed pod is left behind, and the error is ctx's.
//
// For a hard threshold the local stop (*stop) is started here as soon as
// the kubelet has taken the pod over (kubeletTookOver), at the latest
// after Config.StopWait (stopBeside): containers that exit before it has
// would be reported Succeeded. pod is the pod as the eviction read it; a
// stop finish starts is left in *stop for Evict to wait for.
func (e *Evicter) finish(ctx context.Context, log *slog.Logger, w *podWatch, r decide.Request, stop **localStop, pod *v1.Pod) error {
	w.ownTerminal = true
	start := e.cfg.Clock.Now()
	graceEnd := start.Add(time.Duration(r.GracePeriod) * time.Second)
	deadline := start.Add(min(time.Duration(r.GracePeriod)*time.Second+2*time.Second, e.cfg.CleanupTimeout))
	notifier, _ := w.pods.(ChangeNotifier)
	for {
		var changed, stopped <-chan struct{}
		if notifier != nil {
			changed = notifier.Changed()
		}
		gone, state := w.look()
		if *stop != nil && (w.last == nil || e.kubeletTookOver(w.last)) {
			(*stop).release(true)
		}
		e.rewrite(ctx, log, w, r)
		p := w.last
		switch {
		case gone:
			return nil
		case p != nil && terminal(p) && !kubeclient.ContainersRunning(p):
			log.Debug("the kubelet reports the pod's containers stopped; deleting it")
			return e.finalDelete(ctx, log, r, e.awaitFinalizers(ctx, w, p))
		}
		if s := *stop; s != nil {
			select {
			case <-s.done:
				if s.ran && s.err == nil {
					log.Debug("the pod's containers stopped through the runtime; deleting it")
					return e.finalDelete(ctx, log, r, e.awaitFinalizers(ctx, w, w.lastOr(pod)))
				}
			default:
				stopped = s.done
			}
		}
		now := e.cfg.Clock.Now()
		if *stop == nil && e.cfg.StopLocally != nil && !now.Before(graceEnd) {
			log.Debug("the pod's grace period is over and a container still runs; stopping the containers through the runtime", "state", state)
			*stop = e.stopWithin(ctx, log, r.Pod, 1, nil)
			(*stop).release(true)
			stopped = (*stop).done
		}
		if !now.Before(deadline) {
			return fmt.Errorf("%w (the kubelet had not reported the pod's containers stopped %s after its terminal status; the pod is %s, and evictd deletes it once they have stopped)",
				decide.ErrNotGoneInTime, now.Sub(start), state)
		}
		next := deadline
		if *stop == nil && e.cfg.StopLocally != nil && graceEnd.Before(next) {
			next = graceEnd
		}
		t := e.cfg.Clock.NewTimer(min(e.cfg.PollInterval, next.Sub(now)))
		select {
		case <-ctx.Done():
			t.Stop()
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), owedAttempt)
			err := e.finalDelete(dctx, log, r, w.lastOr(pod))
			cancel()
			if err != nil {
				log.Warn("stopping: could not delete the evicted pod; it stays Failed", "err", err)
			}
			return fmt.Errorf("stopped waiting for the pod's containers to stop (it is %s; deleted it): %w", state, ctx.Err())
		case <-t.C():
		case <-changed:
			t.Stop()
		case <-stopped:
			t.Stop()
		}
	}
}

// kubeletTookOver reports whether pod, as the cache holds it, is a
// version newer than evictd's terminal status write that still reads
// Failed: the kubelet's own write from the copy that reads Failed (it
// writes the pod's status as soon as it starts terminating it). From then
// on every status it generates for the pod reads Failed; before, a sync of
// the kubelet's that began from an older copy and finds the containers
// exited would write Succeeded (TestTerminalStatusOrder saw it in 2 of 4
// runs when the containers were stopped as soon as the write returned).
// Another writer's change (a finalizer taken off) reads the same: it only
// makes the stop come sooner.
func (e *Evicter) kubeletTookOver(pod *v1.Pod) bool {
	return terminal(pod) && e.writtenOver(pod)
}

// finalizerWait bounds how long finish waits, once the pod's containers
// have stopped, for the finalizers of other controllers to go before it
// deletes the pod.
const finalizerWait = 2 * time.Second

// awaitFinalizers waits, reading the pod cache, at most finalizerWait by
// the injected clock, until the pod carries no finalizer, and returns it
// as the cache then holds it (pod when the cache does not). A Job's
// tracking finalizer goes once the Job controller has counted the pod
// (its phase Failed); a pod that a finalizer still holds when evictd
// deletes it stays, and the kubelet, which then writes its last status,
// clears the reason and message of containers that exited 0. Its phase
// stays Failed either way.
func (e *Evicter) awaitFinalizers(ctx context.Context, w *podWatch, pod *v1.Pod) *v1.Pod {
	if len(pod.Finalizers) == 0 {
		return pod
	}
	deadline := e.cfg.Clock.Now().Add(finalizerWait)
	notifier, _ := w.pods.(ChangeNotifier)
	for {
		var changed <-chan struct{}
		if notifier != nil {
			changed = notifier.Changed()
		}
		if gone, _ := w.look(); gone || w.last == nil {
			return pod
		}
		pod = w.last
		left := deadline.Sub(e.cfg.Clock.Now())
		if len(pod.Finalizers) == 0 || left <= 0 {
			return pod
		}
		t := e.cfg.Clock.NewTimer(min(e.cfg.PollInterval, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return pod
		case <-t.C():
		case <-changed:
			t.Stop()
		}
	}
}

// finalDelete writes the pod's terminal status again, for the reason and
// message the kubelet may have cleared, and deletes it with that write's
// resourceVersion as a precondition, so that the pod's last state is the
// one evictd wrote: the API server removes a pod in phase Failed at once
// (a finalizer may hold the object). When the kubelet writes between the
// two, both are sent again (at most maxStatusTries times, then the delete
// without the precondition). A pod gone meanwhile is no error.
func (e *Evicter) finalDelete(ctx context.Context, log *slog.Logger, r decide.Request, pod *v1.Pod) error {
	for try := 1; ; try++ {
		rv := ""
		if try <= maxStatusTries {
			var err error
			rv, err = e.markEvicted(ctx, pod, r.Message, false, 0)
			switch {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				e.apiError(metrics.APIPodPatchStatus)
				log.Warn("could not write the pod's terminal status again; deleting it as it is", "err", err)
				rv = ""
			}
		}
		err := e.deletePod(ctx, pod, r.GracePeriod, rv)
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err) && rv != "":
			log.Debug("the pod changed between its terminal status and its delete; writing both again", "try", try)
			continue
		}
		e.apiError(metrics.APIPodDelete)
		return fmt.Errorf("delete: %w", err)
	}
}

// deleteMarked sets evictd's DisruptionTarget condition on the pod, then
// deletes it with the request's grace period and the pod's UID as a
// precondition: an eviction without the terminal status.
func (e *Evicter) deleteMarked(ctx context.Context, log *slog.Logger, r decide.Request, pod *v1.Pod) (string, error) {
	e.markDisruptionTarget(ctx, log, pod, r.Message, !hasDisruptionTarget(pod))
	err := e.deletePod(ctx, pod, r.GracePeriod, "")
	if err == nil {
		return "delete", nil
	}
	if gone := e.goneAfter(ctx, pod, err); gone != nil {
		return "", gone
	}
	e.apiError(metrics.APIPodDelete)
	return "", fmt.Errorf("delete: %w", err)
}

// deletePod deletes the pod with grace seconds, the pod's UID and, unless
// rv is empty, that resourceVersion as preconditions. Without client-go's
// retries, as postEviction: a throttled delete is retried by reach, which
// honours Retry-After within its own bound.
func (e *Evicter) deletePod(ctx context.Context, pod *v1.Pod, grace int64, rv string) error {
	opts := deleteOptions(pod.UID, grace)
	if rv != "" {
		opts.Preconditions.ResourceVersion = &rv
	}
	return e.pods().Core().Delete().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).
		MaxRetries(0).Body(&opts).Do(ctx).Error()
}

// evictMarked is the soft eviction without the terminal status: the
// Eviction API, then evictd's DisruptionTarget condition over the API
// server's.
func (e *Evicter) evictMarked(ctx context.Context, log *slog.Logger, r decide.Request, pod *v1.Pod) (string, error) {
	if err := e.postEviction(ctx, pod, r.GracePeriod, false); err != nil {
		return "", e.evictionRefused(ctx, pod, err)
	}
	e.markDisruptionTarget(ctx, log, pod, r.Message, false)
	return "eviction", nil
}

// evictedByEvictd reports whether the pod reads as evictd's terminal
// status left it: phase Failed, reason Evicted, evictd's DisruptionTarget
// condition. Only the pod's status says so, which its node and evictd
// write, not its owner.
func evictedByEvictd(pod *v1.Pod) bool {
	if pod.Status.Phase != v1.PodFailed || pod.Status.Reason != EvictedReason {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			return c.Status == v1.ConditionTrue && c.Reason == decide.DisruptionTargetReason
		}
	}
	return false
}

// removedByKubelet reports whether the pod is being deleted with grace
// period 0: removed by the kubelet, or by the API server at once for a pod
// in a terminal phase.
func removedByKubelet(pod *v1.Pod) bool {
	return pod.DeletionTimestamp != nil && ptr.Deref(pod.DeletionGracePeriodSeconds, -1) == 0
}
