package main

import (
	"path/filepath"
	"testing"

	"github.com/evictd/evictd/internal/testing/hosttree"
)

// TestAgentHugePages runs standalone evictd on a fixture node of 16 GiB
// with 4 GiB of hugepages and a 5 GiB root working set: its
// memory.available is kubelet 1.37's by default, 16 − 5 − 4 = 7 GiB of
// 16 − 4 = 12 GiB.
func TestAgentHugePages(t *testing.T) {
	const gi = int64(1) << 30
	dir := t.TempDir()
	tree, err := hosttree.Write(filepath.Join(dir, "host"), hosttree.Node{
		MemTotal: 16 * gi, HugePages: 4 * gi,
		Root:          hosttree.Memory{Usage: 6 * gi, InactiveFile: gi},
		KubepodsLimit: 12 * gi, Kubepods: hosttree.Memory{Usage: 2 * gi},
		NoPSI: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	startAgent(t, nil, "--metrics-bind-address", addr, "--root-dir", dir, "--hostname-override", "n1",
		"--proc-root", tree.Proc, "--cgroup-mount", tree.Cgroup, "--kernel-memcg-notification=false", "--fast-poll-interval=0")
	waitHTTP(t, "http://"+addr+"/readyz")
	metrics := parseMetrics(t, waitHTTP(t, "http://"+addr+"/metrics"))
	expect(t, metrics, `evictd_signal_capacity{signal="memory.available"}`, float64(12*gi), 0)
	expect(t, metrics, `evictd_signal_available{signal="memory.available"}`, float64(7*gi), 0)
	// allocatableMemory.available is the kubelet's too: no hugepages
	// come off kubepods' limit.
	expect(t, metrics, `evictd_signal_capacity{signal="allocatableMemory.available"}`, float64(12*gi), 0)
	expect(t, metrics, `evictd_signal_available{signal="allocatableMemory.available"}`, float64(10*gi), 0)
}
