package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/cri"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/testing/testnode"
)

// TestTerminalStatusOrder is the experiment behind the order in which
// evictd writes an evicted pod's terminal status, stops its containers and
// deletes it (docs/ARCHITECTURE.md, "Evicted pods"). On a real kubelet
// with its thresholds off and no evictd, the test plays an outside evictor
// with the cluster admin's client and the node's CRI, in several orders,
// on pods with restartPolicy Never whose program exits 0 on SIGTERM (the
// case the kubelet reports as Succeeded), exits 1, or ignores it; a watch
// records every phase and reason the API server held until the pod was
// gone, and the outcomes are logged as a table.
//
// The orders whose outcome depends on a race (which of the kubelet and
// the evictor writes first) are only logged. Those evictd relies on are
// checked in every run: the API server deletes a pod that reads Failed at
// once, with the evictor's status as its last state; a Failed status
// written with an annotation has the kubelet stop the pod's containers,
// without a delete, and report it Failed, never Succeeded; and evictd's
// own order ends Failed with reason Evicted. ORDERS (short names, comma-
// separated) and ORDER_RUNS (runs of each order and program, default 2)
// choose what runs.
func TestTerminalStatusOrder(t *testing.T) {
	n := testnode.StartForTest(t, testnode.Options{Name: "e2e-order"})
	rt, err := cri.Dial(t.Context(), n.Runtime().Endpoint(), "", 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	x := &orderExperiment{t: t, n: n, rt: rt}
	only := os.Getenv("ORDERS")
	runs := 2
	if v, err := strconv.Atoi(os.Getenv("ORDER_RUNS")); err == nil && v > 0 {
		runs = v
	}
	var b strings.Builder
	for _, o := range orders {
		if only != "" && !slices.Contains(strings.Split(only, ","), o.short) {
			continue
		}
		for _, program := range []string{"exit:0", "exit:1", "ignore"} {
			succeeded := 0
			for i := range runs {
				name := fmt.Sprintf("order-%s-%s-%d", o.short, strings.ReplaceAll(program, ":", ""), i)
				out := x.run(name, program, o)
				if out.seenSucceeded() {
					succeeded++
				}
				fmt.Fprintf(&b, "%-52s %-7s %s\n", o.name, program, out)
				if o.check != nil {
					if msg := o.check(out); msg != "" {
						t.Errorf("%s, %s (%s): %s; seen %s", o.name, program, name, msg, out)
					}
				}
			}
			fmt.Fprintf(&b, "%-52s %-7s Succeeded seen in %d of %d runs\n", o.name, program, succeeded, runs)
		}
	}
	t.Logf("outcomes:\n%s", b.String())
}

// orderOutcome is what the API server held of a pod through one run.
type orderOutcome struct {
	err     string   // the order's own failure
	phases  []string // each distinct phase/reason, in order
	last    *v1.Pod  // the last state, the DELETED event's
	deleted bool
}

// seenSucceeded reports whether the pod was ever seen in phase Succeeded.
func (o orderOutcome) seenSucceeded() bool {
	return slices.ContainsFunc(o.phases, func(p string) bool { return strings.HasPrefix(p, string(v1.PodSucceeded)+"/") })
}

func (o orderOutcome) String() string {
	if o.err != "" {
		return "error: " + o.err
	}
	if o.last == nil {
		return "seen " + strings.Join(o.phases, " → ") + "; nothing else"
	}
	exit, dt := "", ""
	for _, cs := range o.last.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			exit = fmt.Sprintf(" exit=%d", cs.State.Terminated.ExitCode)
		}
	}
	for _, c := range o.last.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			dt = c.Reason
		}
	}
	how := "gone"
	if !o.deleted {
		how = "not gone in 60 s, last"
	}
	return fmt.Sprintf("seen %s; %s as %s/%s%s dt=%s", strings.Join(o.phases, " → "), how, o.last.Status.Phase, o.last.Status.Reason, exit, dt)
}

// failedEvicted is the check of an order whose pod must never read
// Succeeded and must go in phase Failed with reason Evicted.
func failedEvicted(o orderOutcome) string {
	switch {
	case o.err != "":
		return o.err
	case o.seenSucceeded():
		return "the pod read Succeeded"
	case !o.deleted || o.last.Status.Phase != v1.PodFailed || o.last.Status.Reason != "Evicted":
		return "the pod did not go as Failed/Evicted"
	}
	return ""
}

type orderExperiment struct {
	t  *testing.T
	n  *testnode.Node
	rt *cri.Client
}

// evictorFinalizer is the finalizer the experiment's finalizer order holds
// the pod with.
const evictorFinalizer = "evictd.io/experiment"

type order struct {
	name, short string
	steps       func(x *orderExperiment, p *v1.Pod) error
	// check, when set, returns what went wrong with a run, "" if nothing.
	check func(orderOutcome) string
}

