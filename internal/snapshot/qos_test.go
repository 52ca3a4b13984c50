package snapshot

import (
	"strings"
	"testing"

	"github.com/evictd/evictd/signals"
)

// TestQOSFromContainers: a pod without a qos field gets the class
// Kubernetes gives a pod with its containers (internal/podsource's
// TestQOSAgreesWithSnapshot checks that the agent agrees), from the
// quantities as written.
func TestQOSFromContainers(t *testing.T) {
	sc, err := Read(strings.NewReader(`{"pods": [
	  {"name": "none"},
	  {"name": "zero", "containers": [{"name": "x", "requests": {"cpu": 0, "memory": "0"}}]},
	  {"name": "disk", "containers": [{"name": "x", "requests": {"ephemeral-storage": "1Gi"}, "limits": {"ephemeral-storage": "2Gi"}}]},
	  {"name": "limits", "containers": [{"name": "x", "limits": {"cpu": "1", "memory": "1Gi"}}]},
	  {"name": "units", "containers": [{"name": "x", "requests": {"cpu": "1000m", "memory": "1Gi"}, "limits": {"cpu": 1, "memory": 1073741824}}]},
	  {"name": "fraction", "containers": [{"name": "x", "requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}]},
	  {"name": "one-unbounded", "containers": [{"name": "x", "limits": {"cpu": "1", "memory": "1Gi"}}, {"name": "y"}]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]signals.QOSClass{
		"none":          signals.BestEffort,
		"zero":          signals.BestEffort, // zero counts as none
		"disk":          signals.BestEffort, // ephemeral-storage is not a QoS resource
		"limits":        signals.Guaranteed, // requests default to the limits
		"units":         signals.Guaranteed,
		"fraction":      signals.Burstable, // 500m is less than 1, though both round to 1
		"one-unbounded": signals.Burstable,
	}
	for _, p := range sc.Steps[0].Pods {
		if p.QOS != want[p.Name] {
			t.Errorf("pod %s: got %s, want %s", p.Name, p.QOS, want[p.Name])
		}
	}
}

// TestQOSFieldWins: a pod's qos field is taken as it is, whatever its
// containers say.
func TestQOSFieldWins(t *testing.T) {
	sc, err := Read(strings.NewReader(`{"pods": [
	  {"name": "a", "qos": "Guaranteed"},
	  {"name": "b", "qos": "BestEffort", "containers": [{"name": "x", "limits": {"cpu": "1", "memory": "1Gi"}}]},
	  {"name": "c", "qos": "Burstable", "containers": [{"name": "x", "requests": {"ephemeral-storage": "1Gi"}}]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []signals.QOSClass{signals.Guaranteed, signals.BestEffort, signals.Burstable} {
		if got := sc.Steps[0].Pods[i].QOS; got != want {
			t.Errorf("pod %s: got %s, want %s", sc.Steps[0].Pods[i].Name, got, want)
		}
	}
}

// TestQOSIgnoresPodRequests: a pod's requests field is its effective
// requests, not pod-level resources; the containers decide the class.
func TestQOSIgnoresPodRequests(t *testing.T) {
	sc, err := Read(strings.NewReader(`{"pods": [
	  {"name": "a", "requests": {"memory": "1Gi"}},
	  {"name": "b", "requests": {"memory": "1Gi"}, "containers": [{"name": "x", "limits": {"cpu": "1", "memory": "1Gi"}}]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []signals.QOSClass{signals.BestEffort, signals.Guaranteed} {
		if got := sc.Steps[0].Pods[i].QOS; got != want {
			t.Errorf("pod %s: got %s, want %s", sc.Steps[0].Pods[i].Name, got, want)
		}
	}
}
