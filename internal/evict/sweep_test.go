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
	"github.com/evictd/evictd/signals"
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

// TestParseEvicted: the annotation's value is the eviction's time and
// grace period; another form (an older evictd's time alone, a tenant's
// word) is none.
func TestParseEvicted(t *testing.T) {
	at := time.Date(2026, 11, 27, 13, 22, 8, 900_000_000, time.UTC)
	for _, tc := range []struct {
		v     string
		ok    bool
		grace time.Duration
	}{
		{evictedValue(at, 1), true, time.Second},
		{evictedValue(at, 30), true, 30 * time.Second},
		{at.Format(time.RFC3339Nano), false, 0},
		{"2026-11-27T13:22:08Z grace=-5s", false, 0},
		{"soon grace=1s", false, 0},
		{"", false, 0},
	} {
		got, grace, ok := parseEvicted(tc.v)
		if ok != tc.ok || ok && (!got.Equal(at) || grace != tc.grace) {
			t.Errorf("parseEvicted(%q) = %s, %s, %v; want %s, %s, %v", tc.v, got, grace, ok, at, tc.grace, tc.ok)
		}
	}
}

// TestSweepStopsOverdue: a pod an earlier evictd wrote Failed whose
// container still runs past its eviction's grace period has its
// containers stopped through the runtime by Run, once, with a grace
// period of 1 s; one whose eviction's time has not passed is left alone.
func TestSweepStopsOverdue(t *testing.T) {
	e := newEnv(t, testcluster.Options{})
	ns := e.namespace(t, "overdue")
	stops := make(chan string, 4)
	ev, _ := e.newEvicter(t, Config{PollInterval: 50 * time.Millisecond,
		StopLocally: func(_ context.Context, p *signals.Pod, grace int64) error {
			if grace != 1 {
				t.Errorf("stop of %s with grace %d, want 1", p.Name, grace)
			}
			stops <- p.Name
			return nil
		}})
	// Written Failed by an evictd that was then killed: the annotation
	// says a hard eviction (grace 1 s) 1 s ago, and one a minute ahead.
	for name, at := range map[string]time.Time{"overdue": time.Now().Add(-time.Second), "later": time.Now().Add(time.Minute)} {
		pod := e.runningPod(t, ns, name, nil, 30)
		pod.Annotations = map[string]string{EvictedAnnotation: evictedValue(at, 1)}
		pod, err := e.admin.CoreV1().Pods(ns).Update(t.Context(), pod, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status.Phase = v1.PodFailed
		pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
			Reason: decide.DisruptionTargetReason, LastTransitionTime: metav1.NewTime(at)})
		if _, err := e.admin.CoreV1().Pods(ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ev.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case name := <-stops:
		if name != "overdue" {
			t.Errorf("stopped %s, want overdue", name)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not stop the overdue pod's containers")
	}
	select {
	case name := <-stops:
		t.Errorf("a second stop, of %s", name)
	case <-time.After(3 * time.Second):
	}
}
