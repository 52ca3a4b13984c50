package nodestatus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/nodestatus"
	"github.com/evictd/evictd/internal/testing/testcluster"
	"github.com/evictd/evictd/signals"
)

// env is a real control plane with evictd's RBAC applied: an admin client
// for the test's own reads and writes, and a client with the token of
// evictd's ServiceAccount for the publisher.
type env struct {
	cluster *testcluster.Cluster
	admin   kubernetes.Interface
	evictd  kubernetes.Interface // evictd's identity, for the test's checks
	agent   *kubeclient.Client   // evictd's identity, as main builds it
}

// startEnv starts a control plane, applies deploy/rbac.yaml and returns
// clients for the admin and for evictd's ServiceAccount (via TokenRequest).
func startEnv(t *testing.T) *env {
	t.Helper()
	c := testcluster.StartForTest(t, testcluster.Options{})
	admin := kubernetes.NewForConfigOrDie(c.AdminConfig())
	token, err := c.EvictdToken(t.Context())
	if err != nil {
		t.Fatalf("evictd's identity: %v", err)
	}
	evictd := kubernetes.NewForConfigOrDie(c.TokenConfig(token))
	agent, err := kubeclient.NewForConfig(c.TokenConfig(token))
	if err != nil {
		t.Fatalf("evictd's client: %v", err)
	}
	// The authorizer learns of the new binding through a watch: wait for it.
	eventually(t, 10*time.Second, func() error {
		_, err := evictd.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=rbac-probe"})
		return err
	})
	return &env{cluster: c, admin: admin, evictd: evictd, agent: agent}
}

// kubeletConditions are what a kubelet reports for a healthy node.
func kubeletConditions(at time.Time) []v1.NodeCondition {
	ts := metav1.NewTime(at)
	return []v1.NodeCondition{
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientMemory",
			Message: "kubelet has sufficient memory available", LastHeartbeatTime: ts, LastTransitionTime: ts},
		{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet is posting ready status", LastHeartbeatTime: ts, LastTransitionTime: ts},
	}
}

// createNode registers a node the way a kubelet would: the object, then
// its status with the kubelet's conditions.
func createNode(t *testing.T, admin kubernetes.Interface, name string) *v1.Node {
	t.Helper()
	ctx := context.Background()
	n, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	updated := n.DeepCopy()
	updated.Status.Conditions = kubeletConditions(time.Now())
	if n, err = patchNodeStatus(ctx, admin, n, updated); err != nil {
		t.Fatalf("set the kubelet's conditions of %s: %v", name, err)
	}
	return n
}

// patchNodeStatus writes newNode's status the way the kubelet does
// (nodeutil.PatchNodeStatus): a two-way strategic-merge patch from the
// node it read to the node it wants, spec excluded.
func patchNodeStatus(ctx context.Context, c kubernetes.Interface, oldNode, newNode *v1.Node) (*v1.Node, error) {
	oldData, err := json.Marshal(oldNode)
	if err != nil {
		return nil, err
	}
	diff := newNode.DeepCopy()
	diff.Spec = oldNode.Spec
	newData, err := json.Marshal(diff)
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("create patch: %w", err)
	}
	return c.CoreV1().Nodes().Patch(ctx, oldNode.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
}

// newRecorder returns an event recorder that writes through client, as
// main wires it, stopped when t ends.
func newRecorder(t *testing.T, client *kubeclient.Client, node string) record.EventRecorder {
	t.Helper()
	b := record.NewBroadcaster(record.WithSleepDuration(100 * time.Millisecond))
	b.StartRecordingToSink(client.EventSink())
	t.Cleanup(b.Shutdown)
	return b.NewRecorder(client.Scheme(), v1.EventSource{Component: "evictd", Host: node})
}

// apiErrors counts OnAPIError calls by verb.
type apiErrors struct {
	mu sync.Mutex
	n  map[metrics.APIVerb]int
}

func (a *apiErrors) record(verb metrics.APIVerb) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[metrics.APIVerb]int{}
	}
	a.n[verb]++
}

func (a *apiErrors) count(verb metrics.APIVerb) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[verb]
}

// startPublisher makes a publisher with evictd's client and runs it until
// stop is called or t ends.
func startPublisher(t *testing.T, e *env, cfg nodestatus.Config) (p *nodestatus.Publisher, stop func()) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := nodestatus.New(cfg, e.agent, newRecorder(t, e.agent, cfg.NodeName), log)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
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
	return p, stop
}

