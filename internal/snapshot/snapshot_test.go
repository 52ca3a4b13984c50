package snapshot

import (
	"reflect"
	"strings"
	"testing"

	"github.com/evictd/evictd/signals"
)

func TestReadSumsContainers(t *testing.T) {
	sc, err := Read(strings.NewReader(`{
	  "observations": {"memory.available": {"available": "1Gi", "capacity": "4Gi", "age": "5s"}},
	  "pods": [
	    {"name": "a", "containers": [
	      {"name": "x", "requests": {"memory": "100Mi", "ephemeral-storage": "1Gi"}, "usage": {"memory": "300Mi", "rootfs": {"bytes": "1Mi", "inodes": 5}}},
	      {"name": "y", "requests": {"memory": "50Mi"}, "usage": {"memory": "0.5Gi"}}
	    ]},
	    {"name": "b", "requests": {"memory": "1Gi"}, "containers": [{"name": "z", "requests": {"memory": "10Mi"}}]},
	    {"name": "c", "qos": "BestEffort"}
	  ]}`))
	if err != nil {
		t.Fatal(err)
	}
	step := sc.Steps[0]
	const mi = 1 << 20
	if got := step.Observations[signals.MemoryAvailable]; got.Available != 1024*mi || !got.Time.Equal(Epoch.Add(-5e9)) {
		t.Errorf("observation: got %+v, want 1Gi taken 5s before the epoch", got)
	}
	a, b := step.Pods[0], step.Pods[1]
	if a.MemoryRequest != 150*mi || a.EphemeralStorageRequest != 1024*mi || a.QOS != signals.Burstable {
		t.Errorf("pod a: got request %d/%d qos %s, want 150Mi/1Gi Burstable", a.MemoryRequest, a.EphemeralStorageRequest, a.QOS)
	}
	if b.MemoryRequest != 1024*mi {
		t.Errorf("pod b: the pod-level request should win, got %d", b.MemoryRequest)
	}
	st, ok := step.Stats["default/a"]
	if !ok || st.MemoryWorkingSet == nil || *st.MemoryWorkingSet != 812*mi {
		t.Errorf("pod a usage: got %+v, want the containers' sum 812Mi", st)
	}
	if _, ok := step.Stats["default/c"]; ok {
		t.Errorf("pod c has no usage and must have no stats")
	}
	if _, ok := step.Stats["default/b"]; ok {
		t.Errorf("pod b has no usage and must have no stats")
	}
}

func TestReadLocalStorageLimits(t *testing.T) {
	sc, err := Read(strings.NewReader(`{
	  "observations": {"memory.available": {"available": "1Gi", "capacity": "4Gi"}},
	  "pods": [
	    {"name": "a", "emptyDirSizeLimits": {"cache": "100Mi", "zero": "0"}, "containers": [
	      {"name": "x", "limits": {"ephemeral-storage": "1Gi"}},
	      {"name": "y", "limits": {"ephemeral-storage": "512Mi"}},
	      {"name": "z"}
	    ]},
	    {"name": "b", "containers": [{"name": "x"}]}
	  ]}`))
	if err != nil {
		t.Fatal(err)
	}
	const mi = 1 << 20
	a, b := sc.Steps[0].Pods[0], sc.Steps[0].Pods[1]
	if a.EphemeralStorageLimit != 1536*mi {
		t.Errorf("pod a limit: got %d, want the containers' sum 1.5Gi", a.EphemeralStorageLimit)
	}
	if got := []int64{a.Containers[0].EphemeralStorageLimit, a.Containers[1].EphemeralStorageLimit, a.Containers[2].EphemeralStorageLimit}; !reflect.DeepEqual(got, []int64{1024 * mi, 512 * mi, 0}) {
		t.Errorf("container limits: got %v, want 1Gi, 512Mi, none", got)
	}
	if want := map[string]int64{"cache": 100 * mi}; !reflect.DeepEqual(a.EmptyDirLimits, want) {
		t.Errorf("emptyDir limits: got %v, want %v", a.EmptyDirLimits, want)
	}
	if b.EphemeralStorageLimit != 0 || b.EmptyDirLimits != nil {
		t.Errorf("pod b: got limit %d and emptyDir limits %v, want none", b.EphemeralStorageLimit, b.EmptyDirLimits)
	}
}
