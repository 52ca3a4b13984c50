package node

import (
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

// TestStandaloneStopNode runs evictd as the package starts it on a node
// whose kubeconfig is not written yet (--kubeconfig-optional,
// --standalone-stop): with no API server, a hard allocatable memory
// threshold still stops a pod, through the container runtime. Three pods
// share a 1 GiB kubepods: a BestEffort pod of kube-system holding 400 MiB
// and a Guaranteed pod holding 200 MiB of its 256 MiB, both larger than
// the hog, a BestEffort pod of default growing at 20 MiB/s. Standalone
// evictd knows neither priorities nor requests, so it spares the first two
// (kube-system, Guaranteed) and kills the hog's container at the crossing:
// exit code 137, the pod Failed (restartPolicy Never), never Succeeded,
// though it carries a forged kubernetes.io/config.source: file;
// the others keep running, and the kernel's OOM killer has had nothing
// to do.
func TestStandaloneStopNode(t *testing.T) {
	n := testnode.StartForTest(t, testnode.Options{Name: "e2e-standalone", PodsMemory: 1 << 30})
	sys := labelled(n.Pod("sys-hog", "alloc", "--mib", "400"))
	sys.Namespace = metav1.NamespaceSystem
	run(t, n, sys)
	run(t, n, testnode.Resources(labelled(n.Pod("guaranteed", "alloc", "--mib", "200")), "256Mi", "256Mi", "100m"))

	missing := filepath.Join(t.TempDir(), "kubeconfig")
	startEvictd(t, n, "--kubeconfig="+missing, "--kubeconfig-optional", "--standalone-stop",
		"--eviction-hard=allocatableMemory.available<250Mi", "--eviction-pressure-transition-period=5s")
	if got := metric(t, n, "evictd_standalone"); got != 1 {
		t.Fatalf("evictd_standalone %v, want 1", got)
	}
	oomKilled := watchOOMKills(t, n)
	hog := labelled(n.Pod("hog", "alloc", "--base", "50", "--mib", "600", "--rate", "20"))
	hog.Spec.RestartPolicy = v1.RestartPolicyNever
	// The tenant claims its pod is static: the kubelet writes its own
	// config.source over it before the sandbox gets the pod's annotations,
	// so evictd still reads "api".
	hog.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	if _, err := n.Admin().CoreV1().Pods("default").Create(t.Context(), hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *v1.Pod
	poll(t, "the hog's container killed", 90*time.Second, func() (bool, string) {
		p, err := n.Admin().CoreV1().Pods("default").Get(t.Context(), "hog", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		last = p
		return p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded, podSummary(p)
	})
	t.Logf("hog: %s", podSummary(last))
	if last.Status.Phase != v1.PodFailed {
		t.Errorf("hog phase %s, want Failed: a pod stopped for the node is never a success", last.Status.Phase)
	}
	for _, c := range last.Status.ContainerStatuses {
		if term := c.State.Terminated; term == nil || term.ExitCode != 137 {
			t.Errorf("hog container %s: %+v, want terminated with exit code 137 (SIGKILL)", c.Name, c.State)
		}
	}
	log, err := os.ReadFile(n.LogPath("evictd"))
	if err != nil {
		t.Fatal(err)
	}
	const stopped = "standalone, with no API server: killed the pod's containers through the runtime"
	if k := strings.Count(string(log), stopped); k != 1 {
		t.Errorf("%d lines %q in evictd's log, want 1", k, stopped)
	}
	if !strings.Contains(string(log), "default/hog") {
		t.Error("evictd's log never names default/hog")
	}
	series := fmt.Sprintf(`evictd_evictions_total{eviction_signal=%[1]q,result="stopped-locally",signal=%[1]q}`, "allocatableMemory.available")
	if got := metric(t, n, series); got != 1 {
		t.Errorf("%s %v, want 1", series, got)
	}
	for _, p := range []struct{ ns, name string }{{metav1.NamespaceSystem, "sys-hog"}, {"default", "guaranteed"}} {
		alive(t, n, p.ns, p.name)
		got, err := n.Admin().CoreV1().Pods(p.ns).Get(t.Context(), p.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range got.Status.ContainerStatuses {
			if c.RestartCount != 0 {
				t.Errorf("%s/%s: container %s restarted %d times, want never stopped", p.ns, p.name, c.Name, c.RestartCount)
			}
		}
	}
	if k := oomKilled(); k != 0 {
		t.Errorf("the kernel OOM-killed %d processes in kubepods", k)
	}
}
