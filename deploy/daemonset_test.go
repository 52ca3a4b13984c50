package deploy

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/evictd/evictd/internal/testing/testcluster"
)

// evictdTaints are the taint keys deploy/daemonset-tolerations.yaml
// tolerates, in the order it adds them.
var evictdTaints = []string{"evictd.io/memory-pressure", "evictd.io/disk-pressure", "evictd.io/pid-pressure"}

const (
	dsNamespace = "daemons"
	dsNode      = "node-pressured"
	tenantUser  = "tenant"
)

// evictdTolerations returns the tolerations the policy adds for keys.
func evictdTolerations(keys ...string) []v1.Toleration {
	out := make([]v1.Toleration, len(keys))
	for i, k := range keys {
		out[i] = v1.Toleration{Key: k, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}
	}
	return out
}

func daemonSet(name string, tolerations []v1.Toleration) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: dsNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					AutomountServiceAccountToken: new(false),
					Containers:                   []v1.Container{{Name: "c", Image: "example.invalid/none"}},
					Tolerations:                  tolerations,
				},
			},
		},
	}
}

// dsEnv is a control plane running the DaemonSet controller, with one
// Ready node under evictd's memory-pressure taint, a namespace for
// DaemonSets, and a tenant who may create pods there.
type dsEnv struct {
	c      *testcluster.Cluster
	admin  kubernetes.Interface
	tenant kubernetes.Interface
}

func newDSEnv(t *testing.T) *dsEnv {
	t.Helper()
	c := testcluster.StartForTest(t, testcluster.Options{
		ControllerManager: true,
		Controllers:       []string{"daemonset", "serviceaccount"},
		Tokens:            map[string][]string{tenantUser: nil},
	})
	ctx := t.Context()
	admin := c.AdminClient(t)
	tenant, err := kubernetes.NewForConfig(c.TokenConfig(c.Token(tenantUser)))
	if err != nil {
		t.Fatal(err)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: dsNode, Labels: map[string]string{"kubernetes.io/hostname": dsNode}}}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node %s: %v", dsNode, err)
	}
	ready := `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status"}]}}`
	if _, err := admin.CoreV1().Nodes().Patch(ctx, dsNode, types.StrategicMergePatchType, []byte(ready), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("set Ready on node %s: %v", dsNode, err)
	}
	// A Ready node under memory pressure, as evictd taints it: no
	// node lifecycle controller runs to lift the not-ready taint the
	// API server put on the new node, so the taints are replaced.
	taints := fmt.Appendf(nil, `{"spec":{"taints":[{"key":%q,"effect":"NoSchedule"}]}}`, evictdTaints[0])
	if _, err := admin.CoreV1().Nodes().Patch(ctx, dsNode, types.MergePatchType, taints, metav1.PatchOptions{}); err != nil {
		t.Fatalf("taint node %s: %v", dsNode, err)
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dsNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", dsNamespace, err)
	}
	// Pod admission wants the default ServiceAccount; the controller
	// creates it too, whichever comes first.
	_, err = admin.CoreV1().ServiceAccounts(dsNamespace).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create default ServiceAccount: %v", err)
	}
	// The tenant may create pods in the namespace (the built-in edit
	// role is aggregated by a controller that does not run here).
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: dsNamespace},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list"}}},
	}
	if _, err := admin.RbacV1().Roles(dsNamespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create tenant Role: %v", err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: dsNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tenantUser}},
	}
	if _, err := admin.RbacV1().RoleBindings(dsNamespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create tenant RoleBinding: %v", err)
	}
	return &dsEnv{c: c, admin: admin, tenant: tenant}
}

// applyPolicy creates the objects of deploy/daemonset-tolerations.yaml
// and waits until the API server, which loads admission policies through
// a watch, applies it: a dry run goes through admission and stores
// nothing.
func (e *dsEnv) applyPolicy(t *testing.T) {
	t.Helper()
	path := "daemonset-tolerations.yaml"
	created, err := testcluster.CreateManifest(t.Context(), e.admin, path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"MutatingAdmissionPolicy/evictd-daemonset-tolerations", "MutatingAdmissionPolicyBinding/evictd-daemonset-tolerations"}
	if !slices.Equal(created, want) {
		t.Fatalf("%s created %q, want %q", path, created, want)
	}
	var last []v1.Toleration
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ds, err := e.admin.AppsV1().DaemonSets(dsNamespace).Create(ctx, daemonSet("probe", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, fmt.Errorf("dry-run create of DaemonSet probe: %w", err)
		}
		last = ds.Spec.Template.Spec.Tolerations
		return len(last) > 0, nil
	})
	if err != nil {
		t.Fatalf("the policy never added tolerations to a DaemonSet: %v; last tolerations: %v", err, last)
	}
}

