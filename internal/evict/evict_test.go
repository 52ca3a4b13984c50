package evict

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/testing/testagent"
	"github.com/evictd/evictd/internal/testing/testcluster"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
)

// checkEvicted checks the pod's last state as the API server removed it:
// in phase Failed with reason Evicted and the request's message (the
// kubelet's eviction's status, which the fake kubelet clears as the real
// one does for a program that exits 0), with evictd's annotation, and
// carrying evictd's DisruptionTarget condition; and the Warning Evicted
// event with the request's message and annotations.
func (e *env) checkEvicted(t *testing.T, seen <-chan *v1.Pod, r decide.Request) {
	t.Helper()
	pod, ok := <-seen
	if !ok {
		t.Fatal("the fake kubelet never saw the pod removed")
	}
	if pod.Status.Phase != v1.PodFailed || pod.Status.Reason != EvictedReason || pod.Status.Message != r.Message {
		t.Errorf("status phase %s, reason %q, message %q; want Failed, %s, %q", pod.Status.Phase, pod.Status.Reason, pod.Status.Message, EvictedReason, r.Message)
	}
	if pod.Annotations[EvictedAnnotation] == "" {
		t.Errorf("annotations %v, want %s", pod.Annotations, EvictedAnnotation)
	}
	var cond *v1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.DisruptionTarget {
			cond = &pod.Status.Conditions[i]
		}
	}
	switch {
	case cond == nil:
		t.Errorf("no DisruptionTarget condition in %+v", pod.Status.Conditions)
	case cond.Status != v1.ConditionTrue || cond.Reason != decide.DisruptionTargetReason || cond.Message != r.Message || cond.LastTransitionTime.IsZero():
		t.Errorf("DisruptionTarget condition = %+v, want True, reason %s, message %q and a transition time", *cond, decide.DisruptionTargetReason, r.Message)
	}
	if e.getPod(t, pod.Namespace, pod.Name) != nil {
		t.Errorf("pod %s/%s still exists", pod.Namespace, pod.Name)
	}

	events := e.evictedEvents(t, pod.Namespace, pod.UID, r.Message)
	for _, ev := range events {
		if ev.Message != r.Message {
			continue
		}
		if ev.Type != v1.EventTypeWarning || ev.Source.Component != "evictd" || ev.Source.Host != nodeName {
			t.Errorf("event type %s source %+v, want Warning from evictd on %s", ev.Type, ev.Source, nodeName)
		}
		if !maps.Equal(ev.Annotations, r.Annotations) {
			t.Errorf("event annotations = %v, want %v", ev.Annotations, r.Annotations)
		}
	}
}

// checkUntouched checks that the pod is still there, running, not
// terminating and without a DisruptionTarget condition.
func (e *env) checkUntouched(t *testing.T, want *v1.Pod) {
	t.Helper()
	pod := e.getPod(t, want.Namespace, want.Name)
	switch {
	case pod == nil:
		t.Fatalf("pod %s/%s is gone", want.Namespace, want.Name)
	case pod.UID != want.UID:
		t.Fatalf("pod %s/%s has UID %s, want %s", want.Namespace, want.Name, pod.UID, want.UID)
	case pod.DeletionTimestamp != nil:
		t.Errorf("pod %s/%s is terminating (grace period %d)", pod.Namespace, pod.Name, ptr.Deref(pod.DeletionGracePeriodSeconds, -1))
	case pod.Status.Phase != want.Status.Phase || pod.Status.Reason != want.Status.Reason:
		t.Errorf("pod %s/%s is in phase %s (reason %q), want %s as before", pod.Namespace, pod.Name, pod.Status.Phase, pod.Status.Reason, want.Status.Phase)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			t.Errorf("pod %s/%s has condition %+v", pod.Namespace, pod.Name, c)
		}
	}
}

func checkNoAPIErrors(t *testing.T, errs *apiErrors) {
	t.Helper()
	if n := errs.counts(); len(n) > 0 {
		t.Errorf("API errors under evictd's identity: %v", n)
	}
}

