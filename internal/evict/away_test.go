package evict

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/testing/testcluster"
	"github.com/evictd/evictd/signals"
)

func TestAPIServerAway(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection refused", &url.Error{Op: "Get", URL: "https://10.0.0.1:6443", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, true},
		{"connection reset, wrapped", fmt.Errorf("get pod: %w", syscall.ECONNRESET), true},
		{"EOF", fmt.Errorf("get pod: %w", io.EOF), true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"deadline", fmt.Errorf("get pod: %w", context.DeadlineExceeded), true},
		{"503", apierrors.NewServiceUnavailable("etcd is down"), true},
		{"500", apierrors.NewInternalError(errors.New("boom")), true},
		{"504", apierrors.NewTimeoutError("slow", 1), true},
		{"429 throttled", apierrors.NewTooManyRequests("slow down", 1), true},
		{"403", apierrors.NewForbidden(pods, "web", errors.New("RBAC")), false},
		{"401", apierrors.NewUnauthorized("token expired"), false},
		{"404", apierrors.NewNotFound(pods, "web"), false},
		{"409", apierrors.NewConflict(pods, "web", errors.New("UID precondition")), false},
		{"400", apierrors.NewBadRequest("bad"), false},
		{"canceled", context.Canceled, false},
		{"plain", errors.New("no API server client"), false},
		{"pod gone", fmt.Errorf("%w: not found", decide.ErrPodGone), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := apiServerAway(tc.err); got != tc.want {
				t.Errorf("apiServerAway(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// stops records StopLocally's calls and answers with err.
type stops struct {
	mu    sync.Mutex
	calls []string
	err   error
}

func (s *stops) stop(_ context.Context, p *signals.Pod, grace int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, fmt.Sprintf("%s %s %d", p.Ref(), p.UID, grace))
	return s.err
}

func (s *stops) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// closedPort returns the URL of a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// answering returns the URL of a server that answers every request with
// code (or, with code 0, answers nothing until the request is given up).
func answering(t *testing.T, code int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code == 0 {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected %d","code":%d}`, code, code)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func clientFor(t *testing.T, host string) *kubeclient.Client {
	t.Helper()
	c, err := kubeclient.NewForConfig(&rest.Config{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func awayRequest(hard bool) decide.Request {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hog", UID: "uid-hog"}}
	return request(pod, hard, 1, message("away"))
}

// TestEvictAPIServerAway: a hard eviction whose API server does not answer
// is retried for LocalKillAfter, then the pod's containers are stopped and
// the eviction owed; anything else is returned as before.
func TestEvictAPIServerAway(t *testing.T) {
	const killAfter = 300 * time.Millisecond
	for _, tc := range []struct {
		name      string
		host      func(t *testing.T) string
		hard      bool
		killAfter time.Duration
		stopErr   error
		wantStop  bool
		wantOwed  int
		wantErr   error // wrapped by Evict's error; nil: any error but ErrStoppedLocally
	}{
		{"connection refused, hard", closedPort, true, killAfter, nil, true, 1, decide.ErrStoppedLocally},
		{"503, hard", func(t *testing.T) string { return answering(t, http.StatusServiceUnavailable) }, true, killAfter, nil, true, 1, decide.ErrStoppedLocally},
		{"no answer at all, hard", func(t *testing.T) string { return answering(t, 0) }, true, killAfter, nil, true, 1, decide.ErrStoppedLocally},
		{"connection refused, soft", closedPort, false, killAfter, nil, false, 0, nil},
		{"connection refused, local stops off", closedPort, true, 0, nil, false, 0, nil},
		{"403 is an answer", func(t *testing.T) string { return answering(t, http.StatusForbidden) }, true, killAfter, nil, false, 0, nil},
		{"the local stop fails", closedPort, true, killAfter, errors.New("CRI down too"), true, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &stops{err: tc.stopErr}
			var owed []int
			ev := New(Config{NodeName: nodeName, Pods: &fakeCache{}, StopLocally: st.stop, LocalKillAfter: tc.killAfter, OnOwed: func(n int) { owed = append(owed, n) }},
				clientFor(t, tc.host(t)), nil, testLog(t))
			r := awayRequest(tc.hard)
			start := time.Now()
			err := ev.Evict(t.Context(), r)
			took := time.Since(start)
			t.Logf("Evict after %s: %v", took.Round(time.Millisecond), err)
			switch {
			case err == nil:
				t.Fatal("Evict succeeded against an API server that never evicts")
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("Evict error %v, want one wrapping %v", err, tc.wantErr)
			case tc.wantErr == nil && errors.Is(err, decide.ErrStoppedLocally):
				t.Errorf("Evict error %v wraps ErrStoppedLocally", err)
			}
			if tc.wantStop {
				// Killed (grace 0), not stopped with the request's 1 s:
				// the pod does not read Failed, and a program that exits
				// 0 on SIGTERM would make it a success.
				if want := []string{"default/hog uid-hog 0"}; fmt.Sprint(st.got()) != fmt.Sprint(want) {
					t.Errorf("StopLocally calls %v, want %v", st.got(), want)
				}
				if took < tc.killAfter {
					t.Errorf("stopped after %s, before LocalKillAfter %s", took, tc.killAfter)
				}
			} else if len(st.got()) > 0 {
				t.Errorf("StopLocally called: %v", st.got())
			}
			if got := ev.Owed(); got != tc.wantOwed {
				t.Errorf("Owed() = %d, want %d", got, tc.wantOwed)
			}
			if tc.wantOwed > 0 && fmt.Sprint(owed) != "[1]" {
				t.Errorf("OnOwed calls %v, want [1]", owed)
			}
		})
	}
}

// TestOwedEvictions runs the owed evictions against a real API server
// that is stopped and started again.
func TestOwedEvictions(t *testing.T) {
	c := testcluster.StartForTest(t, testcluster.Options{})
	e := newEnvOn(t, c)
	apiDown := false
	down := func(t *testing.T) {
		t.Helper()
		if err := c.StopAPIServer(); err != nil {
			t.Fatalf("stop the API server: %v", err)
		}
		apiDown = true
	}
	up := func(t *testing.T) {
		t.Helper()
		if err := c.StartAPIServer(); err != nil {
			t.Fatalf("start the API server: %v", err)
		}
		apiDown = false
	}
	t.Cleanup(func() {
		if apiDown {
			_ = c.StartAPIServer()
		}
	})
	ns := e.namespace(t, "owed")

	t.Run("completed when the API server is back", func(t *testing.T) {
		pod := e.runningPod(t, ns, "hog", nil, 30)
		st := &stops{}
		ev, _ := e.newEvicter(t, Config{StopLocally: st.stop, LocalKillAfter: 500 * time.Millisecond})
		r := request(pod, true, 1, message("owed"))

		down(t)
		err := ev.Evict(t.Context(), r)
		if !errors.Is(err, decide.ErrStoppedLocally) {
			t.Fatalf("Evict with the API server down: %v, want ErrStoppedLocally", err)
		}
		if len(st.got()) != 1 || ev.Owed() != 1 {
			t.Fatalf("StopLocally calls %v, owed %d; want one call, one owed", st.got(), ev.Owed())
		}
		up(t)
		seen := e.fakeKubelet(t, ns, "hog")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- ev.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
		e.checkEvicted(t, seen, r)
		waitOwed(t, ev, 0)
	})

	t.Run("marked when the pod is already terminating", func(t *testing.T) {
		pod := e.runningPod(t, ns, "deleted", nil, 30)
		ev, _ := e.newEvicter(t, Config{StopLocally: (&stops{}).stop, LocalKillAfter: 500 * time.Millisecond})
		r := request(pod, true, 1, message("terminating"))
		down(t)
		if err := ev.Evict(t.Context(), r); !errors.Is(err, decide.ErrStoppedLocally) {
			t.Fatalf("Evict with the API server down: %v, want ErrStoppedLocally", err)
		}
		up(t)
		// As when the answer to an eviction was lost: terminating, with
		// the API server's condition and not evictd's.
		if err := e.admin.CoreV1().Pods(ns).Delete(t.Context(), "deleted", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		owedRun(t, ev)
		waitOwed(t, ev, 0)
		got := e.getPod(t, ns, "deleted")
		if got == nil || got.DeletionTimestamp == nil {
			t.Fatalf("pod %v, want it terminating", got)
		}
		var reason string
		for _, c := range got.Status.Conditions {
			if c.Type == v1.DisruptionTarget {
				reason = c.Reason + ": " + c.Message
			}
		}
		if want := decide.DisruptionTargetReason + ": " + r.Message; reason != want {
			t.Errorf("DisruptionTarget %q, want %q", reason, want)
		}
		e.evictedEvents(t, ns, pod.UID, r.Message)
	})

	t.Run("dropped when the pod went meanwhile", func(t *testing.T) {
		pod := e.runningPod(t, ns, "gone", nil, 30)
		st := &stops{}
		ev, _ := e.newEvicter(t, Config{StopLocally: st.stop, LocalKillAfter: 500 * time.Millisecond})
		r := request(pod, true, 1, message("gone"))
		down(t)
		if err := ev.Evict(t.Context(), r); !errors.Is(err, decide.ErrStoppedLocally) {
			t.Fatalf("Evict with the API server down: %v, want ErrStoppedLocally", err)
		}
		up(t)
		// Replaced by another pod of the same name before Run looks.
		zero := int64(0)
		if err := e.admin.CoreV1().Pods(ns).Delete(t.Context(), "gone", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		other := e.runningPod(t, ns, "gone", nil, 30)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- ev.Run(ctx) }()
		defer func() {
			cancel()
			<-done
		}()
		waitOwed(t, ev, 0)
		e.checkUntouched(t, other)
		if n := len(e.evictedEventsNow(t, ns, pod.UID)) + len(e.evictedEventsNow(t, ns, other.UID)); n != 0 {
			t.Errorf("%d Evicted events for a dropped owed eviction, want none", n)
		}
	})
}

// owedRun runs ev.Run until t ends.
func owedRun(t *testing.T, ev *Evicter) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ev.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func waitOwed(t *testing.T, ev *Evicter, want int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return ev.Owed() == want, nil
	})
	if err != nil {
		t.Fatalf("owed evictions: %d, want %d", ev.Owed(), want)
	}
}

// fakeAPI is an API server for the pod default/hog of awayRequest, bound
// to nodeName: GET answers with the pod (a list of it, as evictd reads a
// pod by name and node), every other request with code
// (429 as API Priority and Fairness throttles: plain text and
// Retry-After: retryAfter); mode changes both, and records every request.
type fakeAPI struct {
	mu         sync.Mutex
	get        int // GET's code: 200 the pod, or an error
	code       int
	retryAfter string
	reqs       []string
}

func (f *fakeAPI) set(get, code int, retryAfter string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.get, f.code, f.retryAfter = get, code, retryAfter
}

func (f *fakeAPI) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reqs...)
}

// count returns how many requests with that method were made.
func (f *fakeAPI) count(method string) int {
	n := 0
	for _, r := range f.requests() {
		if strings.HasPrefix(r, method+" ") {
			n++
		}
	}
	return n
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r.Method+" "+r.URL.Path)
	get, code, retryAfter := f.get, f.code, f.retryAfter
	f.mu.Unlock()
	if r.Method == http.MethodGet {
		code = get
	}
	switch {
	case code == http.StatusOK:
		pod := v1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hog", UID: "uid-hog", ResourceVersion: "7"},
			Spec:       v1.PodSpec{NodeName: nodeName},
			Status:     v1.PodStatus{Phase: v1.PodRunning},
		}
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/pods") {
			_ = json.NewEncoder(w).Encode(v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: []v1.Pod{pod}})
			return
		}
		_ = json.NewEncoder(w).Encode(pod)
	case code == http.StatusTooManyRequests:
		w.Header().Set("Retry-After", retryAfter)
		http.Error(w, "Too many requests, please try again later.", code)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected %d","code":%d}`, code, code)
	}
}