// history records every version of one node from a watch.
type history struct {
	w     watch.Interface
	done  chan struct{}
	mu    sync.Mutex
	nodes []*v1.Node
	errs  []string // watch.Error events
}

// watchNode records the versions of node name after resourceVersion rv
// (which must be one the API server still holds in its watch cache).
func watchNode(t *testing.T, c kubernetes.Interface, name, rv string) *history {
	t.Helper()
	w, err := c.CoreV1().Nodes().Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=" + name, ResourceVersion: rv,
	})
	if err != nil {
		t.Fatalf("watch node %s: %v", name, err)
	}
	h := &history{w: w, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for ev := range w.ResultChan() {
			h.mu.Lock()
			switch o := ev.Object.(type) {
			case *v1.Node:
				h.nodes = append(h.nodes, o)
			case *metav1.Status:
				h.errs = append(h.errs, o.Message)
			}
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() { h.stop() })
	return h
}

// upToDate returns the versions seen once the watch has delivered the
// node's current version, and ends the watch.
func (h *history) upToDate(t *testing.T, c kubernetes.Interface, name string) []*v1.Node {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	eventually(t, 10*time.Second, func() error {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, seen := range h.nodes {
			if seen.ResourceVersion == n.ResourceVersion {
				return nil
			}
		}
		return fmt.Errorf("the watch has not delivered version %s yet (watch errors: %q)", n.ResourceVersion, h.errs)
	})
	return h.stop()
}

// stop ends the watch and returns the versions seen.
func (h *history) stop() []*v1.Node {
	h.w.Stop()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nodes
}

// eventually calls f until it returns nil, failing t with f's last error
// after timeout.
func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitIdle waits until the publisher waits on the fake clock.
func waitIdle(t *testing.T, fc interface{ HasWaiters() bool }) {
	t.Helper()
	eventually(t, 10*time.Second, func() error {
		if !fc.HasWaiters() {
			return errors.New("the publisher is not waiting on the clock")
		}
		return nil
	})
}

// noJitter makes the report period exactly the report frequency.
func noJitter(d time.Duration) time.Duration { return d }

// everySecond retries a failed write every second of the fake clock.
var everySecond = wait.Backoff{Duration: time.Second, Factor: 1, Steps: math.MaxInt32}

// report is one PressureReport.
func report(p signals.Pressure, active bool, since time.Time, msg string) decide.PressureReport {
	return decide.PressureReport{Pressure: p, Active: active, Since: since, Message: msg}
}

// condition returns the node's condition of type ct, or nil.
func condition(n *v1.Node, ct v1.NodeConditionType) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == ct {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// hasTaint reports whether n carries a taint with key (and returns it).
func hasTaint(n *v1.Node, key string) (v1.Taint, bool) {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return t, true
		}
	}
	return v1.Taint{}, false
}

// eventCounts sums the counts of the node's events by type/reason and
// returns them with the events themselves.
func eventCounts(ctx context.Context, c kubernetes.Interface, node string) (map[string]int32, []v1.Event, error) {
	list, err := c.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node,
	})
	if err != nil {
		return nil, nil, err
	}
	counts := map[string]int32{}
	for _, ev := range list.Items {
		counts[ev.Type+"/"+ev.Reason] += max(ev.Count, 1)
	}
	return counts, list.Items, nil
}

// wantCondition checks the fields of evictd's condition that a test fixes.
func wantCondition(n *v1.Node, ct v1.NodeConditionType, status v1.ConditionStatus, reason, msg string, transition, heartbeat time.Time) error {
	c := condition(n, ct)
	switch {
	case c == nil:
		return fmt.Errorf("node %s has no %s condition", n.Name, ct)
	case c.Status != status || c.Reason != reason || c.Message != msg:
		return fmt.Errorf("%s is %s/%s/%q, want %s/%s/%q", ct, c.Status, c.Reason, c.Message, status, reason, msg)
	case !c.LastTransitionTime.Time.Equal(transition.Truncate(time.Second)):
		return fmt.Errorf("%s lastTransitionTime is %s, want %s", ct, c.LastTransitionTime.UTC(), transition.UTC())
	case !c.LastHeartbeatTime.Time.Equal(heartbeat.Truncate(time.Second)):
		return fmt.Errorf("%s lastHeartbeatTime is %s, want %s", ct, c.LastHeartbeatTime.UTC(), heartbeat.UTC())
	}
	return nil
}
