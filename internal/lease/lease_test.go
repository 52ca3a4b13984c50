package lease_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/lease"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// requests counts the requests a client makes, by method and path, and
// can answer the next ones itself (fault injection).
type requests struct {
	mu     sync.Mutex
	seen   []string
	refuse int           // answer this many more requests with 429
	after  time.Duration // their Retry-After
}

func (r *requests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Method+" "+req.URL.Path)
		refuse := r.refuse > 0
		if refuse {
			r.refuse--
		}
		r.mu.Unlock()
		if refuse {
			body := `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,"message":"too many requests"}`
			h := http.Header{"Content-Type": {"application/json"}, "Retry-After": {fmt.Sprint(int(r.after.Seconds()))}}
			return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
		}
		return rt.RoundTrip(req)
	})
}

func (r *requests) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.seen
	r.seen = nil
	return s
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type env struct {
	cluster *testcluster.Cluster
	admin   kubernetes.Interface
	node    *v1.Node
	token   string
}

// startEnv starts a control plane with deploy/'s manifests applied, a
// node, and a token of evictd's identity bound to it.
func startEnv(t *testing.T, node string) *env {
	t.Helper()
	c := testcluster.StartForTest(t, testcluster.Options{})
	admin := kubernetes.NewForConfigOrDie(c.AdminConfig())
	n, err := admin.CoreV1().Nodes().Create(t.Context(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", node, err)
	}
	token, err := c.EvictdNodeToken(t.Context(), node)
	if err != nil {
		t.Fatalf("evictd's identity: %v", err)
	}
	return &env{cluster: c, admin: admin, node: n, token: token}
}

// keeper starts a Keeper for e's node under evictd's token, its requests
// counted (and refused, when told) by reqs.
func (e *env) keeper(t *testing.T, cfg lease.Config, reqs *requests) (stop func()) {
	t.Helper()
	rc := e.cluster.TokenConfig(e.token)
	rc.WrapTransport = reqs.wrap
	client, err := kubeclient.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	k, err := lease.New(cfg, client, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("after %s: %v", timeout, last)
	}
}

// waitTimer waits until the keeper waits on the fake clock.
func waitTimer(t *testing.T, fc *clocktesting.FakeClock) {
	t.Helper()
	eventually(t, 10*time.Second, func() error {
		if !fc.HasWaiters() {
			return errors.New("the keeper is not waiting on the clock")
		}
		return nil
	})
}

func (e *env) lease(t *testing.T, ns, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := e.admin.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get lease %s/%s: %v", ns, name, err)
	}
	return l
}

