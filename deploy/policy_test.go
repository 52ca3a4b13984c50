package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/evictd/evictd/internal/decide"
	evictpkg "github.com/evictd/evictd/internal/evict"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

const (
	evictedAnnotation = evictpkg.EvictedAnnotation

	nodeA, nodeB = "node-a", "node-b"
	ns           = "workloads"
	policyName   = "evictd-own-node"
	nodeNameKey  = "authentication.kubernetes.io/node-name"
)

// policyEnv is a control plane with deploy/ applied, nodes A and B, and
// clients for the admin and for evictd's identity on node A.
type policyEnv struct {
	admin kubernetes.Interface
	onA   kubernetes.Interface // evictd's ServiceAccount, token bound to node A
	cfgA  *rest.Config         // onA's configuration, for evictd's own clients
	asA   kubernetes.Interface // the same token acting as node A (system:node:node-a), as evictd reads, evicts and deletes pods
	asB   kubernetes.Interface // the same token trying to act as node B
}

func newPolicyEnv(t *testing.T) (*testcluster.Cluster, *policyEnv) {
	t.Helper()
	return newPolicyEnvAs(t, plainIdentity)
}

// plainIdentity is the identity deploy/*.yaml name: the chart's default.
var plainIdentity = identity{"kube-system", "evictd"}

// newPolicyEnvAs is newPolicyEnv with evictd's ServiceAccount id: the
// plain files of deploy/ for plainIdentity, else the chart rendered for id
// and applied server-side.
//
// The API server runs with DRANodeAllocatableResources, the one feature
// gate of v1.36 that is off by default and adds a field to the pod status
// (nodeAllocatableResourceClaimStatuses): without it the server drops the
// field before admission, and TestPolicyByExclusion could not show the
// policy refusing it.
func newPolicyEnvAs(t *testing.T, id identity) (*testcluster.Cluster, *policyEnv) {
	t.Helper()
	c := testcluster.StartForTest(t, testcluster.Options{APIServerFlags: []string{"--feature-gates=DRANodeAllocatableResources=true"}})
	ctx := t.Context()
	admin := c.AdminClient(t)
	for _, n := range []string{nodeA, nodeB} {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node %s: %v", n, err)
		}
		// The kubelet's condition, for the test that evictd may not touch it.
		patch := `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status"}]}}`
		if _, err := admin.CoreV1().Nodes().Patch(ctx, n, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("set Ready on node %s: %v", n, err)
		}
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	// Pod admission wants the default ServiceAccount; no controller creates it.
	_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create default ServiceAccount: %v", err)
	}
	var token string
	if id == plainIdentity {
		token, err = c.EvictdNodeToken(ctx, nodeA)
	} else {
		out, rerr := helmTemplate(t, fmt.Sprintf("namespace: %s\ncreateNamespace: true\nserviceAccount: {name: %s}\n", id.namespace, id.serviceAccount))
		if rerr != nil {
			t.Fatal(rerr)
		}
		applyObjects(t, c, decode(t, out))
		token, err = testcluster.NodeBoundToken(ctx, admin, id.namespace, id.serviceAccount, nodeA)
	}
	if err != nil {
		t.Fatal(err)
	}
	onA, err := kubernetes.NewForConfig(c.TokenConfig(token))
	if err != nil {
		t.Fatal(err)
	}
	asNode := func(node string) kubernetes.Interface {
		cfg := c.TokenConfig(token)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + node}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return client
	}
	e := &policyEnv{admin: admin, onA: onA, cfgA: c.TokenConfig(token), asA: asNode(nodeA), asB: asNode(nodeB)}
	e.waitPolicy(t)
	return c, e
}

// waitPolicy waits until RBAC lets node A's identity patch node statuses
// and the admission policy, which the API server loads through a watch,
// refuses it node B's: a dry run goes through admission and changes
// nothing.
func (e *policyEnv) waitPolicy(t *testing.T) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = e.onA.CoreV1().Nodes().Patch(ctx, nodeB, types.StrategicMergePatchType, conditionPatch("EvictdMemoryPressure"),
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, "status")
		return refusedByPolicy(last), nil
	})
	if err != nil {
		t.Fatalf("the policy never refused node A's identity a status patch of node B; last answer: %v", last)
	}
}

