package qos

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// rl builds a ResourceList from name, quantity pairs.
func rl(pairs ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		l[v1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return l
}

// ctr is a container with requests and limits.
func ctr(name string, req, lim v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
}

// TestClass: the rules of Kubernetes' ComputePodQOS with PodLevelResources
// on, applied to pods as submitted (the API server's defaults first).
func TestClass(t *testing.T) {
	g := rl("cpu", "500m", "memory", "128Mi")
	tests := []struct {
		name string
		spec v1.PodSpec
		want v1.PodQOSClass
	}{
		// BestEffort: no positive cpu or memory request or limit anywhere.
		{"no containers", v1.PodSpec{}, v1.PodQOSBestEffort},
		{"no resources", v1.PodSpec{Containers: []v1.Container{ctr("a", nil, nil), ctr("b", v1.ResourceList{}, v1.ResourceList{})}}, v1.PodQOSBestEffort},
		{"zero requests", v1.PodSpec{Containers: []v1.Container{ctr("a", rl("cpu", "0", "memory", "0"), nil)}}, v1.PodQOSBestEffort},
		{"zero requests and limits", v1.PodSpec{Containers: []v1.Container{ctr("a", rl("cpu", "0", "memory", "0"), rl("cpu", "0", "memory", "0"))}}, v1.PodQOSBestEffort},
		{"ephemeral-storage request only", v1.PodSpec{Containers: []v1.Container{ctr("a", rl("ephemeral-storage", "1Gi"), nil)}}, v1.PodQOSBestEffort},
		{"ephemeral-storage request and limit", v1.PodSpec{Containers: []v1.Container{ctr("a", rl("ephemeral-storage", "1Gi"), rl("ephemeral-storage", "2Gi"))}}, v1.PodQOSBestEffort},
		{"extended resource and hugepages only",
			v1.PodSpec{Containers: []v1.Container{ctr("a", nil, rl("example.com/gpu", "1", "hugepages-2Mi", "4Mi"))}}, v1.PodQOSBestEffort},
		{"hugepages with zero cpu and memory",
			v1.PodSpec{Containers: []v1.Container{ctr("a", rl("cpu", "0", "memory", "0", "hugepages-2Mi", "1Gi"), rl("cpu", "0", "memory", "0", "hugepages-2Mi", "1Gi"))}}, v1.PodQOSBestEffort},
		{"init container without resources", v1.PodSpec{Containers: []v1.Container{ctr("a", nil, nil)}, InitContainers: []v1.Container{ctr("i", nil, nil)}}, v1.PodQOSBestEffort},

		// Guaranteed: cpu and memory limits on every container, app and
		// init, and the requests equal to them.
		{"limits equal requests", v1.PodSpec{Containers: []v1.Container{ctr("a", g, g), ctr("b", g, g)}}, v1.PodQOSGuaranteed},
		{"limits only, requests default to them", v1.PodSpec{Containers: []v1.Container{ctr("a", nil, g)}}, v1.PodQOSGuaranteed},
		{"equal in other units", v1.PodSpec{Containers: []v1.Container{ctr("a", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "1000m", "memory", "1073741824"))}}, v1.PodQOSGuaranteed},
		{"ephemeral-storage does not matter",
			v1.PodSpec{Containers: []v1.Container{ctr("a", rl("cpu", "1", "memory", "1Gi", "ephemeral-storage", "1Gi"), rl("cpu", "1", "memory", "1Gi", "ephemeral-storage", "2Gi"))}}, v1.PodQOSGuaranteed},
		{"zero ephemeral-storage request does not matter",
			v1.PodSpec{Containers: []v1.Container{ctr("a", rl("cpu", "1", "memory", "1Gi", "ephemeral-storage", "0"), rl("cpu", "1", "memory", "1Gi"))}}, v1.PodQOSGuaranteed},
		{"init containers guaranteed too",
			v1.PodSpec{Containers: []v1.Container{ctr("a", g, g)}, InitContainers: []v1.Container{ctr("i", nil, rl("cpu", "1", "memory", "1Gi"))}}, v1.PodQOSGuaranteed},

		// Burstable: anything else.
		{"request below limit", v1.PodSpec{Containers: []v1.Container{ctr("a", rl("cpu", "100m", "memory", "128Mi"), g)}}, v1.PodQOSBurstable},
		{"cpu request a fraction below its limit", v1.PodSpec{Containers: []v1.Container{ctr("a", rl("cpu", "500m", "memory", "1Gi"), rl("cpu", "1", "memory", "1Gi"))}}, v1.PodQOSBurstable},
		{"memory limit only", v1.PodSpec{Containers: []v1.Container{ctr("a", nil, rl("memory", "128Mi"))}}, v1.PodQOSBurstable},
		{"cpu limit only", v1.PodSpec{Containers: []v1.Container{ctr("a", nil, rl("cpu", "1"))}}, v1.PodQOSBurstable},
		{"zero cpu limit is no limit", v1.PodSpec{Containers: []v1.Container{ctr("a", rl("memory", "1Gi"), rl("cpu", "0", "memory", "1Gi"))}}, v1.PodQOSBurstable},
		{"requests only", v1.PodSpec{Containers: []v1.Container{ctr("a", rl("memory", "1Mi"), nil)}}, v1.PodQOSBurstable},
		{"zero requests, positive limits", v1.PodSpec{Containers: []v1.Container{ctr("a", rl("cpu", "0", "memory", "0"), rl("cpu", "100m", "memory", "200Mi"))}}, v1.PodQOSBurstable},
		{"summed requests match summed limits, one container unbounded",
			v1.PodSpec{Containers: []v1.Container{ctr("a", rl("cpu", "100m", "memory", "100Mi"), rl("cpu", "200m", "memory", "200Mi")), ctr("b", rl("cpu", "100m", "memory", "100Mi"), nil)}}, v1.PodQOSBurstable},
		{"one container guaranteed, one without resources", v1.PodSpec{Containers: []v1.Container{ctr("a", g, g), ctr("b", nil, nil)}}, v1.PodQOSBurstable},
		{"init container without limits", v1.PodSpec{Containers: []v1.Container{ctr("a", g, g)}, InitContainers: []v1.Container{ctr("i", nil, nil)}}, v1.PodQOSBurstable},
		{"init container requests only", v1.PodSpec{Containers: []v1.Container{ctr("a", nil, nil)}, InitContainers: []v1.Container{ctr("i", rl("cpu", "100m"), nil)}}, v1.PodQOSBurstable},

		// Pod-level resources decide alone.
		{"pod-level limits only, requests default to them",
			v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: g}, Containers: []v1.Container{ctr("a", nil, nil)}}, v1.PodQOSGuaranteed},
		{"pod-level requests equal limits, containers burstable",
			v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: g, Limits: g}, Containers: []v1.Container{ctr("a", rl("cpu", "100m", "memory", "64Mi"), nil), ctr("b", nil, nil)}}, v1.PodQOSGuaranteed},
		{"pod-level requests only, containers guaranteed",
			v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: g}, Containers: []v1.Container{ctr("a", g, g)}}, v1.PodQOSBurstable},
		{"pod-level memory limit only, containers guaranteed",
			v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: rl("memory", "1Gi")}, Containers: []v1.Container{ctr("a", g, g)}}, v1.PodQOSBurstable},
		{"pod-level limits, container requests become the pod's",
			v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: g}, Containers: []v1.Container{ctr("a", rl("memory", "64Mi"), nil)}}, v1.PodQOSBurstable},
		{"pod-level limits, init container without limits",
			v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: g}, Containers: []v1.Container{ctr("a", nil, nil)}, InitContainers: []v1.Container{ctr("i", nil, nil)}}, v1.PodQOSGuaranteed},

		// An empty spec.resources sets no pod-level resources: the
		// containers decide (1.37's PodLevelResourcesFixKubeletQOSClass;
		// 1.36's API server said BestEffort).
		{"empty pod-level resources, containers burstable",
			v1.PodSpec{Resources: &v1.ResourceRequirements{}, Containers: []v1.Container{ctr("a", rl("memory", "64Mi"), nil)}}, v1.PodQOSBurstable},
		{"empty pod-level lists, containers guaranteed",
			v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}, Containers: []v1.Container{ctr("a", g, g)}}, v1.PodQOSGuaranteed},
		{"empty pod-level resources, containers without resources",
			v1.PodSpec{Resources: &v1.ResourceRequirements{}, Containers: []v1.Container{ctr("a", nil, nil)}}, v1.PodQOSBestEffort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: tt.spec}
			before := pod.DeepCopy()
			if got := Class(pod); got != tt.want {
				t.Errorf("Class = %s, want %s", got, tt.want)
			}
			if !reflect.DeepEqual(pod, before) {
				t.Errorf("Class changed the pod:\n got %+v\nwant %+v", pod.Spec, before.Spec)
			}
			// The API server stores the pod with its defaults; its class
			// is the same.
			if got := Class(WithDefaults(pod)); got != tt.want {
				t.Errorf("Class(WithDefaults) = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestClassIgnoresStatus: Class computes; status.qosClass is the caller's
// to prefer.
func TestClassIgnoresStatus(t *testing.T) {
	pod := &v1.Pod{Status: v1.PodStatus{QOSClass: v1.PodQOSGuaranteed}}
	if got := Class(pod); got != v1.PodQOSBestEffort {
		t.Errorf("Class = %s, want BestEffort", got)
	}
}

func TestWithDefaults(t *testing.T) {
	g := rl("cpu", "1", "memory", "1Gi")
	tests := []struct {
		name string
		spec v1.PodSpec
		want v1.PodSpec
	}{
		{"container limits become its requests",
			v1.PodSpec{Containers: []v1.Container{ctr("a", rl("cpu", "100m"), g)}, InitContainers: []v1.Container{ctr("i", nil, rl("memory", "1Mi"))}},
			v1.PodSpec{Containers: []v1.Container{ctr("a", rl("cpu", "100m", "memory", "1Gi"), g)}, InitContainers: []v1.Container{ctr("i", rl("memory", "1Mi"), rl("memory", "1Mi"))}}},
		{"pod-level requests from the containers, then the pod-level limits",
			v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: g}, Containers: []v1.Container{ctr("a", rl("memory", "64Mi"), nil)}},
			v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "64Mi"), Limits: g}, Containers: []v1.Container{ctr("a", rl("memory", "64Mi"), nil)}}},
		{"absurd magnitudes bounded to 1e100, keeping their sign, before anything compares them",
			v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: rl("memory", "1e3000000")},
				Containers: []v1.Container{ctr("a", rl("memory", "64Mi", "cpu", "1n"), rl("memory", "1e3000000", "ephemeral-storage", "-1e3000000"))}},
			v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: rl("cpu", "1n", "memory", "64Mi"), Limits: rl("memory", "1e100")},
				Containers: []v1.Container{ctr("a", rl("memory", "64Mi", "cpu", "1n", "ephemeral-storage", "-1e100"), rl("memory", "1e100", "ephemeral-storage", "-1e100"))}}},
		{"pod-level requests without limits are left alone",
			v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: rl("cpu", "1")}, Containers: []v1.Container{ctr("a", rl("memory", "64Mi"), nil)}},
			v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: rl("cpu", "1")}, Containers: []v1.Container{ctr("a", rl("memory", "64Mi"), nil)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: tt.spec}
			before := pod.DeepCopy()
			got := WithDefaults(pod)
			if !equalSpecs(got.Spec, tt.want) {
				t.Errorf("got %+v\nwant %+v", got.Spec, tt.want)
			}
			if !reflect.DeepEqual(pod, before) {
				t.Errorf("WithDefaults changed its argument")
			}
			if again := WithDefaults(got); again != got {
				t.Errorf("a pod with its defaults was copied again")
			}
		})
	}
}

// equalSpecs compares the requests and limits of two specs by value
// (resource.Quantity caches its string form, so reflect.DeepEqual cannot).
func equalSpecs(a, b v1.PodSpec) bool {
	same := func(x, y v1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for name, q := range x {
			if p, ok := y[name]; !ok || p.Cmp(q) != 0 {
				return false
			}
		}
		return true
	}
	sameRR := func(x, y v1.ResourceRequirements) bool {
		return same(x.Requests, y.Requests) && same(x.Limits, y.Limits)
	}
	sameCs := func(x, y []v1.Container) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Name != y[i].Name || !sameRR(x[i].Resources, y[i].Resources) {
				return false
			}
		}
		return true
	}
	if (a.Resources == nil) != (b.Resources == nil) || (a.Resources != nil && !sameRR(*a.Resources, *b.Resources)) {
		return false
	}
	return sameCs(a.Containers, b.Containers) && sameCs(a.InitContainers, b.InitContainers)
}