func (f *fakeAPI) client(t *testing.T) *kubeclient.Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return clientFor(t, srv.URL)
}

// TestThrottlingIsNoBudgetRefusal: a 429 of API Priority and Fairness on
// the eviction (its dry run) is the API server's throttling, not a
// PodDisruptionBudget's refusal: a soft eviction does not move on to the
// next pod as if the budget had refused. A hard eviction (the terminal
// status's patch first) makes that one request and returns the throttling
// with its Retry-After for its caller's retries: client-go's own retries
// would hold the eviction for Retry-After ten times over.
func TestThrottlingIsNoBudgetRefusal(t *testing.T) {
	for _, hard := range []bool{false, true} {
		t.Run(fmt.Sprintf("hard %v", hard), func(t *testing.T) {
			api := &fakeAPI{}
			api.set(http.StatusOK, http.StatusTooManyRequests, "3")
			ev := New(Config{NodeName: nodeName, Pods: &fakeCache{}}, api.client(t), nil, testLog(t))
			err := ev.Evict(t.Context(), awayRequest(hard))
			t.Logf("Evict: %v", err)
			if err == nil || errors.Is(err, decide.ErrDisruptionBudget) {
				t.Errorf("Evict = %v, want an error that is no budget refusal", err)
			}
			if s, ok := apierrors.SuggestsClientDelay(err); !ok || s != 3 {
				t.Errorf("SuggestsClientDelay(Evict's error) = %d, %v; want the Retry-After of 3", s, ok)
			}
			wantDeletes, wantPatches, wantPosts := 0, 0, 1
			if hard {
				wantDeletes, wantPatches, wantPosts = 0, 1, 0
			}
			if n := api.count(http.MethodDelete); n != wantDeletes {
				t.Errorf("%d DELETE requests, want %d; requests: %q", n, wantDeletes, api.requests())
			}
			if n := api.count(http.MethodPatch); n != wantPatches {
				t.Errorf("%d PATCH requests, want %d; requests: %q", n, wantPatches, api.requests())
			}
			if n := api.count(http.MethodPost); n != wantPosts {
				t.Errorf("%d POST requests, want %d; requests: %q", n, wantPosts, api.requests())
			}
		})
	}
}

