package evict

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/podsource"
	"github.com/evictd/evictd/internal/testing/testcluster"
	"github.com/evictd/evictd/signals"
)

// nodeName is the Node the test pods are bound to. No kubelet runs for it:
// the tests play the kubelet's part where they need it (fakeKubelet).
const nodeName = "evict-test-node"

// env is a running control plane with evictd's identity on it.
type env struct {
	admin       kubernetes.Interface // system:masters
	evictd      kubernetes.Interface // the ServiceAccount of deploy/rbac.yaml, for the test's checks
	agent       *kubeclient.Client   // the same identity, as main builds it
	agentNode   *kubeclient.Client   // the same identity acting as its node, as main builds it
	agentConfig *rest.Config         // agent's config, for a client of the same identity
	cluster     *testcluster.Cluster
	rec         record.EventRecorder // records through evictd's identity
	pods        *podsource.Source    // the node's pods, watched with the same identity, as main does
}

// newEnv starts a control plane, applies deploy/ (RBAC, admission policy,
// flow control), and returns clients for the admin and for evictd's
// ServiceAccount token bound to the node nodeName, as evictd runs.
func newEnv(t *testing.T, opts testcluster.Options) *env {
	t.Helper()
	return newEnvOn(t, testcluster.StartForTest(t, opts))
}

// newEnvOn is newEnv on a running control plane.
func newEnvOn(t *testing.T, c *testcluster.Cluster) *env {
	t.Helper()
	ctx := t.Context()
	admin := c.AdminClient(t)
	if _, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	token := evictdToken(t, c, nodeName)
	evictd, err := kubernetes.NewForConfig(c.TokenConfig(token))
	if err != nil {
		t.Fatal(err)
	}
	agent, err := kubeclient.NewForConfig(c.TokenConfig(token))
	if err != nil {
		t.Fatal(err)
	}
	agentNode, err := kubeclient.NewForConfigAsNode(c.TokenConfig(token), nodeName)
	if err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, evictd, authorizationv1.ResourceAttributes{Verb: "impersonate-on:associated-node:create", Resource: "pods", Subresource: "eviction"})

	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(agent.EventSink())
	t.Cleanup(b.Shutdown)
	rec := b.NewRecorder(agent.Scheme(), v1.EventSource{Component: "evictd", Host: nodeName})
	return &env{admin: admin, evictd: evictd, agent: agent, agentNode: agentNode, agentConfig: c.TokenConfig(token), cluster: c, rec: rec, pods: watchPods(t, agentNode)}
}

// watchPods runs a pod source of nodeName until t ends, and waits for its
// first list.
func watchPods(t *testing.T, client *kubeclient.Client) *podsource.Source {
	t.Helper()
	src := podsource.New(client, nodeName, 0, nil)
	done := make(chan error, 1)
	go func() { done <- src.Run(t.Context()) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("pod source: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := src.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	return src
}

// evictdToken returns a token of evictd's identity from deploy/rbac.yaml
// bound to the Node node.
func evictdToken(t *testing.T, c *testcluster.Cluster, node string) string {
	t.Helper()
	token, err := c.EvictdNodeToken(t.Context(), node)
	if err != nil {
		t.Fatalf("evictd's identity: %v", err)
	}
	return token
}

// waitAllowed waits until RBAC, which learns of new bindings through its
// informers, allows client the access.
func waitAllowed(t *testing.T, client kubernetes.Interface, attr authorizationv1.ResourceAttributes) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attr}}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("evictd's identity never allowed to %s %s/%s: %v", attr.Verb, attr.Resource, attr.Subresource, err)
	}
}

// namespace creates a namespace for one scenario, with the default
// ServiceAccount that pod admission wants (no controller creates it when
// kube-controller-manager does not run).
func (e *env) namespace(t *testing.T, name string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := e.admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	_, err := e.admin.CoreV1().ServiceAccounts(name).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create default ServiceAccount: %v", err)
	}
	return name
}