// waitObserved waits until the DaemonSet controller has synced the
// current generation of DaemonSet name, and returns it.
func (e *dsEnv) waitObserved(t *testing.T, name string) *appsv1.DaemonSet {
	t.Helper()
	var ds *appsv1.DaemonSet
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		ds, err = e.admin.AppsV1().DaemonSets(dsNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("get DaemonSet %s: %w", name, err)
		}
		return ds.Status.ObservedGeneration == ds.Generation, nil
	})
	if err != nil {
		t.Fatalf("the DaemonSet controller never observed generation %d of DaemonSet %s: %v", ds.Generation, name, err)
	}
	return ds
}

// daemonPods returns the pods of DaemonSet name.
func (e *dsEnv) daemonPods(t *testing.T, name string) []v1.Pod {
	t.Helper()
	pods, err := e.admin.CoreV1().Pods(dsNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatalf("list pods of DaemonSet %s: %v", name, err)
	}
	return pods.Items
}

// waitDaemonPod waits until the DaemonSet controller has created a pod of
// DaemonSet name for the node, and returns it.
func (e *dsEnv) waitDaemonPod(t *testing.T, name string) v1.Pod {
	t.Helper()
	var pods []v1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		pods = e.daemonPods(t, name)
		return len(pods) > 0, nil
	})
	if err != nil {
		ds, _ := e.admin.AppsV1().DaemonSets(dsNamespace).Get(t.Context(), name, metav1.GetOptions{})
		t.Fatalf("the DaemonSet controller created no pod of DaemonSet %s on node %s (under taint %s): %v; DaemonSet: %+v", name, dsNode, evictdTaints[0], err, ds)
	}
	if len(pods) != 1 {
		t.Fatalf("DaemonSet %s has %d pods, want 1", name, len(pods))
	}
	return pods[0]
}

// countKeys counts, for each of evictd's taint keys, the tolerations of
// that key.
func countKeys(tolerations []v1.Toleration) map[string]int {
	n := make(map[string]int)
	for _, tol := range tolerations {
		if slices.Contains(evictdTaints, tol.Key) {
			n[tol.Key]++
		}
	}
	return n
}

