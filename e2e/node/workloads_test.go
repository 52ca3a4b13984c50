package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/cri"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/testing/testnode"
)

// TestWorkloadsNode evicts the pods of real workload controllers (the Job
// and Deployment controllers of kube-controller-manager) on a real node
// and checks what the controllers make of it: an evicted pod is never a
// success (docs/ARCHITECTURE.md, "Evicted pods").
//
//   - A Job (restartPolicy Never, backoffLimit 0, a
//     podFailurePolicy rule Ignore on DisruptionTarget, a program that
//     exits 0 on SIGTERM), evicted under allocatable memory pressure once
//     by the kubelet's own eviction manager (its thresholds on, evictd
//     off) and once by evictd: both outcomes side by side. evictd's must
//     leave the Job's succeeded at 0, neither Complete nor Failed, with a
//     replacement pod.
//   - A Job without a podFailurePolicy: the eviction counts as its
//     failure, never as a success.
//   - A Deployment's pod: replaced, and nothing of it left on the node.
//   - Soft and hard thresholds, restartPolicy Never and OnFailure,
//     programs that exit 0, exit 1 or ignore SIGTERM: the evicted pod
//     ends Failed with evictd's DisruptionTarget condition, its Job never
//     counts a success.
func TestWorkloadsNode(t *testing.T) {
	quick := map[string]any{"evictionPressureTransitionPeriod": "5s"}
	n := testnode.StartForTest(t, testnode.Options{Name: "e2e-workloads", Kubelet: testnode.KubeletOptions{Config: quick}})
	rt, err := cri.Dial(t.Context(), n.Runtime().Endpoint(), "", 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	w := &workloads{t: t, n: n, rt: rt}

	t.Run("job ignoring disruptions: the kubelet and evictd side by side", func(t *testing.T) {
		w.t = t
		job := jobCase{restart: v1.RestartPolicyNever, program: "exit:0", ignoreDisruptions: true, mib: 1700}
		if err := n.RestartKubelet(t.Context(), testnode.KubeletOptions{
			EvictionHard: map[string]string{"memory.available": "500Mi"}, Config: quick,
		}); err != nil {
			t.Fatal(err)
		}
		baseline := job
		baseline.byKubelet = true
		kubelet := w.evictJob("by-kubelet", baseline)
		w.cleanup()
		if err := n.RestartKubelet(t.Context(), testnode.KubeletOptions{Config: quick}); err != nil {
			t.Fatal(err)
		}
		startEvictd(t, n, hardFlags...)
		evictd := w.evictJob("by-evictd", job)
		w.cleanup()
		t.Logf("a Job (restartPolicy Never, backoffLimit 0, podFailurePolicy Ignore on DisruptionTarget, exit 0 on SIGTERM):\n%s",
			outcomeTable(map[string]jobOutcome{"kubelet": kubelet, "evictd": evictd}, "kubelet", "evictd"))
		if kubelet.by != "kubelet" {
			t.Errorf("baseline: the pod was evicted by %q, want the kubelet", kubelet.by)
		}
		evictd.check(t, job)
	})

	t.Run("job without a podFailurePolicy: a failure", func(t *testing.T) {
		w.t = t
		startEvictd(t, n, hardFlags...)
		job := jobCase{restart: v1.RestartPolicyNever, program: "exit:0", mib: 1700}
		got := w.evictJob("no-policy", job)
		w.cleanup()
		t.Logf("%s", outcomeTable(map[string]jobOutcome{"evictd": got}, "evictd"))
		got.check(t, job)
	})

	t.Run("deployment: replaced, nothing left behind", func(t *testing.T) {
		w.t = t
		startEvictd(t, n, hardFlags...)
		w.deployment()
		w.cleanup()
	})

	for _, mode := range []struct {
		name  string
		flags []string
		mib   int
	}{
		{"hard", hardFlags, 1700},
		{"soft", softFlags, 1400},
	} {
		t.Run(mode.name, func(t *testing.T) {
			startEvictd(t, n, mode.flags...)
			outcomes := map[string]jobOutcome{}
			var names []string
			for _, restart := range []v1.RestartPolicy{v1.RestartPolicyNever, v1.RestartPolicyOnFailure} {
				for _, program := range []string{"exit:0", "exit:1", "ignore"} {
					job := jobCase{restart: restart, program: program, ignoreDisruptions: restart == v1.RestartPolicyNever, mib: mode.mib}
					name := strings.ToLower(fmt.Sprintf("%s-%s-%s", mode.name, restart, strings.ReplaceAll(program, ":", "")))
					t.Run(name, func(t *testing.T) {
						w.t = t
						got := w.evictJob(name, job)
						w.cleanup()
						got.check(t, job)
						outcomes[name] = got
						names = append(names, name)
					})
				}
			}
			t.Logf("%s thresholds:\n%s", mode.name, outcomeTable(outcomes, names...))
		})
	}
}

var (
	// hardFlags: allocatableMemory.available<500Mi (from memory.available
	// with pods' allocatable enforced) on a kubepods cgroup of 2 GiB.
	hardFlags = []string{"--eviction-hard=memory.available<500Mi", "--eviction-pressure-transition-period=5s"}
	// softFlags: allocatableMemory.available<900Mi for 1 s, a pod grace
	// period of 2 s; the hard threshold far below.
	softFlags = []string{
		"--eviction-soft=allocatableMemory.available<900Mi",
		"--eviction-soft-grace-period=allocatableMemory.available=1s",
		"--eviction-max-pod-grace-period=2",
		"--eviction-hard=memory.available<100Mi",
		"--eviction-pressure-transition-period=5s",
	}
)

// evictedReason is the reason of an evicted pod's status, the kubelet's.
const evictedReason = "Evicted"

type workloads struct {
	t  *testing.T
	n  *testnode.Node
	rt *cri.Client
}

// jobCase is a Job of one pod whose program allocates mib MiB (and
// crosses the threshold) and then does program (--on-term) on SIGTERM.
type jobCase struct {
	restart v1.RestartPolicy
	program string
	// ignoreDisruptions adds the podFailurePolicy rule Ignore on
	// DisruptionTarget (restartPolicy Never only).
	ignoreDisruptions bool
	mib               int
	// byKubelet: the kubelet's own eviction, which leaves the pod.
	byKubelet bool
}

// jobOutcome is what the API server held of a Job's first pod and of the
// Job once its controller had counted that pod.
type jobOutcome struct {
	by        string   // the Evicted event's source: kubelet or evictd
	phases    []string // every phase the pod was seen in, in order
	phase     v1.PodPhase
	reason    string
	exitCode  string
	dt        string // the DisruptionTarget condition's reason
	deleted   bool   // the pod object went away
	succeeded int32
	failed    int32
	condition string // Complete or Failed, if the Job has either
	replaced  bool   // the Job made another pod
}

// check fails t unless the outcome is an evictd eviction that no
// controller counts as a success.
func (o jobOutcome) check(t *testing.T, c jobCase) {
	t.Helper()
	if o.by != "evictd" {
		t.Errorf("the pod was evicted by %q, want evictd", o.by)
	}
	if slices.Contains(o.phases, string(v1.PodSucceeded)) {
		t.Errorf("the pod was seen Succeeded (phases %v): a Job counts that as a completion", o.phases)
	}
	if o.phase != v1.PodFailed || o.reason != evictedReason {
		t.Errorf("the pod ended in phase %s, reason %q; want Failed, %s", o.phase, o.reason, evictedReason)
	}
	if o.dt != decide.DisruptionTargetReason {
		t.Errorf("the pod ended with DisruptionTarget reason %q, want evictd's %s", o.dt, decide.DisruptionTargetReason)
	}
	if !o.deleted {
		t.Errorf("the evicted pod object was not deleted")
	}
	if o.succeeded != 0 {
		t.Errorf("the Job counts %d succeeded, want 0", o.succeeded)
	}
	switch {
	case c.ignoreDisruptions:
		if o.failed != 0 || o.condition != "" || !o.replaced {
			t.Errorf("the Job counts failed=%d, condition %q, replacement %v; want failed 0, neither Complete nor Failed, and a replacement pod (the disruption ignored)",
				o.failed, o.condition, o.replaced)
		}
	default:
		if o.failed != 1 || o.condition != string(batchv1.JobFailed) {
			t.Errorf("the Job counts failed=%d, condition %q; want failed 1 and Failed (backoffLimit 0)", o.failed, o.condition)
		}
	}
}

// outcomeTable prints the outcomes, one line each, in the order of names.
func outcomeTable(outcomes map[string]jobOutcome, names ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-26s %-8s %-34s %-8s %-10s %-4s %-18s %-7s %-9s %-6s %s\n",
		"case", "by", "phases seen", "phase", "reason", "exit", "DisruptionTarget", "deleted", "succeeded", "failed", "Job")
	for _, name := range names {
		o := outcomes[name]
		job := o.condition
		if job == "" {
			job = "active"
		}
		if o.replaced {
			job += ", replacement pod"
		}
		fmt.Fprintf(&b, "%-26s %-8s %-34s %-8s %-10s %-4s %-18s %-7v %-9d %-6d %s\n",
			name, o.by, strings.Join(o.phases, "→"), o.phase, o.reason, o.exitCode, o.dt, o.deleted, o.succeeded, o.failed, job)
	}
	return b.String()
}

