package podsource

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/qos"
	"github.com/evictd/evictd/internal/testing/testcluster"
	"github.com/evictd/evictd/signals"
)

const (
	thisNode  = "node-a"
	otherNode = "node-b"
)

// testLog sends the Source's log lines to t.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// TestSourceAgainstAPIServer runs the Source against a real kube-apiserver
// under evictd's own identity (deploy/, a token bound to the node, acting
// as the node): it
// lists only this node's active pods, converted as the kubelet sees them,
// with their PodDisruptionBudgets, and evictd's evictions in flight; keeps
// answering while the API server is down; and catches up when it returns.
func TestSourceAgainstAPIServer(t *testing.T) {
	c := testcluster.StartForTest(t, testcluster.Options{})
	ctx := t.Context()
	admin := c.AdminClient(t)

	submitted := createWorld(t, ctx, admin)
	createTerminating(t, ctx, admin)

	// evictd's production identity: deploy/ applied, a token bound to
	// this node, the pods read as the node itself.
	token, err := c.EvictdNodeToken(ctx, thisNode)
	if err != nil {
		t.Fatal(err)
	}
	evictd, err := kubeclient.NewForConfigAsNode(c.TokenConfig(token), thisNode)
	if err != nil {
		t.Fatalf("evictd client: %v", err)
	}
	// The token is evictd's, not an admin's.
	if err := evictd.Core().Get().Namespace("kube-system").Resource("secrets").Do(ctx).Error(); !apierrors.IsForbidden(err) {
		t.Fatalf("evictd listing secrets: err = %v, want Forbidden", err)
	}
	// Acting as its node, it may list no other node's pods.
	if _, err := evictd.Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + otherNode}); !apierrors.IsForbidden(err) {
		t.Fatalf("evictd listing the pods of %s: err = %v, want Forbidden", otherNode, err)
	}

	log := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	src := New(evictd, thisNode, 0, log)
	src.SetTrustedDaemonSetNamespaces([]string{"other"})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})

	begin := time.Now()
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := src.WaitForSync(syncCtx); err != nil {
		t.Fatalf("WaitForSync: %v", err)
	}
	t.Logf("caches synced in %s", time.Since(begin).Round(time.Millisecond))

	pods, err := src.Pods(ctx)
	if err != nil {
		t.Fatalf("Pods: %v", err)
	}
	checkPods(t, ctx, admin, pods)
	checkDefaultsAsAPIServer(t, ctx, admin, submitted)
	inFlight := src.InFlight()
	checkInFlight(t, ctx, admin, inFlight, "shop/evicted", "shop/evicted-failing")
	checkInFlightByWatch(t, ctx, admin, src)

	// The API server goes away: the cache still answers.
	begin = time.Now()
	if err := c.StopAPIServer(); err != nil {
		t.Fatalf("StopAPIServer: %v", err)
	}
	t.Logf("kube-apiserver stopped in %s", time.Since(begin).Round(time.Millisecond))
	if _, err := admin.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatalf("the API server still answers after StopAPIServer")
	}
	during, err := src.Pods(ctx)
	if err != nil {
		t.Fatalf("Pods while the API server is down: %v", err)
	}
	if !reflect.DeepEqual(during, pods) {
		t.Errorf("Pods while the API server is down =\n%+v\nwant what it said before\n%+v", during, pods)
	}
	if got := src.InFlight(); !reflect.DeepEqual(got, inFlight) {
		t.Errorf("InFlight while the API server is down = %+v, want what it said before %+v", got, inFlight)
	}

	begin = time.Now()
	if err := c.StartAPIServer(); err != nil {
		t.Fatalf("StartAPIServer: %v", err)
	}
	t.Logf("kube-apiserver ready again in %s", time.Since(begin).Round(time.Millisecond))

	// Changes after the return reach the cache: a new pod appears, a pod
	// being deleted (no kubelet confirms it) leaves the list.
	late := newPod("shop", "late", thisNode, func(p *v1.Pod) {
		p.Spec.Containers[0].Resources.Requests = rl("memory", "32Mi")
	})
	create(t, ctx, admin, late)
	if err := admin.CoreV1().Pods("shop").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete shop/web: %v", err)
	}
	begin = time.Now()
	var after []signals.Pod
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		after, err = src.Pods(ctx)
		return err == nil && slices.Contains(refs(after), "shop/late") && !slices.Contains(refs(after), "shop/web"), err
	})
	if err != nil {
		t.Fatalf("waiting for shop/late to appear and shop/web to go: %v; last list %q", err, refs(after))
	}
	t.Logf("new pod seen and deleted pod gone %s after the API server's return", time.Since(begin).Round(time.Millisecond))
	i := slices.Index(refs(after), "shop/late")
	if got := after[i]; got.MemoryRequest != 32*mi || got.QOS != signals.Burstable {
		t.Errorf("shop/late = %+v, want a 32Mi Burstable pod", got)
	}
}

