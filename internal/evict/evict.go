package evict

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
)

// Defaults of Config.
const (
	// DefaultCleanupTimeout is the kubelet's podCleanupTimeout, and the
	// loop's default bound on its wait for an eviction in flight.
	DefaultCleanupTimeout = decide.DefaultCleanupTimeout
	DefaultPollInterval   = 100 * time.Millisecond
)

// EventReason is the reason of the Warning event on an evicted pod, the
// kubelet's.
const EventReason = "Evicted"

// ErrCriticalPod is wrapped by Evict's error for a mirror or
// system-critical pod, which evictd never evicts. The other errors Evict
// wraps are the loop's: decide.ErrPodGone (nothing left to evict, or not
// this node's pod; nothing was issued), decide.ErrNotGoneInTime,
// decide.ErrDisruptionBudget, decide.ErrStoppedLocally.
var ErrCriticalPod = errors.New("critical pod, never evicted")

// Config holds the Evicter's settings. Zero values take the defaults.
type Config struct {
	// NodeName is the node evictd runs on (required): a pod the API server
	// reports bound to another node is never evicted, whatever asked for
	// it.
	NodeName string
	// CleanupTimeout bounds the wait, after the eviction is issued, until
	// the pod is gone (default 30s, the kubelet's podCleanupTimeout). The
	// loop waits as long for an eviction in flight: cmd/evictd gives both
	// config.Durations.CleanupTimeout.
	CleanupTimeout time.Duration
	// Pods is the node's pods as an informer holds them (required;
	// cmd/evictd gives internal/podsource.Source). The wait for an
	// evicted pod to go reads it, not the API server.
	Pods PodCache
	// PollInterval is the time between two looks at the pod in Pods while
	// waiting for it to go (default 100ms: short enough to set evictd's
	// DisruptionTarget condition again between the kubelet's final status
	// write and its delete, see waitGone). A look reads the cache: it is
	// no request to the API server.
	PollInterval time.Duration
	// Clock gives the wait its time (default the real clock).
	Clock clock.Clock
	// OnAPIError, when set, is called with the request (metrics.APIPodGet,
	// APIPodEvict, APIPodDelete or APIPodPatchStatus) each time an API call
	// fails unexpectedly (not for a NotFound pod or a PodDisruptionBudget
	// refusal), for evictd_api_errors_total{verb}.
	OnAPIError func(verb metrics.APIVerb)
	// OnIssued, when set, is called once the eviction is issued (the
	// Eviction API accepted it, or a hard eviction's delete returned) with
	// the request and the time from r.Decided (by Clock), for
	// evictd_eviction_issue_latency_seconds. Not called when r.Decided is
	// zero.
	OnIssued func(r decide.Request, sinceDecision time.Duration)
	// StopLocally, when set, stops the pod's containers on this node
	// through the CRI with the grace period, and returns once they have
	// stopped. It is used for a hard eviction when StopWhenIssued is set
	// and after LocalKillAfter.
	StopLocally func(ctx context.Context, pod *signals.Pod, gracePeriodSeconds int64) error
	// StopWhenIssued stops a hard eviction's containers through
	// StopLocally once the eviction is issued, rather than when the
	// kubelet sees the deletion: under fast-growing memory that hop can
	// outlast the headroom. It runs beside the wait for the pod to go;
	// its error is logged (--hard-eviction-local-stop).
	StopWhenIssued bool
	// LocalKillAfter, when positive, is how long a hard eviction retries
	// an API server that does not answer before it stops the pod's
	// containers through StopLocally and owes the eviction, which Run
	// completes when the API server answers again (--local-kill-after).
	// 0 disables: Evict returns the API server's error at once.
	LocalKillAfter time.Duration
	// OnOwed, when set, is called with the number of owed evictions each
	// time it changes, for evictd_evictions_owed.
	OnOwed func(n int)
	// AsNode, when set, reads, evicts and deletes pods in place of the
	// Evicter's own client: a client acting as the node's own identity
	// (kubeclient.NewForConfigAsNode), so that the API server itself
	// refuses a pod bound to another node. The DisruptionTarget patch
	// stays with the own client, whose writes deploy/policy.yaml narrows
	// to that condition (a node's identity may write all of its pods'
	// status).
	AsNode *kubeclient.Client
}

// Evicter evicts pods through the API server. It implements
// the loop's Evicter; its zero value is not usable, build it with New.
type Evicter struct {
	cfg      Config
	client   *kubeclient.Client
	recorder record.EventRecorder
	log      *slog.Logger
	owed     *owedSet
	// marked holds, by pod UID, the resourceVersion the API server gave
	// the pod with evictd's DisruptionTarget condition, for the wait to
	// tell a condition written over from a cache that has not yet caught
	// up with evictd's own write (see waitGone).
	marked sync.Map
}