// TestRenewsWithoutReading: the Lease is created once, owned by the Node,
// then renewed by updates only, every quarter of its duration plus at most
// 10%; deleted, it is read again and created again; a node's evictd may
// write no other node's Lease.
func TestRenewsWithoutReading(t *testing.T) {
	t.Parallel()
	const node = "node-a"
	e := startEnv(t, node)
	fc := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	var reqs requests
	const d = 40 * time.Second
	e.keeper(t, lease.Config{NodeName: node, Namespace: "kube-system", Duration: d, Clock: fc,
		NodeUID: func() types.UID { return e.node.UID }}, &reqs)

	waitTimer(t, fc)
	l := e.lease(t, "kube-system", "evictd-"+node)
	if got := *l.Spec.HolderIdentity; got != node {
		t.Errorf("holderIdentity %q, want %q", got, node)
	}
	if got := *l.Spec.LeaseDurationSeconds; got != 40 {
		t.Errorf("leaseDurationSeconds %d, want 40", got)
	}
	if !l.Spec.RenewTime.Time.Equal(fc.Now()) {
		t.Errorf("renewTime %s, want %s", l.Spec.RenewTime.Time, fc.Now())
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID != e.node.UID {
		t.Errorf("ownerReferences %+v, want the Node %s (%s)", l.OwnerReferences, node, e.node.UID)
	}
	path := "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
	if got, want := strings.Join(reqs.take(), ", "), "GET "+path+"/evictd-"+node+", POST "+path; got != want {
		t.Errorf("requests at start: %s, want %s", got, want)
	}

	// Renewals: not before a quarter of the duration, by 10% more at the
	// latest, each an update alone.
	for i := range 5 {
		start := fc.Now()
		fc.Step(d/4 - time.Second)
		waitTimer(t, fc)
		if got := e.lease(t, "kube-system", "evictd-"+node).Spec.RenewTime.Time; !got.Equal(start) {
			t.Fatalf("renewal %d: renewed at %s, before a quarter of the duration", i, got)
		}
		for fc.Since(start) <= d/4+d/40 {
			fc.Step(500 * time.Millisecond)
			waitTimer(t, fc)
			if got := e.lease(t, "kube-system", "evictd-"+node).Spec.RenewTime.Time; got.After(start) {
				break
			}
		}
		if got := e.lease(t, "kube-system", "evictd-"+node).Spec.RenewTime.Time; !got.After(start) {
			t.Fatalf("renewal %d: not renewed %s after the last", i, fc.Since(start))
		}
		if got, want := strings.Join(reqs.take(), ", "), "PUT "+path+"/evictd-"+node; got != want {
			t.Errorf("renewal %d: requests %s, want %s", i, got, want)
		}
	}

	// Deleted (say, by the garbage collector): read again, created again.
	if err := e.admin.CoordinationV1().Leases("kube-system").Delete(context.Background(), "evictd-"+node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		fc.Step(time.Second)
		waitTimer(t, fc)
		if _, err := e.admin.CoordinationV1().Leases("kube-system").Get(context.Background(), "evictd-"+node, metav1.GetOptions{}); err == nil {
			break
		}
		if i > 60 {
			t.Fatal("the deleted lease was not created again within a minute")
		}
	}

	// The policy: another node's Lease is refused to this node's evictd.
	client, err := kubernetes.NewForConfig(e.cluster.TokenConfig(e.token))
	if err != nil {
		t.Fatal(err)
	}
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "evictd-node-b", Namespace: "kube-system"}}
	if _, err := client.CoordinationV1().Leases("kube-system").Create(context.Background(), other, metav1.CreateOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "may write only the Lease evictd-"+node) {
		t.Errorf("create another node's lease: got %v, want 403 from the policy", err)
	}
	if _, err := client.CoordinationV1().Leases("default").Create(context.Background(),
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "evictd-" + node, Namespace: "default"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create a lease outside kube-system: got %v, want 403 from RBAC", err)
	}
}

