package evict

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
)

// How a hard eviction and the owed evictions retry an API server that does
// not answer (see backoff).
const (
	// awayFirstRetry and awayMaxRetry are the shortest first wait and
	// the longest wait between the attempts inside Evict, within
	// Config.LocalKillAfter.
	awayFirstRetry = 200 * time.Millisecond
	awayMaxRetry   = time.Second
	// minAttempt is the least time one attempt gets, so that the last
	// one before the local stop still has time to be answered.
	minAttempt = time.Second
	// owedFirstRetry and owedMaxRetry are the shortest first wait and
	// the longest wait (unless the API server asks for more) between
	// Run's attempts to complete the owed evictions; owedAttempt bounds
	// each request.
	owedFirstRetry = time.Second
	owedMaxRetry   = 30 * time.Second
	owedAttempt    = 10 * time.Second
	// maxOwed bounds the owed evictions kept: more pods than a node runs.
	maxOwed = 512
	// maxOwedRefusals is how many refusals (answers other than "gone") an
	// owed eviction outlives, a few minutes by the backoff: an API server
	// that has just started answers 403 until its authorizer has loaded
	// the RBAC rules.
	maxOwedRefusals = 10
)

// reach reads the pod back and issues its eviction (current, then issue).
// For a hard request with Config.LocalKillAfter and Config.StopLocally set,
// an API server that does not answer (apiServerAway) is retried, each
// attempt bounded, until LocalKillAfter has passed since the first
// attempt began; then the pod's containers are stopped through
// StopLocally with the request's grace period, the eviction is owed (Run
// completes it when the API server answers again), and the error wraps
// decide.ErrStoppedLocally. Refusals (4xx, PodDisruptionBudgets) are
// answers: they are returned as before, never retried here.
func (e *Evicter) reach(ctx context.Context, log *slog.Logger, r decide.Request, stop *localStop) (*v1.Pod, string, error) {
	if !r.Hard || e.cfg.LocalKillAfter <= 0 || e.cfg.StopLocally == nil {
		return e.attempt(ctx, log, r)
	}
	start := e.cfg.Clock.Now()
	deadline := start.Add(e.cfg.LocalKillAfter)
	b := backoff(awayFirstRetry, awayMaxRetry)
	for tries := 1; ; tries++ {
		actx, cancel := withClockTimeout(ctx, e.cfg.Clock, max(deadline.Sub(e.cfg.Clock.Now()), minAttempt))
		pod, how, err := e.attempt(actx, log, r)
		timedOut := actx.Err() != nil
		cancel()
		switch {
		case err == nil:
			e.owed.remove(r.Pod.UID) // issued after all: nothing owed
			return pod, how, nil
		case ctx.Err() != nil || !(timedOut || apiServerAway(err)):
			return nil, "", err
		}
		if timedOut {
			err = fmt.Errorf("no answer within the attempt's time: %w", err)
		}
		left := deadline.Sub(e.cfg.Clock.Now())
		if left <= 0 {
			return nil, "", e.stopAway(ctx, log, r, stop, e.cfg.Clock.Since(start), tries, err)
		}
		log.Debug("the API server did not answer; retrying until the local stop", "try", tries, "localStopIn", left, "err", err)
		t := e.cfg.Clock.NewTimer(min(retryDelay(&b, err), left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, "", fmt.Errorf("stopped retrying the API server: %w (last: %v)", ctx.Err(), err)
		case <-t.C():
		}
	}
}

// backoff is the schedule of retries from first to longest: a step that
// doubles, up to longest/2, plus a random part of up to as much again
// (jitter): waits in [first, 2·first], [2·first, 4·first], ...
// [longest/2, longest]. The agents of many nodes that lost the API server
// at the same moment thus drift apart with every retry, and come back
// spread over tens of seconds rather than all in the same one.
func backoff(first, longest time.Duration) wait.Backoff {
	return wait.Backoff{Duration: first, Factor: 2, Jitter: 1, Steps: math.MaxInt32, Cap: longest / 2}
}

// retryDelay is b's next wait after err, never shorter than the delay the
// API server asked for in err (a 429's or 5xx's Retry-After, a
// ServerTimeout's suggestion), itself jittered alike so that the agents
// told the same delay do not all come back in its same second.
func retryDelay(b *wait.Backoff, err error) time.Duration {
	d := b.Step()
	if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
		d = max(d, wait.Jitter(time.Duration(s)*time.Second, b.Jitter))
	}
	return d
}

