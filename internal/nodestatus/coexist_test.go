package nodestatus_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/nodestatus"
)

const maintenanceTaint = "example.com/maintenance"

// violations collects what the concurrent writers found wrong.
type violations struct {
	mu   sync.Mutex
	list []string
}

func (v *violations) add(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.list) < 20 {
		v.list = append(v.list, fmt.Sprintf(format, args...))
	}
}

// TestCoexistsWithKubeletAndOtherTaints runs evictd's publisher through six
// transitions while a kubelet-like writer keeps patching MemoryPressure and
// Ready the way the kubelet does, and a third party keeps adding and
// removing its own taint. Neither side's condition flaps, evictd never
// changes the kubelet's fields, the other taint is never lost, and evictd's
// taint is there exactly while its pressure is.
func TestCoexistsWithKubeletAndOtherTaints(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	ctx := context.Background()
	const name = "node-b"
	node := createNode(t, e.admin, name)
	hist := watchNode(t, e.admin, name, node.ResourceVersion)

	const interval = 10 * time.Second
	fc := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	var errs apiErrors
	p, stop := startPublisher(t, e, nodestatus.Config{NodeName: name,
		UpdateFrequency: time.Second, ReportFrequency: interval, Jitter: noJitter, Retry: everySecond, Clock: fc, OnAPIError: errs.record})

	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var bad violations
	var kubeletWrites, toggles atomic.Int64
	wg.Go(func() { playKubelet(wctx, e.admin, name, node.Status.Conditions, &kubeletWrites, &bad) })
	wg.Go(func() { toggleTaint(wctx, e.admin, name, &toggles, &bad) })

	const rounds = 6
	for i := range rounds {
		active := i%2 == 0
		kw, tg := kubeletWrites.Load(), toggles.Load()
		if i > 0 {
			waitIdle(t, fc)
			fc.Step(interval) // a heartbeat, then the transition
		}
		at := fc.Now()
		msg := fmt.Sprintf("round %d", i)
		p.Publish(at, []decide.PressureReport{report(memory, active, at, msg)})
		eventually(t, 20*time.Second, func() (err error) {
			// A conflict with the concurrent writers sends the publisher
			// into its backoff, which waits on the fake clock: move the
			// clock on while the state is not there yet, by whole seconds,
			// since the API server keeps times to the second and the
			// transition times compared below must stay whole.
			defer func() {
				if err != nil && fc.HasWaiters() {
					fc.Step(time.Second)
				}
			}()
			n, err := e.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c := condition(n, memCond)
			if c == nil || c.Status != map[bool]v1.ConditionStatus{true: v1.ConditionTrue, false: v1.ConditionFalse}[active] ||
				c.Message != msg || !c.LastTransitionTime.Time.Equal(at) {
				return fmt.Errorf("round %d: %s is %+v", i, memCond, c)
			}
			if _, ok := hasTaint(n, memTaint); ok != active {
				return fmt.Errorf("round %d: taint %s present=%v, want %v", i, memTaint, ok, active)
			}
			return nil
		})
		// Let both writers work against this state and one heartbeat.
		waitIdle(t, fc)
		fc.Step(interval)
		eventually(t, 20*time.Second, func() error {
			if kubeletWrites.Load() < kw+5 || toggles.Load() < tg+5 {
				return fmt.Errorf("round %d: the concurrent writers are not writing", i)
			}
			return nil
		})
	}
	stopWriters()
	wg.Wait()
	stop()
	eventually(t, 10*time.Second, func() error {
		return wantEvents(ctx, e, name, map[string]int32{"Warning/EvictdMemoryPressure": 3, "Normal/EvictdNoMemoryPressure": 3})
	})

	t.Logf("kubelet status writes: %d, other-taint toggles: %d, evictd API errors: taint patch %d (conflicts), condition patch %d",
		kubeletWrites.Load(), toggles.Load(), errs.count(metrics.APINodeTaints), errs.count(metrics.APINodePatch))
	for _, v := range bad.list {
		t.Error(v)
	}

	// Over every stored version: evictd's condition and taint changed once
	// per transition, the kubelet's conditions never changed status, and
	// the other taint flipped exactly as often as it was toggled.
	var evictdStatus []v1.ConditionStatus
	evictdTaint, otherTaint := []bool{false}, []bool{false} // as created
	for _, n := range hist.upToDate(t, e.admin, name) {
		if c := condition(n, memCond); c != nil && (len(evictdStatus) == 0 || evictdStatus[len(evictdStatus)-1] != c.Status) {
			evictdStatus = append(evictdStatus, c.Status)
		}
		if _, ok := hasTaint(n, memTaint); evictdTaint[len(evictdTaint)-1] != ok {
			evictdTaint = append(evictdTaint, ok)
		}
		if _, ok := hasTaint(n, maintenanceTaint); otherTaint[len(otherTaint)-1] != ok {
			otherTaint = append(otherTaint, ok)
		}
		for ct, want := range map[v1.NodeConditionType]v1.ConditionStatus{v1.NodeMemoryPressure: v1.ConditionFalse, v1.NodeReady: v1.ConditionTrue} {
			if c := condition(n, ct); c == nil || c.Status != want {
				t.Errorf("version %s: the kubelet's %s is %+v, want %s", n.ResourceVersion, ct, c, want)
			}
		}
	}
	wantStatus := []v1.ConditionStatus{"True", "False", "True", "False", "True", "False"}
	if !slices.Equal(evictdStatus, wantStatus) {
		t.Errorf("%s over the versions: %v, want %v", memCond, evictdStatus, wantStatus)
	}
	if want := []bool{false, true, false, true, false, true, false}; !slices.Equal(evictdTaint, want) {
		t.Errorf("%s presence over the versions: %v, want %v", memTaint, evictdTaint, want)
	}
	if n := int64(len(otherTaint) - 1); n != toggles.Load() {
		t.Errorf("%s presence changed %d times over the versions, toggled %d times", maintenanceTaint, n, toggles.Load())
	}
}

