package podsource

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/evictd/evictd/signals"
)

// qosClass is the pod's QoS class as the API server stored it in
// status.qosClass, or, when that is empty (a pod that did not come from the
// API server) or not a class ranking knows, computed as Kubernetes does.
func qosClass(pod *v1.Pod, note func(string, ...any)) signals.QOSClass {
	switch c := pod.Status.QOSClass; c {
	case v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort:
		return signals.QOSClass(c)
	case "":
	default:
		note("status.qosClass %q is not a QoS class; computed from the pod's resources instead", c)
	}
	return signals.QOSClass(computeQOS(pod))
}

// computeQOS is k8s.io/kubernetes/pkg/apis/core/v1/helper/qos.ComputePodQOS
// with the PodLevelResources feature on (component-helpers has no copy):
// only cpu and memory count. Pod-level resources, when the pod has a
// resources stanza, decide alone. Otherwise BestEffort when no container has
// a cpu or memory request or limit; Guaranteed when every container (app
// and init) has both cpu and memory limits and, summed over the containers,
// the requests equal the limits; else Burstable. pod must have its
// defaults (withDefaults), as the API server's copy has.
func computeQOS(pod *v1.Pod) v1.PodQOSClass {
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

// withDefaults returns pod with the resource defaults the API server
// applies on create (k8s.io/kubernetes/pkg/apis/core/v1 SetDefaults_Pod,
// PodLevelResources on): a container's missing requests default to its
// limits; when pod-level limits are set, missing pod-level cpu and memory
// requests default to the containers' aggregated requests, then to the
// pod-level limits. A pod that needs none of this (every pod read from the
// API server) is returned as is; otherwise a copy, pod is not changed.
// Hugepage limit defaulting is left out: it touches no resource evictd
// reads.
func withDefaults(pod *v1.Pod) *v1.Pod {
	if !containersNeedDefaults(pod.Spec.Containers) && !containersNeedDefaults(pod.Spec.InitContainers) &&
		len(podRequestDefaults(pod)) == 0 {
		return pod
	}
	pod = pod.DeepCopy()
	defaultContainerRequests(pod.Spec.Containers)
	defaultContainerRequests(pod.Spec.InitContainers)
	if add := podRequestDefaults(pod); len(add) > 0 {
		if pod.Spec.Resources.Requests == nil {
			pod.Spec.Resources.Requests = v1.ResourceList{}
		}
		for name, q := range add {
			pod.Spec.Resources.Requests[name] = q
		}
	}
	return pod
}

// containersNeedDefaults reports a container with a limit but no request
// for the same resource.
func containersNeedDefaults(cs []v1.Container) bool {
	for i := range cs {
		for name := range cs[i].Resources.Limits {
			if _, ok := cs[i].Resources.Requests[name]; !ok {
				return true
			}
		}
	}
	return false
}

// defaultContainerRequests sets each container's missing requests to its
// limits.
func defaultContainerRequests(cs []v1.Container) {
	for i := range cs {
		r := &cs[i].Resources
		for name, lim := range r.Limits {
			if _, ok := r.Requests[name]; ok {
				continue
			}
			if r.Requests == nil {
				r.Requests = v1.ResourceList{}
			}
			r.Requests[name] = lim.DeepCopy()
		}
	}
}

// podRequestDefaults returns the pod-level requests the API server would
// add (defaultPodRequests): only when pod-level limits are set, for cpu and
// memory the containers' aggregated requests, then for any supported
// resource the pod-level limit. The containers must have their defaults.
func podRequestDefaults(pod *v1.Pod) v1.ResourceList {
	res := pod.Spec.Resources
	if res == nil || len(res.Limits) == 0 {
		return nil
	}
	add := v1.ResourceList{}
	missing := func(name v1.ResourceName) bool {
		_, set := res.Requests[name]
		_, added := add[name]
		return !set && !added
	}
	for name, q := range resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if (name == v1.ResourceCPU || name == v1.ResourceMemory) && missing(name) {
			add[name] = q.DeepCopy()
		}
	}
	for name, q := range res.Limits {
		if resourcehelper.IsSupportedPodLevelResource(name) && missing(name) {
			add[name] = q.DeepCopy()
		}
	}
	return add
}
