package nodestatus_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/nodestatus"
	"github.com/evictd/evictd/signals"
)

const (
	memory = signals.MemoryPressure
	disk   = signals.DiskPressure
	pid    = signals.PIDPressure

	memCond  = "EvictdMemoryPressure"
	diskCond = "EvictdDiskPressure"
	memTaint = "evictd.io/memory-pressure"
)

// TestTransitionsAndHeartbeats: a transition is written at once (condition,
// taint with the configured effect, one event), lastTransitionTime moves
// only on transitions, heartbeats come every interval and not more often,
// and a restarted evictd keeps the node's transition time without an event.
func TestTransitionsAndHeartbeats(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	ctx := context.Background()
	const name = "node-a"
	node := createNode(t, e.admin, name)
	hist := watchNode(t, e.admin, name, node.ResourceVersion)

	const interval = 10 * time.Second
	fc := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	var errs apiErrors
	p, stop := startPublisher(t, e, nodestatus.Config{NodeName: name, TaintEffect: v1.TaintEffectPreferNoSchedule,
		UpdateFrequency: time.Second, ReportFrequency: interval, Jitter: noJitter, Clock: fc, OnAPIError: errs.record})

	// Memory pressure starts.
	t1 := fc.Now()
	on80 := "threshold memory.available<100Mi is met: available 80Mi of 2Gi"
	p.Publish(t1, []decide.PressureReport{
		report(memory, true, t1, on80),
		report(disk, false, time.Time{}, "no disk threshold is met"),
		report(pid, false, time.Time{}, "no pid threshold is met"),
	})
	eventually(t, 10*time.Second, func() error {
		n, err := e.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := wantCondition(n, memCond, v1.ConditionTrue, "EvictdHasMemoryPressure", on80, t1, t1); err != nil {
			return err
		}
		if err := wantCondition(n, diskCond, v1.ConditionFalse, "EvictdHasNoDiskPressure", "no disk threshold is met", t1, t1); err != nil {
			return err
		}
		if taint, ok := hasTaint(n, memTaint); !ok || taint.Effect != v1.TaintEffectPreferNoSchedule {
			return fmt.Errorf("taints %v, want %s:PreferNoSchedule", n.Spec.Taints, memTaint)
		}
		return wantEvents(ctx, e, name, map[string]int32{"Warning/EvictdMemoryPressure": 1})
	})
	_, events, err := eventCounts(ctx, e.admin, name)
	if err != nil {
		t.Fatal(err)
	}
	ev := events[0]
	if ev.InvolvedObject.Kind != "Node" || ev.InvolvedObject.UID != node.UID || ev.InvolvedObject.Namespace != "" ||
		ev.Message != on80 || ev.Source.Component != "evictd" || ev.Source.Host != name {
		t.Errorf("event %+v: want one about node %s (UID %s) with message %q from evictd", ev, name, node.UID, on80)
	}

	// No heartbeat before the interval, even when a pass reports a new
	// message; at the interval, one with that message.
	on70 := strings.Replace(on80, "80Mi", "70Mi", 1)
	waitIdle(t, fc)
	fc.Step(interval - time.Second)
	p.Publish(fc.Now(), []decide.PressureReport{report(memory, true, t1, on70)})
	waitIdle(t, fc)
	fc.Step(time.Second)
	eventually(t, 10*time.Second, func() error {
		n, err := e.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return wantCondition(n, memCond, v1.ConditionTrue, "EvictdHasMemoryPressure", on70, t1, t1.Add(interval))
	})

	// Memory pressure ends between two heartbeats: written at once.
	waitIdle(t, fc)
	fc.Step(3 * time.Second)
	t2 := fc.Now()
	off := "no memory threshold is met"
	p.Publish(t2, []decide.PressureReport{report(memory, false, t2, off)})
	eventually(t, 10*time.Second, func() error {
		n, err := e.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := wantCondition(n, memCond, v1.ConditionFalse, "EvictdHasNoMemoryPressure", off, t2, t2); err != nil {
			return err
		}
		if _, ok := hasTaint(n, memTaint); ok {
			return fmt.Errorf("taint %s still present", memTaint)
		}
		return wantEvents(ctx, e, name, map[string]int32{"Warning/EvictdMemoryPressure": 1, "Normal/EvictdNoMemoryPressure": 1})
	})
	waitIdle(t, fc)
	fc.Step(interval)
	eventually(t, 10*time.Second, func() error {
		n, err := e.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return wantCondition(n, memCond, v1.ConditionFalse, "EvictdHasNoMemoryPressure", off, t2, t2.Add(interval))
	})
	eventually(t, 10*time.Second, func() error {
		if got := nodestatus.LastWritten(p); !got.Equal(t2.Add(interval)) {
			return fmt.Errorf("LastWritten() = %s, want %s", got, t2.Add(interval))
		}
		return nil
	})

	// Every version the API server stored: heartbeats exactly at the
	// interval or on a transition, the transition time moving only on one,
	// the taint flipping once each way, the kubelet's conditions untouched.
	stop()
	type beat struct{ heartbeat, transition time.Time }
	var beats []beat
	taintFlips := []bool{false} // as created
	for _, n := range hist.upToDate(t, e.admin, name) {
		if c := condition(n, memCond); c != nil {
			b := beat{c.LastHeartbeatTime.UTC(), c.LastTransitionTime.UTC()}
			if len(beats) == 0 || beats[len(beats)-1] != b {
				beats = append(beats, b)
			}
		}
		if _, ok := hasTaint(n, memTaint); taintFlips[len(taintFlips)-1] != ok {
			taintFlips = append(taintFlips, ok)
		}
		for _, kc := range node.Status.Conditions {
			if c := condition(n, kc.Type); c == nil || !equalCondition(*c, kc) {
				t.Errorf("version %s: the kubelet's %s is %+v, want %+v", n.ResourceVersion, kc.Type, c, kc)
			}
		}
	}
	wantBeats := []beat{{t1.UTC(), t1.UTC()}, {t1.Add(interval).UTC(), t1.UTC()}, {t2.UTC(), t2.UTC()}, {t2.Add(interval).UTC(), t2.UTC()}}
	if !slices.Equal(beats, wantBeats) {
		t.Errorf("heartbeat/transition times written: %v, want %v", beats, wantBeats)
	}
	if want := []bool{false, true, false}; !slices.Equal(taintFlips, want) {
		t.Errorf("taint presence over the versions: %v, want %v", taintFlips, want)
	}
	if n := errs.count(metrics.APINodePatch) + errs.count(metrics.APINodeTaints); n != 0 {
		t.Errorf("%d API errors, want none", n)
	}

	// evictd restarts: the tracker has never seen memory pressure in this
	// process. The node's transition time stands and no event is emitted;
	// the transition after it gets its event as usual (and, events being
	// sent in order, proves none was sent before it).
	fc2 := clocktesting.NewFakeClock(t2.Add(time.Minute))
	p2, _ := startPublisher(t, e, nodestatus.Config{NodeName: name, TaintEffect: v1.TaintEffectPreferNoSchedule,
		UpdateFrequency: time.Second, ReportFrequency: interval, Jitter: noJitter, Clock: fc2, OnAPIError: errs.record})
	t3 := fc2.Now()
	p2.Publish(t3, []decide.PressureReport{report(memory, false, time.Time{}, off)})
	eventually(t, 10*time.Second, func() error {
		n, err := e.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return wantCondition(n, memCond, v1.ConditionFalse, "EvictdHasNoMemoryPressure", off, t2, t3)
	})
	waitIdle(t, fc2)
	fc2.Step(time.Second)
	p2.Publish(fc2.Now(), []decide.PressureReport{report(memory, true, fc2.Now(), on80)})
	eventually(t, 10*time.Second, func() error {
		return wantEvents(ctx, e, name, map[string]int32{"Warning/EvictdMemoryPressure": 2, "Normal/EvictdNoMemoryPressure": 1})
	})
}