// TestEvict runs every scenario that needs only etcd and kube-apiserver,
// under evictd's ServiceAccount from deploy/rbac.yaml.
func TestEvict(t *testing.T) {
	e := newEnv(t, testcluster.Options{})

	t.Run("identity is not admin", func(t *testing.T) {
		r, err := e.evictd.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(), &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed {
			t.Fatal("evictd's identity may create pods: the scenarios would prove nothing about deploy/rbac.yaml")
		}
	})

	for _, tc := range []struct {
		name  string
		hard  bool
		grace int64
	}{
		{"soft", false, 2},
		{"hard", true, 1},
	} {
		t.Run(tc.name+" eviction", func(t *testing.T) {
			ns := e.namespace(t, tc.name)
			pod := e.runningPod(t, ns, "web", nil, 30)
			var issued []time.Duration
			ev, errs := e.newEvicter(t, Config{PollInterval: 50 * time.Millisecond, OnIssued: func(got decide.Request, d time.Duration) {
				if got.Signal != signals.MemoryAvailable {
					t.Errorf("OnIssued signal = %s, want %s", got.Signal, signals.MemoryAvailable)
				}
				issued = append(issued, d)
			}})
			seen := e.fakeKubelet(t, ns, "web")
			r := request(pod, tc.hard, tc.grace, message(tc.name))
			start := time.Now()
			r.Decided = start
			if err := ev.Evict(t.Context(), r); err != nil {
				t.Fatalf("Evict: %v", err)
			}
			took := time.Since(start)
			t.Logf("evicted with grace period %ds in %s, issued after %v", tc.grace, took.Round(time.Millisecond), issued)
			if len(issued) != 1 || issued[0] <= 0 || issued[0] > took {
				t.Errorf("OnIssued got %v, want one latency in (0, %s]", issued, took)
			}
			e.checkEvicted(t, seen, r)
			checkNoAPIErrors(t, errs)
		})
	}

	// The wait for the pod to go reads the pod source's cache: however
	// long the pod takes to go, the Evicter sends no request after the
	// eviction's, and returns once the informer has seen the pod deleted.
	t.Run("the wait reads the pod cache, not the API server", func(t *testing.T) {
		ns := e.namespace(t, "cached")
		pod := e.runningPod(t, ns, "web", nil, 30)
		reqs := &requestLog{}
		cfg := rest.CopyConfig(e.agentConfig)
		cfg.Wrap(reqs.wrap)
		client, err := kubeclient.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		asNode, err := kubeclient.NewForConfigAsNode(cfg, nodeName)
		if err != nil {
			t.Fatal(err)
		}
		errs := &apiErrors{}
		ev := New(Config{NodeName: nodeName, Pods: e.pods, PollInterval: 50 * time.Millisecond, OnAPIError: errs.inc, AsNode: asNode}, client, e.rec, testLog(t))
		const stopIn = 1500 * time.Millisecond
		seen := e.fakeKubeletAfter(t, ns, "web", stopIn)
		r := request(pod, false, 2, message("cached"))
		start := time.Now()
		if err := ev.Evict(t.Context(), r); err != nil {
			t.Fatalf("Evict: %v", err)
		}
		took := time.Since(start)
		if cached, ok := e.pods.CachedPod(ns, "web"); ok {
			t.Errorf("Evict returned while the pod cache still holds the pod (UID %s, deletionTimestamp %v)", cached.UID, cached.DeletionTimestamp)
		}
		path := "/api/v1/namespaces/" + ns + "/pods"
		// The budgets' word by a dry run, the terminal status; once the
		// kubelet reports the containers stopped, the status again and
		// the delete.
		want := []string{"GET " + path, "POST " + path + "/web/eviction", "PATCH " + path + "/web/status",
			"PATCH " + path + "/web/status", "DELETE " + path + "/web"}
		got := reqs.get()
		t.Logf("the pod went in %s (grace period %ds, containers stopped after %s, a look every 50ms); the Evicter's requests: %q",
			took.Round(time.Millisecond), r.GracePeriod, stopIn, got)
		if !slices.Equal(got, want) {
			t.Errorf("the Evicter's requests = %q, want %q and none while waiting", got, want)
		}
		// The fake kubelet reports the containers stopped 1.5 s after
		// the status: thirty looks.
		if took < stopIn {
			t.Errorf("Evict returned after %s, before the kubelet reported the containers stopped (%s): the wait proved nothing", took, stopIn)
		}
		e.checkEvicted(t, seen, r)
		checkNoAPIErrors(t, errs)
	})

	// The pod is gone from the API server while the runtime is still
	// stopping its containers: the stop is neither cancelled nor left
	// behind; Evict returns once it has returned.
	t.Run("local stop outlives the wait", func(t *testing.T) {
		ns := e.namespace(t, "local-stop")
		pod := e.runningPod(t, ns, "hog", nil, 30)
		release := make(chan struct{})
		stopErr := make(chan error, 1)
		ev, errs := e.newEvicter(t, Config{PollInterval: 50 * time.Millisecond, StopWhenIssued: true,
			StopLocally: func(ctx context.Context, _ *signals.Pod, _ int64) error {
				<-release
				stopErr <- ctx.Err()
				return ctx.Err()
			}})
		seen := e.fakeKubelet(t, ns, "hog")
		r := request(pod, true, 1, message("local stop"))
		evicted := make(chan error, 1)
		go func() { evicted <- ev.Evict(t.Context(), r) }()
		gotSeen := <-seen
		if gotSeen == nil {
			t.Fatal("the pod was never evicted")
		}
		// The pod is removed; give Evict time to see it.
		time.Sleep(300 * time.Millisecond)
		select {
		case err := <-evicted:
			t.Fatalf("Evict returned (%v) while the local stop was still running", err)
		default:
		}
		close(release)
		if err := <-stopErr; err != nil {
			t.Errorf("the local stop's context ended with the wait: %v", err)
		}
		if err := <-evicted; err != nil {
			t.Fatalf("Evict: %v", err)
		}
		checkNoAPIErrors(t, errs)
	})

	// A hard eviction of a pod that restarts always sends its stop signal
	// itself before any API request, and logs which; a pod of another
	// restartPolicy, or one whose processes it cannot signal, gets its
	// first signal from the runtime's stop; a soft eviction gets none of
	// it.
	t.Run("hard: the direct stop signal comes first, for a pod that restarts always", func(t *testing.T) {
		ns := e.namespace(t, "direct")
		reqs := &requestLog{}
		cfg := rest.CopyConfig(e.agentConfig)
		cfg.Wrap(reqs.wrap)
		client, err := kubeclient.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		type signalled struct {
			pod      string
			requests int // API requests made before
		}
		var (
			mu     sync.Mutex
			direct []signalled
			firsts []metrics.SignalPath
			failed = map[string]bool{}
		)
		errs := &apiErrors{}
		logged := &testagent.Log{}
		log := slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, logged), &slog.HandlerOptions{Level: slog.LevelDebug}))
		ev := New(Config{NodeName: nodeName, Pods: e.pods, PollInterval: 50 * time.Millisecond, OnAPIError: errs.inc, AsNode: e.agentNode,
			StopWhenIssued: true, StopWait: 300 * time.Millisecond,
			StopLocally: func(context.Context, *signals.Pod, int64) error { return nil },
			SignalLocally: func(p *signals.Pod) (host.Signalled, error) {
				mu.Lock()
				defer mu.Unlock()
				direct = append(direct, signalled{p.Name, len(reqs.get())})
				if failed[p.Name] {
					return host.Signalled{}, errors.New("test: no process visible")
				}
				return host.Signalled{Processes: 1, Containers: 1, Signals: []syscall.Signal{syscall.SIGQUIT}}, nil
			},
			OnSignalled: func(r decide.Request, path metrics.SignalPath, d time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				firsts = append(firsts, path)
				if d < 0 || d > 10*time.Second {
					t.Errorf("OnSignalled %s after %s", path, d)
				}
			},
		}, client, e.rec, log)
		evict := func(name string, hard, always bool) {
			t.Helper()
			pod := e.runningPod(t, ns, name, nil, 30)
			seen := e.fakeKubelet(t, ns, name)
			r := request(pod, hard, 1, message(name))
			r.Pod.RestartAlways = always
			r.Decided = time.Now()
			if err := ev.Evict(t.Context(), r); err != nil {
				t.Fatalf("Evict %s: %v", name, err)
			}
			e.checkEvicted(t, seen, r)
		}
		evict("always", true, true)
		evict("never", true, false)
		failed["unseen"] = true
		evict("unseen", true, true)
		evict("soft", false, true)
		mu.Lock()
		defer mu.Unlock()
		if len(direct) != 2 || direct[0] != (signalled{"always", 0}) || direct[1].pod != "unseen" {
			t.Errorf("SignalLocally called for %+v, want always (before any API request) and unseen (whose processes could not be signalled), and no other", direct)
		}
		// One first signal per hard eviction: direct, then the runtime's
		// for the pod that does not restart always and for the one whose
		// processes could not be signalled.
		if wantFirst := []metrics.SignalPath{metrics.SignalDirect, metrics.SignalRuntime, metrics.SignalRuntime}; !slices.Equal(firsts, wantFirst) {
			t.Errorf("OnSignalled paths %q, want %q", firsts, wantFirst)
		}
		// The log names the signal sent, the container's own stop signal.
		if !slices.ContainsFunc(strings.Split(logged.String(), "\n"), func(line string) bool {
			return strings.Contains(line, `msg="stop signal sent to the pod's containers' main processes"`) &&
				strings.Contains(line, "pod="+ns+"/always ") && strings.Contains(line, "stopSignal=SIGQUIT ")
		}) {
			t.Errorf("no line says SIGQUIT was sent to always's containers:\n%s", logged)
		}
		checkNoAPIErrors(t, errs)
	})

	// A hard eviction stops the containers once evictd's pod cache holds
	// the pod's terminal status, not before: containers that exit 0 before
	// the kubelet has that status make the pod Succeeded. With an API
	// server that does not answer the status write within
	// Config.StopWait, the stop goes ahead without it: here the write's
	// answer is held until the stop has begun, which must come StopWait
	// after the eviction began. A soft eviction never stops them.
	t.Run("hard: the local stop waits for the terminal status, at most StopWait", func(t *testing.T) {
		ns := e.namespace(t, "stop-after")
		var (
			mu       sync.Mutex
			order    []string
			holdStop bool // hold the status write until the stop begins
			stopping = make(chan struct{}, 1)
		)
		note := func(what string) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, what)
		}
		cfg := rest.CopyConfig(e.agentConfig)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.Method != http.MethodPatch || !strings.HasSuffix(r.URL.Path, "/status") {
					return rt.RoundTrip(r)
				}
				mu.Lock()
				hold := holdStop
				holdStop = false // the first write only
				mu.Unlock()
				if hold {
					select {
					case <-stopping:
					case <-time.After(10 * time.Second):
						return nil, errors.New("test: the local stop had not begun 10s after the status write was sent")
					}
				}
				resp, err := rt.RoundTrip(r)
				note("status answered")
				return resp, err
			})
		})
		client, err := kubeclient.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var stops atomic.Int32
		var stopAt atomic.Int64
		errs := &apiErrors{}
		const stopWait = 300 * time.Millisecond
		ev := New(Config{NodeName: nodeName, Pods: e.pods, PollInterval: 50 * time.Millisecond, OnAPIError: errs.inc, AsNode: e.agentNode,
			StopWhenIssued: true, StopWait: stopWait,
			StopLocally: func(ctx context.Context, p *signals.Pod, grace int64) error {
				stops.Add(1)
				stopAt.Store(time.Now().UnixNano())
				note("stop")
				select {
				case stopping <- struct{}{}:
				default:
				}
				return nil
			}}, client, e.rec, testLog(t))

		pod := e.runningPod(t, ns, "hog", nil, 30)
		seen := e.fakeKubeletAfter(t, ns, "hog", -1) // only evictd stops it
		r := request(pod, true, 1, message("stop after"))
		if err := ev.Evict(t.Context(), r); err != nil {
			t.Fatalf("Evict: %v", err)
		}
		e.checkEvicted(t, seen, r)
		mu.Lock()
		got := slices.Clone(order)
		mu.Unlock()
		// The status, the stop, then the status again before the delete
		// (again after that when the fake kubelet wrote in between and
		// the delete's precondition failed).
		if !statusThenAgain(got, []string{"status answered", "stop"}) || stops.Load() != 1 {
			t.Errorf("order %q with %d stops, want the status answered, one stop, the status again", got, stops.Load())
		}

		// The API server holds the status write: the stop goes ahead after StopWait.
		select {
		case <-stopping: // the first eviction's
		default:
		}
		mu.Lock()
		order, holdStop = nil, true
		mu.Unlock()
		stops.Store(0)
		slow := e.runningPod(t, ns, "slow-api", nil, 30)
		seen = e.fakeKubeletAfter(t, ns, "slow-api", -1)
		r = request(slow, true, 1, message("slow API server"))
		start := time.Now()
		if err := ev.Evict(t.Context(), r); err != nil {
			t.Fatalf("Evict: %v", err)
		}
		e.checkEvicted(t, seen, r)
		after := time.Unix(0, stopAt.Load()).Sub(start)
		mu.Lock()
		got = slices.Clone(order)
		mu.Unlock()
		t.Logf("with the status write held, the stop began %s after the eviction (StopWait %s)", after.Round(time.Millisecond), stopWait)
		if !statusThenAgain(got, []string{"stop", "status answered"}) || stops.Load() != 1 || after < stopWait {
			t.Errorf("order %q with %d stops, the stop %s after the eviction began; want one stop, no sooner than StopWait %s, before the status's answer",
				got, stops.Load(), after, stopWait)
		}

		soft := e.runningPod(t, ns, "soft", nil, 30)
		stops.Store(0)
		seen = e.fakeKubelet(t, ns, "soft")
		rs := request(soft, false, 1, message("soft, no stop"))
		if err := ev.Evict(t.Context(), rs); err != nil {
			t.Fatalf("soft Evict: %v", err)
		}
		e.checkEvicted(t, seen, rs)
		if n := stops.Load(); n != 0 {
			t.Errorf("a soft eviction asked the runtime to stop the pod %d times, want never", n)
		}
		checkNoAPIErrors(t, errs)
	})

	// The kubelet's periodic status reconciliation can write the phase
	// it cached (Running) back over evictd's terminal status before it
	// takes that status in: the wait writes it again, and the pod the
	// kubelet finally terminates reads Failed.
	t.Run("the wait writes the terminal status again over the kubelet's", func(t *testing.T) {
		ns := e.namespace(t, "rewrite")
		pod := e.runningPod(t, ns, "web", nil, 30)
		ev, errs := e.newEvicter(t, Config{PollInterval: 50 * time.Millisecond})
		seen := e.fakeKubelet(t, ns, "web")
		reverted := make(chan error, 1)
		go func() {
			reverted <- wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				p, err := e.admin.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
				if err != nil || p.Status.Phase != v1.PodFailed {
					return false, nil
				}
				_, err = e.admin.CoreV1().Pods(ns).Patch(ctx, "web", types.MergePatchType,
					[]byte(`{"status":{"phase":"Running","reason":null,"message":null}}`), metav1.PatchOptions{}, "status")
				return err == nil, err
			})
		}()
		// The fake kubelet reports the containers stopped 200 ms after the
		// status, in whatever phase the pod reads then: unless evictd has
		// written Failed again, the wait runs to its bound, the grace
		// period and a second.
		r := request(pod, false, 3, message("rewrite"))
		start := time.Now()
		if err := ev.Evict(t.Context(), r); err != nil {
			t.Fatalf("Evict: %v", err)
		}
		took := time.Since(start)
		if err := <-reverted; err != nil {
			t.Fatalf("the test's write of phase Running: %v", err)
		}
		e.checkEvicted(t, seen, r)
		if took >= time.Duration(r.GracePeriod)*time.Second {
			t.Errorf("Evict took %s, not less than the grace period of %ds: the status was not written again", took, r.GracePeriod)
		}
		checkNoAPIErrors(t, errs)
	})

	// A pod another controller's finalizer holds (a Job's, until it has
	// counted the pod) is deleted once that finalizer has gone, not
	// before: held, it would get the kubelet's last status write, which
	// clears the reason of containers that exited 0.
	t.Run("the delete waits for other finalizers", func(t *testing.T) {
		ns := e.namespace(t, "finalizers")
		pod := e.runningPod(t, ns, "job-pod", nil, 30)
		const hold = "example.com/count-me"
		pod.Finalizers = []string{hold}
		pod, err := e.admin.CoreV1().Pods(ns).Update(t.Context(), pod, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := e.admin.CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=job-pod", ResourceVersion: pod.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		heldWhileDeleting := make(chan bool, 1)
		go func() {
			held := false
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*v1.Pod)
				if !ok {
					continue
				}
				if p.DeletionTimestamp != nil && len(p.Finalizers) > 0 {
					held = true
				}
				if p.Status.Phase == v1.PodFailed && len(p.Finalizers) > 0 && p.DeletionTimestamp == nil {
					// The controller counts the Failed pod, then lets it go.
					go func() {
						time.Sleep(500 * time.Millisecond)
						_, _ = e.admin.CoreV1().Pods(ns).Patch(t.Context(), "job-pod", types.JSONPatchType,
							[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
					}()
				}
				if ev.Type == watch.Deleted {
					heldWhileDeleting <- held
					return
				}
			}
		}()
		ev, errs := e.newEvicter(t, Config{PollInterval: 50 * time.Millisecond})
		seen := e.fakeKubelet(t, ns, "job-pod")
		r := request(pod, true, 1, message("finalizers"))
		if err := ev.Evict(t.Context(), r); err != nil {
			t.Fatalf("Evict: %v", err)
		}
		e.checkEvicted(t, seen, r)
		select {
		case held := <-heldWhileDeleting:
			if held {
				t.Error("the pod was deleted while another finalizer held it")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the watch never saw the pod deleted")
		}
		checkNoAPIErrors(t, errs)
	})

	// A request for a pod the API server has bound to another node, as a
	// wrong answer or a wrong decision could make, by the evictd of
	// another-node acting as its node: the pod reads as gone, nothing is
	// written, the pod stays. And if that evictd tried anyway, the API
	// server would refuse it: TestPolicyOwnNodeOnly (deploy/).
	t.Run("pod of another node", func(t *testing.T) {
		ns := e.namespace(t, "elsewhere")
		pod := e.runningPod(t, ns, "web", nil, 30)
		other := "another-node"
		if _, err := e.admin.CoreV1().Nodes().Create(t.Context(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node: %v", err)
		}
		asOther, err := kubeclient.NewForConfigAsNode(e.cluster.TokenConfig(evictdToken(t, e.cluster, other)), other)
		if err != nil {
			t.Fatal(err)
		}
		for _, hard := range []bool{false, true} {
			ev, errs := e.newEvicter(t, Config{NodeName: other, PollInterval: 50 * time.Millisecond, AsNode: asOther})
			err := ev.Evict(t.Context(), request(pod, hard, 1, message("elsewhere")))
			if !errors.Is(err, decide.ErrPodGone) || !strings.Contains(err.Error(), "not found") {
				t.Errorf("Evict (hard %v) of a pod bound to %s by the evictd of %s = %v, want decide.ErrPodGone (not found on its node)", hard, nodeName, other, err)
			}
			checkNoAPIErrors(t, errs)
		}
		got, err := e.admin.CoreV1().Pods(ns).Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the pod of the other node is gone: %v", err)
		}
		if got.DeletionTimestamp != nil || len(got.Status.Conditions) != 2 {
			t.Errorf("the pod of the other node was touched: deletionTimestamp %v, conditions %+v", got.DeletionTimestamp, got.Status.Conditions)
		}
	})

	t.Run("no node name", func(t *testing.T) {
		ns := e.namespace(t, "nonode")
		pod := e.runningPod(t, ns, "web", nil, 30)
		ev := New(Config{}, e.agent, e.rec, nil)
		if err := ev.Evict(t.Context(), request(pod, true, 1, message("nonode"))); err == nil || !strings.Contains(err.Error(), "no node name") {
			t.Errorf("Evict without a node name = %v, want an error saying so", err)
		}
	})

	// Without kube-controller-manager no budget has a status, and the
	// Eviction API refuses with 429 "still being processed"; two budgets
	// over one pod are refused with 500. Both are refusals by budget.
	for _, tc := range []struct {
		name string
		pdbs int
	}{
		{"pdb without status", 1},
		{"two pdbs", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := e.namespace(t, strings.ReplaceAll(tc.name, " ", "-"))
			pod := e.runningPod(t, ns, "db-0", map[string]string{"app": "db"}, 30)
			for i := range tc.pdbs {
				e.pdb(t, ns, "db-"+string(rune('a'+i)), "db", 1)
			}
			ev, errs := e.newEvicter(t, Config{PollInterval: 50 * time.Millisecond})

			soft := request(pod, false, 5, message(tc.name+" soft"))
			start := time.Now()
			err := ev.Evict(t.Context(), soft)
			if !errors.Is(err, decide.ErrDisruptionBudget) {
				t.Fatalf("soft Evict = %v, want an error wrapping %v", err, decide.ErrDisruptionBudget)
			}
			t.Logf("soft: refused in %s: %v", time.Since(start).Round(time.Millisecond), err)
			e.checkUntouched(t, pod)

			seen := e.fakeKubelet(t, ns, "db-0")
			hard := request(pod, true, 1, message(tc.name+" hard"))
			if err := ev.Evict(t.Context(), hard); err != nil {
				t.Fatalf("hard Evict: %v", err)
			}
			e.checkEvicted(t, seen, hard)
			// Events are recorded in order: had the refused soft eviction
			// made one, it would be there by now.
			for _, evt := range e.evictedEvents(t, ns, pod.UID, hard.Message) {
				if evt.Message == soft.Message {
					t.Errorf("an Evicted event for the refused soft eviction: %q", evt.Message)
				}
			}
			checkNoAPIErrors(t, errs)
		})
	}

	t.Run("pod gone", func(t *testing.T) {
		ns := e.namespace(t, "gone")
		ev, errs := e.newEvicter(t, Config{})
		setups := []struct {
			name  string
			setup func(t *testing.T, pod *v1.Pod) (check func(t *testing.T))
		}{
			{"deleted", func(t *testing.T, pod *v1.Pod) func(*testing.T) {
				e.forceDelete(t, pod)
				return func(t *testing.T) {}
			}},
			{"replaced", func(t *testing.T, pod *v1.Pod) func(*testing.T) {
				e.forceDelete(t, pod)
				again := e.runningPod(t, pod.Namespace, pod.Name, nil, 30)
				return func(t *testing.T) { e.checkUntouched(t, again) }
			}},
			{"terminating", func(t *testing.T, pod *v1.Pod) func(*testing.T) {
				if err := e.admin.CoreV1().Pods(pod.Namespace).Delete(t.Context(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}); err != nil {
					t.Fatal(err)
				}
				return func(t *testing.T) {
					got := e.getPod(t, pod.Namespace, pod.Name)
					if got == nil || ptr.Deref(got.DeletionGracePeriodSeconds, -1) != 30 {
						t.Errorf("terminating pod changed: %+v", got)
					}
				}
			}},
			{"finished", func(t *testing.T, pod *v1.Pod) func(*testing.T) {
				pod.Status.Phase = v1.PodSucceeded
				if _, err := e.admin.CoreV1().Pods(pod.Namespace).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				return func(t *testing.T) {
					got := e.getPod(t, pod.Namespace, pod.Name)
					if got == nil || got.DeletionTimestamp != nil {
						t.Errorf("finished pod deleted: %+v", got)
					}
				}
			}},
		}
		for _, s := range setups {
			t.Run(s.name, func(t *testing.T) {
				pod := e.runningPod(t, ns, s.name, nil, 30)
				check := s.setup(t, pod)
				err := ev.Evict(t.Context(), request(pod, true, 1, message(s.name)))
				if !errors.Is(err, decide.ErrPodGone) {
					t.Fatalf("Evict = %v, want an error wrapping decide.ErrPodGone", err)
				}
				t.Logf("Evict: %v", err)
				check(t)
			})
		}
		checkNoAPIErrors(t, errs)
	})

	t.Run("refused requests", func(t *testing.T) {
		ns := e.namespace(t, "refused")
		pod := e.runningPod(t, ns, "etcd", nil, 30)
		ev, errs := e.newEvicter(t, Config{})
		for _, tc := range []struct {
			name   string
			modify func(r *decide.Request)
			want   error
		}{
			{"critical priority", func(r *decide.Request) { r.Pod.Priority = signals.SystemCriticalPriority }, ErrCriticalPod},
			{"static", func(r *decide.Request) { r.Pod.Static = true }, ErrCriticalPod},
			{"mirror", func(r *decide.Request) { r.Pod.Mirror = true }, ErrCriticalPod},
			{"nil pod", func(r *decide.Request) { r.Pod = nil }, nil},
			{"no UID", func(r *decide.Request) { r.Pod.UID = "" }, nil},
			{"no name", func(r *decide.Request) { r.Pod.Name = "" }, nil},
			{"grace period 0", func(r *decide.Request) { r.GracePeriod = 0 }, nil},
			{"negative grace period", func(r *decide.Request) { r.GracePeriod = -1 }, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := request(pod, true, 1, message(tc.name))
				tc.modify(&r)
				err := ev.Evict(t.Context(), r)
				if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || errors.Is(err, decide.ErrPodGone) {
					t.Fatalf("Evict = %v, want a refusal (wrapping %v)", err, tc.want)
				}
				t.Logf("Evict: %v", err)
				e.checkUntouched(t, pod)
			})
		}
		if err := New(Config{}, nil, nil, nil).Evict(t.Context(), request(pod, true, 1, "no client")); err == nil {
			t.Error("Evict without a client succeeded")
		}
		checkNoAPIErrors(t, errs)
	})

	t.Run("cleanup wait", func(t *testing.T) {
		ns := e.namespace(t, "cleanup")

		// No kubelet reports the containers stopped: past the bound (the
		// grace period and 2 s, and the cleanup timeout) Evict says the
		// pod has not gone in time and leaves it Failed, stopping, for
		// Run to delete (TestSweep).
		t.Run("times out", func(t *testing.T) {
			pod := e.runningPod(t, ns, "slow", nil, 30)
			ev, errs := e.newEvicter(t, Config{CleanupTimeout: 500 * time.Millisecond, PollInterval: 100 * time.Millisecond})
			r := request(pod, false, 30, message("slow"))
			start := time.Now()
			err := ev.Evict(t.Context(), r)
			took := time.Since(start)
			if !errors.Is(err, decide.ErrNotGoneInTime) || took < 500*time.Millisecond {
				t.Fatalf("Evict = %v after %s, want an error wrapping decide.ErrNotGoneInTime after the cleanup timeout of 500ms", err, took)
			}
			t.Logf("Evict: %v", err)
			if got := e.getPod(t, ns, "slow"); got == nil || got.DeletionTimestamp != nil || got.Status.Phase != v1.PodFailed {
				t.Fatalf("pod after a timed-out eviction = %+v; want it Failed, not deleted", got)
			}
			// The next pass must not evict it again.
			if err := ev.Evict(t.Context(), r); !errors.Is(err, decide.ErrPodGone) {
				t.Errorf("second Evict = %v, want an error wrapping decide.ErrPodGone", err)
			}
			checkNoAPIErrors(t, errs)
		})

		t.Run("times out by the injected clock", func(t *testing.T) {
			pod := e.runningPod(t, ns, "fake-clock", nil, 30)
			fc := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			ev, _ := e.newEvicter(t, Config{CleanupTimeout: time.Hour, PollInterval: 10 * time.Minute, Clock: fc})
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- ev.Evict(context.Background(), request(pod, false, 30, message("fake clock"))) }()
			steps := 0
			for {
				select {
				case err := <-done:
					// The bound, 32 s by the injected clock, passed at its
					// first step of 10m, far sooner than by the real one.
					if !errors.Is(err, decide.ErrNotGoneInTime) || steps < 1 || time.Since(start) > 20*time.Second {
						t.Fatalf("Evict = %v after %d steps of 10m and %s, want decide.ErrNotGoneInTime after the first step", err, steps, time.Since(start))
					}
					return
				case <-time.After(5 * time.Millisecond):
				}
				if fc.HasWaiters() {
					if steps == 0 {
						// Until the clock moves, the pod stays.
						if got := e.getPod(t, ns, "fake-clock"); got == nil || got.DeletionTimestamp != nil || got.Status.Phase != v1.PodFailed {
							t.Fatalf("before the first step, pod %+v; want it Failed, not deleted", got)
						}
					}
					fc.Step(10 * time.Minute)
					steps++
				}
			}
		})

		// Stopping evictd mid-eviction: the pod is deleted rather than
		// left Failed.
		t.Run("stops with the context", func(t *testing.T) {
			pod := e.runningPod(t, ns, "cancelled", nil, 30)
			ev, _ := e.newEvicter(t, Config{CleanupTimeout: time.Minute, PollInterval: 50 * time.Millisecond})
			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
					p, err := e.admin.CoreV1().Pods(ns).Get(ctx, "cancelled", metav1.GetOptions{})
					return err == nil && p.Status.Phase == v1.PodFailed, nil
				})
				cancel()
			}()
			if err := ev.Evict(ctx, request(pod, false, 30, message("cancelled"))); !errors.Is(err, context.Canceled) {
				t.Fatalf("Evict = %v, want an error wrapping context.Canceled", err)
			}
			if got := e.getPod(t, ns, "cancelled"); got != nil {
				t.Errorf("pod after a cancelled eviction = %s, deletion %v; want it deleted", got.Status.Phase, got.DeletionTimestamp)
			}
		})

		t.Run("returns once the pod is gone", func(t *testing.T) {
			pod := e.runningPod(t, ns, "quick", nil, 30)
			ev, errs := e.newEvicter(t, Config{CleanupTimeout: time.Minute, PollInterval: 50 * time.Millisecond})
			seen := e.fakeKubelet(t, ns, "quick")
			r := request(pod, true, 1, message("quick"))
			if err := ev.Evict(t.Context(), r); err != nil {
				t.Fatalf("Evict: %v", err)
			}
			e.checkEvicted(t, seen, r)
			checkNoAPIErrors(t, errs)
		})
	})
}