// TestDaemonSetTolerations applies deploy/daemonset-tolerations.yaml to
// a real API server, with no feature gate or --runtime-config, beside a
// real DaemonSet controller, and a node under evictd's memory-pressure
// taint. Without the policy the controller runs no pod of a DaemonSet on
// that node; with it, a new DaemonSet and one updated after the policy
// came get the tolerations in their template (each once), and their pods
// on the node. Pods that are not a DaemonSet's get none.
func TestDaemonSetTolerations(t *testing.T) {
	e := newDSEnv(t)
	ctx := t.Context()

	resources, err := e.admin.Discovery().ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil {
		t.Fatalf("discovery of admissionregistration.k8s.io/v1: %v", err)
	}
	var served []string
	for _, r := range resources.APIResources {
		served = append(served, r.Name)
	}
	for _, want := range []string{"mutatingadmissionpolicies", "mutatingadmissionpolicybindings"} {
		if !slices.Contains(served, want) {
			t.Fatalf("admissionregistration.k8s.io/v1 serves %q, without %s", served, want)
		}
	}

	// Before the policy: the controller decides from the template, which
	// does not tolerate the node's taint, and creates no pod there.
	if _, err := e.admin.AppsV1().DaemonSets(dsNamespace).Create(ctx, daemonSet("before", nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create DaemonSet before: %v", err)
	}
	if ds := e.waitObserved(t, "before"); ds.Status.DesiredNumberScheduled != 0 {
		t.Fatalf("without the policy, DaemonSet before wants %d pods on the tainted node, want 0 (did the node lose its taint?)", ds.Status.DesiredNumberScheduled)
	}
	if pods := e.daemonPods(t, "before"); len(pods) != 0 {
		t.Fatalf("without the policy, DaemonSet before has %d pods on the tainted node, want 0", len(pods))
	}

	e.applyPolicy(t)

	t.Run("new DaemonSet", func(t *testing.T) {
		ds, err := e.admin.AppsV1().DaemonSets(dsNamespace).Create(ctx, daemonSet("agent", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create DaemonSet agent: %v", err)
		}
		if got, want := ds.Spec.Template.Spec.Tolerations, evictdTolerations(evictdTaints...); !reflect.DeepEqual(got, want) {
			t.Errorf("template tolerations: got %+v, want %+v", got, want)
		}
		pod := e.waitDaemonPod(t, "agent")
		for _, k := range evictdTaints {
			if n := countKeys(pod.Spec.Tolerations)[k]; n != 1 {
				t.Errorf("pod %s: %d tolerations of %s, want 1; tolerations: %+v", pod.Name, n, k, pod.Spec.Tolerations)
			}
		}
		// The controller's own tolerations are still added beside them.
		if !slices.ContainsFunc(pod.Spec.Tolerations, func(tol v1.Toleration) bool { return tol.Key == v1.TaintNodeMemoryPressure }) {
			t.Errorf("pod %s lacks the DaemonSet controller's %s toleration: %+v", pod.Name, v1.TaintNodeMemoryPressure, pod.Spec.Tolerations)
		}

		// An update that leaves the template alone changes nothing: no
		// duplicate toleration, no new generation, no rollout.
		patch := []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)
		updated, err := e.admin.AppsV1().DaemonSets(dsNamespace).Patch(ctx, "agent", types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("label DaemonSet agent: %v", err)
		}
		if updated.Generation != ds.Generation || !reflect.DeepEqual(updated.Spec.Template.Spec.Tolerations, ds.Spec.Template.Spec.Tolerations) {
			t.Errorf("after a label change: generation %d (was %d), tolerations %+v (were %+v)",
				updated.Generation, ds.Generation, updated.Spec.Template.Spec.Tolerations, ds.Spec.Template.Spec.Tolerations)
		}
	})

	t.Run("DaemonSet from before the policy, restarted", func(t *testing.T) {
		// What kubectl rollout restart writes.
		patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-01-01T00:00:00Z"}}}}}`)
		ds, err := e.admin.AppsV1().DaemonSets(dsNamespace).Patch(ctx, "before", types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("restart DaemonSet before: %v", err)
		}
		if got, want := ds.Spec.Template.Spec.Tolerations, evictdTolerations(evictdTaints...); !reflect.DeepEqual(got, want) {
			t.Errorf("template tolerations: got %+v, want %+v", got, want)
		}
		pod := e.waitDaemonPod(t, "before")
		if got := countKeys(pod.Spec.Tolerations); got[evictdTaints[0]] != 1 {
			t.Errorf("pod %s: tolerations of evictd's taints %v, want one each; tolerations: %+v", pod.Name, got, pod.Spec.Tolerations)
		}
	})

	t.Run("tolerations the template has", func(t *testing.T) {
		memory, disk, pid := evictdTaints[0], evictdTaints[1], evictdTaints[2]
		for _, tc := range []struct {
			name string
			have []v1.Toleration
			add  []string // the keys the policy adds after them
		}{
			{"none", nil, evictdTaints},
			{"memory, Exists, NoSchedule", evictdTolerations(memory), []string{disk, pid}},
			{"all three", evictdTolerations(evictdTaints...), nil},
			{"memory, Exists, any effect", []v1.Toleration{{Key: memory, Operator: v1.TolerationOpExists}}, []string{disk, pid}},
			{"memory, Equal, empty value", []v1.Toleration{{Key: memory, Operator: v1.TolerationOpEqual, Effect: v1.TaintEffectNoSchedule}}, []string{disk, pid}},
			{"memory, empty operator and value", []v1.Toleration{{Key: memory}}, []string{disk, pid}},
			{"memory, Equal, another value", []v1.Toleration{{Key: memory, Operator: v1.TolerationOpEqual, Value: "x"}}, evictdTaints},
			{"memory, NoExecute only", []v1.Toleration{{Key: memory, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}, evictdTaints},
			{"every taint", []v1.Toleration{{Operator: v1.TolerationOpExists}}, nil},
			{"every NoSchedule taint", []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}, nil},
			{"every NoExecute taint", []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}, evictdTaints},
			{"the kubelet's", []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}, evictdTaints},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ds, err := e.admin.AppsV1().DaemonSets(dsNamespace).Create(ctx, daemonSet("table", tc.have), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				if err != nil {
					t.Fatalf("dry-run create of DaemonSet with tolerations %+v: %v", tc.have, err)
				}
				want := append(slices.Clone(tc.have), evictdTolerations(tc.add...)...)
				if got := ds.Spec.Template.Spec.Tolerations; !reflect.DeepEqual(got, want) {
					t.Errorf("got %+v, want %+v", got, want)
				}
			})
		}
	})

	t.Run("pods that are not a DaemonSet's", func(t *testing.T) {
		ds, err := e.admin.AppsV1().DaemonSets(dsNamespace).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get DaemonSet agent: %v", err)
		}
		owner := func(uid types.UID) []metav1.OwnerReference {
			return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: uid, Controller: new(true)}}
		}
		for _, tc := range []struct {
			name   string
			owners []metav1.OwnerReference
		}{
			{"no owner", nil},
			{"forged owner: a DaemonSet that does not exist", owner(types.UID(uuid.NewUUID()))},
			{"forged owner: a real DaemonSet", owner(ds.UID)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := &v1.Pod{
					ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-", Namespace: dsNamespace, OwnerReferences: tc.owners},
					Spec: v1.PodSpec{
						NodeName:                     dsNode,
						AutomountServiceAccountToken: new(false),
						Containers:                   []v1.Container{{Name: "c", Image: "example.invalid/none"}},
					},
				}
				got, err := e.tenant.CoreV1().Pods(dsNamespace).Create(ctx, p, metav1.CreateOptions{})
				if err != nil {
					t.Fatalf("tenant's pod with owners %+v: %v", tc.owners, err)
				}
				if n := countKeys(got.Spec.Tolerations); len(n) != 0 {
					t.Errorf("tenant's pod %s with owners %+v got tolerations of evictd's taints: %+v", got.Name, tc.owners, got.Spec.Tolerations)
				}
			})
		}
	})
}