func TestBudgetRefusal(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	withCause := func(err *apierrors.StatusError, msg string) *apierrors.StatusError {
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: msg})
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"no disruption allowed", withCause(apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0),
			"The disruption budget db needs 2 healthy pods and has 2 currently"), true},
		{"budget not processed yet, wrapped", fmt.Errorf("eviction: %w", withCause(apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10),
			"The disruption budget db is still being processed by the server.")), true},
		{"throttled by API Priority and Fairness", apierrors.NewGenericServerResponse(http.StatusTooManyRequests, "POST", pods, "web",
			"Too many requests, please try again later.", 1, true), false},
		{"429 without details", apierrors.NewTooManyRequests("slow down", 1), false},
		{"corrupt budget", apierrors.NewForbidden(schema.GroupResource{Group: "policy", Resource: "poddisruptionbudget"}, "db",
			errors.New("pdb disruptions allowed is negative")), true},
		{"RBAC", apierrors.NewForbidden(pods, "web", errors.New("RBAC")), false},
		{"two budgets", &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
			Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}}, true},
		{"500", apierrors.NewInternalError(errors.New("boom")), false},
		{"transport", io.EOF, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if msg, got := budgetRefusal(tc.err); got != tc.want {
				t.Errorf("budgetRefusal(%v) = %q, %v; want %v", tc.err, msg, got, tc.want)
			}
		})
	}
}