// TestEvictPodDisruptionBudget runs kube-controller-manager, so budgets
// have a real status. The controllers that would act on a node without a
// kubelet (node lifecycle, taint eviction, pod GC) are off, so the pods
// stay Ready for as long as the test needs.
func TestEvictPodDisruptionBudget(t *testing.T) {
	e := newEnv(t, testcluster.Options{ControllerManager: true, Controllers: []string{
		"*", "-node-lifecycle-controller", "-taint-eviction-controller", "-pod-garbage-collector-controller"}})
	ns := e.namespace(t, "pdb")

	// db: minAvailable 2 of 2, no disruption allowed. cache: minAvailable
	// 1 of 2, one allowed.
	db := []*v1.Pod{e.runningPod(t, ns, "db-0", map[string]string{"app": "db"}, 30), e.runningPod(t, ns, "db-1", map[string]string{"app": "db"}, 30)}
	cache := e.runningPod(t, ns, "cache-0", map[string]string{"app": "cache"}, 30)
	e.runningPod(t, ns, "cache-1", map[string]string{"app": "cache"}, 30)
	e.waitBudget(t, e.pdb(t, ns, "db", "db", 2), 0)
	e.waitBudget(t, e.pdb(t, ns, "cache", "cache", 1), 1)
	ev, errs := e.newEvicter(t, Config{PollInterval: 50 * time.Millisecond})

	t.Run("soft respects the budget", func(t *testing.T) {
		err := ev.Evict(t.Context(), request(db[0], false, 5, message("db soft")))
		if !errors.Is(err, decide.ErrDisruptionBudget) {
			t.Fatalf("Evict = %v, want an error wrapping %v", err, decide.ErrDisruptionBudget)
		}
		t.Logf("Evict: %v", err)
		e.checkUntouched(t, db[0])
	})
	t.Run("hard puts the node first", func(t *testing.T) {
		seen := e.fakeKubelet(t, ns, "db-0")
		r := request(db[0], true, 1, message("db hard"))
		if err := ev.Evict(t.Context(), r); err != nil {
			t.Fatalf("Evict: %v", err)
		}
		e.checkEvicted(t, seen, r)
		e.checkUntouched(t, db[1])
	})
	t.Run("soft within the budget", func(t *testing.T) {
		seen := e.fakeKubelet(t, ns, "cache-0")
		r := request(cache, false, 2, message("cache soft"))
		if err := ev.Evict(t.Context(), r); err != nil {
			t.Fatalf("Evict: %v", err)
		}
		e.checkEvicted(t, seen, r)
	})
	checkNoAPIErrors(t, errs)
}

