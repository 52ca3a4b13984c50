package deploy

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/evictd/evictd/internal/testing/testcluster"
)

// TestChartOnAPIServer applies the chart's rendering for a namespace and a
// ServiceAccount of its own (evictd-system/node-evictd, every optional part
// on; the monitoring and OpenShift objects, whose CRDs a bare API server
// lacks, are checked offline by TestChartValues) to a real kube-apiserver
// by server-side apply with strict field validation, twice, and checks
// that the admission policy, given its ServiceAccount by paramRef, holds
// that identity to its node: a token bound to node A writes node A's
// status and Lease, and is refused node B's.
func TestChartOnAPIServer(t *testing.T) {
	out, err := helmTemplate(t, "namespace: evictd-system\ncreateNamespace: true\nserviceAccount: {name: node-evictd}\n"+allParts)
	if err != nil {
		t.Fatal(err)
	}
	checkOnAPIServer(t, decode(t, out), "evictd-system", "node-evictd")
}

// TestKustomizeOnAPIServer does the same with the example kustomize
// overlay's objects.
func TestKustomizeOnAPIServer(t *testing.T) {
	out, err := run(tool(t, "kustomize"), "build", "kustomize/overlays/example")
	if err != nil {
		t.Fatal(err)
	}
	checkOnAPIServer(t, decode(t, out), "evictd-system", "node-evictd")
}

// checkOnAPIServer applies objs to a new control plane and checks that
// the ServiceAccount namespace/sa is held to its node.
func checkOnAPIServer(t *testing.T, objs []object, namespace, sa string) {
	t.Helper()
	c := testcluster.StartForTest(t, testcluster.Options{})
	ctx := t.Context()
	admin := c.AdminClient(t)
	applyObjects(t, c, objs)
	for _, n := range []string{nodeA, nodeB} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	token, err := testcluster.NodeBoundToken(ctx, admin, namespace, sa, nodeA)
	if err != nil {
		t.Fatal(err)
	}
	onA, err := kubernetes.NewForConfig(c.TokenConfig(token))
	if err != nil {
		t.Fatal(err)
	}
	// The API server learns of the policy, its binding and its parameter
	// through watches.
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = onA.CoreV1().Nodes().Patch(ctx, nodeB, types.StrategicMergePatchType, conditionPatch("EvictdMemoryPressure"),
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, "status")
		return refusedByPolicy(last), nil
	})
	if err != nil {
		t.Fatalf("the policy never refused %s/%s on node A a status patch of node B; last answer: %v", namespace, sa, last)
	}
	if _, err := onA.CoreV1().Nodes().Patch(ctx, nodeA, types.StrategicMergePatchType, conditionPatch("EvictdMemoryPressure"), metav1.PatchOptions{}, "status"); err != nil {
		t.Errorf("node A's evictd patching node A's status: %v", err)
	}
	lease := func(name string) error {
		_, err := onA.CoordinationV1().Leases(namespace).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: new(nodeA)},
		}, metav1.CreateOptions{})
		return err
	}
	if err := lease("evictd-" + nodeA); err != nil {
		t.Errorf("node A's evictd creating its Lease in %s: %v", namespace, err)
	}
	if err := lease("evictd-" + nodeB); !refusedByPolicy(err) {
		t.Errorf("node A's evictd creating node B's Lease: %v, want the policy's refusal", err)
	}
	if _, err := onA.CoreV1().Nodes().Patch(ctx, nodeB, types.StrategicMergePatchType, conditionPatch("EvictdMemoryPressure"), metav1.PatchOptions{}, "status"); !refusedByPolicy(err) {
		t.Errorf("node A's evictd patching node B's status: %v, want the policy's refusal", err)
	}
	// The kube-system identity the plain files name does not exist here:
	// nothing of the rendering refers to it.
	if _, err := admin.CoreV1().ServiceAccounts("kube-system").Get(ctx, "evictd", metav1.GetOptions{}); err == nil {
		t.Error("kube-system/evictd exists")
	}
}

// applyObjects applies objs to c by server-side apply with strict field
// validation, twice: the second time changes nothing and must succeed too.
func applyObjects(t *testing.T, c *testcluster.Cluster, objs []object) {
	t.Helper()
	ctx := t.Context()
	admin := c.AdminClient(t)
	dyn, err := dynamic.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(admin.Discovery()))
	for round := 1; round <= 2; round++ {
		for _, o := range objs {
			gvk := o.u.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%s: %v", o.id(), err)
			}
			j, err := o.u.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
			if o.u.GetNamespace() != "" {
				r = dyn.Resource(m.Resource).Namespace(o.u.GetNamespace())
			}
			_, err = r.Patch(ctx, o.u.GetName(), types.ApplyPatchType, j,
				metav1.PatchOptions{FieldManager: "evictd-chart-test", Force: new(true), FieldValidation: "Strict"})
			if err != nil {
				t.Fatalf("server-side apply (round %d) of %s: %v", round, o.id(), err)
			}
		}
	}
}
