package podsource

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/snapshot"
	"github.com/evictd/evictd/signals"
)

// TestQOSAgreesWithSnapshot: the agent, for a pod without status.qosClass,
// and `evictd simulate`, for a snapshot pod without a qos field, give the
// same pod the class Kubernetes gives it (ComputePodQOS after the API
// server's defaults). A container is its requests and limits as name,
// quantity pairs.
func TestQOSAgreesWithSnapshot(t *testing.T) {
	type container struct{ req, lim []string }
	full := []string{"cpu", "1", "memory", "1Gi"}
	tests := []struct {
		name       string
		containers []container
		want       signals.QOSClass
	}{
		{"no containers", nil, signals.BestEffort},
		{"no resources", []container{{}}, signals.BestEffort},
		{"zero requests", []container{{req: []string{"cpu", "0", "memory", "0"}}}, signals.BestEffort},
		{"ephemeral-storage request only", []container{{req: []string{"ephemeral-storage", "1Gi"}}}, signals.BestEffort},
		{"ephemeral-storage request and limit", []container{{req: []string{"ephemeral-storage", "1Gi"}, lim: []string{"ephemeral-storage", "2Gi"}}}, signals.BestEffort},
		{"limits equal requests", []container{{req: full, lim: full}, {req: []string{"cpu", "100m", "memory", "64Mi"}, lim: []string{"cpu", "100m", "memory", "64Mi"}}}, signals.Guaranteed},
		{"limits only, requests default to them", []container{{lim: full}}, signals.Guaranteed},
		{"equal in other units", []container{{req: []string{"cpu", "1000m", "memory", "1Gi"}, lim: []string{"cpu", "1", "memory", "1073741824"}}}, signals.Guaranteed},
		{"ephemeral-storage does not matter",
			[]container{{req: []string{"cpu", "1", "memory", "1Gi", "ephemeral-storage", "1Gi"}, lim: []string{"cpu", "1", "memory", "1Gi", "ephemeral-storage", "2Gi"}}}, signals.Guaranteed},
		{"cpu request a fraction below its limit", []container{{req: []string{"cpu", "500m", "memory", "1Gi"}, lim: full}}, signals.Burstable},
		{"memory limit only", []container{{lim: []string{"memory", "1Gi"}}}, signals.Burstable},
		{"requests only", []container{{req: []string{"memory", "1Mi"}}}, signals.Burstable},
		{"zero requests, positive limits", []container{{req: []string{"cpu", "0", "memory", "0"}, lim: []string{"cpu", "100m", "memory", "200Mi"}}}, signals.Burstable},
		{"one container guaranteed, one without resources", []container{{req: full, lim: full}, {}}, signals.Burstable},
	}

	// One snapshot with a pod per test.
	type containerJSON struct {
		Name     string            `json:"name"`
		Requests map[string]string `json:"requests,omitempty"`
		Limits   map[string]string `json:"limits,omitempty"`
	}
	type podJSON struct {
		Name       string          `json:"name"`
		Containers []containerJSON `json:"containers,omitempty"`
	}
	asMap := func(pairs []string) map[string]string {
		if len(pairs) == 0 {
			return nil
		}
		m := map[string]string{}
		for i := 0; i+1 < len(pairs); i += 2 {
			m[pairs[i]] = pairs[i+1]
		}
		return m
	}
	var pods []podJSON
	for i, tt := range tests {
		pj := podJSON{Name: fmt.Sprintf("p%d", i)}
		for j, c := range tt.containers {
			pj.Containers = append(pj.Containers, containerJSON{Name: fmt.Sprintf("c%d", j), Requests: asMap(c.req), Limits: asMap(c.lim)})
		}
		pods = append(pods, pj)
	}
	in, err := json.Marshal(map[string]any{"pods": pods})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := snapshot.Read(strings.NewReader(string(in)))
	if err != nil {
		t.Fatalf("read snapshot %s: %v", in, err)
	}

	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var spec v1.PodSpec
			for j, c := range tt.containers {
				var req, lim v1.ResourceList
				if len(c.req) > 0 {
					req = rl(c.req...)
				}
				if len(c.lim) > 0 {
					lim = rl(c.lim...)
				}
				spec.Containers = append(spec.Containers, ctr(fmt.Sprintf("c%d", j), req, lim))
			}
			agent := Convert(podOf(spec)).QOS
			simulate := sc.Steps[0].Pods[i].QOS
			if agent != tt.want || simulate != tt.want {
				t.Errorf("agent %s, simulate %s, want %s", agent, simulate, tt.want)
			}
		})
	}
}