// waitBudget waits until the disruption controller has computed the
// budget's status with the given number of allowed disruptions.
func (e *env) waitBudget(t *testing.T, pdb *policyv1.PodDisruptionBudget, allowed int32) {
	t.Helper()
	var got *policyv1.PodDisruptionBudget
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = e.admin.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Get(ctx, pdb.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.ObservedGeneration >= got.Generation && got.Status.ExpectedPods == 2 && got.Status.DisruptionsAllowed == allowed, nil
	})
	if err != nil {
		t.Fatalf("PDB %s/%s status never showed %d disruptions allowed of 2 pods: %v (status %+v)", pdb.Namespace, pdb.Name, allowed, err, got.Status)
	}
}

// forceDelete removes the pod at once, as a kubelet's final delete does.
func (e *env) forceDelete(t *testing.T, pod *v1.Pod) {
	t.Helper()
	err := e.admin.CoreV1().Pods(pod.Namespace).Delete(t.Context(), pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil {
		t.Fatalf("delete pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// statusThenAgain reports whether order is first, then one or more status
// writes answered: the rewrite before the delete, once more for each
// delete whose resourceVersion precondition a write in between failed.
func statusThenAgain(order, first []string) bool {
	if len(order) <= len(first) || !slices.Equal(order[:len(first)], first) {
		return false
	}
	for _, o := range order[len(first):] {
		if o != "status answered" {
			return false
		}
	}
	return true
}
