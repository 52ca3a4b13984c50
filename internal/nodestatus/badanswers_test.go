package nodestatus_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/nodestatus"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// faults counts the publisher's writes (PATCH requests) and answers the
// next ones itself with a status code, and a Retry-After when set.
type faults struct {
	mu         sync.Mutex
	patches    int
	code       int // answer this code to the next `left` patches
	left       int
	retryAfter string
}

func (f *faults) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodPatch {
			return rt.RoundTrip(req)
		}
		f.mu.Lock()
		f.patches++
		fail := f.left > 0
		code, after := f.code, f.retryAfter
		if fail {
			f.left--
		}
		f.mu.Unlock()
		if !fail {
			return rt.RoundTrip(req)
		}
		h := http.Header{"Content-Type": {"application/json"}}
		if after != "" {
			h.Set("Retry-After", after)
		}
		body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected","code":%d}`, code)
		return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
	})
}

func (f *faults) set(code, n int, retryAfter string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.code, f.left, f.retryAfter = code, n, retryAfter
}

func (f *faults) count() (patches, left int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.patches, f.left
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// syncBuffer is a log destination safe for the publisher's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), substr)
}

// startFaultyPublisher starts a publisher whose requests go through f and
// whose log goes to the test's output and to log.
func startFaultyPublisher(t *testing.T, e *env, cfg nodestatus.Config, f *faults, log *syncBuffer) *nodestatus.Publisher {
	t.Helper()
	return startFaultyPublisherIn(t, context.Background(), e, cfg, f, log)
}

// startFaultyPublisherIn is startFaultyPublisher, run until parent ends or
// the test does.
func startFaultyPublisherIn(t *testing.T, parent context.Context, e *env, cfg nodestatus.Config, f *faults, log *syncBuffer) *nodestatus.Publisher {
	t.Helper()
	token, err := testcluster.ServiceAccountToken(t.Context(), e.admin, "kube-system", "evictd")
	if err != nil {
		t.Fatal(err)
	}
	rc := e.cluster.TokenConfig(token)
	rc.WrapTransport = f.wrap
	client, err := kubeclient.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), log), &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := nodestatus.New(cfg, client, newRecorder(t, client, cfg.NodeName), logger)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(parent)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return p
}

// TestBadAnswers: the node missing at start, deleted and created again;
// 429s with Retry-After and 5xx answers to its writes. Each is logged
// once, costs no request while nothing can be written, is retried on the
// jittered schedule, and ends with the node showing evictd's state.
func TestBadAnswers(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	ctx := context.Background()
	const name = "node-late"
	fc := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	var f faults
	var log syncBuffer
	var errs apiErrors
	p := startFaultyPublisher(t, e, nodestatus.Config{NodeName: name, UpdateFrequency: time.Second, ReportFrequency: time.Hour,
		Jitter: noJitter, Clock: fc, OnAPIError: errs.record}, &f, &log)
	at := fc.Now()
	p.Publish(at, []decide.PressureReport{report(memory, true, at, "mem on")})

	showsPressure := func() error {
		n, err := e.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(n, memCond); c == nil || c.Status != v1.ConditionTrue {
			return fmt.Errorf("%s is %+v", memCond, c)
		}
		if _, ok := hasTaint(n, memTaint); !ok {
			return fmt.Errorf("taints %v: no %s", n.Spec.Taints, memTaint)
		}
		return nil
	}

	// The node does not exist yet: a warning, once, and no write however
	// long it lasts.
	for range 30 {
		waitIdle(t, fc)
		fc.Step(time.Second)
	}
	if n, _ := f.count(); n != 0 {
		t.Errorf("%d writes to a node that does not exist, want 0", n)
	}
	if n := log.count("the node does not exist (yet)"); n != 1 {
		t.Errorf("logged the missing node %d times, want once", n)
	}
	// settled waits for the node to show the pressure. The kubelet writes
	// the node's status just after creating it, so evictd's taint patch,
	// carrying the version its own status patch returned, may meet a
	// conflict; its retry waits on the fake clock, which moves on then.
	// Every conflict costs one more write of the taint, and of the
	// conditions when the retry is for a transition, and nothing else.
	settled := func(what string, before, conflictsBefore int) {
		t.Helper()
		eventually(t, 20*time.Second, func() (err error) {
			defer func() {
				if err != nil && fc.HasWaiters() {
					fc.Step(time.Second)
				}
			}()
			return showsPressure()
		})
		n, _ := f.count()
		conflicts := errs.count(metrics.APINodeTaints) - conflictsBefore
		if w := n - before; w < 2+conflicts || w > 2+2*conflicts {
			t.Errorf("%s: %d writes with %d conflicts of the taint patch, want %d to %d (conditions, taint, and at most both again per conflict)",
				what, w, conflicts, 2+conflicts, 2+2*conflicts)
		}
	}
	// Created (by its kubelet): written at once.
	createNode(t, e.admin, name)
	settled("after the node appeared", 0, 0)

	// Deleted and created again (a node re-registering): evictd's state
	// is written again to the new object, which has none of it.
	if err := e.admin.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if log.count("the node does not exist (yet)") != 2 {
			return fmt.Errorf("the deletion is not noticed")
		}
		return nil
	})
	before, _ := f.count()
	conflictsBefore := errs.count(metrics.APINodeTaints)
	createNode(t, e.admin, name)
	settled("after the node came back", before, conflictsBefore)

	// 429s with Retry-After: client-go waits as the server says and
	// retries within the request; the publisher sees no failure.
	waitIdle(t, fc)
	f.set(http.StatusTooManyRequests, 2, "1")
	start := time.Now()
	p.Publish(fc.Now(), []decide.PressureReport{report(memory, false, fc.Now(), "mem off")})
	eventually(t, 20*time.Second, func() error {
		n, err := e.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(n, memCond); c == nil || c.Status != v1.ConditionFalse {
			return fmt.Errorf("%s is %+v", memCond, c)
		}
		return nil
	})
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("written %s after two 429s with Retry-After: 1, want at least 2s", took)
	}
	if n := errs.count(metrics.APINodePatch); n != 0 {
		t.Errorf("%d failed patches after 429s client-go retried, want 0", n)
	}

	// 500s without Retry-After: the publisher's own backoff, 1s doubling,
	// each delay stretched by up to 100%; logged once.
	eventually(t, 10*time.Second, func() error {
		if _, ok := hasTaintNow(ctx, e, name); ok {
			return fmt.Errorf("taint still there")
		}
		return nil
	})
	waitIdle(t, fc)
	f.set(http.StatusInternalServerError, 4, "")
	warned := log.count("could not write node status; retrying with backoff")
	// Failures are counted from before the publish: the first attempt may
	// fail before the loop first looks.
	failedBefore := errs.count(metrics.APINodePatch)
	on := fc.Now()
	p.Publish(on, []decide.PressureReport{report(memory, true, on, "mem on again")})
	var attempts []time.Duration // fake-clock time of each failed attempt since on
	for len(attempts) < 4 {
		waitIdle(t, fc)
		for failed := errs.count(metrics.APINodePatch) - failedBefore; len(attempts) < failed; {
			attempts = append(attempts, fc.Since(on))
		}
		if len(attempts) < 4 {
			fc.Step(250 * time.Millisecond)
		}
		if fc.Since(on) > time.Minute {
			t.Fatalf("failed attempts at %v within a minute, want 4", attempts)
		}
	}
	for i, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		if g := attempts[i+1] - attempts[i]; g < base || g > 2*base+250*time.Millisecond {
			t.Errorf("attempt %d came %s after the one before, want within [%s, %s]", i+2, g, base, 2*base)
		}
	}
	for fc.Since(on) < 2*time.Minute && showsPressure() != nil {
		waitIdle(t, fc)
		fc.Step(time.Second)
	}
	eventually(t, 10*time.Second, showsPressure)
	if n := log.count("could not write node status; retrying with backoff") - warned; n != 1 {
		t.Errorf("the failing episode logged %d warnings, want 1", n)
	}
}

