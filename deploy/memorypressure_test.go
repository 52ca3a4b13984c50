package deploy

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/evictd/evictd/internal/qos"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

const (
	mpPolicy    = "evictd-memory-pressure-toleration"
	mpNamespace = "scheduled"
	memoryKey   = "evictd.io/memory-pressure"
	diskKey     = "evictd.io/disk-pressure"
	pidKey      = "evictd.io/pid-pressure"
	// The scheduler's TaintToleration filter's reason (1.36 names no taint).
	untoleratedTaint = "node(s) had untolerated taint(s)"
)

// memoryToleration is the toleration the policy adds with its effect.
func memoryToleration(effect v1.TaintEffect) v1.Toleration {
	return v1.Toleration{Key: memoryKey, Operator: v1.TolerationOpExists, Effect: effect}
}

// mpEnv is a control plane with kube-scheduler and schedulable fake
// nodes (no kubelet: a Ready node with allocatable resources is all the
// scheduler looks at), each under one of evictd's taints.
type mpEnv struct {
	admin kubernetes.Interface
}

func newMPEnv(t *testing.T) *mpEnv {
	t.Helper()
	c := testcluster.StartForTest(t, testcluster.Options{Scheduler: true})
	admin := c.AdminClient(t)
	ctx := t.Context()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mpNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", mpNamespace, err)
	}
	// Pod admission wants the default ServiceAccount; no controller creates it.
	_, err := admin.CoreV1().ServiceAccounts(mpNamespace).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create default ServiceAccount: %v", err)
	}
	return &mpEnv{admin: admin}
}

// node creates a Ready node named name with room for many pods, whose
// only taint is taint.
func (e *mpEnv) node(t *testing.T, name string, taint v1.Taint) {
	t.Helper()
	ctx := t.Context()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	if _, err := e.admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	status := `{"status":{
		"capacity":{"cpu":"16","memory":"64Gi","pods":"110","ephemeral-storage":"100Gi"},
		"allocatable":{"cpu":"16","memory":"64Gi","pods":"110","ephemeral-storage":"100Gi"},
		"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status"}]}}`
	if _, err := e.admin.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("set status of node %s: %v", name, err)
	}
	// No node lifecycle controller runs to lift the not-ready taint the
	// API server put on the new node: the taints are replaced.
	taints := fmt.Appendf(nil, `{"spec":{"taints":[{"key":%q,"effect":%q}]}}`, taint.Key, taint.Effect)
	if _, err := e.admin.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, taints, metav1.PatchOptions{}); err != nil {
		t.Fatalf("taint node %s: %v", name, err)
	}
}

// mpPod returns a pod that only node can run, with spec's changes.
func mpPod(name, node string, spec func(*v1.PodSpec)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mpNamespace},
		Spec: v1.PodSpec{
			NodeSelector:                 map[string]string{"kubernetes.io/hostname": node},
			AutomountServiceAccountToken: new(false),
			Containers:                   []v1.Container{{Name: "c", Image: "example.invalid/none"}},
		},
	}
	if spec != nil {
		spec(&p.Spec)
	}
	return p
}

func resources(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// applyPolicy creates the objects of deploy/memory-pressure-toleration.yaml
// and waits until the API server, which loads admission policies through
// a watch, applies them: a dry-run create of a Burstable pod gets the
// toleration.
func (e *mpEnv) applyPolicy(t *testing.T) {
	t.Helper()
	path := "memory-pressure-toleration.yaml"
	created, err := testcluster.CreateManifest(t.Context(), e.admin, path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"MutatingAdmissionPolicy/" + mpPolicy, "MutatingAdmissionPolicyBinding/" + mpPolicy}
	if !slices.Equal(created, want) {
		t.Fatalf("%s created %q, want %q", path, created, want)
	}
	e.waitToleration(t, memoryToleration(v1.TaintEffectNoSchedule))
}

// waitToleration waits until a dry-run create of a Burstable pod gets
// exactly want from the policy.
func (e *mpEnv) waitToleration(t *testing.T, want v1.Toleration) {
	t.Helper()
	probe := mpPod("probe", "none", func(s *v1.PodSpec) { s.Containers[0].Resources.Requests = resources("memory", "1Mi") })
	var last []v1.Toleration
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := e.admin.CoreV1().Pods(mpNamespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, fmt.Errorf("dry-run create of pod probe: %w", err)
		}
		last = withoutDefaults(p.Spec.Tolerations)
		return reflect.DeepEqual(last, []v1.Toleration{want}), nil
	})
	if err != nil {
		t.Fatalf("the policy never gave a Burstable pod the toleration %+v: %v; last tolerations: %+v", want, err, last)
	}
}

