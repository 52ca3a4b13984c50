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
	"github.com/evictd/evictd/signals/host"
)

// Defaults of Config.
const (
	// DefaultCleanupTimeout is the kubelet's podCleanupTimeout, and the
	// loop's default bound on its wait for an eviction in flight.
	DefaultCleanupTimeout = decide.DefaultCleanupTimeout
	DefaultPollInterval   = 100 * time.Millisecond
	// DefaultStopWait is the default of Config.StopWait: far more than
	// the two API requests it waits for take on a healthy API server,
	// far less than the kubelet's own eviction takes to act.
	DefaultStopWait = time.Second
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
	// pod's terminal status written, or, when it could not be, the
	// Eviction API accepted it or the delete returned) with
	// the request and the time from r.Decided (by Clock), for
	// evictd_eviction_issue_latency_seconds. Not called when r.Decided is
	// zero.
	OnIssued func(r decide.Request, sinceDecision time.Duration)
	// StopLocally, when set, stops the pod's containers on this node
	// through the CRI with the grace period, and returns once they have
	// stopped. It is used for a hard eviction when StopWhenIssued is set
	// and after LocalKillAfter.
	StopLocally func(ctx context.Context, pod *signals.Pod, gracePeriodSeconds int64) error
	// SignalLocally, when set, sends the stop signal itself to the main
	// processes of the pod's containers on this node (each container's
	// as the runtime reports it, SIGTERM where it has not said), and
	// returns how many got it and which signals went
	// (host.PodSignaller.SignalEach; --hard-eviction-direct-signal). A
	// hard eviction of a pod whose restartPolicy is Always
	// (signals.Pod.RestartAlways) calls it first, before any API request:
	// the containers have their stop signal about a millisecond after the
	// decision, not after a CRI call, a new runtime process and its kill.
	// A pod of any other
	// restartPolicy waits for StopLocally, as StopWait says: a program
	// that exits 0 on its SIGTERM before the kubelet has the pod's
	// terminal status would make the pod Succeeded (a Job's completion).
	// On an error or none signalled, the stop is StopLocally's alone.
	SignalLocally func(pod *signals.Pod) (host.Signalled, error)
	// OnSignalled, when set, is called once per hard eviction with the
	// request, how its containers got their first stop signal and the
	// time from r.Decided (by Clock), for
	// evictd_eviction_signal_latency_seconds. Not called when r.Decided
	// is zero.
	OnSignalled func(r decide.Request, path metrics.SignalPath, sinceDecision time.Duration)
	// SandboxReady, when set, reports whether the runtime still has a
	// ready sandbox of the pod with uid. An eviction whose pod evictd
	// deleted itself (its terminal status written) waits, after the pod
	// has gone, until it has none (see tornDown): the API server removes
	// a Failed pod at once, before the kubelet has torn it down, and the
	// pod's exited containers, whose writable layers hold what a disk
	// eviction is to free, can be removed only then.
	SandboxReady func(ctx context.Context, uid string) (bool, error)
	// StopWhenIssued stops a hard eviction's containers through
	// StopLocally with the eviction's grace period once the eviction is
	// issued (its terminal status written, and taken over by the
	// kubelet, as Pods shows), rather
	// than when the kubelet sees it: under fast-growing memory that hop
	// can outlast the headroom. It runs beside the wait for the pod to
	// go; its error is logged (--hard-eviction-local-stop). Whatever it
	// says, StopLocally also stops, with a grace period of 1 s, the
	// containers of an evicted pod still running when the eviction's
	// grace period is over (the kubelet gives the pod its own, which may
	// be longer; see finish).
	StopWhenIssued bool
	// StopWait bounds how long that stop waits for the eviction to be
	// issued and the kubelet to take the pod over before it starts
	// anyway (default DefaultStopWait; cmd/evictd gives
	// config.Durations.HardEvictionStopWait, --hard-eviction-stop-wait):
	// the kubelet may report a pod whose containers exited 0 before it
	// took the pod over as Succeeded (see stopBeside).
	StopWait time.Duration
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
	// marked holds, by pod UID, evictd's last write of the pod's status
	// (a mark), for the wait to tell a status written over from a cache
	// that has not yet caught up with evictd's own write (see waitGone).
	marked sync.Map
	// evicting holds the UIDs of the pods an Evict of this evictd is
	// evicting, from its start to its end: the sweep leaves them alone
	// (their status may be written before their mark is stored).
	evicting sync.Map
}

