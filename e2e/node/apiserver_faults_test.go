package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/testing/testnode"
)

// TestAPIServerFaults runs, on one real node, a hard memory threshold
// crossed while the API server is down, and the pod informer after the
// API server's restart.
func TestAPIServerFaults(t *testing.T) {
	n := testnode.StartForTest(t, testnode.Options{Name: "e2e-apifaults"})
	apiServerFaults(t, n, n.Cluster(), nativeScale)
	cleanPods(t, n)
}

// apiServer stops and starts the API server n's kubelet and evictd use:
// the node's own control plane (a *testcluster.Cluster), or the host's of
// a test guest (hostControlPlane).
type apiServer interface {
	StopAPIServer() error
	StartAPIServer() error
}

// apiServerFaults runs TestAPIServerFaults' scenarios on n, whose API
// server api stops and starts, with the memory sizes sc gives.
func apiServerFaults(t *testing.T, n *testnode.Node, api apiServer, sc memoryScale) {
	startEvictd(t, n,
		"--eviction-hard=memory.available<"+sc.quantity(500),
		"--eviction-pressure-transition-period=5s",
		"--local-kill-after=2s",
		// The --local-kill-after path: without the immediate stop, the
		// hog is stopped once the API server has not answered for 2 s,
		// not at the crossing, where it would be gone within tens of
		// milliseconds, a window the test's own sampler (every 20 ms)
		// missed under a CPU burner. TestMemoryNode's allocatable
		// scenario and TestDaemonSetNode run the immediate stop.
		"--hard-eviction-local-stop=false")
	t.Run("API server down: the hog's containers are stopped locally, the eviction completed when it returns", func(t *testing.T) {
		apiServerDown(t, n, api, sc)
	})
	t.Run("the informer watches again after the restart", func(t *testing.T) { watchResumed(t, n, sc) })
}