// playKubelet keeps writing the kubelet's conditions (new heartbeats, same
// statuses) as the kubelet's status update does, until ctx ends, and
// checks before each write that its fields are as it last left them,
// counting its writes.
func playKubelet(ctx context.Context, c kubernetes.Interface, name string, initial []v1.NodeCondition, writes *atomic.Int64, bad *violations) {
	last := slices.Clone(initial)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// Requests are not cut short when ctx ends: a write the API server
		// made must be known to have been made.
		n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			bad.add("kubelet: get node: %v", err)
			continue
		}
		for _, want := range last {
			if got := condition(n, want.Type); got == nil || !equalCondition(*got, want) {
				bad.add("kubelet: %s changed behind its back: %+v, wrote %+v", want.Type, got, want)
			}
		}
		updated := n.DeepCopy()
		now := metav1.NewTime(time.Now())
		for i := range updated.Status.Conditions {
			if condition(&v1.Node{Status: v1.NodeStatus{Conditions: last}}, updated.Status.Conditions[i].Type) != nil {
				updated.Status.Conditions[i].LastHeartbeatTime = now
			}
		}
		got, err := patchNodeStatus(context.Background(), c, n, updated)
		if err != nil {
			bad.add("kubelet: patch status: %v", err)
			continue
		}
		for i := range last {
			last[i] = *condition(got, last[i].Type)
		}
		writes.Add(1)
	}
}

// toggleTaint keeps adding and removing the maintenance taint with updates
// carrying the resourceVersion until ctx ends, checking before each that
// the taint is as it left it, counting its toggles.
func toggleTaint(ctx context.Context, c kubernetes.Interface, name string, toggles *atomic.Int64, bad *violations) {
	present := false
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if _, ok := hasTaint(n, maintenanceTaint); ok != present {
				bad.add("taint %s present=%v, last left %v: someone else changed it", maintenanceTaint, ok, present)
			}
			n = n.DeepCopy()
			if present {
				n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == maintenanceTaint })
			} else {
				n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: maintenanceTaint, Value: "yes", Effect: v1.TaintEffectNoSchedule})
			}
			_, err = c.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
			return err
		})
		switch {
		case err == nil:
			present = !present
			toggles.Add(1)
		case apierrors.IsConflict(err):
			// lost the race five times in a row: try again next tick
		default:
			bad.add("toggle %s: %v", maintenanceTaint, err)
		}
	}
}