// withoutDefaults drops the tolerations the DefaultTolerationSeconds
// admission plugin gives every pod (not-ready and unreachable, NoExecute,
// 300 s).
func withoutDefaults(tolerations []v1.Toleration) []v1.Toleration {
	var out []v1.Toleration
	for _, tol := range tolerations {
		if (tol.Key == v1.TaintNodeNotReady || tol.Key == v1.TaintNodeUnreachable) &&
			tol.Operator == v1.TolerationOpExists && tol.Effect == v1.TaintEffectNoExecute &&
			tol.TolerationSeconds != nil && *tol.TolerationSeconds == 300 {
			continue
		}
		out = append(out, tol)
	}
	return out
}

// waitScheduled waits until the scheduler binds pod to node.
func (e *mpEnv) waitScheduled(t *testing.T, name, node string) {
	t.Helper()
	var p *v1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		p, err = e.admin.CoreV1().Pods(mpNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("get pod %s: %w", name, err)
		}
		return p.Spec.NodeName != "", nil
	})
	if err != nil {
		t.Fatalf("pod %s was never scheduled: %v; conditions: %+v; tolerations: %+v", name, err, p.Status.Conditions, p.Spec.Tolerations)
	}
	if p.Spec.NodeName != node {
		t.Fatalf("pod %s scheduled on %s, want %s", name, p.Spec.NodeName, node)
	}
}

// waitUnschedulable waits until the scheduler has tried pod and found no
// node for it because of a taint: its PodScheduled condition is False
// with reason Unschedulable and the taint filter's message, and it has no
// node.
func (e *mpEnv) waitUnschedulable(t *testing.T, name string) {
	t.Helper()
	var p *v1.Pod
	var cond v1.PodCondition
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		p, err = e.admin.CoreV1().Pods(mpNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("get pod %s: %w", name, err)
		}
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("pod %s was scheduled on %s", name, p.Spec.NodeName)
		}
		i := slices.IndexFunc(p.Status.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.PodScheduled })
		if i < 0 {
			return false, nil
		}
		cond = p.Status.Conditions[i]
		return cond.Status == v1.ConditionFalse, nil
	})
	if err != nil {
		t.Fatalf("pod %s: want Pending and unschedulable: %v; tolerations: %+v", name, err, p.Spec.Tolerations)
	}
	if cond.Reason != v1.PodReasonUnschedulable || !strings.Contains(cond.Message, untoleratedTaint) {
		t.Fatalf("pod %s: PodScheduled False with reason %q and message %q, want reason %s and %q",
			name, cond.Reason, cond.Message, v1.PodReasonUnschedulable, untoleratedTaint)
	}
	if p.Status.Phase != v1.PodPending {
		t.Fatalf("pod %s: phase %s, want Pending", name, p.Status.Phase)
	}
}

// setEffect sets the policy's effect variable to effect and waits until
// the API server applies the changed policy.
func (e *mpEnv) setEffect(t *testing.T, effect v1.TaintEffect) {
	t.Helper()
	policies := e.admin.AdmissionregistrationV1().MutatingAdmissionPolicies()
	policy, err := policies.Get(t.Context(), mpPolicy, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get MutatingAdmissionPolicy %s: %v", mpPolicy, err)
	}
	i := slices.IndexFunc(policy.Spec.Variables, func(v admissionregistrationv1.Variable) bool { return v.Name == "effect" })
	if i < 0 {
		t.Fatalf("MutatingAdmissionPolicy %s has no variable effect: %+v", mpPolicy, policy.Spec.Variables)
	}
	policy.Spec.Variables[i].Expression = fmt.Sprintf("'%s'", effect)
	if _, err := policies.Update(t.Context(), policy, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update MutatingAdmissionPolicy %s: %v", mpPolicy, err)
	}
	e.waitToleration(t, memoryToleration(effect))
}

func (e *mpEnv) create(t *testing.T, p *v1.Pod) *v1.Pod {
	t.Helper()
	got, err := e.admin.CoreV1().Pods(mpNamespace).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", p.Name, err)
	}
	return got
}

