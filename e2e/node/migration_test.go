package node

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/testing/testnode"
)

// migratingGuide is the guide the scenario follows.
const migratingGuide = "../../docs/MIGRATING.md"

// TestMigrationNode follows docs/MIGRATING.md on a real node whose kubelet
// still evicts (memory.available<100Mi): evictd in dry run warns of the
// kubelet's threshold and local-storage eviction; the guide's own drop-in
// (its KubeletConfiguration block, in the kubelet's --config-dir) turns the
// kubelet's thresholds off; evictd, restarted without dry run, then warns
// of local-storage eviction alone, which the guide keeps on; and a pod over
// its emptyDir sizeLimit, which both agents then enforce, is evicted once,
// by one of them, not twice.
func TestMigrationNode(t *testing.T) {
	n := testnode.StartForTest(t, testnode.Options{
		Name:    "e2e-migration",
		Kubelet: testnode.KubeletOptions{EvictionHard: map[string]string{"memory.available": "100Mi"}},
	})
	kubeletConfig := "--kubelet-config=" + n.KubeletConfigPath()
	races := func() map[string]float64 {
		got := map[string]float64{}
		for _, kind := range []string{"threshold", "local-storage", "image-gc"} {
			got[kind] = metric(t, n, `evictd_kubelet_eviction_races{kind="`+kind+`"}`)
		}
		return got
	}

	// Step 1: evictd beside the kubelet, in dry run, checking its file.
	startEvictd(t, n, "--dry-run", kubeletConfig, "--eviction-hard=memory.available<500Mi")
	if got, want := races(), map[string]float64{"threshold": 1, "local-storage": 1, "image-gc": 0}; !maps.Equal(got, want) {
		t.Errorf("before: evictd_kubelet_eviction_races %v, want %v", got, want)
	}
	out := checkConfig(t, kubeletConfig, "--eviction-hard=memory.available<500Mi")
	for _, want := range []string{"still has memory.available<100Mi", "localStorageCapacityIsolation"} {
		if !strings.Contains(out, want) {
			t.Errorf("before: check-config does not warn of %q:\n%s", want, out)
		}
	}

	// Step 5: the guide's drop-in, the kubelet restarted, then evictd
	// without dry run.
	dropIns := t.TempDir()
	if err := os.WriteFile(filepath.Join(dropIns, "90-evictd.conf"), guideKubeletConfig(t), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := n.RestartKubelet(t.Context(), testnode.KubeletOptions{
		EvictionHard: map[string]string{"memory.available": "100Mi"},
		ConfigDir:    dropIns,
	}); err != nil {
		t.Fatal(err)
	}
	if err := n.StopEvictd(); err != nil {
		t.Fatal(err)
	}
	kubeletConfigDir := "--kubelet-config-dir=" + dropIns
	startEvictd(t, n, kubeletConfig, kubeletConfigDir, "--eviction-hard=memory.available<500Mi")
	if got, want := races(), map[string]float64{"threshold": 0, "local-storage": 1, "image-gc": 0}; !maps.Equal(got, want) {
		t.Errorf("after: evictd_kubelet_eviction_races %v, want %v", got, want)
	}
	out = checkConfig(t, kubeletConfig, kubeletConfigDir, "--eviction-hard=memory.available<500Mi")
	if strings.Contains(out, "evictionHard") || !strings.Contains(out, "localStorageCapacityIsolation") {
		t.Errorf("after: check-config should warn of localStorageCapacityIsolation alone:\n%s", out)
	}

	// Local storage, enforced by both: one eviction.
	over := labelled(n.Pod("over", "write", "--dir", "/data", "--mib", "60"))
	limit := resource.MustParse("20Mi")
	over.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &limit}}}}
	over.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	if _, err := n.Admin().CoreV1().Pods("default").Create(t.Context(), over, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the pod over its emptyDir sizeLimit to be evicted", 120*time.Second, func() (bool, string) {
		return gone(t, n, "default", "over")
	})
	// The kubelet's eviction manager looks every 10 s: give it two looks
	// at a pod it could still see.
	time.Sleep(20 * time.Second)
	evs := evictedEvents(t, n, "default", "over")
	var by []string
	for _, e := range evs {
		by = append(by, e.Source.Component+": "+e.Message)
	}
	t.Logf("Evicted events: %q", by)
	if k := evictionsOf(t, n, "default", "over"); k != 1 {
		t.Errorf("the pod over its emptyDir sizeLimit was evicted %d times, want once: %q", k, by)
	}
	// Both agents word it as the kubelet does.
	if len(evs) > 0 && !strings.Contains(evs[0].Message, `Usage of EmptyDir volume "data" exceeds the limit "20Mi".`) {
		t.Errorf("Evicted for %q, want its emptyDir's limit", evs[0].Message)
	}
	cleanPods(t, n)
}

// guideKubeletConfig returns the guide's KubeletConfiguration block that
// turns the kubelet's thresholds and image garbage collection off.
func guideKubeletConfig(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(migratingGuide)
	if err != nil {
		t.Fatal(err)
	}
	const start = "```yaml\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n"
	i := strings.Index(string(data), start)
	if i < 0 {
		t.Fatalf("%s: no KubeletConfiguration block with evictionHard", migratingGuide)
	}
	block := string(data)[i+len("```yaml\n"):]
	end := strings.Index(block, "```")
	if end < 0 {
		t.Fatalf("%s: the KubeletConfiguration block does not end", migratingGuide)
	}
	return []byte(block[:end])
}

// checkConfig runs `evictd check-config` with the node's flags and args
// and returns what it printed.
func checkConfig(t *testing.T, args ...string) string {
	t.Helper()
	bin := os.Getenv(testnode.EnvEvictdBin)
	if bin == "" {
		t.Fatalf("%s is not set", testnode.EnvEvictdBin)
	}
	out, err := exec.Command(bin, append([]string{"check-config"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("evictd check-config: %v\n%s", err, out)
	}
	return string(out)
}