// evictJob runs the Job c named name until its first pod is evicted and
// counted by the Job controller, and returns the outcome.
func (w *workloads) evictJob(name string, c jobCase) jobOutcome {
	t := w.t
	ctx := t.Context()
	labels := map[string]string{"e2e": "yes", "workload": name}
	spec := w.n.PodSpec("--on-term="+c.program, "alloc", "--mib", fmt.Sprint(c.mib), "--rate", "400")
	spec.RestartPolicy = c.restart
	spec.TerminationGracePeriodSeconds = ptr.To[int64](3)
	// Burstable, so that the kubelet admits the replacement under its
	// own memory pressure too; bound to the node, so that no taint keeps
	// it from it.
	pod := testnode.Resources(&v1.Pod{Spec: spec}, "64Mi", "", "")
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template:     v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	}
	if c.ignoreDisruptions {
		job.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:          batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue}},
		}}}
	}
	if _, err := w.n.Admin().BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := w.firstPod("workload=" + name)
	hist := w.settle(first, !c.byKubelet)
	o := jobOutcome{phases: hist.phases, deleted: hist.deleted}
	if p := hist.last; p != nil {
		o.phase, o.reason = p.Status.Phase, p.Status.Reason
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated != nil {
				o.exitCode = fmt.Sprint(cs.State.Terminated.ExitCode)
			}
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.DisruptionTarget {
				o.dt = cond.Reason
			}
		}
	}
	for _, e := range events(t, w.n, "default", "Pod", first.Name, "Evicted") {
		o.by = e.Source.Component
	}
	// The Job controller has counted the pod once it took its finalizer
	// off; its status says so once no pod is left uncounted.
	poll(t, "the Job's status to count the pod", 30*time.Second, func() (bool, string) {
		j, err := w.n.Admin().BatchV1().Jobs("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		o.succeeded, o.failed, o.condition = j.Status.Succeeded, j.Status.Failed, ""
		for _, cond := range j.Status.Conditions {
			if (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) && cond.Status == v1.ConditionTrue {
				o.condition = string(cond.Type)
			}
		}
		pods, err := w.n.Admin().CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "workload=" + name})
		if err != nil {
			return false, err.Error()
		}
		o.replaced = slices.ContainsFunc(pods.Items, func(p v1.Pod) bool { return p.UID != first.UID })
		uncounted := j.Status.UncountedTerminatedPods
		settled := uncounted == nil || len(uncounted.Succeeded)+len(uncounted.Failed) == 0
		counted := o.succeeded+o.failed > 0 || o.replaced
		return settled && counted, fmt.Sprintf("succeeded %d, failed %d, uncounted %+v, condition %q, replaced %v",
			o.succeeded, o.failed, uncounted, o.condition, o.replaced)
	})
	return o
}