// New returns an Evicter that acts with client (evictd's own identity) and
// records events with recorder. A nil recorder records no events; a nil
// log discards.
func New(cfg Config, client *kubeclient.Client, recorder record.EventRecorder, log *slog.Logger) *Evicter {
	if cfg.CleanupTimeout <= 0 {
		cfg.CleanupTimeout = DefaultCleanupTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Evicter{cfg: cfg, client: client, recorder: recorder, log: log, owed: newOwedSet(cfg.OnOwed)}
}

// pods returns the client that reads, evicts and deletes pods: Config.AsNode
// when set, the own client otherwise.
func (e *Evicter) pods() *kubeclient.Client {
	if e.cfg.AsNode != nil {
		return e.cfg.AsNode
	}
	return e.client
}

// Evict evicts one pod and waits, bounded by Config.CleanupTimeout, until it
// is gone:
//
//  1. a critical pod is refused (ErrCriticalPod);
//  2. the pod is read back: one that is not found, has another UID, has
//     finished or is already terminating is not evicted again (decide.ErrPodGone);
//  3. for a soft threshold, the policy/v1 Eviction subresource is asked
//     to evict it with r.GracePeriod and a UID precondition; a
//     PodDisruptionBudget refusal returns an error wrapping
//     decide.ErrDisruptionBudget. For a hard threshold the node comes
//     first: the pod is marked (step 4) and deleted with the same grace
//     period and precondition, no budget consulted (see issue). For a hard
//     threshold, an API server that does not answer is retried for
//     Config.LocalKillAfter, then the pod's containers are stopped through
//     Config.StopLocally and the error wraps decide.ErrStoppedLocally:
//     the eviction is owed, and Run completes it later (away.go);
//  4. the pod gets a DisruptionTarget condition (reason decide.DisruptionTargetReason,
//     message r.Message): after the Eviction API accepted, replacing the
//     generic one the API server sets itself, or before a hard eviction's
//     delete, which sets none; failing to write it is logged and counted and
//     does not stop the eviction. Then a Warning Evicted event with
//     r.Message and r.Annotations. Neither is written when the eviction is
//     refused, so a pod that stays is never marked or reported evicted;
//  5. for a hard threshold, Config.StopLocally (with StopWhenIssued) stops the pod's
//     containers on the node from the start, in parallel with steps 2–4
//     (the node comes first: the SIGTERM does not wait for the API
//     server), bounded by the grace period and Config.CleanupTimeout but
//     not by the wait below. A pod found gone in step 2 had nothing left
//     to stop, or was going anyway; one the API server refuses to evict
//     (a 403, say) keeps its stopped containers until the kubelet
//     restarts them, and a warning says so. Meanwhile
//  6. Evict looks at the pod in Config.Pods, the informer's cache, until
//     it is gone (no longer there, replaced, or finished; see podWatch) and,
//     once the stop has returned too, returns nil; or an error wrapping
//     decide.ErrNotGoneInTime.
//
// The API requests of one eviction are the read of step 2, the eviction
// (the delete, for a hard threshold), the condition's patch and the event;
// the wait makes none.
func (e *Evicter) Evict(ctx context.Context, r decide.Request) error {
	if r.Pod == nil {
		return errors.New("evict: the request names no pod")
	}
	ref := r.Pod.Ref()
	if err := e.check(r); err != nil {
		return fmt.Errorf("evict %s: %w", ref, err)
	}
	log := e.log.With("pod", ref, "uid", r.Pod.UID, "signal", r.Signal, "hard", r.Hard, "gracePeriodSeconds", r.GracePeriod)

	watch := e.watch(r.Pod) // before the eviction: see podWatch
	defer e.marked.Delete(watch.uid)
	var stop *localStop
	if r.Hard && e.cfg.StopWhenIssued && e.cfg.StopLocally != nil {
		// The node comes first: the containers get their SIGTERM now,
		// not an API round trip later.
		stop = e.stopBeside(ctx, log, r)
	}
	pod, how, err := e.reach(ctx, log, r, stop)
	if err != nil {
		if stop != nil && !errors.Is(err, decide.ErrPodGone) && !errors.Is(err, decide.ErrStoppedLocally) {
			log.Warn("the pod's containers were stopped through the runtime, but the API server did not take the eviction; the kubelet may start them again", "err", err)
		}
		return fmt.Errorf("evict %s: %w", ref, err)
	}
	if e.cfg.OnIssued != nil && !r.Decided.IsZero() {
		e.cfg.OnIssued(r, e.cfg.Clock.Since(r.Decided))
	}
	if e.recorder != nil {
		e.recorder.AnnotatedEventf(pod, r.Annotations, v1.EventTypeWarning, EventReason, "%s", r.Message)
	}
	log.Debug("eviction issued; waiting for the pod to go", "by", how, "cleanupTimeout", e.cfg.CleanupTimeout)
	if err := e.waitGone(ctx, log, watch, r); err != nil {
		return fmt.Errorf("evict %s (%s issued): %w", ref, how, err)
	}
	if stop != nil {
		// The API server may drop the pod before the runtime has
		// answered the stop; the next pass must not measure a node whose
		// memory is still being given back.
		select {
		case <-stop.done:
		case <-ctx.Done():
		}
	}
	return nil
}

// localStop is a stop of a pod's containers through Config.StopLocally
// running beside the eviction: done is closed when it has returned, and
// err is then its error.
type localStop struct {
	done chan struct{}
	err  error
}

// stopBeside starts stopping r's pod's containers through
// Config.StopLocally at once, beside the eviction's API calls and the wait
// for the pod to go. The stop is not cut short when the wait ends first
// (the kubelet then raced it, and a cancelled CRI call would only leave a
// container half-stopped and a misleading error) nor when ctx is cancelled
// (evictd shutting down mid-eviction): it is bounded by the grace period
// and Config.CleanupTimeout instead. Its error is logged here.
func (e *Evicter) stopBeside(ctx context.Context, log *slog.Logger, r decide.Request) *localStop {
	s := &localStop{done: make(chan struct{})}
	bound := time.Duration(r.GracePeriod)*time.Second + e.cfg.CleanupTimeout
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	go func() {
		defer close(s.done)
		defer cancel()
		if s.err = e.cfg.StopLocally(stopCtx, r.Pod, r.GracePeriod); s.err != nil {
			log.Warn("could not stop the pod's containers through the runtime; the kubelet will", "err", s.err)
		}
	}()
	return s
}

// check refuses what Evict must never act on: critical pods and requests
// that do not say exactly which pod, or with a grace period the API server
// would read as a forced deletion.
func (e *Evicter) check(r decide.Request) error {
	p := r.Pod
	switch {
	case p.Critical():
		return fmt.Errorf("%w (%s)", ErrCriticalPod, criticalWhy(p))
	case p.Namespace == "" || p.Name == "":
		return fmt.Errorf("pod namespace %q and name %q must both be set", p.Namespace, p.Name)
	case p.UID == "":
		return errors.New("pod UID must be set, so that no other pod of the same name is evicted")
	case r.GracePeriod < 1:
		return fmt.Errorf("grace period %ds: must be at least 1 (0 would be a forced deletion)", r.GracePeriod)
	case e.client == nil:
		return errors.New("no API server client")
	case e.cfg.NodeName == "":
		return errors.New("no node name: evictd evicts only the pods of its own node")
	case e.cfg.Pods == nil:
		return errors.New("no pod cache: the wait for an evicted pod reads it")
	}
	return nil
}

func criticalWhy(p *signals.Pod) string {
	switch {
	case p.Static:
		return "static pod"
	case p.Mirror:
		return "mirror pod"
	}
	return fmt.Sprintf("priority %d >= %d", p.Priority, signals.SystemCriticalPriority)
}

// current reads the pod back and returns it if it is still the pod asked
// for, still bound to this node and still running; otherwise an error
// wrapping decide.ErrPodGone says why. A pod bound to another node reads as
// not found (kubeclient.PodOnNode).
//
// This read is the API server's, not the cache's: the eviction's only
// preconditions are the UID and a resource version, and a cache behind
// the API server could let through what it must refuse: a pod already
// terminating (the Eviction API deletes it at once with evictd's grace
// period, cutting short the one its deleter chose), a pod that has
// finished (the Eviction API deletes it, and its record with it), or a pod
// the API server reports bound to another node. It is one request per
// eviction, not per look.
func (e *Evicter) current(ctx context.Context, want *signals.Pod) (*v1.Pod, error) {
	pod, err := e.pods().PodOnNode(ctx, want.Namespace, want.Name, e.cfg.NodeName)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: not found", decide.ErrPodGone)
	case err != nil:
		e.apiError(metrics.APIPodGet)
		return nil, fmt.Errorf("get pod: %w", err)
	case string(pod.UID) != want.UID:
		return nil, fmt.Errorf("%w: replaced by another pod of the same name (UID %s, not %s)", decide.ErrPodGone, pod.UID, want.UID)
	case pod.Spec.NodeName != e.cfg.NodeName:
		return nil, fmt.Errorf("%w from this node: bound to node %q, not %q", decide.ErrPodGone, pod.Spec.NodeName, e.cfg.NodeName)
	case pod.DeletionTimestamp != nil:
		return nil, fmt.Errorf("%w: already terminating since %s (grace period %ds)", decide.ErrPodGone,
			pod.DeletionTimestamp.UTC().Format(time.RFC3339), ptr.Deref(pod.DeletionGracePeriodSeconds, 0))
	case terminal(pod):
		return nil, fmt.Errorf("%w: already finished (phase %s)", decide.ErrPodGone, pod.Status.Phase)
	}
	return pod, nil
}