// TestCatchesUpAfterAPIServerOutage: transitions published while the API
// server is away are retried with jittered backoff; after its return the
// node gets the latest state (never an intermediate one) within one
// retry delay, and every transition the publisher saw gets one event, late,
// saying when it happened.
func TestCatchesUpAfterAPIServerOutage(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	ctx := context.Background()
	const name = "node-c"
	createNode(t, e.admin, name)

	const interval = 10 * time.Second
	fc := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	var errs apiErrors
	// Retries: 1s doubling to 4s, jittered up to 100%: at most 8s apart.
	retry := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 1, Steps: math.MaxInt32, Cap: 4 * time.Second}
	p, _ := startPublisher(t, e, nodestatus.Config{NodeName: name,
		UpdateFrequency: time.Second, ReportFrequency: interval, Jitter: noJitter, Retry: retry, Clock: fc, OnAPIError: errs.record})

	t0 := fc.Now()
	p.Publish(t0, []decide.PressureReport{report(memory, false, time.Time{}, "mem clear"), report(disk, false, time.Time{}, "disk clear")})
	eventually(t, 10*time.Second, func() error {
		if nodestatus.LastWritten(p).IsZero() {
			return errors.New("nothing written yet")
		}
		return nil
	})
	before := nodestatus.LastWritten(p)

	if err := e.cluster.StopAPIServer(); err != nil {
		t.Fatalf("stop kube-apiserver: %v", err)
	}
	// Memory pressure starts: the write fails and is retried.
	waitIdle(t, fc)
	fc.Step(2 * time.Second)
	t1 := fc.Now()
	p.Publish(t1, []decide.PressureReport{report(memory, true, t1, "mem on"), report(disk, false, time.Time{}, "disk clear")})
	eventually(t, 10*time.Second, func() error {
		if n := errs.count(metrics.APINodePatch); n < 1 {
			return errors.New("no failed patch yet")
		}
		return nil
	})
	waitIdle(t, fc)
	fc.Step(interval)
	// Disk pressure starts, then memory pressure ends: memory's whole
	// episode falls within the outage.
	waitIdle(t, fc)
	t2 := fc.Now()
	p.Publish(t2, []decide.PressureReport{report(memory, true, t1, "mem on"), report(disk, true, t2, "disk on")})
	waitIdle(t, fc)
	fc.Step(3 * time.Second)
	t3 := fc.Now()
	p.Publish(t3, []decide.PressureReport{report(memory, false, t3, "mem off"), report(disk, true, t2, "disk on")})
	waitIdle(t, fc)
	fc.Step(interval)
	waitIdle(t, fc)
	if got := nodestatus.LastWritten(p); !got.Equal(before) {
		t.Fatalf("LastWritten() = %s during the outage, want %s", got, before)
	}
	failed := errs.count(metrics.APINodePatch)
	t.Logf("%d failed attempts during the outage", failed)
	if failed < 3 {
		t.Errorf("%d failed attempts during the outage, want retries (at least 3)", failed)
	}

	restart := time.Now()
	if err := e.cluster.StartAPIServer(); err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Logf("kube-apiserver back in %s", time.Since(restart).Round(time.Millisecond))
	// Record what is written from now on: from the resourceVersion of a
	// list (the node's own predates the restarted API server's watch cache).
	list, err := e.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatalf("list nodes after the restart: %v", err)
	}
	hist := watchNode(t, e.admin, name, list.ResourceVersion)

	// Advance the publisher's clock a second at a time until it has
	// written: no more than one retry delay (8s at most), within the report
	// period.
	back := fc.Now()
	for nodestatus.LastWritten(p).Equal(before) && fc.Since(back) < interval {
		fc.Step(time.Second)
		waitIdle(t, fc)
	}
	caughtUp := nodestatus.LastWritten(p)
	if caughtUp.Equal(before) {
		t.Fatalf("nothing written within %s of the API server's return", interval)
	}
	t.Logf("caught up %s (publisher's clock) after the API server's return", caughtUp.Sub(back))

	eventually(t, 10*time.Second, func() error {
		n, err := e.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := wantCondition(n, memCond, v1.ConditionFalse, "EvictdHasNoMemoryPressure", "mem off", t3, caughtUp); err != nil {
			return err
		}
		if err := wantCondition(n, diskCond, v1.ConditionTrue, "EvictdHasDiskPressure", "disk on", t2, caughtUp); err != nil {
			return err
		}
		if _, ok := hasTaint(n, "evictd.io/disk-pressure"); !ok {
			return fmt.Errorf("taints %v: no evictd.io/disk-pressure", n.Spec.Taints)
		}
		return wantEvents(ctx, e, name, map[string]int32{
			"Warning/EvictdMemoryPressure": 1, "Warning/EvictdDiskPressure": 1, "Normal/EvictdNoMemoryPressure": 1,
		})
	})
	_, events, err := eventCounts(ctx, e.admin, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		at := map[string]time.Time{"EvictdMemoryPressure": t1, "EvictdDiskPressure": t2, "EvictdNoMemoryPressure": t3}[ev.Reason]
		if want := "(at " + at.UTC().Format(time.RFC3339) + "; reported late, after failed writes to the API server)"; !strings.HasSuffix(ev.Message, want) {
			t.Errorf("event %s: message %q, want the suffix %q", ev.Reason, ev.Message, want)
		}
	}
	// The intermediate state (memory pressure on) was never written.
	for _, n := range hist.upToDate(t, e.admin, name) {
		if c := condition(n, memCond); c != nil && c.Status == v1.ConditionTrue {
			t.Errorf("version %s: %s True was written after the outage", n.ResourceVersion, memCond)
		}
		if _, ok := hasTaint(n, memTaint); ok {
			t.Errorf("version %s: taint %s was written after the outage", n.ResourceVersion, memTaint)
		}
	}

	// The watch of the node, ended by the restart, runs again: a taint of
	// evictd's removed by someone else is put back, without a report due.
	if err := updateNodeAdmin(ctx, e.admin, name, func(n *v1.Node) { n.Spec.Taints = nil }); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() error {
		n, err := e.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := hasTaint(n, "evictd.io/disk-pressure"); !ok {
			return fmt.Errorf("taints %v: evictd.io/disk-pressure not put back", n.Spec.Taints)
		}
		return nil
	})
}