// TestBacksOffAndHonoursRetryAfter: a 429 with Retry-After is retried
// when the server asks (client-go does it within the request) and costs
// no failed renewal; while the API server is away the renewals back off
// (each delay within [1, 2] × 1s, 2s, 4s... capped at the renewal
// interval), and the keeper renews as soon as it is back.
func TestBacksOffAndHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	const node = "node-c"
	e := startEnv(t, node)
	fc := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	var reqs requests
	var mu sync.Mutex
	failed := 0
	failures := func() int { mu.Lock(); defer mu.Unlock(); return failed }
	const d = 40 * time.Second
	e.keeper(t, lease.Config{NodeName: node, Namespace: "kube-system", Duration: d, Clock: fc,
		OnAPIError: func(metrics.APIVerb) { mu.Lock(); failed++; mu.Unlock() }}, &reqs)
	waitTimer(t, fc)
	reqs.take()

	reqs.mu.Lock()
	reqs.refuse, reqs.after = 2, 2*time.Second
	reqs.mu.Unlock()
	start := time.Now()
	fc.Step(d/4 + d/40)
	eventually(t, 20*time.Second, func() error {
		if got := e.lease(t, "kube-system", "evictd-"+node).Spec.RenewTime.Time; !got.Equal(fc.Now()) {
			return fmt.Errorf("renewTime %s, want %s", got, fc.Now())
		}
		return nil
	})
	if took := time.Since(start); took < 4*time.Second {
		t.Errorf("renewed %s after two 429s with Retry-After: 2, want at least 4s", took)
	}
	if n := failures(); n != 0 {
		t.Errorf("%d failed renewals after 429s that client-go retried, want 0", n)
	}
	waitTimer(t, fc)
	reqs.take()

	if err := e.cluster.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	// Each failure's retry delay, by the fake clock, from one failed
	// attempt to the next. The count is read before each step: the
	// keeper's attempt can fail and be counted before this goroutine
	// runs again after the step, and once the keeper waits again on the
	// clock its attempt has been counted.
	var gaps []time.Duration
	last := fc.Now()
	n := failures()
	fc.Step(d/4 + d/40)
	for len(gaps) < 7 {
		waitTimer(t, fc)
		if f := failures(); f > n {
			gaps = append(gaps, fc.Since(last))
			last = fc.Now()
			n = f
		}
		fc.Step(250 * time.Millisecond)
	}
	// gaps[0] is the renewal interval; then 1s, 2s, 4s, 8s, 10s (the cap),
	// each stretched by up to 100%, measured in 250ms steps.
	for i, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second} {
		if g := gaps[i+1]; g < base || g > 2*base+250*time.Millisecond {
			t.Errorf("retry %d came %s after the failure before it, want within [%s, %s]", i+1, g, base, 2*base)
		}
	}
	if err := e.cluster.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	back := fc.Now()
	eventually(t, 60*time.Second, func() error {
		l, err := e.admin.CoordinationV1().Leases("kube-system").Get(context.Background(), "evictd-"+node, metav1.GetOptions{})
		if err == nil && l.Spec.RenewTime.Time.After(back) {
			return nil
		}
		if fc.HasWaiters() {
			fc.Step(time.Second)
		}
		return fmt.Errorf("not renewed since the API server came back (%v)", err)
	})
	if s := fc.Since(back); s > 20*time.Second+time.Second {
		t.Errorf("renewed %s (fake clock) after the API server came back, want within one capped retry (20s)", s)
	}

	// The renewal after the outage is not a quarter later, in phase with
	// every other agent that came back at once, but anywhere within half
	// to one and a half quarters.
	waitTimer(t, fc)
	renewed := e.lease(t, "kube-system", "evictd-"+node).Spec.RenewTime.Time
	from := fc.Now()
	for {
		fc.Step(250 * time.Millisecond)
		waitTimer(t, fc)
		if got := e.lease(t, "kube-system", "evictd-"+node).Spec.RenewTime.Time; got.After(renewed) {
			break
		}
		if fc.Since(from) > d*3/8 {
			t.Fatalf("not renewed within %s of the renewal after the outage", d*3/8)
		}
	}
	if s := fc.Since(from); s < d/8 {
		t.Errorf("renewed again %s after the renewal that ended the outage, want at least half a quarter (%s)", s, d/8)
	}
}

// TestFirstRenewalSpread: with StartWithin the first renewal waits a
// random time below it, different from agent to agent, and nothing is
// requested before it.
func TestFirstRenewalSpread(t *testing.T) {
	t.Parallel()
	const node = "node-s"
	e := startEnv(t, node)
	const within = 10 * time.Second
	var firsts []time.Duration
	for i := range 3 {
		fc := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
		var reqs requests
		stop := e.keeper(t, lease.Config{NodeName: node, Namespace: "kube-system", Duration: 40 * time.Second, StartWithin: within, Clock: fc}, &reqs)
		start := fc.Now()
		for {
			// Once the keeper waits on the clock again, whatever the
			// last step let it send has been sent: looked at only then,
			// a first renewal the step to within itself released counts
			// (looked at before, it was missed under load).
			waitTimer(t, fc)
			if len(reqs.take()) > 0 {
				break
			}
			if fc.Since(start) >= within {
				t.Fatalf("agent %d: no request within %s", i, within)
			}
			fc.Step(100 * time.Millisecond)
		}
		firsts = append(firsts, fc.Since(start))
		stop()
	}
	if firsts[0] == firsts[1] && firsts[1] == firsts[2] {
		t.Errorf("three agents renewed first after %v: the same delay, want them spread", firsts)
	}
}