// issue makes the pod go and returns how ("eviction" or "delete").
//
// A soft eviction goes through the policy/v1 Eviction API, which
// enforces PodDisruptionBudgets: a refusal returns an error wrapping
// decide.ErrDisruptionBudget. The API server sets a DisruptionTarget
// condition of its own (reason EvictionByEvictionAPI, a generic message)
// and evictd's replaces it once the eviction is accepted.
//
// A hard eviction puts the node first, as the kubelet's does: no budget
// holds it back. evictd marks the pod with its DisruptionTarget condition
// and then deletes it with the grace period, without the Eviction API.
// Through the Eviction API the API server's own condition would come
// first, in the same request as the deletion, and the kubelet, which
// starts terminating the pod from the copy the deletion brought, would
// write that condition back with the pod's final status, over evictd's:
// on a real node it did in most evictions with a grace period of 1 s. Marked
// first, the pod the kubelet sees deleted carries evictd's condition.
func (e *Evicter) issue(ctx context.Context, log *slog.Logger, r decide.Request, pod *v1.Pod) (string, error) {
	if r.Hard {
		return e.deleteMarked(ctx, log, r, pod)
	}
	err := e.postEviction(ctx, pod, r.GracePeriod)
	if err == nil {
		e.markDisruptionTarget(ctx, log, pod, r.Message, false)
		return "eviction", nil
	}
	if gone := e.goneAfter(ctx, pod, err); gone != nil {
		return "", gone
	}
	refusal, ok := budgetRefusal(err)
	if !ok {
		e.apiError(metrics.APIPodEvict)
		return "", fmt.Errorf("eviction API: %w", err)
	}
	return "", fmt.Errorf("%w: %s", decide.ErrDisruptionBudget, refusal)
}