// runningPod creates a pod bound to nodeName and reports it Running and
// Ready, as its kubelet would; it returns the pod as created.
func (e *env) runningPod(t *testing.T, ns, name string, labels map[string]string, tgps int64) *v1.Pod {
	t.Helper()
	ctx := t.Context()
	pod, err := e.admin.CoreV1().Pods(ns).Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: v1.PodSpec{
			NodeName:                      nodeName,
			TerminationGracePeriodSeconds: &tgps,
			Containers:                    []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	now := metav1.Now()
	pod.Status.Phase = v1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: now},
	}
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", Image: "registry.k8s.io/pause:3.10", Ready: true,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}}}}
	if pod, err = e.admin.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set pod %s/%s running: %v", ns, name, err)
	}
	return pod
}

// pdb creates a PodDisruptionBudget over the pods labelled app=<app>.
func (e *env) pdb(t *testing.T, ns, name, app string, minAvailable int) *policyv1.PodDisruptionBudget {
	t.Helper()
	min := intstr.FromInt32(int32(minAvailable))
	pdb, err := e.admin.PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &min,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create PDB %s/%s: %v", ns, name, err)
	}
	return pdb
}

// getPod returns the pod, or nil when it is not found.
func (e *env) getPod(t *testing.T, ns, name string) *v1.Pod {
	t.Helper()
	pod, err := e.admin.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get pod %s/%s: %v", ns, name, err)
	}
	return pod
}

// fakeKubelet plays the kubelet v1.36's part for one pod, as
// fakeKubeletAfter with containers that stop 200 ms after evictd's
// terminal status.
func (e *env) fakeKubelet(t *testing.T, ns, name string) <-chan *v1.Pod {
	return e.fakeKubeletAfter(t, ns, name, 200*time.Millisecond)
}

// fakeKubeletAfter plays the kubelet v1.36's part for one pod:
//   - a pod that reads Failed while a container still runs, not being
//     deleted (evictd's terminal status, which the real kubelet syncs at
//     once for evictd's annotation, stopping the containers with the pod's
//     grace period): at once its reason and message are cleared, as the
//     kubelet's first status write for it does, and stopAfter later
//     (never when negative) its container is reported stopped with exit
//     code 0;
//   - a pod being deleted in a phase not terminal (an eviction without
//     the terminal status): once its deletionTimestamp has passed, as a
//     kubelet stopping the containers would, it is removed with grace
//     period 0.
//
// The pod's last state, as the API server removed it, is sent on the
// returned channel.
func (e *env) fakeKubeletAfter(t *testing.T, ns, name string, stopAfter time.Duration) <-chan *v1.Pod {
	t.Helper()
	out := make(chan *v1.Pod, 1)
	ctx := t.Context()
	start, err := e.admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("fake kubelet for %s/%s: %v", ns, name, err)
	}
	watchFrom := func(rv string) (watch.Interface, error) {
		return e.admin.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: rv})
	}
	// From the most recent version: just after the API server started,
	// its watch cache may not serve the version the read gave.
	w, err := watchFrom("")
	if err != nil {
		t.Fatalf("fake kubelet for %s/%s: %v", ns, name, err)
	}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { w.Stop() })
	wg.Go(func() {
		defer close(out)
		stopping, removing := false, false
		rv := start.ResourceVersion
		events := w.ResultChan()
		for {
			ev, open := <-events
			if !open {
				// The API server ends watches when it restarts: watch
				// again from the last version seen.
				if ctx.Err() != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
				nw, err := watchFrom(rv)
				if err != nil {
					continue
				}
				w.Stop()
				w, events = nw, nw.ResultChan()
				continue
			}
			pod, ok := ev.Object.(*v1.Pod)
			if !ok || pod.UID != start.UID {
				continue
			}
			rv = pod.ResourceVersion
			switch {
			case ev.Type == watch.Deleted:
				out <- pod
				return
			case pod.DeletionTimestamp == nil && pod.Status.Phase == v1.PodFailed && kubeclient.ContainersRunning(pod) && !stopping:
				stopping = true
				wg.Go(func() { e.stopContainers(t, ctx, pod, stopAfter) })
			case pod.DeletionTimestamp != nil && !terminal(pod) && !removing:
				removing = true
				wg.Go(func() {
					select {
					case <-time.After(time.Until(pod.DeletionTimestamp.Time)):
					case <-ctx.Done():
						return
					}
					err := e.admin.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
						GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
					if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
						t.Errorf("fake kubelet: remove %s/%s: %v", ns, name, err)
					}
				})
			}
		}
	})
	return out
}