// refusedByPolicy reports whether err is the API server's refusal by the
// ValidatingAdmissionPolicy of deploy/policy.yaml.
func refusedByPolicy(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policyName+"'")
}

func conditionPatch(typ string) []byte {
	return fmt.Appendf(nil, `{"status":{"conditions":[{"type":%q,"status":"True","reason":"Test","message":"written by the test"}]}}`, typ)
}

// pod creates a pod bound to node (no kubelet runs it: binding is enough
// for the API server).
func (e *policyEnv) pod(t *testing.T, name, node string) *v1.Pod {
	t.Helper()
	return e.podWith(t, name, node, nil)
}

// podWith is pod with change, unless nil, made to the pod before it is
// created.
func (e *policyEnv) podWith(t *testing.T, name, node string, change func(*v1.Pod)) *v1.Pod {
	t.Helper()
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.PodSpec{
			NodeName:                     node,
			AutomountServiceAccountToken: new(false),
			Containers:                   []v1.Container{{Name: "c", Image: "example.invalid/none"}},
		},
	}
	if change != nil {
		change(p)
	}
	p, err := e.admin.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s on %s: %v", name, node, err)
	}
	return p
}

// terminalPatch is the status evictd writes on a pod it evicts (phase,
// reason, message) beside a DisruptionTarget condition with dtReason, with
// the annotation of key annotation unless it is empty.
func terminalPatch(phase, reason, dtReason, annotation string) []byte {
	meta := ""
	if annotation != "" {
		meta = fmt.Sprintf(`"metadata":{"annotations":{%q:"2026-03-01T12:00:00Z"}},`, annotation)
	}
	return fmt.Appendf(nil, `{%s"status":{"phase":%q,"reason":%q,"message":"The node was low on resource: memory. ",`+
		`"conditions":[{"type":"DisruptionTarget","status":"True","reason":%q,"message":"written by the test"}]}}`, meta, phase, reason, dtReason)
}

// disruptionPatch sets a pod's DisruptionTarget condition with reason.
func disruptionPatch(reason string) []byte {
	return fmt.Appendf(nil, `{"status":{"conditions":[{"type":"DisruptionTarget","status":"True","reason":%q,"message":"written by the test"}]}}`, reason)
}

// updateNode changes node through client with change as evictd writes
// its taints: a list of the one node (its role grants no get), then a JSON
// merge patch carrying the node's resourceVersion.
func updateNode(ctx context.Context, client kubernetes.Interface, node string, change func(*v1.Node)) error {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + node})
	if err != nil {
		return err
	}
	if len(list.Items) != 1 {
		return fmt.Errorf("list of node %s: %d nodes", node, len(list.Items))
	}
	n := &list.Items[0]
	change(n)
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": n.ResourceVersion, "labels": n.Labels},
		"spec":     map[string]any{"taints": n.Spec.Taints, "unschedulable": n.Spec.Unschedulable},
	})
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// setTaint adds a NoExecute taint of key to node through client.
func setTaint(ctx context.Context, client kubernetes.Interface, node, key string) error {
	return updateNode(ctx, client, node, func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Effect: v1.TaintEffectNoExecute})
	})
}

func evict(ctx context.Context, client kubernetes.Interface, p *v1.Pod) error {
	return client.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
}

func event(node string, involved *v1.Pod) *v1.Event {
	return &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "evictd-", Namespace: involved.Namespace},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: involved.Namespace, Name: involved.Name, UID: involved.UID},
		Reason:         "Evicted", Message: "written by the test", Type: v1.EventTypeWarning,
		Source:              v1.EventSource{Component: "evictd", Host: node},
		ReportingController: "evictd", ReportingInstance: node,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
	}
}

// TestPolicyOwnNodeOnly takes the identity evictd has on node A (deploy/
// applied, a token bound to node A) and tries every write it makes on
// node A, which must pass, and on node B and its pods, which the API
// server must refuse with the policy's words. The eviction of a pod on
// node B is the write the policy cannot see: it must pass too, as
// deploy/README.md says.
func TestPolicyOwnNodeOnly(t *testing.T) {
	// The plain files' identity, and the chart's for a namespace and a
	// ServiceAccount of its own: the policy takes it from its paramRef.
	for _, id := range []identity{plainIdentity, {"evictd-system", "node-evictd"}} {
		t.Run(id.namespace+"/"+id.serviceAccount, func(t *testing.T) { testPolicyOwnNodeOnly(t, id) })
	}
}