// TestPodLevelAgreesWithSnapshot: a pod with pod-level resources reads the
// same from the API server (Convert) and from a snapshot (`evictd
// simulate`): the same requests, pod-level memory request and QoS class,
// so that simulate writes the agent's eviction message.
func TestPodLevelAgreesWithSnapshot(t *testing.T) {
	tests := []struct {
		name      string
		resources string // the snapshot's "resources"
		spec      v1.ResourceRequirements
		container string // the snapshot container's "requests"
		ctrReq    v1.ResourceList
	}{
		{"the kubelet's case", `{"requests": {"memory": "250Mi"}, "limits": {"memory": "1000Mi"}}`,
			v1.ResourceRequirements{Requests: rl("memory", "250Mi"), Limits: rl("memory", "1000Mi")}, `{}`, nil},
		{"decimal request", `{"requests": {"memory": "1G"}}`,
			v1.ResourceRequirements{Requests: rl("memory", "1G")}, `{"memory": "100Mi", "ephemeral-storage": "1Gi"}`, rl("memory", "100Mi", "ephemeral-storage", "1Gi")},
		{"limits alone", `{"limits": {"cpu": "2", "memory": "1Gi"}}`,
			v1.ResourceRequirements{Limits: rl("cpu", "2", "memory", "1Gi")}, `{"memory": "100Mi"}`, rl("memory", "100Mi")},
		{"guaranteed", `{"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}`,
			v1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")}, `{}`, nil},
		{"cpu only", `{"requests": {"cpu": "500m"}}`,
			v1.ResourceRequirements{Requests: rl("cpu", "500m")}, `{"memory": "100Mi"}`, rl("memory", "100Mi")},
	}
	var pods []string
	for i, tt := range tests {
		pods = append(pods, fmt.Sprintf(`{"name": "p%d", "resources": %s, "containers": [{"name": "app", "requests": %s}]}`, i, tt.resources, tt.container))
	}
	sc, err := snapshot.Read(strings.NewReader(`{"pods": [` + strings.Join(pods, ",") + `]}`))
	if err != nil {
		t.Fatalf("read snapshot: %v", err)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			agent := Convert(podOf(v1.PodSpec{Resources: &spec, Containers: []v1.Container{ctr("app", tt.ctrReq, nil)}}))
			simulate := sc.Steps[0].Pods[i]
			if hasMemory := !tt.spec.Requests.Memory().IsZero() || !tt.spec.Limits.Memory().IsZero(); hasMemory != (agent.PodLevelMemoryRequest != nil) {
				t.Errorf("agent: pod-level memory request %+v for pod-level resources %v", agent.PodLevelMemoryRequest, tt.spec)
			}
			if !reflect.DeepEqual(agent.PodLevelMemoryRequest, simulate.PodLevelMemoryRequest) {
				t.Errorf("pod-level memory request: agent %+v, simulate %+v", agent.PodLevelMemoryRequest, simulate.PodLevelMemoryRequest)
			}
			if agent.MemoryRequest != simulate.MemoryRequest || agent.EphemeralStorageRequest != simulate.EphemeralStorageRequest {
				t.Errorf("requests: agent %d/%d, simulate %d/%d", agent.MemoryRequest, agent.EphemeralStorageRequest, simulate.MemoryRequest, simulate.EphemeralStorageRequest)
			}
			if agent.QOS != simulate.QOS {
				t.Errorf("qos: agent %s, simulate %s", agent.QOS, simulate.QOS)
			}
			if !reflect.DeepEqual(agent.Containers, simulate.Containers) {
				t.Errorf("containers: agent %+v, simulate %+v", agent.Containers, simulate.Containers)
			}
		})
	}
}