// TestEvictRefusedKilledAndOwed: a hard eviction with the stop beside it
// (StopWhenIssued) that the API server refuses (a 403, as a restarted
// server answers until its authorizer has synced) kills the pod's
// containers (grace 0: the pod does not read Failed) and owes the
// eviction, to be retried as one the server was away for; with the kill
// failing too, nothing is owed.
func TestEvictRefusedKilledAndOwed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stopErr  error
		wantOwed int
	}{
		{"killed", nil, 1},
		{"the kill fails", errors.New("CRI down too"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &stops{err: tc.stopErr}
			ev := New(Config{NodeName: nodeName, Pods: &fakeCache{}, StopLocally: st.stop, StopWhenIssued: true, StopWait: time.Minute},
				clientFor(t, answering(t, http.StatusForbidden)), nil, testLog(t))
			err := ev.Evict(t.Context(), awayRequest(true))
			if want := []string{"default/hog uid-hog 0"}; fmt.Sprint(st.got()) != fmt.Sprint(want) {
				t.Errorf("StopLocally calls %v, want %v", st.got(), want)
			}
			if got := ev.Owed(); got != tc.wantOwed {
				t.Errorf("Owed() = %d, want %d", got, tc.wantOwed)
			}
			if owed := errors.Is(err, decide.ErrStoppedLocally); owed != (tc.wantOwed > 0) || err == nil {
				t.Errorf("Evict error %v: wraps ErrStoppedLocally %v, want %v", err, owed, tc.wantOwed > 0)
			}
		})
	}
}