var orders = []order{
	{"stop, status, delete", "ssd", func(x *orderExperiment, p *v1.Pod) error {
		x.stop(p)
		if _, err := x.markFailed(p, false); err != nil {
			return err
		}
		return x.delete(p, "")
	}, nil},
	{"status, delete (rv precondition), stop", "sds", func(x *orderExperiment, p *v1.Pod) error {
		rv, err := x.markFailed(p, false)
		if err != nil {
			return err
		}
		if err := x.delete(p, rv); err != nil {
			return err
		}
		x.stop(p)
		return nil
	}, func(o orderOutcome) string {
		// The API server removes a pod that reads Failed at once: the
		// evictor's write is its last state, and no grace period is left.
		if msg := failedEvicted(o); msg != "" {
			return msg
		}
		if len(o.phases) != 1 || ptr.Deref(o.last.DeletionGracePeriodSeconds, -1) != 0 {
			return fmt.Sprintf("the pod was not removed at once with the evictor's status (deletion grace %d)", ptr.Deref(o.last.DeletionGracePeriodSeconds, -1))
		}
		return ""
	}},
	{"status, stop, delete", "std", func(x *orderExperiment, p *v1.Pod) error {
		if _, err := x.markFailed(p, false); err != nil {
			return err
		}
		x.stop(p)
		return x.delete(p, "")
	}, nil},
	{"delete, stop, status", "dss", func(x *orderExperiment, p *v1.Pod) error {
		if err := x.delete(p, ""); err != nil {
			return err
		}
		x.stop(p)
		_, err := x.markFailed(p, false)
		return err
	}, nil},
	{"status+annotation, delete once the kubelet stopped it", "ann", func(x *orderExperiment, p *v1.Pod) error {
		if _, err := x.markFailedAnnotated(p); err != nil {
			return err
		}
		if err := x.waitStopped(p); err != nil {
			return err
		}
		return x.delete(p, "")
	}, func(o orderOutcome) string {
		// The kubelet stops the containers of a pod written Failed with
		// an annotation, with no delete, and reports it Failed: the reason
		// it keeps only for a program that did not exit 0.
		switch {
		case o.err != "":
			return o.err
		case o.seenSucceeded():
			return "the pod read Succeeded"
		case !o.deleted || o.last.Status.Phase != v1.PodFailed:
			return "the pod did not go as Failed"
		}
		return ""
	}},
	{"evictd's: status+annotation, kubelet's write, stop, status, delete (rv)", "evictd", func(x *orderExperiment, p *v1.Pod) error {
		rv, err := x.markFailedAnnotated(p)
		if err != nil {
			return err
		}
		x.awaitKubelet(p, rv)
		x.stop(p)
		if err := x.waitStopped(p); err != nil {
			return err
		}
		rv, err = x.markFailed(p, false)
		if err != nil {
			return err
		}
		return x.delete(p, rv)
	}, failedEvicted},
	{"status+annotation, stop at once, status, delete (rv)", "atonce", func(x *orderExperiment, p *v1.Pod) error {
		if _, err := x.markFailedAnnotated(p); err != nil {
			return err
		}
		x.stop(p)
		if err := x.waitStopped(p); err != nil {
			return err
		}
		rv, err := x.markFailed(p, false)
		if err != nil {
			return err
		}
		return x.delete(p, rv)
	}, nil},
	{"status+finalizer, delete, stop, reason after kubelet", "fin", func(x *orderExperiment, p *v1.Pod) error {
		rv, err := x.markFailed(p, true)
		if err != nil {
			return err
		}
		if err := x.delete(p, rv); err != nil {
			return err
		}
		x.stop(p)
		// The kubelet's last act is its delete with grace 0.
		var last *v1.Pod
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			got, err := x.n.Admin().CoreV1().Pods("default").Get(x.t.Context(), p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			last = got
			if ptr.Deref(got.DeletionGracePeriodSeconds, -1) == 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if ptr.Deref(last.DeletionGracePeriodSeconds, -1) != 0 {
			return fmt.Errorf("the kubelet did not delete the pod within 30 s: %s", podSummary(last))
		}
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"uid": p.UID, "$deleteFromPrimitiveList/finalizers": []string{evictorFinalizer}},
			"status":   map[string]any{"phase": v1.PodFailed, "reason": "Evicted", "message": orderMessage},
		})
		_, err = x.n.Admin().CoreV1().Pods("default").Patch(x.t.Context(), p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		return err
	}, nil},
}

const orderMessage = "The node was low on resource: memory. Threshold quantity: 500Mi, available: 300Mi. "