// apiServerDown: a Guaranteed pod and a Burstable pod idle, a BestEffort
// hog grows; the API server is stopped before the hog crosses
// allocatableMemory.available<500Mi (sizes scaled by sc). evictd cannot
// reach it, and after --local-kill-after stops the hog's containers
// through the CRI and owes the eviction (the immediate stop is off here);
// the other pods keep running. When the API server is back, the owed
// eviction goes through it: the hog is deleted with evictd's
// DisruptionTarget condition and an Evicted event.
func apiServerDown(t *testing.T, n *testnode.Node, api apiServer, sc memoryScale) {
	ctx := t.Context()
	guaranteed := run(t, n, labelled(testnode.Resources(n.Pod("guaranteed", "alloc", "--mib", sc.mibArg(50)), sc.quantity(100), sc.quantity(100), "100m")))
	burstable := run(t, n, labelled(testnode.Resources(n.Pod("burstable", "alloc", "--mib", sc.mibArg(50)), sc.quantity(100), "", "")))
	// 2300 MiB at 50 MiB/s: about 30 s to the threshold (1548 MiB in use),
	// 10 s more to the kubepods cgroup's limit (at the native scale; a
	// guest's scale halves the sizes and slows the rate).
	hogPod := labelled(n.Pod("hog", "alloc", "--mib", sc.mibArg(2300), "--rate", sc.rateArg(50)))
	hogPod.Finalizers = []string{holdFinalizer}
	// Not restarted by the kubelet once stopped, so that it does not grow
	// back while the eviction is completed (docs/OPERATIONS.md: the trade-off).
	hogPod.Spec.RestartPolicy = v1.RestartPolicyNever
	t.Cleanup(func() { release(t, n, "hog") })
	hog := run(t, n, hogPod)
	s := sample(t, n, int64(sc.mib(500))<<20)
	oomKilled := watchOOMKills(t, n)

	apiDown := true
	if err := api.StopAPIServer(); err != nil {
		t.Fatalf("stop the API server: %v", err)
	}
	t.Cleanup(func() {
		if apiDown { // the node's cleanup needs it
			if err := api.StartAPIServer(); err != nil {
				t.Errorf("start the API server: %v", err)
			}
		}
	})
	if !s.crossedAt().IsZero() {
		t.Fatal("the hog crossed the threshold before the API server was stopped: the scenario needs a slower hog on this machine")
	}
	t.Logf("API server stopped; waiting for the hog to cross the threshold")

	rs := n.Runtime().RuntimeService()
	hogContainer := containerID(t, hog)
	poll(t, "evictd to stop the hog's container through the CRI", 90*time.Second, func() (bool, string) {
		st, err := rs.ContainerStatus(ctx, hogContainer, false)
		if err != nil {
			return false, err.Error()
		}
		state := st.GetStatus().GetState()
		return state == runtimeapi.ContainerState_CONTAINER_EXITED, state.String()
	})
	crossed := s.crossedAt()
	if crossed.IsZero() {
		t.Fatal("the hog's container stopped before the test saw the threshold crossed")
	}
	t.Logf("threshold crossed at %s; lowest available %d MiB", crossed.Format(time.StampMilli), s.minAvail>>20)
	// The eviction is owed once the local stop has returned.
	poll(t, "the eviction to be owed", 30*time.Second, func() (bool, string) {
		v := metric(t, n, "evictd_evictions_owed")
		return v == 1, fmt.Sprintf("evictd_evictions_owed = %v", v)
	})
	if v := metric(t, n, `evictd_evictions_total{eviction_signal="allocatableMemory.available",result="stopped-locally",signal="allocatableMemory.available"}`); v < 1 {
		t.Errorf(`evictd_evictions_total{result="stopped-locally"} = %v, want at least 1`, v)
	}
	if v := metric(t, n, "evictd_evictions_owed"); v != 1 {
		t.Errorf("evictd_evictions_owed = %v, want 1", v)
	}
	log := tail(n.LogPath("evictd"), 300)
	for _, want := range []string{"the API server did not answer; stopped the pod's containers through the runtime", "pod=default/hog"} {
		if !strings.Contains(log, want) {
			t.Errorf("evictd's log lacks %q:\n%s", want, log)
		}
	}
	for _, p := range []*v1.Pod{guaranteed, burstable} {
		st, err := rs.ContainerStatus(ctx, containerID(t, p), false)
		if err != nil {
			t.Fatalf("CRI status of %s: %v", p.Name, err)
		}
		if state := st.GetStatus().GetState(); state != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("pod %s's container is %s, want running", p.Name, state)
		}
	}
	if k := oomKilled(); k != 0 {
		t.Errorf("the kernel OOM-killed %d processes in kubepods while the API server was down", k)
	}

	if err := api.StartAPIServer(); err != nil {
		t.Fatalf("start the API server: %v", err)
	}
	apiDown = false
	t.Logf("API server started again")
	// The finalizer keeps the hog, terminating, until its condition is read.
	// evictd writes its DisruptionTarget reason just after the Eviction API
	// has accepted (replacing the API server's own), so wait for both.
	var last *v1.Pod
	poll(t, "the owed eviction to be completed", 120*time.Second, func() (bool, string) {
		p, err := n.Admin().CoreV1().Pods("default").Get(ctx, "hog", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		last = p
		return p.DeletionTimestamp != nil && hasEvictdTarget(p), fmt.Sprintf("%s, conditions %+v", podSummary(p), p.Status.Conditions)
	})
	if last.UID != hog.UID || !hasEvictdTarget(last) {
		t.Errorf("hog as evicted: %s, UID %s (want %s), conditions %+v; want DisruptionTarget reason %s",
			podSummary(last), last.UID, hog.UID, last.Status.Conditions, decide.DisruptionTargetReason)
	}
	release(t, n, "hog")
	poll(t, "the hog to go", sc.wait(60*time.Second), func() (bool, string) { return gone(t, n, "default", "hog") })
	poll(t, "the Evicted event", 30*time.Second, func() (bool, string) {
		evs := evictedEvents(t, n, "default", "hog")
		for _, e := range evs {
			if e.Source.Component == "evictd" && strings.HasPrefix(e.Message, "The node was low on resource: memory.") {
				return true, e.Message
			}
		}
		return false, "no Evicted event from evictd"
	})
	poll(t, "evictd_evictions_owed to drop to 0", 30*time.Second, func() (bool, string) {
		v := metric(t, n, "evictd_evictions_owed")
		return v == 0, fmt.Sprint("evictd_evictions_owed ", v)
	})
	if log := tail(n.LogPath("evictd"), 300); !strings.Contains(log, "owed eviction completed") {
		t.Errorf("evictd's log does not say the owed eviction was completed:\n%s", log)
	}
	alive(t, n, "default", "guaranteed")
	alive(t, n, "default", "burstable")
}