func hasTaintNow(ctx context.Context, e *env, name string) (v1.Taint, bool) {
	n, err := e.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return v1.Taint{}, false
	}
	return hasTaint(n, memTaint)
}

// TestRestartWritesNothingNew: an evictd restarted while its node already
// shows its state (a mass restart of a fleet, an upgrade) writes nothing
// until its report comes due, a period after the node's heartbeat; one
// whose state changed while it was down writes at once.
func TestRestartWritesNothingNew(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	const name = "node-r"
	createNode(t, e.admin, name)
	const interval = 30 * time.Second
	t0 := time.Now().Truncate(time.Second)
	cfg := func(fc *clocktesting.FakeClock) nodestatus.Config {
		return nodestatus.Config{NodeName: name, UpdateFrequency: time.Second, ReportFrequency: interval, Jitter: noJitter, Clock: fc}
	}
	state := []decide.PressureReport{report(memory, true, t0, "mem on"), report(disk, false, time.Time{}, "disk clear")}

	var first faults
	fc1 := clocktesting.NewFakeClock(t0)
	ctx1, stop1 := context.WithCancel(context.Background())
	p1 := startFaultyPublisherCtx(t, ctx1, e, cfg(fc1), &first, &syncBuffer{})
	p1.Publish(t0, state)
	// Its writes done and its event recorded (the event follows the
	// writes' answers) before it stops.
	eventually(t, 20*time.Second, func() error {
		if n, _ := first.count(); n != 2 {
			return fmt.Errorf("%d writes, want 2 (conditions, taint)", n)
		}
		return wantEvents(context.Background(), e, name, map[string]int32{"Warning/EvictdMemoryPressure": 1})
	})
	stop1()

	// Restarted 5s later: the node shows the same state, heartbeat t0.
	var second faults
	fc2 := clocktesting.NewFakeClock(t0.Add(5 * time.Second))
	p2 := startFaultyPublisherCtx(t, context.Background(), e, cfg(fc2), &second, &syncBuffer{})
	p2.Publish(fc2.Now(), []decide.PressureReport{report(memory, true, time.Time{}, "mem on"), report(disk, false, time.Time{}, "disk clear")})
	for fc2.Since(t0) < interval-time.Second {
		waitIdle(t, fc2)
		fc2.Step(time.Second)
	}
	waitIdle(t, fc2)
	if n, _ := second.count(); n != 0 {
		t.Errorf("the restarted publisher wrote %d times before its report was due, want 0", n)
	}
	fc2.Step(time.Second)
	eventually(t, 10*time.Second, func() error {
		if n, _ := second.count(); n != 1 {
			return fmt.Errorf("%d writes at the report, want 1 (conditions)", n)
		}
		return nil
	})
	// No event for a state the node already showed.
	eventually(t, 10*time.Second, func() error {
		return wantEvents(context.Background(), e, name, map[string]int32{"Warning/EvictdMemoryPressure": 1})
	})
}

// startFaultyPublisherCtx is startFaultyPublisher stopped when ctx ends
// (or the test does).
func startFaultyPublisherCtx(t *testing.T, ctx context.Context, e *env, cfg nodestatus.Config, f *faults, log *syncBuffer) *nodestatus.Publisher {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	return startFaultyPublisherIn(t, ctx, e, cfg, f, log)
}
