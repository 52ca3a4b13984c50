package node

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/evictd/evictd/internal/nodestatus"
	"github.com/evictd/evictd/internal/testing/testnode"
	"github.com/evictd/evictd/signals"
)

// TestControllersNode runs the scenarios that involve the controllers and
// evictd's own life on one real node: DaemonSet pods ranked after the
// others of their tier, a PodDisruptionBudget respected by a soft eviction,
// an evicted ReplicaSet pod recreated once the taint is gone, and evictd
// killed and restarted under pressure.
func TestControllersNode(t *testing.T) {
	n := testnode.StartForTest(t, testnode.Options{Name: "e2e-controllers"})
	t.Run("daemonset pods after the others of their tier", func(t *testing.T) { daemonSet(t, n) })
	cleanPods(t, n)
	t.Run("pdb respected, replicaset pod recreated", func(t *testing.T) { pdbAndReplicaSet(t, n) })
	cleanPods(t, n)
	t.Run("evictd killed and restarted under pressure", func(t *testing.T) { restart(t, n) })
	cleanPods(t, n)
}

// trigger starts a Burstable pod under its request that takes the node
// across a threshold at 1200Mi of allocatable memory: it is never the one
// to go while BestEffort pods use more than they asked for.
func trigger(t *testing.T, n *testnode.Node) {
	p := labelled(testnode.Resources(n.Pod("trigger", "alloc", "--mib", "250", "--rate", "50"), "300Mi", "", ""))
	if _, err := n.Admin().CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// daemonSet runs a DaemonSet in default, a namespace the operator trusts
// here (--trusted-daemonset-namespaces): its pod ranks after plain though
// it uses more. (A DaemonSet of a namespace not trusted ranks as any other
// pod: TestSourceAgainstAPIServer.)
func daemonSet(t *testing.T, n *testnode.Node) {
	startEvictd(t, n, "--eviction-hard=memory.available<1200Mi", "--eviction-pressure-transition-period=5s",
		"--trusted-daemonset-namespaces=default")
	labels := map[string]string{"app": "agent", "e2e": "yes"}
	spec := n.PodSpec("alloc", "--mib", "400")
	spec.NodeName = "" // the scheduler places DaemonSet pods
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if _, err := n.Admin().AppsV1().DaemonSets("default").Create(t.Context(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var dsPod string
	poll(t, "the DaemonSet pod to run", 60*time.Second, func() (bool, string) {
		pods, err := n.Admin().CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=agent"})
		if err != nil || len(pods.Items) != 1 {
			return false, "no DaemonSet pod yet"
		}
		dsPod = pods.Items[0].Name
		return pods.Items[0].Status.Phase == v1.PodRunning, podSummary(&pods.Items[0])
	})
	run(t, n, labelled(n.Pod("plain", "alloc", "--mib", "300")))
	deleted := watchDeletion(t, n, "default", "plain")
	trigger(t, n)
	select {
	case <-deleted:
	case <-time.After(60 * time.Second):
		t.Fatalf("plain pod not evicted within 60 s")
	}
	poll(t, "plain to go", 30*time.Second, func() (bool, string) { return gone(t, n, "default", "plain") })
	alive(t, n, "default", dsPod)
	if k := evictions(t, n, "default", dsPod); k != 0 {
		t.Errorf("DaemonSet pod %s: %d Evicted events, want 0 (it uses more, but ranks after plain)", dsPod, k)
	}
}

func pdbAndReplicaSet(t *testing.T, n *testnode.Node) {
	startEvictd(t, n,
		"--eviction-soft=allocatableMemory.available<1200Mi",
		"--eviction-soft-grace-period=allocatableMemory.available=2s",
		"--eviction-max-pod-grace-period=5",
		"--eviction-pressure-transition-period=5s")
	c := n.Admin()
	replicaSet := func(name, mib string) {
		labels := map[string]string{"app": name, "e2e": "yes"}
		spec := n.PodSpec("alloc", "--mib", mib)
		spec.NodeName = ""
		one := int32(1)
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: appsv1.ReplicaSetSpec{
				Replicas: &one,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
			},
		}
		if _, err := c.AppsV1().ReplicaSets("default").Create(t.Context(), rs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	podOf := func(app string) (*v1.Pod, string) {
		pods, err := c.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return nil, err.Error()
		}
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp == nil && pods.Items[i].Status.Phase == v1.PodRunning {
				return &pods.Items[i], podSummary(&pods.Items[i])
			}
		}
		return nil, "no running pod"
	}
	replicaSet("guarded", "400")
	replicaSet("free", "300")
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &one,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
		},
	}
	if _, err := c.PolicyV1().PodDisruptionBudgets("default").Create(t.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var guarded, free *v1.Pod
	poll(t, "both ReplicaSet pods to run", 60*time.Second, func() (bool, string) {
		var d1, d2 string
		guarded, d1 = podOf("guarded")
		free, d2 = podOf("free")
		return guarded != nil && free != nil, d1 + "; " + d2
	})
	poll(t, "the PDB to allow no disruption", 30*time.Second, func() (bool, string) {
		p, err := c.PolicyV1().PodDisruptionBudgets("default").Get(t.Context(), "guarded", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.ObservedGeneration >= 1 && p.Status.CurrentHealthy == 1 && p.Status.DisruptionsAllowed == 0,
			"status not computed yet"
	})
	deleted := watchDeletion(t, n, "default", free.Name)
	trigger(t, n)
	select {
	case d := <-deleted:
		if g := evictedGrace(t, d, "default", free.Name, evictdLog(n)); g != 5 {
			t.Errorf("free pod deleted with grace %d, want min(5, 30) = 5", g)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the free ReplicaSet pod was not evicted within 60 s")
	}
	// The guarded pod ranks first (it uses more) but its PDB refuses.
	alive(t, n, "default", guarded.Name)
	// The ReplicaSet makes a new pod at once; the scheduler places it
	// once evictd's NoSchedule taint is gone.
	sawUnschedulable := false
	poll(t, "a new free pod to run", 90*time.Second, func() (bool, string) {
		pods, err := c.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=free"})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if p.Name == free.Name {
				continue
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse && hasTaint(t, n, memoryTaint) {
					sawUnschedulable = true
				}
			}
			return p.Status.Phase == v1.PodRunning, podSummary(&p)
		}
		return false, "no new pod"
	})
	t.Logf("new free pod held back by the taint while it was set: %v", sawUnschedulable)
	if hasTaint(t, n, memoryTaint) {
		t.Errorf("the new pod runs while the node still has %s", memoryTaint)
	}
	if k := evictionsOf(t, n, "default", free.Name); k != 1 {
		t.Errorf("free pod: %d Evicted events, want 1", k)
	}
}

func restart(t *testing.T, n *testnode.Node) {
	args := []string{"--eviction-hard=memory.available<1200Mi", "--eviction-pressure-transition-period=5s"}
	startEvictd(t, n, args...)
	// A critical pod puts the node under pressure that no eviction can
	// relieve: the condition stays True throughout.
	since := holdPressure(t, n, nativeScale)

	// The node is under pressure already: the victim is evictable from
	// the moment it is bound, running or still being created (under load
	// the pass may come before its container runs), so the test does not
	// wait for it to run.
	deleted := watchDeletion(t, n, "default", "victim")
	if _, err := n.Admin().CoreV1().Pods("default").Create(t.Context(), labelled(n.Pod("victim", "alloc", "--mib", "50")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-deleted:
	case <-time.After(30 * time.Second):
		t.Fatalf("victim not evicted within 30 s")
	}
	// Killed right after the eviction, as systemd would find it.
	if err := n.KillEvictd(); err != nil {
		t.Fatal(err)
	}
	if err := n.StartEvictd(t.Context(), args...); err != nil {
		t.Fatal(err)
	}
	poll(t, "victim to go", 30*time.Second, func() (bool, string) { return gone(t, n, "default", "victim") })
	// Two housekeeping intervals of the new evictd under pressure.
	time.Sleep(12 * time.Second)
	// The Evicted event goes out asynchronously, just before the eviction:
	// a kill -9 a moment later may lose it, never double it.
	if k := evictions(t, n, "default", "victim"); k > 1 {
		t.Errorf("victim: %d Evicted events across the restart, want at most 1", k)
	} else if k == 0 {
		t.Logf("victim: the Evicted event was lost with the killed evictd")
	}
	if v := metric(t, n, `evictd_evictions_total{eviction_signal="allocatableMemory.available",result="evicted",signal="allocatableMemory.available"}`); v > 0 {
		t.Errorf("the restarted evictd evicted %v more pods, with nothing evictable left", v)
	}
	c := condition(t, n, memoryCondition)
	if c.Status != v1.ConditionTrue || !c.LastTransitionTime.Equal(&since) {
		t.Errorf("condition across the restart: %s since %s, want True since %s", c.Status, c.LastTransitionTime, since)
	}
	reason := nodestatus.EventReason(signals.MemoryPressure, false)
	for _, e := range events(t, n, "default", "Node", n.Name(), reason) {
		if !e.LastTimestamp.Before(&since) {
			t.Errorf("node event %s at %s, after the pressure began at %s: the condition flapped", reason, e.LastTimestamp, since)
		}
	}
	alive(t, n, "kube-system", "critical")
}
