package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/kubeclient"
)

// TestPolicyByExclusion shows that deploy/policy.yaml checks a write by
// exclusion: node A's evictd, on its own node and the pods bound to it,
// may change its own parts (Evictd conditions, evictd.io/ taints, a pod's
// DisruptionTarget condition and an eviction's terminal status) and
// nothing else, whatever the field. Each status field below is one an
// earlier policy, which compared a list of fields, left open; the policy
// names none of them (checked), so each is refused because it is not
// evictd's, as a field a later Kubernetes adds will be.
//
// A field this API server does not know cannot be tried: the server drops
// an unknown field while it decodes the request (or refuses it, with
// fieldValidation=Strict), before admission. A later server that knows
// the field keeps it in the object the policy compares, key by key, with
// the stored one.
//
// Events: an update or patch of an event is checked on the event as it
// was too, so node A's evictd may change only the events it recorded
// itself, and only their count, last time and message (what client-go's
// recorder patches); client-go's recorder itself, aggregating a repeated
// event, still works.
func TestPolicyByExclusion(t *testing.T) {
	c, e := newPolicyEnv(t)
	ctx := t.Context()
	policy, err := os.ReadFile("policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tokenB, err := c.EvictdNodeToken(ctx, nodeB)
	if err != nil {
		t.Fatal(err)
	}
	onB, err := kubernetes.NewForConfig(c.TokenConfig(tokenB))
	if err != nil {
		t.Fatal(err)
	}

	requests := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	plain := e.podWith(t, "x-plain", nodeA, func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = requests })
	extended := e.podWith(t, "x-extended", nodeA, func(p *v1.Pod) {
		gpu := v1.ResourceList{"example.com/gpu": resource.MustParse("1")}
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: gpu, Limits: gpu}
	})
	claims := e.podWith(t, "x-claims", nodeA, func(p *v1.Pod) {
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "claim", ResourceClaimName: new("claim-a")}}
		p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "claim"}}
	})
	disrupted := e.pod(t, "x-disrupted", nodeA)

	// The kubelet's status of a running pod, and the Eviction API's
	// DisruptionTarget condition.
	started := time.Now().UTC().Format(time.RFC3339)
	running := fmt.Sprintf(`{"status":{"phase":"Running","hostIP":"10.0.0.10","podIP":"10.1.0.10","startTime":%q,"observedGeneration":1,`+
		`"conditions":[{"type":"Ready","status":"True","observedGeneration":1}],`+
		`"containerStatuses":[{"name":"c","image":"example.invalid/none","imageID":"","ready":true,"restartCount":0,"started":true,`+
		`"state":{"running":{"startedAt":%q}},"allocatedResources":{"cpu":"100m","memory":"64Mi"},`+
		`"resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}}`, started, started)
	for name, status := range map[string]string{
		plain.Name:     running,
		disrupted.Name: `{"status":{"conditions":[{"type":"DisruptionTarget","status":"True","reason":"EvictionByEvictionAPI","message":"Eviction API: evicting"}]}}`,
	} {
		if _, err := e.admin.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("the kubelet's status of pod %s: %v", name, err)
		}
	}
	containerStatus := func(allocatedMemory, requestedMemory string) string {
		return fmt.Sprintf(`{"status":{"containerStatuses":[{"name":"c","image":"example.invalid/none","imageID":"","ready":true,"restartCount":0,"started":true,`+
			`"state":{"running":{"startedAt":%q}},"allocatedResources":{"cpu":"100m","memory":%q},`+
			`"resources":{"requests":{"cpu":"100m","memory":%q}}}]}}`, started, allocatedMemory, requestedMemory)
	}

	// Events: one of node B's evictd, one of node A's kubelet, one of node
	// A's evictd.
	ofB, err := onB.CoreV1().Events(ns).Create(ctx, event(nodeB, plain), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("node B's evictd records an event: %v", err)
	}
	kubelet := event(nodeA, plain)
	kubelet.Source.Component, kubelet.ReportingController = "kubelet", "kubelet"
	ofKubelet, err := e.admin.CoreV1().Events(ns).Create(ctx, kubelet, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("node A's kubelet's event: %v", err)
	}
	ofA, err := e.onA.CoreV1().Events(ns).Create(ctx, event(nodeA, plain), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("node A's evictd records an event: %v", err)
	}

	pods := e.onA.CoreV1().Pods(ns)
	nodes := e.onA.CoreV1().Nodes()
	events := e.onA.CoreV1().Events(ns)
	patchPod := func(p *v1.Pod, pt types.PatchType, patch string) func() error {
		return func() error {
			_, err := pods.Patch(ctx, p.Name, pt, []byte(patch), metav1.PatchOptions{}, "status")
			return err
		}
	}
	patchEvent := func(ev *v1.Event, patch string) func() error {
		return func() error {
			_, err := events.Patch(ctx, ev.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		}
	}
	// rewritten is client-go's patch of a repeated event (count, last time
	// and message) with the source and reporting instance of node A.
	rewritten := fmt.Sprintf(`{"count":2,"lastTimestamp":%q,"message":"rewritten by node A","source":{"component":"evictd","host":%q},`+
		`"reportingComponent":"evictd","reportingInstance":%q}`, time.Now().UTC().Format(time.RFC3339), nodeA, nodeA)

	refused := []struct {
		name  string
		field string // the field written, which the policy must not name; "" when it is not a status field
		write func() error
		says  string // in the refusal
	}{
		{"observedGeneration of a pod", "observedGeneration", patchPod(disrupted, types.MergePatchType, `{"status":{"observedGeneration":1}}`), "no other status field"},
		{"resources of a container status", "resources", patchPod(plain, types.StrategicMergePatchType, containerStatus("64Mi", "1Gi")), "no other status field"},
		{"allocatedResources of a container status", "allocatedResources", patchPod(plain, types.StrategicMergePatchType, containerStatus("1Gi", "64Mi")), "no other status field"},
		{"resources of a pod", "resources", patchPod(plain, types.MergePatchType, `{"status":{"resources":{"requests":{"cpu":"4"}}}}`), "no other status field"},
		{"allocatedResources of a pod", "allocatedResources", patchPod(plain, types.MergePatchType, `{"status":{"allocatedResources":{"cpu":"4"}}}`), "no other status field"},
		{"extendedResourceClaimStatus of a pod", "extendedResourceClaimStatus", patchPod(extended, types.MergePatchType,
			`{"status":{"extendedResourceClaimStatus":{"resourceClaimName":"x-extended-gpu","requestMappings":[{"containerName":"c","resourceName":"example.com/gpu","requestName":"gpu"}]}}}`),
			"no other status field"},
		{"nodeAllocatableResourceClaimStatuses of a pod", "nodeAllocatableResourceClaimStatuses", patchPod(claims, types.MergePatchType,
			`{"status":{"nodeAllocatableResourceClaimStatuses":[{"resourceClaimName":"claim-a","containers":["c"],"resources":{"cpu":"1"}}]}}`),
			"no other status field"},
		{"the Eviction API's DisruptionTarget condition removed", "", patchPod(disrupted, types.StrategicMergePatchType,
			`{"status":{"conditions":[{"type":"DisruptionTarget","$patch":"delete"}]}}`), "only to its own"},
		{"generateName of a pod through pods/status", "", patchPod(plain, types.MergePatchType, `{"metadata":{"generateName":"hijacked-"}}`), "no other metadata"},
		{"declaredFeatures of its node", "declaredFeatures", func() error {
			_, err := nodes.Patch(ctx, nodeA, types.MergePatchType, []byte(`{"status":{"declaredFeatures":["ExampleFeature"]}}`), metav1.PatchOptions{}, "status")
			return err
		}, "no other condition or status field"},
		{"declaredFeatures of its node by server-side apply", "declaredFeatures", func() error {
			apply := fmt.Sprintf(`{"apiVersion":"v1","kind":"Node","metadata":{"name":%q},"status":{"declaredFeatures":["ExampleFeature"]}}`, nodeA)
			_, err := nodes.Patch(ctx, nodeA, types.ApplyPatchType, []byte(apply), metav1.PatchOptions{FieldManager: "evictd-test", Force: new(true)}, "status")
			return err
		}, "no other condition or status field"},
		{"node B's evictd's event rewritten as node A's", "", patchEvent(ofB, rewritten), "may change only the events it recorded itself"},
		{"node B's evictd's event patched", "", patchEvent(ofB, `{"count":2,"message":"patched by node A"}`), "only as evictd of its own node"},
		{"node A's kubelet's event rewritten as evictd's", "", patchEvent(ofKubelet, rewritten), "may change only the events it recorded itself"},
		{"its own event's reason", "", patchEvent(ofA, `{"reason":"Rewritten"}`), "only the count, lastTimestamp and message"},
		{"its own event's object", "", patchEvent(ofA, `{"involvedObject":{"name":"x-extended"}}`), "only the count, lastTimestamp and message"},
		{"an event about node B", "", func() error {
			ev := event(nodeA, plain)
			ev.Namespace, ev.InvolvedObject = metav1.NamespaceDefault, v1.ObjectReference{Kind: "Node", Name: nodeB, UID: types.UID(nodeB)}
			_, err := e.onA.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{})
			return err
		}, "only about pods and its own node"},
		{"an event about a namespace", "", func() error {
			ev := event(nodeA, plain)
			ev.Namespace, ev.InvolvedObject = metav1.NamespaceDefault, v1.ObjectReference{Kind: "Namespace", Name: ns}
			_, err := e.onA.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{})
			return err
		}, "only about pods and its own node"},
		{"an event without its reporting instance", "", func() error {
			ev := event(nodeA, plain)
			ev.ReportingInstance = ""
			_, err := events.Create(ctx, ev, metav1.CreateOptions{})
			return err
		}, "only as evictd of its own node"},
	}
	for _, tc := range refused {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			if tc.field != "" && regexp.MustCompile(`(\.\??|')`+tc.field+`\b`).Match(policy) {
				t.Errorf("policy.yaml names %s: the policy should refuse it by exclusion, not by name", tc.field)
			}
			err := tc.write()
			if !refusedByPolicy(err) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want a refusal by ValidatingAdmissionPolicy %s saying %q", err, policyName, tc.says)
			}
			t.Logf("refused: %v", err)
		})
	}

	// RBAC grants evictd create and patch of core events, what client-go's
	// recorder sends, and nothing else of events.
	forbidden := []struct {
		name  string
		write func() error
		says  string // in the refusal
	}{
		{"update of its own event", func() error { _, err := events.Update(ctx, ofA, metav1.UpdateOptions{}); return err }, `cannot update resource "events"`},
		{"delete of its own event", func() error { return events.Delete(ctx, ofA.Name, metav1.DeleteOptions{}) }, `cannot delete resource "events"`},
		{"an event through events.k8s.io", func() error {
			ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "evictd-", Namespace: ns}, Reason: "Evicted", Type: v1.EventTypeWarning,
				ReportingController: "evictd", ReportingInstance: nodeA, Action: "Evict", EventTime: metav1.NowMicro(),
				Regarding: v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: plain.Name, UID: plain.UID}}
			_, err := e.onA.EventsV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
			return err
		}, `cannot create resource "events" in API group "events.k8s.io"`},
	}
	for _, tc := range forbidden {
		t.Run("forbidden/"+tc.name, func(t *testing.T) {
			err := tc.write()
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want 403 Forbidden saying %q", err, tc.says)
			}
		})
	}

	allowed := []struct {
		name  string
		write func() error
	}{
		{"its DisruptionTarget condition over the Eviction API's", func() error {
			got, err := pods.Patch(ctx, disrupted.Name, types.StrategicMergePatchType, disruptionPatch(decide.DisruptionTargetReason), metav1.PatchOptions{}, "status")
			if err == nil && disruptionReason(got) != decide.DisruptionTargetReason {
				return fmt.Errorf("written, but the pod's DisruptionTarget reason is %q", disruptionReason(got))
			}
			return err
		}},
		{"the terminal status of an eviction over the kubelet's status", func() error {
			got, err := pods.Patch(ctx, plain.Name, types.StrategicMergePatchType,
				terminalPatch("Failed", "Evicted", decide.DisruptionTargetReason, evictedAnnotation), metav1.PatchOptions{}, "status")
			if err == nil && (got.Status.Phase != v1.PodFailed || len(got.Status.ContainerStatuses) != 1 || got.Status.PodIP == "") {
				return fmt.Errorf("written, but the pod reads phase %s, %d container statuses, pod IP %q", got.Status.Phase, len(got.Status.ContainerStatuses), got.Status.PodIP)
			}
			return err
		}},
		// What the policy leaves open (deploy/README.md says so): the API
		// server rewrites managedFields, server-side apply's record of who
		// set which field, on every write, so the policy leaves them out. A
		// write of the node object itself may reset them (writes of a
		// status subresource cannot: the API server ignores their
		// managedFields).
		{"managedFields of its node reset beside its taint", func() error {
			list, err := nodes.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + nodeA})
			if err != nil || len(list.Items) != 1 {
				return fmt.Errorf("list node A: %v", err)
			}
			n := list.Items[0]
			patch, err := json.Marshal(map[string]any{
				"metadata": map[string]any{"resourceVersion": n.ResourceVersion, "managedFields": []any{map[string]any{}}},
				"spec":     map[string]any{"taints": append(n.Spec.Taints, v1.Taint{Key: "evictd.io/managed-fields", Effect: v1.TaintEffectNoSchedule})},
			})
			if err != nil {
				return err
			}
			got, err := nodes.Patch(ctx, nodeA, types.MergePatchType, patch, metav1.PatchOptions{})
			for _, m := range got.ManagedFields {
				if err == nil && m.Subresource == "status" {
					return fmt.Errorf("written, but the node keeps the managedFields entry of %s's status write", m.Manager)
				}
			}
			return err
		}},
		{"its node condition by server-side apply", func() error {
			apply := fmt.Sprintf(`{"apiVersion":"v1","kind":"Node","metadata":{"name":%q},"status":{"conditions":[`+
				`{"type":"EvictdPIDPressure","status":"False","reason":"Test","message":"applied by the test"}]}}`, nodeA)
			_, err := nodes.Patch(ctx, nodeA, types.ApplyPatchType, []byte(apply), metav1.PatchOptions{FieldManager: "evictd-test"}, "status")
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

	t.Run("allowed/client-go's recorder aggregating a repeated event", func(t *testing.T) {
		recordTwice(t, e, plain)
	})
}

// disruptionReason returns the reason of p's DisruptionTarget condition.
func disruptionReason(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			return c.Reason
		}
	}
	return ""
}