// TestMemoryPressureToleration applies deploy/memory-pressure-toleration.yaml
// to a real kube-apiserver v1.36.3 (default flags: no feature gate, no
// --runtime-config) beside a real kube-scheduler, with fake nodes under
// evictd's memory, disk and PID pressure taints. Without the policy a
// Burstable pod is not scheduled under memory pressure; with it, pods that
// are not BestEffort (by the API server's QoS class, which must agree with
// internal/qos) get one toleration of the memory-pressure taint and are
// scheduled, BestEffort pods get none and stay Pending, a toleration the
// pod has is not doubled, and disk and PID pressure still keep every new
// pod away.
func TestMemoryPressureToleration(t *testing.T) {
	e := newMPEnv(t)
	ctx := t.Context()
	const memNode, diskNode, pidNode = "node-memory", "node-disk", "node-pid"
	e.node(t, memNode, v1.Taint{Key: memoryKey, Effect: v1.TaintEffectNoSchedule})
	e.node(t, diskNode, v1.Taint{Key: diskKey, Effect: v1.TaintEffectNoSchedule})
	e.node(t, pidNode, v1.Taint{Key: pidKey, Effect: v1.TaintEffectNoSchedule})

	burstable := func(s *v1.PodSpec) { s.Containers[0].Resources.Requests = resources("memory", "64Mi") }

	// Before the policy: evictd's taint keeps a Burstable pod away.
	before := e.create(t, mpPod("burstable-before", memNode, burstable))
	if got := withoutDefaults(before.Spec.Tolerations); len(got) != 0 {
		t.Fatalf("without the policy, pod %s got tolerations %+v", before.Name, got)
	}
	e.waitUnschedulable(t, before.Name)

	e.applyPolicy(t)

	t.Run("pods under memory pressure", func(t *testing.T) {
		kubelets := v1.Toleration{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}
		for _, tc := range []struct {
			name  string
			spec  func(*v1.PodSpec)
			class v1.PodQOSClass
			added bool // the policy adds its toleration after the pod's own
			runs  bool // the scheduler binds it to the node
		}{
			{"burstable", burstable, v1.PodQOSBurstable, true, true},
			{"burstable-cpu-limit-only", func(s *v1.PodSpec) { s.Containers[0].Resources.Limits = resources("cpu", "100m") }, v1.PodQOSBurstable, true, true},
			{"guaranteed", func(s *v1.PodSpec) {
				s.Containers[0].Resources.Limits = resources("cpu", "100m", "memory", "64Mi")
			}, v1.PodQOSGuaranteed, true, true},
			{"besteffort", nil, v1.PodQOSBestEffort, false, false},
			{"besteffort-zero-requests", func(s *v1.PodSpec) {
				s.Containers[0].Resources.Requests = resources("cpu", "0", "memory", "0")
			}, v1.PodQOSBestEffort, false, false},
			{"besteffort-ephemeral-storage", func(s *v1.PodSpec) {
				s.Containers[0].Resources.Requests = resources("ephemeral-storage", "1Gi")
				s.Containers[0].Resources.Limits = resources("ephemeral-storage", "1Gi")
			}, v1.PodQOSBestEffort, false, false},
			{"pod-level-requests-only", func(s *v1.PodSpec) {
				s.Resources = &v1.ResourceRequirements{Requests: resources("memory", "64Mi")}
			}, v1.PodQOSBurstable, true, true},
			{"pod-level-guaranteed", func(s *v1.PodSpec) {
				s.Resources = &v1.ResourceRequirements{Limits: resources("cpu", "100m", "memory", "64Mi")}
			}, v1.PodQOSGuaranteed, true, true},
			// Pod-level resources decide alone once they name cpu,
			// memory or hugepages: an empty spec.resources leaves the
			// containers to decide (1.37's rule; 1.36's API server made
			// this pod BestEffort).
			{"empty-pod-level-resources", func(s *v1.PodSpec) {
				burstable(s)
				s.Resources = &v1.ResourceRequirements{}
			}, v1.PodQOSBurstable, true, true},
			{"init-container-requests-only", func(s *v1.PodSpec) {
				s.InitContainers = []v1.Container{{Name: "init", Image: "example.invalid/none", Resources: v1.ResourceRequirements{Requests: resources("cpu", "100m")}}}
			}, v1.PodQOSBurstable, true, true},
			{"sidecar-limits-only", func(s *v1.PodSpec) {
				s.InitContainers = []v1.Container{{Name: "sidecar", Image: "example.invalid/none", RestartPolicy: new(v1.ContainerRestartPolicyAlways),
					Resources: v1.ResourceRequirements{Limits: resources("memory", "64Mi")}}}
			}, v1.PodQOSBurstable, true, true},
			{"second-container-requests", func(s *v1.PodSpec) {
				s.Containers = append(s.Containers, v1.Container{Name: "d", Image: "example.invalid/none", Resources: v1.ResourceRequirements{Requests: resources("memory", "1Mi")}})
			}, v1.PodQOSBurstable, true, true},
			{"burstable-tolerating-exists-noschedule", func(s *v1.PodSpec) {
				burstable(s)
				s.Tolerations = []v1.Toleration{memoryToleration(v1.TaintEffectNoSchedule)}
			}, v1.PodQOSBurstable, false, true},
			{"burstable-tolerating-every-effect", func(s *v1.PodSpec) {
				burstable(s)
				s.Tolerations = []v1.Toleration{{Key: memoryKey, Operator: v1.TolerationOpExists}}
			}, v1.PodQOSBurstable, false, true},
			{"burstable-tolerating-equal-empty-value", func(s *v1.PodSpec) {
				burstable(s)
				s.Tolerations = []v1.Toleration{{Key: memoryKey, Operator: v1.TolerationOpEqual, Effect: v1.TaintEffectNoSchedule}}
			}, v1.PodQOSBurstable, false, true},
			{"burstable-tolerating-every-taint", func(s *v1.PodSpec) {
				burstable(s)
				s.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
			}, v1.PodQOSBurstable, false, true},
			{"burstable-tolerating-every-noschedule-taint", func(s *v1.PodSpec) {
				burstable(s)
				s.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
			}, v1.PodQOSBurstable, false, true},
			{"burstable-tolerating-noexecute-only", func(s *v1.PodSpec) {
				burstable(s)
				s.Tolerations = []v1.Toleration{memoryToleration(v1.TaintEffectNoExecute)}
			}, v1.PodQOSBurstable, true, true},
			{"burstable-tolerating-another-value", func(s *v1.PodSpec) {
				burstable(s)
				s.Tolerations = []v1.Toleration{{Key: memoryKey, Operator: v1.TolerationOpEqual, Value: "x", Effect: v1.TaintEffectNoSchedule}}
			}, v1.PodQOSBurstable, true, true},
			{"burstable-tolerating-kubelets-and-disk", func(s *v1.PodSpec) {
				burstable(s)
				s.Tolerations = []v1.Toleration{kubelets, {Key: diskKey, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
			}, v1.PodQOSBurstable, true, true},
			{"besteffort-tolerating-itself", func(s *v1.PodSpec) {
				s.Tolerations = []v1.Toleration{memoryToleration(v1.TaintEffectNoSchedule)}
			}, v1.PodQOSBestEffort, false, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				sent := mpPod(tc.name, memNode, tc.spec)
				if got := qos.Class(sent); got != tc.class {
					t.Fatalf("internal/qos: class %s, want %s", got, tc.class)
				}
				p := e.create(t, sent)
				// The API server sets the class after admission, by its rule.
				if p.Status.QOSClass != tc.class {
					t.Fatalf("the API server's class %s, want %s", p.Status.QOSClass, tc.class)
				}
				want := slices.Clone(sent.Spec.Tolerations)
				if tc.added {
					want = append(want, memoryToleration(v1.TaintEffectNoSchedule))
				}
				if got := withoutDefaults(p.Spec.Tolerations); !reflect.DeepEqual(got, want) {
					t.Fatalf("tolerations: got %+v, want %+v", got, want)
				}
				if tc.runs {
					e.waitScheduled(t, p.Name, memNode)
				} else {
					e.waitUnschedulable(t, p.Name)
				}
			})
		}
	})

	t.Run("LimitRange defaults", func(t *testing.T) {
		// LimitRanger runs before the policy: a pod without resources in a
		// namespace whose LimitRange gives containers a default request is
		// Burstable when the policy sees it, as when the API server sets
		// its class.
		const limited = "limited"
		if _, err := e.admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: limited}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s: %v", limited, err)
		}
		if _, err := e.admin.CoreV1().ServiceAccounts(limited).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create default ServiceAccount in %s: %v", limited, err)
		}
		lr := &v1.LimitRange{
			ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: limited},
			Spec: v1.LimitRangeSpec{Limits: []v1.LimitRangeItem{{
				Type: v1.LimitTypeContainer, DefaultRequest: resources("memory", "64Mi"),
			}}},
		}
		if _, err := e.admin.CoreV1().LimitRanges(limited).Create(ctx, lr, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create LimitRange: %v", err)
		}
		sent := mpPod("defaulted", memNode, nil)
		sent.Namespace = limited
		// LimitRanger reads LimitRanges through an informer: retry until
		// the default request is there.
		var p *v1.Pod
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := e.admin.CoreV1().Pods(limited).Create(ctx, sent, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				return false, fmt.Errorf("dry-run create of pod %s: %w", sent.Name, err)
			}
			if got.Spec.Containers[0].Resources.Requests.Memory().IsZero() {
				return false, nil
			}
			p, err = e.admin.CoreV1().Pods(limited).Create(ctx, sent, metav1.CreateOptions{})
			return true, err
		})
		if err != nil {
			t.Fatalf("create pod %s/%s with the LimitRange's default: %v", limited, sent.Name, err)
		}
		if p.Status.QOSClass != v1.PodQOSBurstable {
			t.Fatalf("the API server's class %s, want %s", p.Status.QOSClass, v1.PodQOSBurstable)
		}
		if got, want := withoutDefaults(p.Spec.Tolerations), []v1.Toleration{memoryToleration(v1.TaintEffectNoSchedule)}; !reflect.DeepEqual(got, want) {
			t.Fatalf("tolerations: got %+v, want %+v", got, want)
		}
		var bound *v1.Pod
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			bound, err = e.admin.CoreV1().Pods(limited).Get(ctx, p.Name, metav1.GetOptions{})
			return err == nil && bound.Spec.NodeName == memNode, err
		})
		if err != nil {
			t.Fatalf("pod %s/%s was not scheduled on %s: %v; conditions: %+v", limited, p.Name, memNode, err, bound.Status.Conditions)
		}
	})

	t.Run("disk and PID pressure", func(t *testing.T) {
		for _, node := range []string{diskNode, pidNode} {
			t.Run(node, func(t *testing.T) {
				p := e.create(t, mpPod("burstable-on-"+node, node, burstable))
				want := []v1.Toleration{memoryToleration(v1.TaintEffectNoSchedule)}
				if got := withoutDefaults(p.Spec.Tolerations); !reflect.DeepEqual(got, want) {
					t.Fatalf("tolerations: got %+v, want %+v", got, want)
				}
				e.waitUnschedulable(t, p.Name)
			})
		}
	})

	t.Run("pod updates are not mutated", func(t *testing.T) {
		// The pod from before the policy keeps its tolerations (none of
		// evictd's) through an update.
		patch := []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)
		p, err := e.admin.CoreV1().Pods(mpNamespace).Patch(ctx, before.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("label pod %s: %v", before.Name, err)
		}
		if got := withoutDefaults(p.Spec.Tolerations); len(got) != 0 {
			t.Fatalf("pod %s got tolerations %+v on update", p.Name, got)
		}
	})
	// The effect variable follows evictd's --pressure-taint-effect: with
	// NoExecute the toleration's effect is NoExecute; with '' it has no
	// effect and tolerates the taint whatever its effect.
	t.Run("effect", func(t *testing.T) {
		const node = "node-memory-noexecute"
		e.node(t, node, v1.Taint{Key: memoryKey, Effect: v1.TaintEffectNoExecute})
		for _, effect := range []v1.TaintEffect{v1.TaintEffectNoExecute, ""} {
			t.Run(fmt.Sprintf("%q", effect), func(t *testing.T) {
				e.setEffect(t, effect)
				for _, tc := range []struct {
					name  string
					spec  func(*v1.PodSpec)
					added bool
					runs  bool
				}{
					{"burstable", burstable, true, true},
					{"besteffort", nil, false, false},
					{"burstable-tolerating-noschedule-only", func(s *v1.PodSpec) {
						burstable(s)
						s.Tolerations = []v1.Toleration{memoryToleration(v1.TaintEffectNoSchedule)}
					}, true, true},
					{"burstable-tolerating-every-effect", func(s *v1.PodSpec) {
						burstable(s)
						s.Tolerations = []v1.Toleration{{Key: memoryKey, Operator: v1.TolerationOpExists}}
					}, false, true},
				} {
					t.Run(tc.name, func(t *testing.T) {
						name := strings.ToLower(fmt.Sprintf("%s-%s", tc.name, cmp.Or(string(effect), "any")))
						sent := mpPod(name, node, tc.spec)
						p := e.create(t, sent)
						want := slices.Clone(sent.Spec.Tolerations)
						if tc.added {
							want = append(want, memoryToleration(effect))
						}
						if got := withoutDefaults(p.Spec.Tolerations); !reflect.DeepEqual(got, want) {
							t.Fatalf("tolerations: got %+v, want %+v", got, want)
						}
						if tc.runs {
							e.waitScheduled(t, p.Name, node)
						} else {
							e.waitUnschedulable(t, p.Name)
						}
					})
				}
			})
		}
	})
}