// deleteMarked sets evictd's DisruptionTarget condition on the pod, then
// deletes it with the request's grace period and the pod's UID as a
// precondition.
func (e *Evicter) deleteMarked(ctx context.Context, log *slog.Logger, r decide.Request, pod *v1.Pod) (string, error) {
	e.markDisruptionTarget(ctx, log, pod, r.Message, !hasDisruptionTarget(pod))
	opts := deleteOptions(pod.UID, r.GracePeriod)
	// Without client-go's retries, as postEviction: a throttled delete is
	// retried by reach, which honours Retry-After within its own bound.
	err := e.pods().Core().Delete().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).
		MaxRetries(0).Body(&opts).Do(ctx).Error()
	if err == nil {
		return "delete", nil
	}
	if gone := e.goneAfter(ctx, pod, err); gone != nil {
		return "", gone
	}
	e.apiError(metrics.APIPodDelete)
	return "", fmt.Errorf("delete: %w", err)
}

// postEviction creates the policy/v1 Eviction of pod. It is the request
// client-go's typed Evict makes, without client-go's own retries: a 429
// that carries Retry-After (a PodDisruptionBudget whose status is not
// computed yet says 10s) would otherwise be retried for up to ten times
// that, while the node starves. The loop decides again. The Retry-After
// of the API server's own throttling (a 429 of API Priority and Fairness)
// is honoured by evictd's retries instead: Evict's for a hard threshold
// and Run's (retryDelay).
func (e *Evicter) postEviction(ctx context.Context, pod *v1.Pod, grace int64) error {
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: ptr.To(deleteOptions(pod.UID, grace)),
	}
	return e.pods().Core().Post().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).
		SubResource("eviction").MaxRetries(0).Body(ev).Do(ctx).Error()
}

