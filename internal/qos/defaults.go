package qos

import (
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// WithDefaults returns pod with the resource defaults the API server
// applies on create (k8s.io/kubernetes/pkg/apis/core/v1 SetDefaults_Pod,
// PodLevelResources on), on which the QoS class depends: a container's
// missing requests default to its limits; when pod-level limits are set,
// missing pod-level cpu and memory requests default to the containers'
// aggregated requests, then to the pod-level limits. A pod that needs none
// of this (every pod read from the API server) is returned as is;
// otherwise a copy, pod is not changed. Hugepage limit defaulting is left
// out: it touches no resource evictd reads.
//
// Quantities of absurd magnitude (beyond ±1e100 of their unit, such as a
// tenant's memory limit of 1e3000000) are first bounded to ±1e100, which
// is still beyond every limit evictd clamps to: comparing such a quantity
// costs time that grows with its exponent (half a second at 1e3000000,
// without end at 1e2147483647), and no node has that much of anything.
func WithDefaults(pod *v1.Pod) *v1.Pod {
	pod = bounded(pod)
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

// hugeExponent bounds a quantity's magnitude: 10^hugeExponent of its unit
// (bytes, cores). Comparing quantities up to it costs microseconds.
const hugeExponent = 100

// bounded returns pod, or a copy with every resource quantity of absurd
// magnitude replaced by the bound, keeping its sign. Only cheap reads of
// the quantities (sign, approximate value) are made.
func bounded(pod *v1.Pod) *v1.Pod {
	if !anyAbsurd(pod) {
		return pod
	}
	pod = pod.DeepCopy()
	for _, l := range resourceLists(pod) {
		for name, q := range l {
			if b, ok := bound(q); ok {
				l[name] = b
			}
		}
	}
	return pod
}

// anyAbsurd reports whether any resource quantity of pod needs bounding.
func anyAbsurd(pod *v1.Pod) bool {
	for _, l := range resourceLists(pod) {
		for _, q := range l {
			if _, ok := bound(q); ok {
				return true
			}
		}
	}
	return false
}

// resourceLists returns every resource list of pod whose quantities
// evictd reads: each container's and init container's requests and
// limits, the pod-level ones and the overhead.
func resourceLists(pod *v1.Pod) []v1.ResourceList {
	lists := []v1.ResourceList{pod.Spec.Overhead}
	if r := pod.Spec.Resources; r != nil {
		lists = append(lists, r.Requests, r.Limits)
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			lists = append(lists, cs[i].Resources.Requests, cs[i].Resources.Limits)
		}
	}
	return lists
}

// bound returns the bounded quantity for q and true when q's magnitude is
// absurd, else false.
func bound(q resource.Quantity) (resource.Quantity, bool) {
	sign := q.Sign()
	if sign == 0 {
		return q, false
	}
	// The API server stores quantities to the nano (smaller ones round
	// up), so only the large side needs a bound.
	if f := math.Abs(q.AsApproximateFloat64()); f > math.Pow10(hugeExponent) || math.IsInf(f, 0) || math.IsNaN(f) {
		b := resource.NewScaledQuantity(int64(sign), hugeExponent)
		b.Format = resource.DecimalExponent // "1e100"
		return *b, true
	}
	return q, false
}