// attempt is one try: the pod read back, then the eviction issued.
func (e *Evicter) attempt(ctx context.Context, log *slog.Logger, r decide.Request) (*v1.Pod, string, error) {
	pod, err := e.current(ctx, r.Pod)
	if err != nil {
		return nil, "", err
	}
	how, err := e.issue(ctx, log, r, pod)
	if err != nil {
		return nil, "", err
	}
	return pod, how, nil
}

// stopAway stops the pod's containers through the runtime after the API
// server stayed away for away, and owes the eviction.
func (e *Evicter) stopAway(ctx context.Context, log *slog.Logger, r decide.Request, stop *localStop, away time.Duration, tries int, last error) error {
	why := fmt.Sprintf("the API server did not answer for %s (%d tries; last: %v)", away.Round(time.Millisecond), tries, last)
	var err error
	if stop != nil {
		// Prepared since the eviction began, and started after
		// Config.StopWait at the latest: start it now and wait for it.
		// Killed: the pod does not read Failed (see stopKill).
		stop.kill()
		select {
		case <-stop.done:
			err = stop.err
		case <-ctx.Done():
			err = ctx.Err()
		}
	} else {
		err = e.cfg.StopLocally(ctx, r.Pod, 0)
	}
	if err != nil {
		return fmt.Errorf("%s, and stopping the pod's containers through the runtime failed: %w", why, err)
	}
	n := e.owed.add(r, e.cfg.Clock.Now(), log)
	log.Debug("stopped the pod's containers through the runtime; the eviction is owed", "owed", n)
	return fmt.Errorf("%w: %s", decide.ErrStoppedLocally, why)
}

// apiServerAway reports whether err means the API server did not answer,
// or answered that it cannot serve now: a transport error (connection
// refused or reset, EOF, TLS or dial timeout), an attempt that ran out of
// time, a 5xx, or a 429 (a 429 of the Eviction API, a PodDisruptionBudget,
// is handled by issue and never gets here: the 429s left are the API
// server's own throttling). Any other answer, a 4xx refusal, is not.
func apiServerAway(err error) bool {
	if err == nil {
		return false
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code := st.Status().Code
		return code >= http.StatusInternalServerError || code == http.StatusTooManyRequests
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded)
}

