package node

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/testing/testnode"
)

// TestTrustNode: what a tenant writes decides nothing. A real static pod,
// which the real kubelet reads from a manifest and mirrors into the API
// server (its mirror annotation and a controller ownerReference to the
// Node), is the biggest memory user and stays; a tenant's pod that says it
// comes from a file (kubernetes.io/config.source: file, the annotation the
// kubelet keeps for itself and evictd used to believe) is ranked and
// evicted like any other. (A forged kubernetes.io/config.mirror needs no
// test here: the kubelet deletes such a pod at once as an orphaned
// mirror.)
func TestTrustNode(t *testing.T) {
	manifests := t.TempDir()
	n := testnode.StartForTest(t, testnode.Options{
		Name:    "e2e-trust",
		Kubelet: testnode.KubeletOptions{Config: map[string]any{"staticPodPath": manifests}},
	})
	staticSpared(t, n, manifests, nativeScale)
}

// staticSpared runs TestTrustNode's scenario on n, whose kubelet reads
// static pods from manifests, with the memory sizes sc gives.
func staticSpared(t *testing.T, n *testnode.Node, manifests string, sc memoryScale) {
	// The static pod holds 300 MiB; the kubelet names its mirror
	// <name>-<node>.
	static := n.Pod("static", "alloc", "--mib", sc.mibArg(300))
	static.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	static.Spec.NodeName = ""
	data, err := json.Marshal(static)
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(manifests, "static.json")
	if err := os.WriteFile(manifest, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// The kubelet stops the static pod once its manifest has gone: on a
	// node that runs other scenarios after this one.
	t.Cleanup(func() {
		if err := os.Remove(manifest); err != nil {
			t.Errorf("remove the static pod's manifest: %v", err)
		}
	})
	mirrorName := "static-" + n.Name()
	mirror, err := n.WaitPod(t.Context(), "default", mirrorName, 120*time.Second, func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && p.Annotations["kubernetes.io/config.mirror"] != ""
	})
	if err != nil {
		t.Fatalf("the static pod's mirror never ran: %v (last seen: %s)", err, podSummary(mirror))
	}
	if ref := metav1.GetControllerOf(mirror); ref == nil || ref.Kind != "Node" || ref.Name != n.Name() {
		t.Fatalf("mirror pod's controller is %+v, want the Node %s (what evictd trusts)", ref, n.Name())
	}
	// Measure once the static pod holds its memory: two readings a second
	// apart within 4 MiB, at least 280 MiB in kubepods (scaled).
	var ws int64
	poll(t, "the static pod to hold its memory", 60*time.Second, func() (bool, string) {
		a, err := workingSet(n)
		if err != nil {
			return false, err.Error()
		}
		time.Sleep(time.Second)
		b, err := workingSet(n)
		if err != nil {
			return false, err.Error()
		}
		ws = b
		return b >= int64(sc.mib(280))<<20 && max(a-b, b-a) < 4<<20, fmt.Sprintf("kubepods working set %d MiB, then %d MiB", a>>20, b>>20)
	})
	limit := podsMemoryLimit(t, n)

	// The threshold is crossed once the forged pod holds its 150 MiB (by
	// 70 MiB) and clear again once it is gone (by 80 MiB); the static pod
	// alone never crosses it (sizes scaled).
	threshold := (limit - ws - int64(sc.mib(80))<<20) >> 20
	startEvictd(t, n, fmt.Sprintf("--eviction-hard=memory.available<%dMi", threshold),
		"--eviction-pressure-transition-period=5s")

	forged := labelled(n.Pod("forged", "alloc", "--mib", sc.mibArg(150)))
	forged.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	deleted := watchDeletion(t, n, "default", "forged")
	if _, err := n.Admin().CoreV1().Pods("default").Create(t.Context(), forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-deleted:
	case <-time.After(90 * time.Second):
		t.Fatalf("the pod with forged static annotations was not evicted within 90 s; evictd's log:\n%s", tail(n.LogPath("evictd"), 30))
	}
	poll(t, "the forged pod to go", 60*time.Second, func() (bool, string) { return gone(t, n, "default", "forged") })
	if got := evictionsOf(t, n, "default", "forged"); got != 1 {
		t.Errorf("Evicted events on the forged pod: %d, want 1", got)
	}
	alive(t, n, "default", mirrorName)
	if got := evictions(t, n, "default", mirrorName); got != 0 {
		t.Errorf("Evicted events on the static pod's mirror: %d, want 0", got)
	}
	// The static pod's cgroup carries its manifest's UID, not its
	// mirror's: no sign of a pod cache behind the API server.
	logged, err := os.ReadFile(n.LogPath("evictd"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(logged), "\n") {
		if strings.Contains(line, "not in the pod cache") && strings.Contains(line, mirrorName) {
			t.Errorf("evictd took the static pod for one its pod cache lacks: %s", line)
		}
	}
}