// updateNodeAdmin changes node with change, as an administrator would.
func updateNodeAdmin(ctx context.Context, admin kubernetes.Interface, node string, change func(*v1.Node)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(n)
		_, err = admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// TestIdentityIsRefusedOutsideItsRights: the publisher runs under evictd's
// ServiceAccount in every test here, which proves deploy/rbac.yaml
// sufficient; this one shows that writes outside it are refused.
func TestIdentityIsRefusedOutsideItsRights(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	ctx := context.Background()
	const name = "node-d"
	createNode(t, e.admin, name)

	fc := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	p, _ := startPublisher(t, e, nodestatus.Config{NodeName: name, Clock: fc})
	p.Publish(fc.Now(), []decide.PressureReport{report(memory, true, fc.Now(), "mem on")})
	eventually(t, 10*time.Second, func() error {
		n, err := e.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if taint, ok := hasTaint(n, memTaint); !ok || taint.Effect != v1.TaintEffectNoSchedule {
			return fmt.Errorf("taints %v, want %s:NoSchedule", n.Spec.Taints, memTaint)
		}
		return wantEvents(ctx, e, name, map[string]int32{"Warning/EvictdMemoryPressure": 1})
	})

	nodes := e.evictd.CoreV1().Nodes()
	refused := map[string]func() error{
		"delete the node": func() error { return nodes.Delete(ctx, name, metav1.DeleteOptions{}) },
		"create a node": func() error {
			_, err := nodes.Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{})
			return err
		},
		"read the node": func() error {
			_, err := nodes.Get(ctx, name, metav1.GetOptions{})
			return err
		},
		"update the node": func() error {
			n, err := e.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
			return err
		},
		"update nodes/status": func() error {
			n, err := e.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		},
		"delete events": func() error {
			return e.evictd.CoreV1().Events(metav1.NamespaceDefault).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		},
		"read secrets": func() error {
			_, err := e.evictd.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
			return err
		},
	}
	for what, do := range refused {
		if err := do(); !apierrors.IsForbidden(err) {
			t.Errorf("%s with evictd's token: got %v, want 403 Forbidden", what, err)
		}
	}
}

// wantEvents checks the node's event counts by type/reason.
func wantEvents(ctx context.Context, e *env, node string, want map[string]int32) error {
	got, _, err := eventCounts(ctx, e.admin, node)
	if err != nil {
		return err
	}
	for k, n := range want {
		if got[k] != n {
			return fmt.Errorf("events %v, want %v", got, want)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("events %v, want %v", got, want)
	}
	return nil
}

// equalCondition compares two conditions as the API server stores them.
func equalCondition(a, b v1.NodeCondition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
		a.LastHeartbeatTime.Equal(&b.LastHeartbeatTime) && a.LastTransitionTime.Equal(&b.LastTransitionTime)
}