// markFailed writes what the kubelet's eviction writes: phase Failed,
// reason Evicted, its message, and evictd's DisruptionTarget condition
// (with the experiment's finalizer if fin), and returns the pod's new
// resourceVersion.
func (x *orderExperiment) markFailed(p *v1.Pod, fin bool) (string, error) {
	meta := map[string]any{"uid": p.UID}
	if fin {
		meta["finalizers"] = []string{evictorFinalizer}
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": meta,
		"status": map[string]any{
			"phase": v1.PodFailed, "reason": "Evicted", "message": orderMessage,
			"conditions": []any{map[string]any{
				"type": v1.DisruptionTarget, "status": v1.ConditionTrue,
				"reason": decide.DisruptionTargetReason, "message": orderMessage,
				"lastTransitionTime": metav1.Now(),
			}},
		},
	})
	if err != nil {
		return "", err
	}
	got, err := x.n.Admin().CoreV1().Pods("default").Patch(x.t.Context(), p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return "", fmt.Errorf("status: %w", err)
	}
	return got.ResourceVersion, nil
}

// markFailedAnnotated is markFailed with an annotation in the same write,
// which the kubelet takes as an update of the pod (not a mere status
// change to reconcile) and syncs at once, from the copy that reads Failed.
func (x *orderExperiment) markFailedAnnotated(p *v1.Pod) (string, error) {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": p.UID, "annotations": map[string]string{"evictd.io/evicted": time.Now().UTC().Format(time.RFC3339Nano)}},
		"status": map[string]any{
			"phase": v1.PodFailed, "reason": "Evicted", "message": orderMessage,
			"conditions": []any{map[string]any{
				"type": v1.DisruptionTarget, "status": v1.ConditionTrue,
				"reason": decide.DisruptionTargetReason, "message": orderMessage,
				"lastTransitionTime": metav1.Now(),
			}},
		},
	})
	if err != nil {
		return "", err
	}
	got, err := x.n.Admin().CoreV1().Pods("default").Patch(x.t.Context(), p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return "", fmt.Errorf("status: %w", err)
	}
	return got.ResourceVersion, nil
}

// awaitKubelet waits, at most 1 s (evictd's StopWait), until the pod is
// in a version newer than rv that still reads Failed: the kubelet's first
// write from the copy that reads Failed.
func (x *orderExperiment) awaitKubelet(p *v1.Pod, rv string) {
	start := time.Now()
	for time.Since(start) < time.Second {
		got, err := x.n.Admin().CoreV1().Pods("default").Get(x.t.Context(), p.Name, metav1.GetOptions{})
		if err != nil {
			return
		}
		if cmp, err := resourceversion.CompareResourceVersion(got.ResourceVersion, rv); err == nil && cmp > 0 && got.Status.Phase == v1.PodFailed {
			x.t.Logf("%s: the kubelet wrote the pod %s after the status write", p.Name, time.Since(start).Round(time.Millisecond))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	x.t.Logf("%s: no write of the kubelet's within 1 s of the status write", p.Name)
}

// waitStopped waits until the API server reports every container of the
// pod terminated (the kubelet's write after its kill).
func (x *orderExperiment) waitStopped(p *v1.Pod) error {
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	for time.Now().Before(deadline) {
		got, err := x.n.Admin().CoreV1().Pods("default").Get(x.t.Context(), p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		stopped := len(got.Status.ContainerStatuses) > 0
		for _, cs := range got.Status.ContainerStatuses {
			if cs.State.Terminated == nil {
				stopped = false
			}
		}
		if stopped {
			x.t.Logf("%s: containers reported stopped %s after the status write (phase %s)", p.Name, time.Since(start).Round(time.Millisecond), got.Status.Phase)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("containers not reported stopped within 60 s")
}

func (x *orderExperiment) delete(p *v1.Pod, rv string) error {
	pre := &metav1.Preconditions{UID: &p.UID}
	if rv != "" {
		pre.ResourceVersion = &rv
	}
	err := x.n.Admin().CoreV1().Pods("default").Delete(x.t.Context(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1), Preconditions: pre})
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return nil
}

func (x *orderExperiment) stop(p *v1.Pod) {
	if _, err := x.rt.StopPodContainers(x.t.Context(), string(p.UID), 1); err != nil {
		x.t.Logf("%s: CRI stop: %v", p.Name, err)
	}
}

// run starts a pod running the program, applies the order, and returns
// what the API server held of it until it was gone.
func (x *orderExperiment) run(name, program string, o order) orderOutcome {
	t := x.t
	pod := labelled(x.n.Pod(name, "--on-term="+program, "sleep"))
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](4)
	p := run(t, x.n, pod)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	w, err := x.n.Admin().CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: p.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var out orderOutcome
	if err := o.steps(x, p); err != nil {
		out.err = err.Error()
	}
	for ev := range w.ResultChan() {
		got, ok := ev.Object.(*v1.Pod)
		if !ok {
			continue
		}
		out.last = got
		s := fmt.Sprintf("%s/%s", got.Status.Phase, got.Status.Reason)
		if len(out.phases) == 0 || out.phases[len(out.phases)-1] != s {
			out.phases = append(out.phases, s)
		}
		if ev.Type == watch.Deleted {
			out.deleted = true
			return out
		}
	}
	if out.err == "" {
		out.err = "not gone in 60 s"
	}
	return out
}