// stopContainers clears the pod's reason and message, as the kubelet
// v1.36's first status write for a pod that reads Failed does, and, after
// delay (never when negative), reports its containers stopped with exit
// code 0.
func (e *env) stopContainers(t *testing.T, ctx context.Context, pod *v1.Pod, delay time.Duration) {
	_, err := e.admin.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType,
		[]byte(`{"status":{"reason":null,"message":null}}`), metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		t.Errorf("fake kubelet: clear the reason of %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	if delay < 0 {
		return
	}
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		return
	}
	now := metav1.Now()
	var statuses []v1.ContainerStatus
	for _, cs := range pod.Status.ContainerStatuses {
		cs.Ready = false
		cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: now}}
		statuses = append(statuses, cs)
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"reason": nil, "message": nil, "containerStatuses": statuses}})
	if err != nil {
		t.Errorf("fake kubelet: %v", err)
		return
	}
	_, err = e.admin.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		t.Errorf("fake kubelet: report the containers of %s/%s stopped: %v", pod.Namespace, pod.Name, err)
	}
}

// evictedEvents waits until the Evicted events of the pod with uid include
// one with message want, and returns them all.
func (e *env) evictedEvents(t *testing.T, ns string, uid types.UID, want string) []v1.Event {
	t.Helper()
	var events []v1.Event
	sel := fields.Set{"involvedObject.uid": string(uid), "reason": EventReason}.AsSelector().String()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := e.admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false, err
		}
		events = l.Items
		for _, ev := range events {
			if ev.Message == want {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Evicted event %q for pod %s: %v (have %d)", want, uid, err, len(events))
	}
	return events
}

// evictedEventsNow returns the Evicted events of the pod with uid as they
// are now.
func (e *env) evictedEventsNow(t *testing.T, ns string, uid types.UID) []v1.Event {
	t.Helper()
	sel := fields.Set{"involvedObject.uid": string(uid), "reason": EventReason}.AsSelector().String()
	l, err := e.admin.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	return l.Items
}

// request is a decide.Request for pod as the decider would make it.
func request(pod *v1.Pod, hard bool, grace int64, msg string) decide.Request {
	return decide.Request{
		Signal: "memory.available",
		Hard:   hard,
		Eviction: decide.Eviction{
			Pod: &signals.Pod{
				Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID),
				QOS: signals.BestEffort, TerminationGracePeriodSeconds: pod.Spec.TerminationGracePeriodSeconds,
				Containers: []signals.Container{{Name: "app"}},
			},
			GracePeriod: grace,
			Message:     msg,
			Annotations: map[string]string{
				"offending_containers":       "app",
				"offending_containers_usage": "600Mi",
				"starved_resource":           "memory",
			},
		},
	}
}

// message is a kubelet-format eviction message, made unique by tag.
func message(tag string) string {
	return fmt.Sprintf("The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. Container app was using 600Mi, request is 0, has larger consumption of memory. (%s)", tag)
}

// apiErrors counts OnAPIError calls by verb.
type apiErrors struct {
	mu sync.Mutex
	n  map[metrics.APIVerb]int
}

func (a *apiErrors) inc(verb metrics.APIVerb) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[metrics.APIVerb]int{}
	}
	a.n[verb]++
}

func (a *apiErrors) counts() map[metrics.APIVerb]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[metrics.APIVerb]int{}
	for k, v := range a.n {
		out[k] = v
	}
	return out
}

// newEvicter builds the Evicter under test with evictd's identity, its log
// written to the test's log.
func (e *env) newEvicter(t *testing.T, cfg Config) (*Evicter, *apiErrors) {
	errs := &apiErrors{}
	cfg.OnAPIError = errs.inc
	if cfg.NodeName == "" {
		cfg.NodeName = nodeName
	}
	if cfg.Pods == nil {
		cfg.Pods = e.pods
	}
	if cfg.AsNode == nil {
		cfg.AsNode = e.agentNode
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return New(cfg, e.agent, e.rec, log), errs
}

// requestLog records the method and path of a client's requests.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

// wrap is a rest.Config's WrapTransport that records each request.
func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Method+" "+r.URL.Path)
		l.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

func (l *requestLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

var _ io.Writer = testWriter{}
