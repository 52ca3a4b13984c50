package qos

import (
	v1 "k8s.io/api/core/v1"
)

// Class is the QoS class Kubernetes gives pod, as submitted or as stored:
// Compute of pod with the API server's resource defaults (WithDefaults).
// It ignores pod.Status.QOSClass; pod is not changed.
func Class(pod *v1.Pod) v1.PodQOSClass {
	return Compute(WithDefaults(pod))
}

// Compute is k8s.io/kubernetes/pkg/apis/core/v1/helper/qos.ComputePodQOS
// as Kubernetes 1.36 runs it, with the PodLevelResources feature on (its
// default since 1.34):
//
//   - only cpu and memory count, and only positive quantities: a zero
//     request or limit, ephemeral-storage, hugepages and extended
//     resources are as if absent;
//   - when the pod has a resources stanza (pod-level resources), it alone
//     decides and the containers are not looked at;
//   - otherwise the app and init containers (not the ephemeral ones) are
//     summed: BestEffort when none has a cpu or memory request or limit;
//     Guaranteed when every one has both a cpu and a memory limit and the
//     summed requests equal the summed limits; else Burstable.
//
// pod must have its defaults, as the API server's copy has; Class applies
// them.
//
// It is written here, not imported: k8s.io/component-helpers has no copy,
// and Kubernetes' own sits in k8s.io/kubernetes behind its feature gates,
// which is not a library. k8s.io/kubectl/pkg/util/qos.ComputePodQOS is the
// same rule (pod-level resources always on) and links nothing else the
// agent lacks, but it would make the k8s.io/kubectl module, and the
// modules of its go.mod, requirements of evictd's; the tests pin the rule,
// so that a switch to it can be checked.
func Compute(pod *v1.Pod) v1.PodQOSClass {
	requests := v1.ResourceList{}
	limits := v1.ResourceList{}
	guaranteed := true
	if pod.Spec.Resources != nil {
		addQOSResources(requests, pod.Spec.Resources.Requests)
		if len(pod.Spec.Resources.Limits) > 0 {
			if !addQOSResources(limits, pod.Spec.Resources.Limits) {
				guaranteed = false
			}
		}
	} else {
		for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range cs {
				addQOSResources(requests, cs[i].Resources.Requests)
				if !addQOSResources(limits, cs[i].Resources.Limits) {
					guaranteed = false
				}
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// addQOSResources adds the positive cpu and memory quantities of from to
// sum, and reports whether from had both.
func addQOSResources(sum, from v1.ResourceList) (cpuAndMemory bool) {
	var cpu, memory bool
	for name, q := range from {
		if (name != v1.ResourceCPU && name != v1.ResourceMemory) || q.Sign() != 1 {
			continue
		}
		cpu = cpu || name == v1.ResourceCPU
		memory = memory || name == v1.ResourceMemory
		total := q.DeepCopy()
		if prev, ok := sum[name]; ok {
			total.Add(prev)
		}
		sum[name] = total
	}
	return cpu && memory
}
