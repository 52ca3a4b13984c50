package testnode

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNode brings a node up, runs a pod on the kubelet, starts evictd
// beside it under its ServiceAccount, restarts the kubelet with its own
// thresholds on, and checks that Stop leaves no process, cgroup or
// directory behind.
func TestNode(t *testing.T) {
	n := StartForTest(t, Options{Name: "testnode"})
	ctx := t.Context()

	node, err := n.Admin().CoreV1().Nodes().Get(ctx, n.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := node.Status.Allocatable[v1.ResourceMemory]
	if got, want := alloc.Value(), int64(DefaultPodsMemory); got != want {
		// The kubelet subtracts its hard eviction threshold from
		// allocatable; all are off here.
		t.Errorf("node allocatable memory %d, want %d (capacity − systemReserved)", got, want)
	}
	limit := readInt(t, n.PodsMemoryCgroup()+"/memory.limit_in_bytes")
	if limit != DefaultPodsMemory {
		t.Errorf("kubepods memory.limit_in_bytes %d, want %d", limit, int64(DefaultPodsMemory))
	}

	pod, err := n.RunPod(ctx, n.Pod("sleeper", "sleep"), 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.PodIP == "" || pod.Status.PodIP == "127.0.0.1" {
		t.Errorf("pod IP %q, want one of the pod network", pod.Status.PodIP)
	}

	if err := n.StartEvictd(ctx); err != nil {
		t.Fatal(err)
	}
	metrics, err := n.EvictdGet(ctx, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics, `evictd_signal_available{signal="allocatableMemory.available"}`) {
		t.Errorf("evictd /metrics has no allocatableMemory.available observation")
	}

	if err := n.RestartKubelet(ctx, KubeletOptions{EvictionHard: map[string]string{"memory.available": "300Mi"}}); err != nil {
		t.Fatal(err)
	}
	node, err = n.Admin().CoreV1().Nodes().Get(ctx, n.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc = node.Status.Allocatable[v1.ResourceMemory]
	if got, want := alloc.Value(), int64(DefaultPodsMemory-300<<20); got != want {
		t.Errorf("with the kubelet's threshold on: node allocatable memory %d, want %d", got, want)
	}

	dirs := []string{n.Dir(), n.Cluster().Dir(), n.Runtime().Dir(), n.PodsMemoryCgroup()}
	pids := []int{n.KubeletPID(), n.EvictdPID(), n.Runtime().PID()}
	if err := n.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still exists after Stop (%v)", d, err)
		}
	}
	for _, pid := range pids {
		if pid != 0 && processAlive(pid) {
			t.Errorf("pid %d still running after Stop", pid)
		}
	}
}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// processAlive reports whether pid names a live process (not a zombie).
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}