// newPod is a pod bound to node, with one container "app" and no
// ServiceAccount token (no controller manager runs to make one).
func newPod(ns, name, node string, mutate ...func(*v1.Pod)) *v1.Pod {
	no := false
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.PodSpec{
			NodeName:                     node,
			AutomountServiceAccountToken: &no,
			Containers:                   []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func create(t *testing.T, ctx context.Context, client kubernetes.Interface, pod *v1.Pod) *v1.Pod {
	t.Helper()
	got, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return got
}

// createWorld makes the nodes, namespaces, RuntimeClass and pods the
// test lists, and returns the pods as submitted (before the API server's
// defaults), by namespace/name.
func createWorld(t *testing.T, ctx context.Context, admin kubernetes.Interface) map[string]*v1.Pod {
	t.Helper()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("create %s: %v", what, err)
		}
	}
	nodeUIDs := map[string]types.UID{}
	for _, n := range []string{thisNode, otherNode} {
		node, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		must("node "+n, err)
		if err == nil {
			nodeUIDs[n] = node.UID
		}
	}
	for _, ns := range []string{"shop", "other"} {
		_, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		must("namespace "+ns, err)
		_, err = admin.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		must("ServiceAccount "+ns+"/default", err)
	}
	_, err := admin.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "sandboxed"},
		Handler:    "runsc",
		Overhead:   &nodev1.Overhead{PodFixed: rl("cpu", "100m", "memory", "64Mi")},
	}, metav1.CreateOptions{})
	must("RuntimeClass sandboxed", err)

	always := v1.ContainerRestartPolicyAlways
	grace := int64(45)
	sandboxed := "sandboxed"
	scratchLimit := resource.MustParse("100Mi")
	pods := []*v1.Pod{
		newPod("shop", "web", thisNode, func(p *v1.Pod) {
			p.Labels = map[string]string{"app": "web"}
			p.Spec.Containers[0].Resources.Limits = rl("cpu", "500m", "memory", "256Mi", "ephemeral-storage", "1Gi")
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox", Resources: v1.ResourceRequirements{Limits: rl("cpu", "1", "memory", "512Mi")}}}
		}),
		newPod("shop", "api", thisNode, func(p *v1.Pod) {
			p.Labels = map[string]string{"app": "api"}
			p.Spec.RuntimeClassName = &sandboxed
			p.Spec.TerminationGracePeriodSeconds = &grace
			p.Spec.Containers[0].Resources.Requests = rl("memory", "100Mi", "ephemeral-storage", "2Gi")
			p.Spec.InitContainers = []v1.Container{
				{Name: "proxy", Image: "envoy", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: rl("memory", "50Mi")}},
				{Name: "migrate", Image: "busybox", Resources: v1.ResourceRequirements{Requests: rl("memory", "400Mi")}},
			}
		}),
		newPod("shop", "pod-level", thisNode, func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("memory", "300Mi"), Limits: rl("cpu", "1", "memory", "1Gi")}
			p.Spec.Containers[0].Resources.Requests = rl("memory", "100Mi", "ephemeral-storage", "1Gi")
		}),
		newPod("shop", "daemon", thisNode, func(p *v1.Pod) {
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "5f0c7a8e-0000-4000-8000-000000000001", Controller: &yes}}
		}),
		newPod("shop", "replica", thisNode, func(p *v1.Pod) {
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d4f", UID: "5f0c7a8e-0000-4000-8000-000000000002", Controller: &yes}}
		}),
		newPod("shop", "critical", thisNode, func(p *v1.Pod) { p.Spec.PriorityClassName = "system-node-critical" }),
		// A mirror pod as the kubelet creates it: protected.
		newPod("shop", "mirror", thisNode, func(p *v1.Pod) {
			yes := true
			p.Annotations = map[string]string{configMirrorAnnotation: "0123abcd", configSourceAnnotation: "file"}
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: thisNode, UID: nodeUIDs[thisNode], Controller: &yes}}
		}),
		// A tenant's pod that writes the same annotations: not protected.
		newPod("shop", "forged", thisNode, func(p *v1.Pod) {
			p.Annotations = map[string]string{configMirrorAnnotation: "0123abcd", configSourceAnnotation: "file"}
		}),
		newPod("shop", "volumes", thisNode, func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{
				{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &scratchLimit}}},
				{Name: "shm", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
				{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "c"}}}},
				{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
				{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}},
				{Name: "bundle", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{}}}},
				{Name: "logs", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/log"}}},
			}
		}),
		newPod("other", "web", thisNode, func(p *v1.Pod) { p.Labels = map[string]string{"app": "web"} }),
		// A DaemonSet pod of a namespace the operator trusts (other), beside
		// shop/daemon, a tenant's.
		newPod("other", "agent", thisNode, func(p *v1.Pod) {
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "5f0c7a8e-0000-4000-8000-000000000003", Controller: &yes}}
		}),
		newPod("shop", "elsewhere", otherNode, func(p *v1.Pod) { p.Labels = map[string]string{"app": "web"} }),
		newPod("shop", "finished", thisNode),
		newPod("shop", "leaving", thisNode),
	}
	submitted := map[string]*v1.Pod{}
	for _, p := range pods {
		submitted[p.Namespace+"/"+p.Name] = p.DeepCopy()
		got := create(t, ctx, admin, p)
		switch p.Name {
		case "finished":
			got.Status.Phase = v1.PodSucceeded
			_, err := admin.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, got, metav1.UpdateOptions{})
			must("status of shop/finished", err)
		case "leaving":
			// Bound to a node and not confirmed by a kubelet: it stays,
			// with deletionTimestamp set, for its grace period.
			must("deletion of shop/leaving", admin.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}))
		}
	}
	return submitted
}