// withClockTimeout is context.WithTimeout on the injected clock.
func withClockTimeout(ctx context.Context, c clock.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := c.NewTimer(d)
	go func() {
		defer t.Stop()
		select {
		case <-t.C():
			cancel(context.DeadlineExceeded)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// owedEviction is a hard eviction whose pod's containers were stopped
// through the runtime while the API server was away.
type owedEviction struct {
	r        decide.Request
	stopped  time.Time // when the containers were stopped (the latest time)
	log      *slog.Logger
	refusals int // answers other than "gone" so far
}

// owedSet holds the owed evictions by pod UID, in memory only: a restart
// of evictd forgets them (the pod's containers stay stopped or are
// restarted by the kubelet; if its memory comes back, evictd decides again).
type owedSet struct {
	mu      sync.Mutex
	m       map[string]owedEviction
	kick    chan struct{} // a new owed eviction, for Run
	changed func(n int)   // Config.OnOwed
}

func newOwedSet(changed func(int)) *owedSet {
	return &owedSet{m: map[string]owedEviction{}, kick: make(chan struct{}, 1), changed: changed}
}

// add owes r's eviction and returns how many are owed. Past maxOwed the
// oldest is forgotten, with a log line.
func (s *owedSet) add(r decide.Request, now time.Time, log *slog.Logger) int {
	s.mu.Lock()
	if _, ok := s.m[r.Pod.UID]; !ok && len(s.m) >= maxOwed {
		var oldest string
		for uid, o := range s.m {
			if oldest == "" || o.stopped.Before(s.m[oldest].stopped) {
				oldest = uid
			}
		}
		log.Warn("too many owed evictions; forgetting the oldest", "forgotten", s.m[oldest].r.Pod.Ref(), "max", maxOwed)
		delete(s.m, oldest)
	}
	s.m[r.Pod.UID] = owedEviction{r: r, stopped: now, log: log}
	n := len(s.m)
	s.mu.Unlock()
	s.report(n)
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return n
}

// refused counts a refusal of the owed eviction of uid and returns how
// many there were.
func (s *owedSet) refused(uid string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.m[uid]
	if !ok {
		return 0
	}
	o.refusals++
	s.m[uid] = o
	return o.refusals
}

func (s *owedSet) remove(uid string) {
	s.mu.Lock()
	_, ok := s.m[uid]
	delete(s.m, uid)
	n := len(s.m)
	s.mu.Unlock()
	if ok {
		s.report(n)
	}
}

// list returns the owed evictions, oldest first.
func (s *owedSet) list() []owedEviction {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]owedEviction, 0, len(s.m))
	for _, o := range s.m {
		out = append(out, o)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].stopped.Before(out[j-1].stopped); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func (s *owedSet) report(n int) {
	if s.changed != nil {
		s.changed(n)
	}
}

// Owed returns how many evictions are owed: pods whose containers were
// stopped through the runtime while the API server was away, and whose
// eviction Run has not completed yet.
func (e *Evicter) Owed() int {
	e.owed.mu.Lock()
	defer e.owed.mu.Unlock()
	return len(e.owed.m)
}

// Run completes the owed evictions until ctx is done, and returns nil
// then. It tries them all, oldest first, 1 to 2s after one is owed, then
// with a jittered exponential backoff (backoff) up to waits of 15 to 30s
// while the API server still does not answer, never sooner than the
// API server asked (Retry-After; see retryDelay).
// Each is completed as a hard eviction is: the pod's terminal status, the
// Evicted event with the request's message, the containers stopped again
// and the delete (a pod already terminating, perhaps by an earlier try
// whose answer was lost, gets the DisruptionTarget condition and event
// only).
// It is dropped when the pod is gone or was replaced, or when the API
// server has refused it maxOwedRefusals times (logged).
//
// Beside that, with a Config.Pods that can list and notify (PodLister,
// ChangeNotifier), Run deletes the pods an eviction left Failed once
// their containers have stopped (sweep), and waits for that to end
// before it returns.
func (e *Evicter) Run(ctx context.Context) error {
	defer func(done <-chan struct{}) { <-done }(e.startSweep(ctx, e.log))
	b := backoff(owedFirstRetry, owedMaxRetry)
	delay := b.Step()
	for {
		var t clock.Timer
		var retry <-chan time.Time
		if e.Owed() > 0 {
			t = e.cfg.Clock.NewTimer(delay)
			retry = t.C()
		}
		kicked := false
		select {
		case <-ctx.Done():
		case <-e.owed.kick:
			kicked = true
		case <-retry:
		}
		if t != nil {
			t.Stop()
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case kicked: // a new one: try it soon
			b = backoff(owedFirstRetry, owedMaxRetry)
			delay = b.Step()
			continue
		}
		if settled, err := e.settle(ctx); settled {
			b = backoff(owedFirstRetry, owedMaxRetry)
			delay = b.Step()
		} else {
			delay = retryDelay(&b, err)
		}
	}
}

// settle tries every owed eviction once, oldest first, and reports whether
// they are all settled; it stops at the first the API server does not
// answer, and returns its error.
func (e *Evicter) settle(ctx context.Context) (bool, error) {
	settled := true
	for _, o := range e.owed.list() {
		if ctx.Err() != nil {
			return false, nil
		}
		actx, cancel := withClockTimeout(ctx, e.cfg.Clock, owedAttempt)
		err := e.complete(actx, o)
		timedOut := actx.Err() != nil
		cancel()
		log := o.log.With("owedFor", e.cfg.Clock.Since(o.stopped).Round(time.Millisecond))
		switch {
		case err == nil:
			log.Info("the API server answers again: owed eviction completed", "message", o.r.Message)
		case ctx.Err() != nil:
			return false, nil
		case timedOut || apiServerAway(err):
			log.Debug("the API server still does not answer; the eviction stays owed", "err", err)
			return false, err
		case errors.Is(err, decide.ErrPodGone):
			log.Info("owed eviction dropped: nothing left to evict", "reason", err)
		case e.owed.refused(o.r.Pod.UID) < maxOwedRefusals:
			log.Warn("the API server refused the owed eviction; retrying", "err", err)
			settled = false
			continue
		default:
			log.Error("owed eviction dropped: the API server kept refusing it", "refusals", maxOwedRefusals, "err", err)
		}
		e.owed.remove(o.r.Pod.UID)
	}
	return settled, nil
}

// complete issues an owed eviction, then (with Config.StopWhenIssued) stops
// the pod's containers again. A pod already terminating is only marked
// and reported. Unlike a fresh one, a pod that has finished is evicted too: its containers were most likely stopped by
// evictd, and the eviction (which deletes a finished pod) with its
// condition and event says so, as an eviction that went through at once
// would have.
func (e *Evicter) complete(ctx context.Context, o owedEviction) error {
	want := o.r.Pod
	e.evicting.Store(types.UID(want.UID), struct{}{})
	defer e.evicting.Delete(types.UID(want.UID))
	// The API server's word, not the cache's, for current's reasons; the
	// cache is all the more likely behind just after the API server's
	// return, its watch reconnecting with a backoff of its own.
	pod, err := e.pods().PodOnNode(ctx, want.Namespace, want.Name, e.cfg.NodeName)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: not found", decide.ErrPodGone)
	case err != nil:
		e.apiError(metrics.APIPodGet)
		return fmt.Errorf("get pod: %w", err)
	case string(pod.UID) != want.UID:
		return fmt.Errorf("%w: replaced by another pod of the same name (UID %s, not %s)", decide.ErrPodGone, pod.UID, want.UID)
	}
	how := "already terminating"
	if pod.DeletionTimestamp == nil {
		if how, err = e.issue(ctx, o.log, o.r, pod); err != nil {
			return err
		}
	} else {
		// Deleted meanwhile: by an earlier try whose answer was lost, or
		// by someone else. Either way evictd stopped its containers: say
		// so on the pod.
		e.markDisruptionTarget(ctx, o.log, pod, o.r.Message, !hasDisruptionTarget(pod))
	}
	if e.recorder != nil {
		e.recorder.AnnotatedEventf(pod, o.r.Annotations, v1.EventTypeWarning, EventReason, "%s", o.r.Message)
	}
	defer e.marked.Delete(pod.UID) // no wait follows to read it
	o.log.Debug("owed eviction issued", "by", how, "phase", pod.Status.Phase)
	if e.cfg.StopWhenIssued && e.cfg.StopLocally != nil {
		// The kubelet may have restarted the containers meanwhile, and
		// may take a while to see the deletion after the API server's
		// return: stop them again, as a hard eviction does.
		if err := e.cfg.StopLocally(ctx, o.r.Pod, o.r.GracePeriod); err != nil {
			o.log.Warn("could not stop the pod's containers through the runtime; the kubelet will", "err", err)
		}
	}
	if how == "status" {
		// The containers are stopped: the delete follows at once.
		return e.finalDelete(ctx, o.log, o.r, pod)
	}
	return nil
}