// mark is evictd's last write of an evicted pod's status.
type mark struct {
	// rv is the resourceVersion the API server gave the pod.
	rv string
	// terminal is true once evictd has written the pod's terminal status
	// (markEvicted), not only its DisruptionTarget condition.
	terminal bool
}

// ownTerminal reports whether evictd has written the terminal status of
// the pod with uid during its eviction.
func (e *Evicter) ownTerminal(uid types.UID) bool {
	m, ok := e.marked.Load(uid)
	return ok && m.(mark).terminal
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
	if cfg.StopWait <= 0 {
		cfg.StopWait = DefaultStopWait
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
//     finished, already reads as evictd's terminal status left it, or is
//     already terminating is not evicted again (decide.ErrPodGone);
//  3. for a soft threshold, the policy/v1 Eviction subresource is asked in
//     a dry run with r.GracePeriod and a UID precondition; a
//     PodDisruptionBudget refusal returns an error wrapping
//     decide.ErrDisruptionBudget. For a hard threshold the node comes
//     first: no budget is consulted (see issue). For a hard threshold, an
//     API server that does not answer is retried for
//     Config.LocalKillAfter, then the pod's containers are stopped through
//     Config.StopLocally and the error wraps decide.ErrStoppedLocally:
//     the eviction is owed, and Run completes it later (away.go);
//  4. the pod's terminal status is written as the kubelet's eviction
//     writes it, phase Failed, reason Evicted, message r.Message, with
//     evictd's DisruptionTarget condition (reason
//     decide.DisruptionTargetReason, message r.Message): the kubelet stops
//     the pod's containers at once, and the pod reads Failed whatever its
//     program's exit code (terminal.go). When the API server refuses that
//     write, the pod gets the condition alone and the delete or the
//     Eviction API, as before. Then a Warning Evicted event with r.Message
//     and r.Annotations. Neither is written when the eviction is refused,
//     so a pod that stays is never marked or reported evicted;
//  5. for a hard threshold, Config.StopLocally (with StopWhenIssued) stops
//     the pod's containers with the grace period as soon as evictd's pod
//     cache holds the kubelet's first write after that status, or after
//     Config.StopWait without it (the node comes first), bounded by the grace period and
//     Config.CleanupTimeout but not by the waits below. A pod found gone
//     in step 2 has nothing left to stop; one the API server refuses to
//     evict (a 403, say) keeps its stopped containers until the kubelet
//     restarts them, and a warning says so;
//  6. once the kubelet reports the containers stopped, or the local stop
//     has returned, the status is written again and the pod deleted
//     (finish, finalDelete): the API server removes a pod in phase Failed
//     at once. Containers still running when the grace period is over are
//     stopped through Config.StopLocally; past the grace period and 2 s,
//     or Config.CleanupTimeout, Evict returns an error wrapping
//     decide.ErrNotGoneInTime and Run deletes the pod once they have
//     stopped (sweep);
//  7. Evict looks at the pod in Config.Pods, the informer's cache, until
//     it is gone (no longer there, replaced, or finished; see podWatch) and,
//     once the stop has returned too, returns nil; or an error wrapping
//     decide.ErrNotGoneInTime.
//
// The API requests of one eviction are the read of step 2, the dry run of
// step 3, the status writes of steps 4 and 6, the delete and the event;
// the waits make none.
func (e *Evicter) Evict(ctx context.Context, r decide.Request) error {
	if r.Pod == nil {
		return errors.New("evict: the request names no pod")
	}
	ref := r.Pod.Ref()
	if err := e.check(r); err != nil {
		return fmt.Errorf("evict %s: %w", ref, err)
	}
	log := e.log.With("pod", ref, "uid", r.Pod.UID, "signal", r.Signal, "hard", r.Hard, "gracePeriodSeconds", r.GracePeriod)

	e.evicting.Store(types.UID(r.Pod.UID), struct{}{})
	defer e.evicting.Delete(types.UID(r.Pod.UID))
	watch := e.watch(r.Pod) // before the eviction: see podWatch
	defer e.marked.Delete(watch.uid)
	signalled := r.Hard && e.signalAtOnce(log, r)
	var stop *localStop
	if r.Hard && e.cfg.StopWhenIssued && e.cfg.StopLocally != nil {
		// The node comes first: the containers get their SIGTERM as soon
		// as the kubelet has taken the pod over, or after
		// Config.StopWait without it.
		stop = e.stopBeside(ctx, log, r, signalled)
	}
	pod, how, err := e.reach(ctx, log, r, stop)
	if err != nil {
		switch {
		case stop == nil || errors.Is(err, decide.ErrStoppedLocally):
		case errors.Is(err, decide.ErrPodGone):
			stop.release(false)
		default:
			// A refusal: after a restart the API server answers 403
			// until its authorizer has synced (seen on the real node),
			// so the eviction is owed and retried as when the server
			// is away, up to maxOwedRefusals refusals.
			stop.kill()
			select {
			case <-stop.done:
			case <-ctx.Done():
			}
			if stop.ran && stop.err == nil {
				n := e.owed.add(r, e.cfg.Clock.Now(), log)
				log.Warn("the pod's containers are killed through the runtime, but the API server did not take the eviction; it is owed and retried", "err", err, "owed", n)
				return fmt.Errorf("evict %s: the API server refused the eviction (%v); %w", ref, err, decide.ErrStoppedLocally)
			}
			log.Warn("the API server did not take the eviction, and the pod's containers could not be killed through the runtime", "err", err)
		}
		return fmt.Errorf("evict %s: %w", ref, err)
	}
	if e.cfg.OnIssued != nil && !r.Decided.IsZero() {
		e.cfg.OnIssued(r, e.cfg.Clock.Since(r.Decided))
	}
	if e.recorder != nil {
		e.recorder.AnnotatedEventf(pod, r.Annotations, v1.EventTypeWarning, EventReason, "%s", r.Message)
	}
	var late error
	if how == "status" {
		log.Debug("terminal status written; waiting for the pod's containers to stop")
		late = e.finish(ctx, log, watch, r, &stop, pod)
		if late != nil && !errors.Is(late, decide.ErrNotGoneInTime) {
			if stop != nil {
				stop.release(true)
			}
			return fmt.Errorf("evict %s (terminal status written): %w", ref, late)
		}
	}
	if stop != nil {
		stop.release(true)
	}
	if late == nil {
		log.Debug("eviction issued; waiting for the pod to go", "by", how, "cleanupTimeout", e.cfg.CleanupTimeout)
		if err := e.waitGone(ctx, log, watch, r); err != nil {
			return fmt.Errorf("evict %s (%s issued): %w", ref, how, err)
		}
		if how == "status" {
			e.tornDown(ctx, log, r)
		}
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
	if late != nil {
		return fmt.Errorf("evict %s: %w", ref, late)
	}
	return nil
}

// localStop is a stop of a pod's containers through Config.StopLocally
// beside the eviction's API calls: done is closed when it has returned (or
// was called off), and err is then its error.
type localStop struct {
	done chan struct{}
	err  error
	// ran is true once StopLocally was called (not called off).
	ran bool
	// start is sent how to stop: not at all, with the grace period, or
	// killed (grace 0).
	start chan stopMode
}

// stopMode is how a localStop stops the pod's containers.
type stopMode int

const (
	stopOff stopMode = iota
	// stopGraceful: SIGTERM and the grace period, once the pod reads
	// Failed (the terminal status written) or the API server has taken
	// the eviction.
	stopGraceful
	// stopKill: SIGKILL at once (grace 0), when the pod does not read
	// Failed: a program that exits 0 on SIGTERM would make the kubelet
	// count the pod a success (a Job's completion), where a kill's exit
	// code 137 makes it Failed.
	stopKill
)

// release starts the stop now with the grace period (run) or calls it
// off; only the first call of release or kill, and only before
// Config.StopWait has passed, counts.
func (s *localStop) release(run bool) {
	m := stopOff
	if run {
		m = stopGraceful
	}
	select {
	case s.start <- m:
	default:
	}
}

// kill starts the stop now with grace 0 (stopKill); see release.
func (s *localStop) kill() {
	select {
	case s.start <- stopKill:
	default:
	}
}

// stopBeside prepares the stop of r's pod's containers through
// Config.StopLocally beside the eviction's API calls: it starts when
// released (once the kubelet has taken the pod over, see finish, or the
// eviction failed other than by the pod's absence), or once
// Config.StopWait has passed by the injected clock, whichever comes
// first; a release with false (the pod was gone) calls it off.
//
// The stop waits for the status because the kubelet computes the phase of
// a pod whose containers exited 0 as Succeeded unless the pod it syncs
// already reads Failed (terminal.go): containers that exit before the
// kubelet has the terminal status make the pod a success. StopWait bounds
// that wait: an API server slower than that does not hold the node's
// memory. A stop that starts without the status (StopWait passed, the API
// server away or refusing) kills the containers (stopKill), so that the
// pod ends Failed all the same, at the price of their grace period.
//
// The stop is not cut short when the wait ends first (the kubelet then
// raced it, and a cancelled CRI call would only leave a container
// half-stopped and a misleading error) nor when ctx is cancelled (evictd
// shutting down mid-eviction): it is bounded by the grace period and
// Config.CleanupTimeout instead. Its error is logged here.
//
// Unless signalled (SignalLocally has sent the first signal already), the
// start of the stop is the first signal's time for Config.OnSignalled.
func (e *Evicter) stopBeside(ctx context.Context, log *slog.Logger, r decide.Request, signalled bool) *localStop {
	var onStart func()
	if !signalled {
		onStart = func() { e.signalledAt(r, metrics.SignalRuntime, e.cfg.Clock.Now()) }
	}
	return e.stopWithin(ctx, log, r.Pod, r.GracePeriod, onStart)
}

// signalAtOnce sends the stop signals of r's pod's containers through
// Config.SignalLocally when r's pod restarts always (see there), and
// reports whether any process got one. The log names the signals sent
// (stopSignal): each container's own, which need not be SIGTERM.
func (e *Evicter) signalAtOnce(log *slog.Logger, r decide.Request) bool {
	if e.cfg.SignalLocally == nil || !r.Pod.RestartAlways {
		return false
	}
	began := e.cfg.Clock.Now()
	done, err := e.cfg.SignalLocally(r.Pod)
	if done.Processes == 0 {
		log.Warn("could not send the stop signal to the pod's containers itself; the stop goes through the runtime", "err", err)
		return false
	}
	e.signalledAt(r, metrics.SignalDirect, began.Add(done.FirstAfter))
	sent := done.SignalNames()
	if err != nil {
		log.Warn("stop signal sent to some of the pod's containers, not all; the rest are stopped through the runtime",
			"stopSignal", sent, "processes", done.Processes, "err", err)
	} else {
		log.Info("stop signal sent to the pod's containers' main processes",
			"stopSignal", sent, "processes", done.Processes, "firstAfter", done.FirstAfter, "took", e.cfg.Clock.Since(began))
	}
	return true
}

// signalledAt calls Config.OnSignalled for r's first stop signal, sent
// at at.
func (e *Evicter) signalledAt(r decide.Request, path metrics.SignalPath, at time.Time) {
	if e.cfg.OnSignalled != nil && !r.Decided.IsZero() {
		e.cfg.OnSignalled(r, path, at.Sub(r.Decided))
	}
}

// stopWithin is stopBeside for pod's containers with grace seconds;
// onStart, when set, is called as the stop starts.
func (e *Evicter) stopWithin(ctx context.Context, log *slog.Logger, pod *signals.Pod, grace int64, onStart func()) *localStop {
	s := &localStop{done: make(chan struct{}), start: make(chan stopMode, 1)}
	bound := time.Duration(grace)*time.Second + e.cfg.CleanupTimeout
	t := e.cfg.Clock.NewTimer(e.cfg.StopWait)
	go func() {
		defer close(s.done)
		select {
		case m := <-s.start:
			t.Stop()
			switch m {
			case stopOff:
				return
			case stopKill:
				grace = 0
			}
		case <-t.C():
			s.kill() // later releases count for nothing
			grace = 0
			log.Debug("the API server has not taken the eviction yet; killing the pod's containers anyway", "stopWait", e.cfg.StopWait)
		}
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
		defer cancel()
		s.ran = true
		if onStart != nil {
			onStart()
		}
		if s.err = e.cfg.StopLocally(stopCtx, pod, grace); s.err != nil {
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
	case evictedByEvictd(pod):
		return nil, fmt.Errorf("%w: already evicted by evictd (phase Failed; deleted once its containers have stopped)", decide.ErrPodGone)
	case terminal(pod):
		return nil, fmt.Errorf("%w: already finished (phase %s)", decide.ErrPodGone, pod.Status.Phase)
	}
	return pod, nil
}

// issue issues the pod's eviction and returns how: "status" when its
// terminal status is written (finish then stops and deletes it), or, when
// the status could not be written, "delete" or "eviction" (markTerminal).
//
// A soft eviction respects PodDisruptionBudgets: the Eviction API is asked
// first in a dry run, which evicts nothing; a refusal returns an error
// wrapping decide.ErrDisruptionBudget and nothing is written. The dry run
// must come first: the Eviction API no longer consults the budgets of a
// pod that reads Failed. A budget that changes between the dry run and the
// status write, a few milliseconds, is not seen.
//
// A hard eviction puts the node first, as the kubelet's does: no budget
// holds it back.
func (e *Evicter) issue(ctx context.Context, log *slog.Logger, r decide.Request, pod *v1.Pod) (string, error) {
	if !r.Hard {
		if err := e.postEviction(ctx, pod, r.GracePeriod, true); err != nil {
			return "", e.evictionRefused(ctx, pod, err)
		}
	}
	return e.markTerminal(ctx, log, r, pod)
}

// evictionRefused is the error of an Eviction API request that failed
// with err: decide.ErrPodGone, decide.ErrDisruptionBudget or the API
// server's error.
func (e *Evicter) evictionRefused(ctx context.Context, pod *v1.Pod, err error) error {
	if gone := e.goneAfter(ctx, pod, err); gone != nil {
		return gone
	}
	refusal, ok := budgetRefusal(err)
	if !ok {
		e.apiError(metrics.APIPodEvict)
		return fmt.Errorf("eviction API: %w", err)
	}
	return fmt.Errorf("%w: %s", decide.ErrDisruptionBudget, refusal)
}

// postEviction creates the policy/v1 Eviction of pod. It is the request
// client-go's typed Evict makes, without client-go's own retries: a 429
// that carries Retry-After (a PodDisruptionBudget whose status is not
// computed yet says 10s) would otherwise be retried for up to ten times
// that, while the node starves. The loop decides again. The Retry-After
// of the API server's own throttling (a 429 of API Priority and Fairness)
// is honoured by evictd's retries instead: Evict's for a hard threshold
// and Run's (retryDelay).
//
// With dryRun the API server makes every check, PodDisruptionBudgets
// included, and evicts nothing.
func (e *Evicter) postEviction(ctx context.Context, pod *v1.Pod, grace int64, dryRun bool) error {
	opts := deleteOptions(pod.UID, grace)
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &opts,
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
	cond := e.disruptionTarget(pod, message, transition)
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
			e.marked.Store(pod.UID, mark{rv: marked.ResourceVersion, terminal: e.ownTerminal(pod.UID)})
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