// holdFinalizer keeps a deleted pod terminating: no controller removes it.
const holdFinalizer = "evictd.test/hold"

// createTerminating makes pods kept terminating by a finalizer, some with
// evictd's DisruptionTarget condition (set through the status subresource,
// as the Evicter sets it), and deletes them: only shop/evicted is one of
// evictd's evictions in flight on thisNode. All are left out of Pods.
func createTerminating(t *testing.T, ctx context.Context, admin kubernetes.Interface) {
	t.Helper()
	evictd := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: decide.DisruptionTargetReason, Message: "The node was low on resource: memory."}
	api := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}
	for _, tc := range []struct {
		name, node string
		cond       *v1.PodCondition
		phase      v1.PodPhase
	}{
		{name: "evicted", node: thisNode, cond: &evictd},
		{name: "deleted", node: thisNode},
		{name: "evicted-by-someone-else", node: thisNode, cond: &api},
		{name: "evicted-and-finished", node: thisNode, cond: &evictd, phase: v1.PodFailed},
		{name: "evicted-elsewhere", node: otherNode, cond: &evictd},
	} {
		pod := create(t, ctx, admin, newPod("shop", tc.name, tc.node, func(p *v1.Pod) { p.Finalizers = []string{holdFinalizer} }))
		markAndDelete(t, ctx, admin, pod, tc.cond, tc.phase)
	}
	// evictd writes an evicted pod Failed as the kubelet starts stopping
	// its containers, and deletes it once they have stopped: in flight
	// while the kubelet reports one running.
	for _, tc := range []struct {
		name    string
		running bool
	}{{"evicted-failing", true}, {"evicted-failed", false}} {
		pod := create(t, ctx, admin, newPod("shop", tc.name, thisNode))
		c := evictd
		c.LastTransitionTime = metav1.Now()
		pod.Status.Phase = v1.PodFailed
		pod.Status.Conditions = append(pod.Status.Conditions, c)
		state := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}
		if tc.running {
			state = v1.ContainerState{Running: &v1.ContainerStateRunning{}}
		}
		pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", Image: "registry.k8s.io/pause:3.10", ImageID: "sha256:1", State: state}}
		if _, err := admin.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("status of %s/%s: %v", pod.Namespace, pod.Name, err)
		}
	}
}

// markAndDelete sets cond (if not nil) and phase (if set) on pod through
// the status subresource, then deletes it, which its finalizer holds.
func markAndDelete(t *testing.T, ctx context.Context, admin kubernetes.Interface, pod *v1.Pod, cond *v1.PodCondition, phase v1.PodPhase) {
	t.Helper()
	if cond != nil || phase != "" {
		if cond != nil {
			c := *cond
			c.LastTransitionTime = metav1.Now()
			pod.Status.Conditions = append(pod.Status.Conditions, c)
		}
		if phase != "" {
			pod.Status.Phase = phase
		}
		if _, err := admin.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("status of %s/%s: %v", pod.Namespace, pod.Name, err)
		}
	}
	if err := admin.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	got, err := admin.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("%s/%s should be terminating: %v", pod.Namespace, pod.Name, err)
	}
}

