package evict

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// TestSweep: an eviction whose containers the kubelet has not reported
// stopped within its bound leaves the pod Failed, and Evict says so
// (decide.ErrNotGoneInTime); Run deletes it once the kubelet reports them
// stopped, and no other Failed pod: not one another writer failed, not one
// still stopping, not one being deleted.
func TestSweep(t *testing.T) {
	e := newEnv(t, testcluster.Options{})
	ns := e.namespace(t, "sweep")
	ev, errs := e.newEvicter(t, Config{CleanupTimeout: time.Second, PollInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ev.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	// Failed by another writer (the kubelet, say), its containers stopped.
	other := e.runningPod(t, ns, "failed-elsewhere", nil, 30)
	other.Status.Phase = v1.PodFailed
	other.Status.Conditions = append(other.Status.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
		Reason: "TerminationByKubelet", LastTransitionTime: metav1.Now()})
	other.Status.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
	if _, err := e.admin.CoreV1().Pods(ns).UpdateStatus(t.Context(), other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Evicted, but no kubelet reports its containers stopped in time.
	pod := e.runningPod(t, ns, "slow", nil, 30)
	seen := e.fakeKubeletAfter(t, ns, "slow", -1)
	r := request(pod, false, 1, message("slow"))
	err := ev.Evict(t.Context(), r)
	if !errors.Is(err, decide.ErrNotGoneInTime) {
		t.Fatalf("Evict = %v, want an error wrapping decide.ErrNotGoneInTime", err)
	}
	t.Logf("Evict: %v", err)
	// Still stopping: left as it is.
	time.Sleep(500 * time.Millisecond)
	got := e.getPod(t, ns, "slow")
	if got == nil || got.DeletionTimestamp != nil || got.Status.Phase != v1.PodFailed {
		t.Fatalf("pod still stopping = %+v, want it Failed and not deleted", got)
	}
	// The kubelet reports its containers stopped: Run deletes it.
	e.stopContainers(t, t.Context(), got, 0)
	select {
	case last := <-seen:
		if last.Status.Phase != v1.PodFailed {
			t.Errorf("deleted in phase %s, want Failed", last.Status.Phase)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not delete the evicted pod once its containers had stopped")
	}
	// The other one stays.
	err = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, time.Second, true, func(context.Context) (bool, error) {
		return e.getPod(t, ns, "failed-elsewhere") == nil, nil
	})
	if err == nil {
		t.Error("Run deleted a pod another writer failed")
	}
	checkNoAPIErrors(t, errs)
}
