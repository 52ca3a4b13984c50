package testnode

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod returns a pod of the default namespace bound to the node that runs
// the workload binary with args (e.g. "alloc", "--mib", "300"), in one
// container named "app", with no requests (BestEffort) unless
// Requests/Limits are set on the result.
func (n *Node) Pod(name string, args ...string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec:       n.PodSpec(args...),
	}
}

// PodSpec returns the spec of Pod, for templates (ReplicaSets, DaemonSets)
// without the nodeName when unbound is wanted.
func (n *Node) PodSpec(args ...string) v1.PodSpec {
	grace := int64(30)
	no := false
	return v1.PodSpec{
		NodeName:                      n.name,
		AutomountServiceAccountToken:  &no,
		TerminationGracePeriodSeconds: &grace,
		Containers: []v1.Container{{
			Name:            "app",
			Image:           WorkloadImage,
			ImagePullPolicy: v1.PullNever,
			Args:            args,
		}},
	}
}

// Resources sets the first container's requests and limits (memory and
// cpu as quantities, "" for none) and returns pod.
func Resources(pod *v1.Pod, reqMem, limMem, cpu string) *v1.Pod {
	r := &pod.Spec.Containers[0].Resources
	set := func(l *v1.ResourceList, name v1.ResourceName, q string) {
		if q == "" {
			return
		}
		if *l == nil {
			*l = v1.ResourceList{}
		}
		(*l)[name] = resource.MustParse(q)
	}
	set(&r.Requests, v1.ResourceMemory, reqMem)
	set(&r.Limits, v1.ResourceMemory, limMem)
	set(&r.Requests, v1.ResourceCPU, cpu)
	if limMem != "" && limMem == reqMem {
		set(&r.Limits, v1.ResourceCPU, cpu)
	}
	return pod
}

// RunPod creates pod and waits until it is Running with its containers
// ready, returning it as the API server has it then.
func (n *Node) RunPod(ctx context.Context, pod *v1.Pod, timeout time.Duration) (*v1.Pod, error) {
	created, err := n.admin.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	return n.WaitPod(ctx, created.Namespace, created.Name, timeout, func(p *v1.Pod) bool {
		if p.Status.Phase != v1.PodRunning {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.ContainersReady {
				return c.Status == v1.ConditionTrue
			}
		}
		return false
	})
}