// checkInFlight compares InFlight's answer with the pods named, as the API
// server has them.
func checkInFlight(t *testing.T, ctx context.Context, admin kubernetes.Interface, got []decide.InFlight, names ...string) {
	t.Helper()
	var want []decide.InFlight
	for _, ref := range names {
		ns, name, _ := strings.Cut(ref, "/")
		p, err := admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get %s: %v", ref, err)
		}
		if p.DeletionTimestamp == nil {
			// Written Failed by evictd, not yet deleted: the kubelet gives
			// it its own grace period from evictd's condition.
			grace := time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
			var since time.Time
			for _, c := range p.Status.Conditions {
				if c.Type == v1.DisruptionTarget {
					since = c.LastTransitionTime.Time
				}
			}
			want = append(want, decide.InFlight{Namespace: ns, Name: name, UID: string(p.UID), DeletionTimestamp: since.Add(grace), DeletionGracePeriod: grace})
			continue
		}
		if p.DeletionGracePeriodSeconds == nil {
			t.Fatalf("pod %s/%s is terminating without a deletionGracePeriodSeconds", ns, name)
		}
		want = append(want, decide.InFlight{Namespace: ns, Name: name, UID: string(p.UID), DeletionTimestamp: p.DeletionTimestamp.Time,
			DeletionGracePeriod: time.Duration(*p.DeletionGracePeriodSeconds) * time.Second})
	}
	if len(got) != len(want) {
		t.Fatalf("InFlight = %+v, want %+v", got, want)
	}
	for i := range want {
		if g, w := got[i], want[i]; g.Ref() != w.Ref() || g.UID != w.UID || !g.DeletionTimestamp.Equal(w.DeletionTimestamp) {
			t.Errorf("InFlight[%d] = %+v, want %+v", i, g, w)
		}
	}
}

// checkInFlightByWatch: an eviction made after the first list reaches
// InFlight through the watch, with the condition kept by slim; once the
// pod has finished it leaves InFlight.
func checkInFlightByWatch(t *testing.T, ctx context.Context, admin kubernetes.Interface, src *Source) {
	t.Helper()
	pod := create(t, ctx, admin, newPod("shop", "evicted-late", thisNode, func(p *v1.Pod) { p.Finalizers = []string{holdFinalizer} }))
	markAndDelete(t, ctx, admin, pod, &v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: decide.DisruptionTargetReason}, "")
	waitInFlight(t, ctx, src, "shop/evicted", "shop/evicted-failing", "shop/evicted-late")
	checkInFlight(t, ctx, admin, src.InFlight(), "shop/evicted", "shop/evicted-failing", "shop/evicted-late")

	// The kubelet reports the pod's containers stopped: a terminal phase.
	p, err := admin.CoreV1().Pods("shop").Get(ctx, "evicted-late", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get shop/evicted-late: %v", err)
	}
	p.Status.Phase = v1.PodFailed
	if _, err := admin.CoreV1().Pods("shop").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status of shop/evicted-late: %v", err)
	}
	waitInFlight(t, ctx, src, "shop/evicted", "shop/evicted-failing")
}

// waitInFlight waits until InFlight names the pods refs, in that order.
func waitInFlight(t *testing.T, ctx context.Context, src *Source, refs ...string) {
	t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got = got[:0]
		for _, f := range src.InFlight() {
			got = append(got, f.Ref())
		}
		return slices.Equal(got, refs), nil
	})
	if err != nil {
		t.Fatalf("InFlight names %q, want %q: %v", got, refs, err)
	}
}