// firstPod waits for the first pod with the label selector and returns it.
func (w *workloads) firstPod(selector string) *v1.Pod {
	var first *v1.Pod
	poll(w.t, "the first pod of "+selector, 60*time.Second, func() (bool, string) {
		pods, err := w.n.Admin().CoreV1().Pods("default").List(w.t.Context(), metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(pods.Items) == 0 {
			return false, fmt.Sprintf("no pod yet (%v)", err)
		}
		first = &pods.Items[0]
		return true, ""
	})
	return first
}

// podOutcome is what a watch saw of one pod.
type podOutcome struct {
	phases  []string
	last    *v1.Pod
	deleted bool
}

// settle watches the pod from its first version until it is deleted
// (deleted), or, when not (the kubelet's own eviction leaves the pod),
// until it is terminal with its containers stopped and no finalizer of the
// Job controller left on it.
func (w *workloads) settle(p *v1.Pod, deleted bool) podOutcome {
	t := w.t
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	wt, err := w.n.Admin().CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + p.Name, ResourceVersion: p.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer wt.Stop()
	o := podOutcome{phases: []string{string(p.Status.Phase)}, last: p}
	for ev := range wt.ResultChan() {
		got, ok := ev.Object.(*v1.Pod)
		if !ok || got.UID != p.UID {
			continue
		}
		o.last = got
		if ph := string(got.Status.Phase); o.phases[len(o.phases)-1] != ph {
			o.phases = append(o.phases, ph)
		}
		switch {
		case ev.Type == watch.Deleted:
			o.deleted = true
			return o
		case !deleted && (got.Status.Phase == v1.PodFailed || got.Status.Phase == v1.PodSucceeded) && got.DeletionTimestamp == nil &&
			!slices.Contains(got.Finalizers, batchv1.JobTrackingFinalizer) && stopped(got):
			return o
		}
	}
	t.Fatalf("pod %s not settled within 120 s; phases %v, last %s", p.Name, o.phases, podSummary(o.last))
	return o
}

// stopped reports whether the pod's status has every container
// terminated.
func stopped(p *v1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated == nil {
			return false
		}
	}
	return len(p.Status.ContainerStatuses) > 0
}

