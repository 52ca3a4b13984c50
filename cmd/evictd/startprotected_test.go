package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/testing/hosttree"
)

// TestCheckConfigThresholdsSetAside: on a fixture node of 8Gi, kubepods
// limited to 6Gi, a threshold beyond its signal's capacity is an error
// line and exit code 1 (check-config gates CI), while the table, notes and
// warnings are still printed: the agent would start with the others. With
// no threshold left, check-config prints the agent's refusal only.
func TestCheckConfigThresholdsSetAside(t *testing.T) {
	const gi = int64(1) << 30
	dir := t.TempDir()
	tree, err := hosttree.Write(filepath.Join(dir, "host"), hosttree.Node{
		MemTotal: 8 * gi, Root: hosttree.Memory{Usage: 3 * gi, InactiveFile: gi},
		KubepodsLimit: 6 * gi, Kubepods: hosttree.Memory{Usage: gi},
		NoPSI: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	node := []string{"check-config", "--hostname-override=n1", "--proc-root=" + tree.Proc, "--cgroup-mount=" + tree.Cgroup, "--root-dir=" + dir}
	const memErr = "--eviction-hard: threshold memory.available<10Gi is 10Gi, at or above the capacity of memory.available on this node (8Gi): it would always be met and evict pod after pod"
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		wantOut    []string
		wantErr    []string
		wantNoRows bool
	}{
		{name: "every threshold fits", args: []string{"--eviction-hard=memory.available<1Gi,nodefs.available<1%"},
			wantOut: []string{"SIGNAL", "memory.available"}},
		{name: "one threshold set aside, the others kept",
			args: []string{"--eviction-hard=memory.available<10Gi,nodefs.available<1%", "--enforce-node-allocatable=none"}, code: 1,
			wantOut: []string{"SIGNAL", "nodefs.available"},
			wantErr: []string{"note: this node has no hugepages",
				"error: " + memErr + ": the agent sets memory.available<10Gi aside and starts with the other thresholds",
				"evictd check-config: 1 threshold(s) cannot hold on this node; the agent would set them aside and start with the others:\n  " + memErr + "\n"}},
		{name: "the derived allocatableMemory.available too",
			args: []string{"--eviction-hard=memory.available<10Gi,nodefs.available<1%"}, code: 1,
			wantOut: []string{"SIGNAL", "allocatableMemory.available"},
			wantErr: []string{"error: " + memErr,
				"error: derived from memory.available (enforce-node-allocatable=pods): threshold allocatableMemory.available<10Gi is 10Gi, at or above the capacity of allocatableMemory.available on this node (6Gi)",
				"2 threshold(s) cannot hold on this node"}},
		{name: "none left: the agent would refuse",
			args: []string{"--eviction-hard=memory.available<10Gi", "--enforce-node-allocatable=none"}, code: 1, wantNoRows: true,
			wantErr: []string{"evictd check-config: no threshold can hold on this node; the agent would refuse to start:\n  " + memErr + "\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCmd(append(append([]string{}, node...), tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if tc.wantNoRows && out != "" {
				t.Errorf("a refused configuration printed:\n%s", out)
			}
			if tc.code == 0 && (strings.Contains(errOut, "error: ") || strings.Contains(out, "error: ")) {
				t.Errorf("a configuration that fits printed errors:\nstdout:\n%s\nstderr:\n%s", out, errOut)
			}
		})
	}
}

// TestCheckConfigNewerKubeletFile: a KubeletConfiguration with a field
// evictd's API types do not know, from a newer kubelet, is a warning naming
// the field, not an error, whether evictd only checks it for races
// (--kubelet-config) or takes its thresholds from it (--config); a file
// that is not a KubeletConfiguration at all stays an error.
func TestCheckConfigNewerKubeletFile(t *testing.T) {
	dir := t.TempDir()
	const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	future, broken := filepath.Join(dir, "f.yaml"), filepath.Join(dir, "broken.yaml")
	for p, text := range map[string]string{
		future: header + "someFieldFromKubelet138: true\nevictionHard:\n  memory.available: 200Mi\n",
		broken: header + "evictionHard: [memory.available\n",
	} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		wantOut []string
		wantErr string
	}{
		{"checked for races", []string{"--kubelet-config", future}, 0, []string{
			"warning: KubeletConfiguration " + future + " (--kubelet-config) is not valid strictly, so evictd decoded it leniently, as the kubelet does: ignored unknown field(s) \"someFieldFromKubelet138\"",
			"warning: the kubelet's evictionHard in " + future + " still has memory.available<200Mi",
		}, ""},
		{"thresholds taken from it", []string{"--config", future}, 0, []string{
			"warning: KubeletConfiguration " + future + " (--config) is not valid strictly",
			"evictionHard in " + future,
		}, ""},
		{"not YAML", []string{"--kubelet-config", broken}, 1, nil, "evictd check-config: KubeletConfiguration " + broken + ": yaml: line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCmd(append([]string{"check-config", "--hostname-override=n1"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			// The warnings go to stderr with the errors.
			for _, w := range tc.wantOut {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("stderr %q lacks %q", errOut, tc.wantErr)
			}
		})
	}
}
