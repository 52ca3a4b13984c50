package snapshot

import (
	"reflect"
	"strings"
	"testing"

	"github.com/evictd/evictd/signals"
)

// TestReadPodLevelResources: a pod's "resources" are its pod-level
// resources (spec.resources): its requests are the pod-level ones, as the
// kubelet's, its pod-level memory request is kept as Kubernetes prints it
// for the eviction message, and its QoS class is the pod-level one.
func TestReadPodLevelResources(t *testing.T) {
	const mi = 1 << 20
	sc, err := Read(strings.NewReader(`{"pods": [
	  {"name": "kubelet-case", "resources": {"requests": {"memory": "250Mi"}, "limits": {"memory": "1000Mi"}},
	   "containers": [{"name": "regular1"}, {"name": "regular2"}]},
	  {"name": "decimal", "resources": {"requests": {"memory": "1G"}},
	   "containers": [{"name": "app", "requests": {"memory": "100Mi", "ephemeral-storage": "1Gi"}}]},
	  {"name": "limit-only", "resources": {"limits": {"memory": "1Gi"}},
	   "containers": [{"name": "app", "requests": {"memory": "100Mi"}}, {"name": "sidecar", "requests": {"memory": "28Mi"}}]},
	  {"name": "guaranteed", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
	   "containers": [{"name": "app"}]},
	  {"name": "cpu-only", "resources": {"requests": {"cpu": "1"}},
	   "containers": [{"name": "app", "requests": {"memory": "100Mi"}}]},
	  {"name": "effective-wins", "requests": {"memory": "300Mi"}, "resources": {"requests": {"memory": "250Mi"}},
	   "containers": [{"name": "app"}]},
	  {"name": "empty", "resources": {}, "containers": [{"name": "app", "requests": {"memory": "100Mi"}}]},
	  {"name": "none", "containers": [{"name": "app", "requests": {"memory": "100Mi"}}]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		podLevel       *signals.Request
		memory, disk   int64
		qos            signals.QOSClass
		containerReqMi []int64
	}
	wants := map[string]want{
		"kubelet-case": {&signals.Request{Bytes: 250 * mi, Text: "250Mi"}, 250 * mi, 0, signals.Burstable, []int64{0, 0}},
		// No ephemeral-storage at pod level: the kubelet sees none.
		"decimal":        {&signals.Request{Bytes: 1000000000, Text: "1G"}, 1000000000, 0, signals.Burstable, []int64{100}},
		"limit-only":     {&signals.Request{Bytes: 128 * mi, Text: "128Mi"}, 128 * mi, 0, signals.Burstable, []int64{100, 28}},
		"guaranteed":     {&signals.Request{Bytes: 1024 * mi, Text: "1Gi"}, 1024 * mi, 0, signals.Guaranteed, []int64{0}},
		"cpu-only":       {nil, 0, 0, signals.Burstable, []int64{100}},
		"effective-wins": {&signals.Request{Bytes: 250 * mi, Text: "250Mi"}, 300 * mi, 0, signals.Burstable, []int64{0}},
		// Kubernetes 1.37's class: an empty spec.resources sets no
		// pod-level resources, and the containers decide (1.36 said
		// BestEffort); the requests stay the containers'.
		"empty": {nil, 100 * mi, 0, signals.Burstable, []int64{100}},
		"none":  {nil, 100 * mi, 0, signals.Burstable, []int64{100}},
	}
	for _, p := range sc.Steps[0].Pods {
		t.Run(p.Name, func(t *testing.T) {
			w := wants[p.Name]
			if !reflect.DeepEqual(p.PodLevelMemoryRequest, w.podLevel) {
				t.Errorf("pod-level memory request: got %+v, want %+v", p.PodLevelMemoryRequest, w.podLevel)
			}
			if p.MemoryRequest != w.memory || p.EphemeralStorageRequest != w.disk {
				t.Errorf("requests: got memory %d, ephemeral-storage %d; want %d, %d", p.MemoryRequest, p.EphemeralStorageRequest, w.memory, w.disk)
			}
			if p.QOS != w.qos {
				t.Errorf("qos: got %s, want %s", p.QOS, w.qos)
			}
			var got []int64
			for _, c := range p.Containers {
				got = append(got, c.MemoryRequest/mi)
			}
			if !reflect.DeepEqual(got, w.containerReqMi) {
				t.Errorf("container memory requests: got %v Mi, want %v Mi", got, w.containerReqMi)
			}
		})
	}
}

func TestReadRejectsBadPodLevelResources(t *testing.T) {
	for _, tc := range []struct{ name, resources, want string }{
		{"ephemeral-storage", `{"requests": {"ephemeral-storage": "1Gi"}}`,
			`pods[0].resources.requests: "ephemeral-storage" is not a pod-level resource (want memory or cpu)`},
		{"unknown limit", `{"limits": {"gpu": "1"}}`, `pods[0].resources.limits: "gpu" is not a pod-level resource`},
		{"request above limit", `{"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}`,
			`pods[0].resources.requests.memory: 2Gi is above limits.memory 1Gi`},
		{"negative", `{"requests": {"memory": "-1Mi"}}`, `quantity "-1Mi" is negative`},
		{"garbage", `{"requests": {"memory": "lots"}}`, `quantity "lots"`},
		{"not an object", `["memory"]`, "resources"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(`{"pods": [{"name": "a", "containers": [{"name": "app"}], "resources": ` + tc.resources + `}]}`))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