// goneAfter tells, after a NotFound or Conflict from an eviction or delete
// with a UID precondition, whether the pod went away or was replaced in
// the meantime, and returns the decide.ErrPodGone error that says so; nil when the
// error means something else. After a Conflict it reads the pod from the
// API server: the cache may not have seen the replacement yet, and a
// Conflict can have other causes. That read is on this refusal's path
// only.
func (e *Evicter) goneAfter(ctx context.Context, pod *v1.Pod, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: went away before the eviction", decide.ErrPodGone)
	case apierrors.IsConflict(err):
		now, gerr := e.pods().PodOnNode(ctx, pod.Namespace, pod.Name, e.cfg.NodeName)
		switch {
		case apierrors.IsNotFound(gerr):
			return fmt.Errorf("%w: went away before the eviction", decide.ErrPodGone)
		case gerr == nil && now.UID != pod.UID:
			return fmt.Errorf("%w: replaced by another pod of the same name (UID %s, not %s) before the eviction", decide.ErrPodGone, now.UID, pod.UID)
		}
	}
	return nil
}

// markDisruptionTarget sets the pod's DisruptionTarget condition to True
// with evictd's reason and message by a strategic-merge patch of
// pods/status (conditions merge by type), the transition time set to now
// when transition is true and left as it is otherwise. The node comes
// first: a failure is logged and counted, never returned.
func (e *Evicter) markDisruptionTarget(ctx context.Context, log *slog.Logger, pod *v1.Pod, message string, transition bool) {
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
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID}, // a precondition: never another pod's status
		"status":   map[string]any{"conditions": []any{cond}},
	})
	if err != nil {
		log.Warn("could not build the DisruptionTarget patch; evicting anyway", "err", err)
		return
	}
	// Without client-go's retries: a hard eviction's delete waits for this
	// patch, and a throttled API server's Retry-After must not hold it.
	res := e.client.Core().Patch(types.StrategicMergePatchType).Namespace(pod.Namespace).Resource("pods").Name(pod.Name).
		SubResource("status").MaxRetries(0).Body(patch).Do(ctx)
	err = res.Error()
	var marked v1.Pod
	switch {
	case err == nil:
		// The pod as written, for its resourceVersion; an answer without
		// one leaves the wait to re-mark as it did before.
		if res.Into(&marked) == nil && marked.UID == pod.UID && marked.ResourceVersion != "" {
			e.marked.Store(pod.UID, marked.ResourceVersion)
		}
	case apierrors.IsNotFound(err):
		log.Debug("pod gone before its DisruptionTarget condition was set")
	default:
		e.apiError(metrics.APIPodPatchStatus)
		log.Warn("could not set the DisruptionTarget condition; evicting anyway", "err", err)
	}
}

func (e *Evicter) apiError(verb metrics.APIVerb) {
	if e.cfg.OnAPIError != nil {
		e.cfg.OnAPIError(verb)
	}
}

// deleteOptions gives the pod grace seconds to stop and applies only to the
// pod with that UID.
func deleteOptions(uid types.UID, grace int64) metav1.DeleteOptions {
	return metav1.DeleteOptions{
		GracePeriodSeconds: &grace,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	}
}

func hasDisruptionTarget(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

// terminal reports whether all the pod's containers have stopped for good.
func terminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// budgetRefusal reports whether err is the Eviction API refusing because of
// PodDisruptionBudgets, and the server's words for it:
//   - 429 TooManyRequests with a DisruptionBudget cause: no disruption
//     allowed now, or the budget's status is not computed yet. A 429
//     without one is the API server's own throttling (API Priority and
//     Fairness, a plain-text answer with Retry-After), not a budget's
//     refusal: for a hard threshold it must not lead to the delete that
//     bypasses budgets;
//   - 403 Forbidden about a poddisruptionbudget: its status is corrupt
//     (negative disruptions allowed, too many unconfirmed disruptions);
//   - 500 when more than one budget covers the pod, which the Eviction API
//     never allows.
func budgetRefusal(err error) (string, bool) {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return "", false
	}
	st := se.Status()
	switch {
	case st.Code == http.StatusTooManyRequests && budgetCause(st):
	case st.Code == http.StatusForbidden && st.Details != nil && st.Details.Group == policyv1.GroupName && st.Details.Kind == "poddisruptionbudget":
	case st.Code == http.StatusInternalServerError && strings.Contains(st.Message, "more than one PodDisruptionBudget"):
	default:
		return "", false
	}
	msg := st.Message
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Type == policyv1.DisruptionBudgetCause && c.Message != "" {
				msg += " " + c.Message
			}
		}
	}
	return msg, true
}

// budgetCause reports whether st names a PodDisruptionBudget among its
// causes, as every 429 of the Eviction API does.
func budgetCause(st metav1.Status) bool {
	if st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Type == policyv1.DisruptionBudgetCause {
			return true
		}
	}
	return false
}