// deployment evicts the pod of a one-replica Deployment and checks that
// it is replaced and that nothing of it is left: not its object, not a
// running container or ready sandbox, not its cgroup.
func (w *workloads) deployment() {
	t := w.t
	ctx := t.Context()
	labels := map[string]string{"e2e": "yes", "workload": "web"}
	spec := w.n.PodSpec("alloc", "--mib", "1700", "--rate", "400")
	spec.TerminationGracePeriodSeconds = ptr.To[int64](3)
	pod := testnode.Resources(&v1.Pod{Spec: spec}, "64Mi", "", "")
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	}
	if _, err := w.n.Admin().AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := w.firstPod("workload=web")
	hist := w.settle(first, true)
	t.Logf("the Deployment's pod: phases %v, last %s", hist.phases, podSummary(hist.last))
	if !hist.deleted {
		t.Fatalf("the evicted pod was not deleted: %s", podSummary(hist.last))
	}
	if evs := events(t, w.n, "default", "Pod", first.Name, "Evicted"); len(evs) != 1 || evs[0].Source.Component != "evictd" {
		t.Errorf("Evicted events of the Deployment's pod: %+v, want one by evictd", evs)
	}
	poll(t, "a replacement pod", 30*time.Second, func() (bool, string) {
		pods, err := w.n.Admin().CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "workload=web"})
		if err != nil {
			return false, err.Error()
		}
		return slices.ContainsFunc(pods.Items, func(p v1.Pod) bool { return p.UID != first.UID }), fmt.Sprintf("%d pods, none new", len(pods.Items))
	})
	uid := string(first.UID)
	poll(t, "nothing of the evicted pod on the node", 30*time.Second, func() (bool, string) {
		rs := w.rt.RuntimeService()
		ctrs, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid},
		})
		if err != nil {
			return false, err.Error()
		}
		sandboxes, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
			State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
			LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid},
		})
		if err != nil {
			return false, err.Error()
		}
		cgroup := filepath.Join(w.n.PodsMemoryCgroup(), "burstable", "pod"+uid)
		_, statErr := os.Stat(cgroup)
		return len(ctrs) == 0 && len(sandboxes) == 0 && os.IsNotExist(statErr),
			fmt.Sprintf("%d running containers, %d ready sandboxes, cgroup %s: %v", len(ctrs), len(sandboxes), cgroup, statErr)
	})
}

// cleanup deletes the test's Jobs and Deployments, then its pods, and waits
// until the node's pods are gone.
func (w *workloads) cleanup() {
	t := w.t
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := w.n.Admin()
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	sel := metav1.ListOptions{LabelSelector: "e2e=yes"}
	if err := c.BatchV1().Jobs("default").DeleteCollection(ctx, opts, sel); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete Jobs: %v", err)
	}
	if err := c.AppsV1().Deployments("default").DeleteCollection(ctx, opts, sel); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete Deployments: %v", err)
	}
	cleanPods(t, w.n)
}