// recordTwice records the same event on pod p and on node A twice through
// client-go's recorder as evictd builds it (internal/agent: its
// kubeclient's event sink, source evictd on node A), and waits until the
// API server holds each with count 2: the second is client-go's patch of
// the first.
func recordTwice(t *testing.T, e *policyEnv, p *v1.Pod) {
	ctx := t.Context()
	client, err := kubeclient.NewForConfig(e.cfgA)
	if err != nil {
		t.Fatal(err)
	}
	broadcaster := record.NewBroadcaster()
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(client.EventSink())
	recorder := broadcaster.NewRecorder(client.Scheme(), v1.EventSource{Component: "evictd", Host: nodeA})
	node := &v1.ObjectReference{Kind: "Node", Name: nodeA, UID: types.UID(nodeA)}
	for range 2 {
		recorder.Event(p, v1.EventTypeWarning, "Evicted", "recorded twice by the test")
		recorder.Event(node, v1.EventTypeWarning, "EvictdTest", "recorded twice by the test")
	}
	for _, want := range []struct{ namespace, reason string }{{p.Namespace, "Evicted"}, {metav1.NamespaceDefault, "EvictdTest"}} {
		var count int32
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := e.admin.CoreV1().Events(want.namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + want.reason})
			if err != nil {
				return false, err
			}
			count = 0
			for _, ev := range list.Items {
				if ev.Message == "recorded twice by the test" {
					count = max(count, ev.Count)
				}
			}
			return count == 2, nil
		})
		if err != nil {
			t.Errorf("event %s in namespace %s: count %d, want 2 (client-go's patch of the repeated event allowed): %v", want.reason, want.namespace, count, err)
		}
	}
}
