package deploy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/evictd/evictd/internal/testing/testcluster"
)

// flowName names the FlowSchema and the PriorityLevelConfiguration of
// deploy/flowcontrol.yaml.
const flowName = "evictd"

// match is where the API server's Priority and Fairness put a request, as
// its response's headers say.
type match struct {
	flowSchema, priorityLevel types.UID
}

// recordingClient returns a client authenticated by token, acting as the
// node asNode unless it is empty, and a function returning the match of
// the last response it received.
func recordingClient(t *testing.T, c *testcluster.Cluster, token, asNode string) (kubernetes.Interface, func() match) {
	t.Helper()
	var (
		mu   sync.Mutex
		last match
	)
	cfg := c.TokenConfig(token)
	if asNode != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + asNode}
	}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil {
				mu.Lock()
				last = match{
					flowSchema:    types.UID(resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID)),
					priorityLevel: types.UID(resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID)),
				}
				mu.Unlock()
			}
			return resp, err
		})
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client, func() match {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// flowNames maps the UIDs of every FlowSchema and priority level to their
// names, for messages.
type flowNames map[types.UID]string

func (n flowNames) of(m match) string {
	return fmt.Sprintf("FlowSchema %q, priority level %q", n[m.flowSchema], n[m.priorityLevel])
}

// schema returns the match of the FlowSchema name, whose priority level
// is its own, and records both names in names.
func schema(t *testing.T, admin kubernetes.Interface, name string, names flowNames) match {
	t.Helper()
	ctx := t.Context()
	fs, err := admin.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := admin.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, fs.Spec.PriorityLevelConfiguration.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	names[fs.UID], names[pl.UID] = fs.Name, pl.Name
	return match{flowSchema: fs.UID, priorityLevel: pl.UID}
}

// dispatched returns the API server's
// apiserver_flowcontrol_dispatched_requests_total for the FlowSchema name.
func dispatched(t *testing.T, admin kubernetes.Interface, name string) float64 {
	t.Helper()
	body, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("API server metrics: %v", err)
	}
	var sum float64
	lines := bufio.NewScanner(bytes.NewReader(body))
	for lines.Scan() {
		series, value, ok := strings.Cut(lines.Text(), " ")
		if !ok || !strings.HasPrefix(series, "apiserver_flowcontrol_dispatched_requests_total{") ||
			!strings.Contains(series, `flow_schema="`+name+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("API server metrics: %s: %v", lines.Text(), err)
		}
		sum += v
	}
	return sum
}

// TestFlowSchemaEvictdOwnLevel applies deploy/ and makes, as node A's
// evictd (a node-bound token), the requests evictd makes; the API server
// must classify each into the FlowSchema and the priority level of
// deploy/flowcontrol.yaml, and another kube-system ServiceAccount's request
// into the built-in kube-system-service-accounts.
func TestFlowSchemaEvictdOwnLevel(t *testing.T) {
	c, e := newPolicyEnv(t)
	ctx := t.Context()
	names := flowNames{}
	want := schema(t, e.admin, flowName, names)
	kubeSystem := schema(t, e.admin, "kube-system-service-accounts", names)
	schema(t, e.admin, "system-leader-election", names)

	token, err := c.EvictdNodeToken(ctx, nodeA)
	if err != nil {
		t.Fatal(err)
	}
	evictd, last := recordingClient(t, c, token, "")
	// The node's pods are read and evicted acting as the node: the API
	// server classifies those requests as the node's own, the kubelet's
	// (system-nodes), after impersonation.
	asNode, asNodeLast := recordingClient(t, c, token, nodeA)
	nodes := schema(t, e.admin, "system-nodes", names)
	// The API server loads FlowSchemas through a watch.
	ownNode := metav1.ListOptions{FieldSelector: "metadata.name=" + nodeA}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := evictd.CoreV1().Nodes().List(ctx, ownNode)
		return err == nil && last() == want, nil
	})
	if err != nil {
		t.Fatalf("evictd's requests never matched %s; last: %s", names.of(want), names.of(last()))
	}

	p := e.pod(t, "flow-evict", nodeA)
	onNode := metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeA}
	before := dispatched(t, e.admin, flowName)
	requests := []struct {
		name   string
		do     func() error
		asNode bool
	}{
		{"list of its node", func() error {
			_, err := evictd.CoreV1().Nodes().List(ctx, ownNode)
			return err
		}, false},
		{"list of its node's pods", func() error {
			_, err := asNode.CoreV1().Pods(v1.NamespaceAll).List(ctx, onNode)
			return err
		}, true},
		{"watch of its node's pods", func() error {
			w, err := asNode.CoreV1().Pods(v1.NamespaceAll).Watch(ctx, onNode)
			if err != nil {
				return err
			}
			w.Stop()
			return nil
		}, true},
		{"eviction of a pod on its node", func() error { return evict(ctx, asNode, p) }, true},
		// system-leader-election (precedence 100) takes the Lease get,
		// create and update of every kube-system ServiceAccount: whatever
		// RBAC answers, the request is classified first.
		{"get of its Lease", func() error {
			_, _ = evictd.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, "evictd-"+nodeA, metav1.GetOptions{})
			return nil
		}, false},
	}
	own := 0
	for _, tc := range requests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); err != nil {
				t.Fatalf("got %v, want success", err)
			}
			got, want := last(), want
			if tc.asNode {
				got, want = asNodeLast(), nodes
			}
			if got != want {
				t.Errorf("got %s, want %s", names.of(got), names.of(want))
			}
		})
		if !tc.asNode {
			own++
		}
	}

	// Another ServiceAccount of kube-system, its token bound to node A
	// too, stays in the built-in schema.
	other := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "not-evictd", Namespace: metav1.NamespaceSystem}}
	if _, err := e.admin.CoreV1().ServiceAccounts(other.Namespace).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	otherToken, err := testcluster.NodeBoundToken(ctx, e.admin, other.Namespace, other.Name, nodeA)
	if err != nil {
		t.Fatal(err)
	}
	otherClient, otherLast := recordingClient(t, c, otherToken, "")
	_, _ = otherClient.CoreV1().Nodes().Get(ctx, nodeA, metav1.GetOptions{}) // refused by RBAC, after classification
	if got := otherLast(); got != kubeSystem {
		t.Errorf("%s/%s: got %s, want %s", other.Namespace, other.Name, names.of(got), names.of(kubeSystem))
	}

	// The API server's own count: evictd's requests, and only they.
	if got, want := dispatched(t, e.admin, flowName)-before, float64(own); got != want {
		t.Errorf("apiserver_flowcontrol_dispatched_requests_total{flow_schema=%q} rose by %v, want %v", flowName, got, want)
	}
}