func testPolicyOwnNodeOnly(t *testing.T, id identity) {
	_, e := newPolicyEnvAs(t, id)
	ctx := t.Context()
	a1, a2, a3 := e.pod(t, "on-a-status", nodeA), e.pod(t, "on-a-delete", nodeA), e.pod(t, "on-a-evict", nodeA)
	a4, a5, a6 := e.pod(t, "on-a-evicted", nodeA), e.pod(t, "on-a-succeeded", nodeA), e.pod(t, "on-a-failed", nodeA)
	// Pods that have finished: their phase is the kubelet's last word.
	for p, status := range map[*v1.Pod]string{
		a5: `{"status":{"phase":"Succeeded"}}`,
		a6: `{"status":{"phase":"Failed","reason":"Error","conditions":[{"type":"DisruptionTarget","status":"True","reason":"TerminationByKubelet"}]}}`,
	} {
		if _, err := e.admin.CoreV1().Pods(ns).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	b1 := e.pod(t, "on-b", nodeB)
	b2 := e.pod(t, "on-b-evict", nodeB)
	pods := e.onA.CoreV1().Pods(ns)
	nodes := e.onA.CoreV1().Nodes()

	refused := []struct {
		name  string
		write func() error
	}{
		{"status patch of node B", func() error {
			_, err := nodes.Patch(ctx, nodeB, types.StrategicMergePatchType, conditionPatch("EvictdMemoryPressure"), metav1.PatchOptions{}, "status")
			return err
		}},
		{"taint on node B", func() error { return setTaint(ctx, e.onA, nodeB, "evictd.io/memory-pressure") }},
		{"status patch of a pod on node B", func() error {
			_, err := pods.Patch(ctx, b1.Name, types.StrategicMergePatchType, disruptionPatch(decide.DisruptionTargetReason), metav1.PatchOptions{}, "status")
			return err
		}},
		{"event from node B", func() error {
			_, err := e.onA.CoreV1().Events(ns).Create(ctx, event(nodeB, a1), metav1.CreateOptions{})
			return err
		}},
		{"kubelet's Ready condition on node A", func() error {
			_, err := nodes.Patch(ctx, nodeA, types.StrategicMergePatchType,
				[]byte(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Test","message":"written by the test"}]}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"allocatable of node A", func() error {
			_, err := nodes.Patch(ctx, nodeA, types.StrategicMergePatchType, []byte(`{"status":{"allocatable":{"memory":"1Ti"}}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"label on node A", func() error {
			return updateNode(ctx, e.onA, nodeA, func(n *v1.Node) { n.Labels["evictd.io/test"] = "x" })
		}},
		{"unschedulable on node A", func() error {
			return updateNode(ctx, e.onA, nodeA, func(n *v1.Node) { n.Spec.Unschedulable = true })
		}},
		{"node.kubernetes.io/ taint on node A", func() error { return setTaint(ctx, e.onA, nodeA, "node.kubernetes.io/unreachable") }},
		{"another owner's taint added on node A", func() error { return setTaint(ctx, e.onA, nodeA, "example.com/dedicated") }},
		{"another owner's taint removed from node A", func() error {
			if err := setTaint(ctx, e.admin, nodeA, "example.com/keep"); err != nil {
				return fmt.Errorf("the admin's taint: %w", err)
			}
			return updateNode(ctx, e.onA, nodeA, func(n *v1.Node) {
				n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == "example.com/keep" })
			})
		}},
		{"podCIDR of node A", func() error {
			_, err := nodes.Patch(ctx, nodeA, types.MergePatchType, []byte(`{"spec":{"podCIDR":"10.99.0.0/24","podCIDRs":["10.99.0.0/24"]}}`), metav1.PatchOptions{})
			return err
		}},
		{"label of node A through nodes/status", func() error {
			_, err := nodes.Patch(ctx, nodeA, types.MergePatchType, []byte(`{"metadata":{"labels":{"evictd.io/test":"x"}}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"another writer's condition on node A", func() error {
			_, err := nodes.Patch(ctx, nodeA, types.StrategicMergePatchType, conditionPatch("ExampleComDiskHealthy"), metav1.PatchOptions{}, "status")
			return err
		}},
		{"addresses of node A", func() error {
			_, err := nodes.Patch(ctx, nodeA, types.MergePatchType, []byte(`{"status":{"addresses":[{"type":"InternalIP","address":"10.9.9.9"}]}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"label of a pod on node A through pods/status", func() error {
			_, err := pods.Patch(ctx, a1.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"hijacked"}}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"another condition of a pod on node A", func() error {
			_, err := pods.Patch(ctx, a1.Name, types.StrategicMergePatchType,
				[]byte(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Test"}]}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"another writer's DisruptionTarget condition on a pod on node A", func() error {
			_, err := pods.Patch(ctx, a1.Name, types.StrategicMergePatchType, disruptionPatch("TerminationByKubelet"), metav1.PatchOptions{}, "status")
			return err
		}},
		{"phase of a pod on node A", func() error {
			_, err := pods.Patch(ctx, a1.Name, types.MergePatchType, []byte(`{"status":{"phase":"Failed","reason":"Evicted"}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"Failed/Evicted beside another writer's DisruptionTarget condition", func() error {
			_, err := pods.Patch(ctx, a1.Name, types.StrategicMergePatchType, terminalPatch("Failed", "Evicted", "TerminationByKubelet", evictedAnnotation), metav1.PatchOptions{}, "status")
			return err
		}},
		{"Succeeded beside evictd's DisruptionTarget condition", func() error {
			_, err := pods.Patch(ctx, a1.Name, types.StrategicMergePatchType, terminalPatch("Succeeded", "Evicted", decide.DisruptionTargetReason, evictedAnnotation), metav1.PatchOptions{}, "status")
			return err
		}},
		{"Failed with another reason beside evictd's DisruptionTarget condition", func() error {
			_, err := pods.Patch(ctx, a1.Name, types.StrategicMergePatchType, terminalPatch("Failed", "DeadlineExceeded", decide.DisruptionTargetReason, evictedAnnotation), metav1.PatchOptions{}, "status")
			return err
		}},
		{"Failed/Evicted over a pod that has succeeded", func() error {
			_, err := pods.Patch(ctx, a5.Name, types.StrategicMergePatchType, terminalPatch("Failed", "Evicted", decide.DisruptionTargetReason, evictedAnnotation), metav1.PatchOptions{}, "status")
			return err
		}},
		{"Failed/Evicted over a pod another writer failed", func() error {
			_, err := pods.Patch(ctx, a6.Name, types.StrategicMergePatchType, terminalPatch("Failed", "Evicted", decide.DisruptionTargetReason, ""), metav1.PatchOptions{}, "status")
			return err
		}},
		{"Failed/Evicted with another annotation", func() error {
			_, err := pods.Patch(ctx, a1.Name, types.StrategicMergePatchType, terminalPatch("Failed", "Evicted", decide.DisruptionTargetReason, "example.com/owner"), metav1.PatchOptions{}, "status")
			return err
		}},
		{"evictd's annotation without the terminal status", func() error {
			_, err := pods.Patch(ctx, a1.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+evictedAnnotation+`":"x"}}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"Failed/Evicted on a pod on node B", func() error {
			_, err := pods.Patch(ctx, b1.Name, types.StrategicMergePatchType, terminalPatch("Failed", "Evicted", decide.DisruptionTargetReason, evictedAnnotation), metav1.PatchOptions{}, "status")
			return err
		}},
	}
	for _, tc := range refused {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			err := tc.write()
			if !refusedByPolicy(err) {
				t.Fatalf("got %v, want a refusal by ValidatingAdmissionPolicy %s", err, policyName)
			}
			t.Logf("refused: %v", err)
		})
	}

	// What no admission policy can see (an Eviction names the pod, not its
	// node), the API server itself refuses: evictd reads, evicts and
	// deletes pods acting as its node, which the Node authorizer and
	// NodeRestriction judge as they judge the kubelet; and its own
	// identity may not touch pods at all.
	forbidden := []struct {
		name  string
		write func() error
		says  string // in the refusal
	}{
		{"eviction of a pod on node B, as node A", func() error { return evict(ctx, e.asA, b2) }, "can only evict pods with spec.nodeName set to itself"},
		{"delete of a pod on node B, as node A", func() error { return e.asA.CoreV1().Pods(ns).Delete(ctx, b1.Name, metav1.DeleteOptions{}) },
			"can only delete pods with spec.nodeName set to itself"},
		{"list of node B's pods, as node A", func() error {
			_, err := e.asA.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeB})
			return err
		}, "spec.nodeName field selector"},
		{"list of every pod, as node A", func() error {
			_, err := e.asA.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			return err
		}, "spec.nodeName field selector"},
		{"status of a pod on node A, as node A (its own identity's write, narrowed by the policy)", func() error {
			_, err := e.asA.CoreV1().Pods(ns).Patch(ctx, a1.Name, types.MergePatchType, []byte(`{"status":{"phase":"Failed"}}`), metav1.PatchOptions{}, "status")
			return err
		}, "impersonate-on:associated-node:patch"},
		{"eviction of a pod on node B, as node B", func() error { return evict(ctx, e.asB, b2) }, "impersonate"},
		{"eviction of a pod on node A, without acting as node A", func() error { return evict(ctx, e.onA, a3) }, "cannot create resource \"pods/eviction\""},
		{"eviction of a pod on node B, without acting as a node", func() error { return evict(ctx, e.onA, b2) }, "cannot create resource \"pods/eviction\""},
		{"delete of a pod on node B, without acting as a node", func() error { return pods.Delete(ctx, b1.Name, metav1.DeleteOptions{}) }, "cannot delete resource \"pods\""},
		{"list of pods, without acting as a node", func() error {
			_, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeA})
			return err
		}, "cannot list resource \"pods\""},
	}
	for _, tc := range forbidden {
		t.Run("forbidden/"+tc.name, func(t *testing.T) {
			err := tc.write()
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want 403 Forbidden saying %q", err, tc.says)
			}
			t.Logf("refused: %v", err)
		})
	}

	allowed := []struct {
		name  string
		write func() error
	}{
		{"status patch of node A", func() error {
			_, err := nodes.Patch(ctx, nodeA, types.StrategicMergePatchType, conditionPatch("EvictdMemoryPressure"), metav1.PatchOptions{}, "status")
			return err
		}},
		{"taint on node A", func() error { return setTaint(ctx, e.onA, nodeA, "evictd.io/memory-pressure") }},
		{"status patch of a pod on node A", func() error {
			_, err := pods.Patch(ctx, a1.Name, types.StrategicMergePatchType, disruptionPatch(decide.DisruptionTargetReason), metav1.PatchOptions{}, "status")
			return err
		}},
		{"terminal status of an eviction on a pod on node A", func() error {
			got, err := pods.Patch(ctx, a4.Name, types.StrategicMergePatchType, terminalPatch("Failed", "Evicted", decide.DisruptionTargetReason, evictedAnnotation), metav1.PatchOptions{}, "status")
			if err == nil && (got.Status.Phase != v1.PodFailed || got.Status.Reason != "Evicted" || got.Annotations[evictedAnnotation] == "") {
				return fmt.Errorf("written, but the pod reads phase %s reason %q annotations %v", got.Status.Phase, got.Status.Reason, got.Annotations)
			}
			return err
		}},
		{"the terminal status again, after the kubelet cleared its reason", func() error {
			if _, err := e.admin.CoreV1().Pods(ns).Patch(ctx, a4.Name, types.MergePatchType, []byte(`{"status":{"reason":null,"message":null}}`), metav1.PatchOptions{}, "status"); err != nil {
				return fmt.Errorf("the kubelet's write: %w", err)
			}
			got, err := pods.Patch(ctx, a4.Name, types.StrategicMergePatchType, terminalPatch("Failed", "Evicted", decide.DisruptionTargetReason, ""), metav1.PatchOptions{}, "status")
			if err == nil && got.Status.Reason != "Evicted" {
				return fmt.Errorf("written, but the pod reads reason %q", got.Status.Reason)
			}
			return err
		}},
		{"delete of a pod on node A, as node A", func() error { return e.asA.CoreV1().Pods(ns).Delete(ctx, a2.Name, metav1.DeleteOptions{}) }},
		{"eviction of a pod on node A, as node A", func() error { return evict(ctx, e.asA, a3) }},
		{"list of node A's pods, as node A", func() error {
			_, err := e.asA.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeA})
			return err
		}},
		{"event from node A", func() error {
			_, err := e.onA.CoreV1().Events(ns).Create(ctx, event(nodeA, a1), metav1.CreateOptions{})
			return err
		}},
	}
	for _, tc := range allowed {
		t.Run("allowed/"+tc.name, func(t *testing.T) {
			if err := tc.write(); err != nil {
				t.Fatalf("got %v, want success", err)
			}
		})
	}

	// The refused writes changed nothing.
	b, err := e.admin.CoreV1().Nodes().Get(ctx, nodeB, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, taint := range b.Spec.Taints {
		if strings.HasPrefix(taint.Key, "evictd.io/") {
			t.Errorf("node B has taint %s, want it absent", taint.Key)
		}
	}
	for _, c := range b.Status.Conditions {
		if c.Type == "EvictdMemoryPressure" {
			t.Errorf("node B has condition %s, want it absent", c.Type)
		}
	}
	for _, p := range []*v1.Pod{b1, b2} {
		if got, err := e.admin.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}); err != nil || got.DeletionTimestamp != nil {
			t.Errorf("pod %s on node B: %v, want it still there and not terminating", p.Name, err)
		}
	}
}

// TestPolicyRefusesUnboundToken checks that a token of evictd's
// ServiceAccount that is bound to no node writes nothing, not even on a
// node, while a node-bound token carries its node's name.
func TestPolicyRefusesUnboundToken(t *testing.T) {
	c, e := newPolicyEnv(t)
	ctx := t.Context()
	token, err := testcluster.ServiceAccountToken(ctx, e.admin, "kube-system", "evictd")
	if err != nil {
		t.Fatal(err)
	}
	unbound, err := kubernetes.NewForConfig(c.TokenConfig(token))
	if err != nil {
		t.Fatal(err)
	}
	_, err = unbound.CoreV1().Nodes().Patch(ctx, nodeA, types.StrategicMergePatchType, conditionPatch("EvictdMemoryPressure"), metav1.PatchOptions{}, "status")
	if !refusedByPolicy(err) || !strings.Contains(err.Error(), "not bound to a node") {
		t.Fatalf("unbound token patching node A's status: got %v, want the policy's refusal for a token not bound to a node", err)
	}

	// The API server sets the extra the policy reads.
	for _, tc := range []struct {
		client kubernetes.Interface
		want   []string
	}{{e.onA, []string{nodeA}}, {unbound, nil}} {
		r, err := tc.client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := r.Status.UserInfo.Extra[nodeNameKey]
		if !equal(got, tc.want) {
			t.Errorf("user %s: extra %s = %v, want %v", r.Status.UserInfo.Username, nodeNameKey, got, tc.want)
		}
	}
}

func equal(a authenticationv1.ExtraValue, b []string) bool {
	ja, _ := json.Marshal([]string(a))
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb) || (len(a) == 0 && len(b) == 0)
}

// TestBefore136 applies rbac-before-1.36.yaml, for clusters where evictd
// cannot act as its node (--impersonate-node=false), and shows what it
// grants and what it opens: node A's evictd lists its pods and evicts one
// under its own identity; the policy still refuses it the delete of a pod
// on node B; and the eviction of a pod on node B, which no admission
// policy can see, goes through (deploy/README.md, "Before Kubernetes
// 1.36").
func TestBefore136(t *testing.T) {
	_, e := newPolicyEnv(t)
	ctx := t.Context()
	if _, err := testcluster.CreateManifest(ctx, e.admin, "rbac-before-1.36.yaml"); err != nil {
		t.Fatal(err)
	}
	a, b1, b2 := e.pod(t, "old-a", nodeA), e.pod(t, "old-b", nodeB), e.pod(t, "old-b-evict", nodeB)
	pods := e.onA.CoreV1().Pods(ns)
	// RBAC learns of the binding through a watch.
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeA})
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("rbac-before-1.36.yaml never let evictd list pods: %v", last)
	}
	if err := evict(ctx, e.onA, a); err != nil {
		t.Errorf("eviction of a pod on node A under evictd's own identity: %v, want success", err)
	}
	if err := pods.Delete(ctx, b1.Name, metav1.DeleteOptions{}); !refusedByPolicy(err) {
		t.Errorf("delete of a pod on node B: %v, want a refusal by ValidatingAdmissionPolicy %s", err, policyName)
	}
	if err := evict(ctx, e.onA, b2); err != nil {
		t.Errorf("eviction of a pod on node B under evictd's own identity: %v, want success (what this role opens)", err)
	}
}