// watchResumed: after the API server's restart, a pod created on the node
// reaches evictd through its informer (re-listed and watching again): when
// it hogs, evictd evicts it through the API server; a pod evictd did not
// know of could not be chosen.
func watchResumed(t *testing.T, n *testnode.Node, sc memoryScale) {
	ctx := t.Context()
	deleted := watchDeletion(t, n, "default", "late")
	if _, err := n.Admin().CoreV1().Pods("default").Create(ctx,
		labelled(n.Pod("late", "alloc", "--mib", sc.mibArg(2300), "--rate", sc.rateArg(100))), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The 90 s run from when the kubelet runs the pod, not from its
	// creation: after the restart a loaded node's kubelet took 80 s to
	// start it, and a pod that does not run cannot hog.
	created := time.Now()
	var d deletion
	ran := false
	for !ran {
		select {
		case d = <-deleted:
			ran = true
			continue
		case <-time.After(time.Second):
		}
		p, err := n.Admin().CoreV1().Pods("default").Get(ctx, "late", metav1.GetOptions{})
		if err == nil && p.Status.Phase == v1.PodRunning {
			ran = true
		} else if time.Since(created) > 180*time.Second {
			t.Fatalf("the kubelet did not run the new hog within 180 s (last: %v)", err)
		}
	}
	t.Logf("the kubelet ran the new hog %s after its creation", time.Since(created).Round(time.Second))
	if d == (deletion{}) {
		select {
		case d = <-deleted:
		case <-time.After(90 * time.Second):
			t.Fatal("the new hog was not evicted within 90 s of running")
		}
	}
	if g := evictedGrace(t, d, "default", "late", evictdLog(n)); g != 1 {
		t.Errorf("hard threshold: deletion grace %d s, want 1", g)
	}
	poll(t, "the new hog to go", sc.wait(60*time.Second), func() (bool, string) { return gone(t, n, "default", "late") })
	if log := tail(n.LogPath("evictd"), 100); !strings.Contains(log, "default/late ranks first") {
		t.Errorf("evictd's log has no decision naming the new pod:\n%s", log)
	}
	alive(t, n, "default", "guaranteed")
	alive(t, n, "default", "burstable")
}

// holdFinalizer keeps an evicted pod, terminating, until release.
const holdFinalizer = "e2e.evictd.io/hold"

// release removes holdFinalizer from the pod, if it is still there.
func release(t *testing.T, n *testnode.Node, name string) {
	t.Helper()
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	_, err := n.Admin().CoreV1().Pods("default").Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("remove the finalizer of %s: %v", name, err)
	}
}

func hasEvictdTarget(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == decide.DisruptionTargetReason {
			return true
		}
	}
	return false
}

// containerID is the runtime's ID of the pod's first container.
func containerID(t *testing.T, p *v1.Pod) string {
	t.Helper()
	if len(p.Status.ContainerStatuses) == 0 {
		t.Fatalf("pod %s has no container status", p.Name)
	}
	id := p.Status.ContainerStatuses[0].ContainerID
	_, after, ok := strings.Cut(id, "://")
	if !ok {
		t.Fatalf("pod %s: container ID %q is not runtime://id", p.Name, id)
	}
	return after
}