// checkPods compares the Source's answer with the pods as written by hand.
func checkPods(t *testing.T, ctx context.Context, admin kubernetes.Interface, got []signals.Pod) {
	t.Helper()
	grace30, grace45 := int64(30), int64(45)
	c := func(name string, memory, disk int64) signals.Container {
		return signals.Container{Name: name, MemoryRequest: memory, EphemeralStorageRequest: disk}
	}
	plain := func(ns, name string) signals.Pod {
		return signals.Pod{Namespace: ns, Name: name, QOS: signals.BestEffort, Containers: []signals.Container{c("app", 0, 0)}, TerminationGracePeriodSeconds: &grace30, RestartAlways: true}
	}
	with := func(p signals.Pod, f func(*signals.Pod)) signals.Pod { f(&p); return p }
	want := []signals.Pod{
		with(plain("other", "agent"), func(p *signals.Pod) { p.DaemonSet = true }),
		with(plain("other", "web"), func(*signals.Pod) {}),
		with(plain("shop", "api"), func(p *signals.Pod) {
			p.QOS = signals.Burstable
			p.MemoryRequest = (400 + 50 + 64) * mi // max(100+50, 400+50) + overhead
			p.EphemeralStorageRequest = 2048 * mi
			p.Containers = []signals.Container{c("app", 100*mi, 2048*mi), c("proxy", 50*mi, 0), c("migrate", 400*mi, 0)}
			p.TerminationGracePeriodSeconds = &grace45
		}),
		with(plain("shop", "critical"), func(p *signals.Pod) { p.Priority = 2000001000 }),
		// A DaemonSet's pod, but shop is not trusted with the later turn.
		plain("shop", "daemon"),
		plain("shop", "forged"),
		with(plain("shop", "mirror"), func(p *signals.Pod) { p.Mirror = true }),
		with(plain("shop", "pod-level"), func(p *signals.Pod) {
			p.QOS = signals.Burstable
			p.MemoryRequest = 300 * mi // the pod's, not its container's; and no ephemeral-storage
			p.PodLevelMemoryRequest = &signals.Request{Bytes: 300 * mi, Text: "300Mi"}
			p.Containers = []signals.Container{c("app", 100*mi, 1024*mi)}
		}),
		plain("shop", "replica"),
		with(plain("shop", "volumes"), func(p *signals.Pod) {
			p.LocalVolumes = []string{"scratch", "config", "logs"}
			p.EmptyDirLimits = map[string]int64{"scratch": 100 * mi}
		}),
		with(plain("shop", "web"), func(p *signals.Pod) {
			p.QOS = signals.Guaranteed
			p.MemoryRequest = 512 * mi // the init container's
			p.EphemeralStorageRequest = 1024 * mi
			p.EphemeralStorageLimit = 1024 * mi
			p.Containers = []signals.Container{c("app", 256*mi, 1024*mi), c("init", 512*mi, 0)}
			p.Containers[0].EphemeralStorageLimit = 1024 * mi
		}),
	}
	for i := range want {
		server, err := admin.CoreV1().Pods(want[i].Namespace).Get(ctx, want[i].Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get %s: %v", want[i].Ref(), err)
		}
		want[i].UID = string(server.UID)
	}
	if !reflect.DeepEqual(refs(got), refs(want)) {
		t.Fatalf("Pods lists %q, want %q (only %s's active pods)", refs(got), refs(want), thisNode)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("pod %s:\n got %s\nwant %s", want[i].Ref(), show(got[i]), show(want[i]))
		}
	}
}

// checkDefaultsAsAPIServer checks the fallbacks for pods that did not come
// from the API server against the API server itself: converting a pod as
// submitted (no defaults, no status.qosClass) gives what converting the
// stored pod gives. Pods whose admission adds fields (RuntimeClass
// overhead, priority) are left out.
func checkDefaultsAsAPIServer(t *testing.T, ctx context.Context, admin kubernetes.Interface, submitted map[string]*v1.Pod) {
	t.Helper()
	for ref, sub := range submitted {
		if sub.Spec.RuntimeClassName != nil || sub.Spec.PriorityClassName != "" || sub.Name == "finished" || sub.Name == "leaving" {
			continue
		}
		server, err := admin.CoreV1().Pods(sub.Namespace).Get(ctx, sub.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get %s: %v", ref, err)
		}
		if server.Status.QOSClass == "" {
			t.Errorf("%s: the API server set no status.qosClass", ref)
		}
		if got := qos.Class(sub); got != server.Status.QOSClass {
			t.Errorf("%s: QoS computed from the submitted pod = %s, API server says %s", ref, got, server.Status.QOSClass)
		}
		fromSub, fromServer := Convert(sub), Convert(server)
		fromSub.UID, fromSub.TerminationGracePeriodSeconds = fromServer.UID, fromServer.TerminationGracePeriodSeconds
		if !reflect.DeepEqual(fromSub, fromServer) {
			t.Errorf("%s: converted as submitted\n%s\nas stored\n%s", ref, show(fromSub), show(fromServer))
		}
	}
}

func refs(pods []signals.Pod) []string {
	out := make([]string, len(pods))
	for i := range pods {
		out[i] = pods[i].Ref()
	}
	return out
}

// show prints a signals.Pod with its grace period's value, not its address.
func show(p signals.Pod) string {
	grace := "nil"
	if p.TerminationGracePeriodSeconds != nil {
		grace = fmt.Sprint(*p.TerminationGracePeriodSeconds)
	}
	p.TerminationGracePeriodSeconds = nil
	return fmt.Sprintf("%+v grace=%s", p, grace)
}
