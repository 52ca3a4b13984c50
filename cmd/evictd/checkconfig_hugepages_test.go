package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/testing/hosttree"
)

// TestCheckConfigHugePages: check-config says which memory.available is in
// force and how many hugepages this node has, and checks the thresholds
// against memory.available's capacity as the agent would observe it: on a
// 16Gi node with 4Gi of hugepages, kubelet 1.37's capacity is 12Gi, so
// memory.available<13Gi would always be met, while with kubelet 1.36's
// (16Gi) it would not.
func TestCheckConfigHugePages(t *testing.T) {
	const gi = int64(1) << 30
	node := func(t *testing.T, huge int64) []string {
		t.Helper()
		dir := t.TempDir()
		tree, err := hosttree.Write(filepath.Join(dir, "host"), hosttree.Node{
			MemTotal: 16 * gi, HugePages: huge,
			Root:          hosttree.Memory{Usage: 6 * gi, InactiveFile: gi},
			KubepodsLimit: 14 * gi, Kubepods: hosttree.Memory{Usage: 2 * gi},
			NoPSI: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		return []string{"check-config", "--hostname-override=n1", "--proc-root=" + tree.Proc, "--cgroup-mount=" + tree.Cgroup, "--root-dir=" + dir}
	}
	const (
		on  = "memory.available is kubelet 1.37's (HugepageAwareEviction on, the default as in kubelet 1.37; --feature-gates=HugepageAwareEviction=false for kubelet 1.36's)"
		off = "memory.available is kubelet 1.36's (HugepageAwareEviction=false, from --feature-gates)"
	)
	for _, tc := range []struct {
		name    string
		huge    int64
		args    []string
		code    int
		want    []string
		wantErr string
	}{
		{name: "kubelet 1.37's, with hugepages", huge: 4 * gi, want: []string{on,
			"note: this node has 4Gi of hugepages (Hugetlb in ", "/meminfo): memory.available and its capacity are that much lower than kubelet 1.36's."}},
		{name: "kubelet 1.36's, with hugepages", huge: 4 * gi, args: []string{"--feature-gates=HugepageAwareEviction=false"}, want: []string{off,
			"note: this node has 4Gi of hugepages (Hugetlb in ", "left in memory.available as kubelet 1.36 does"}},
		{name: "no hugepages", want: []string{on, "note: this node has no hugepages: kubelet 1.37's memory.available and 1.36's are the same here."}},
		{name: "a threshold above 1.37's capacity", huge: 4 * gi, args: []string{"--eviction-hard=memory.available<13Gi"}, code: 1,
			wantErr: "threshold memory.available<13Gi is 13Gi, at or above the capacity of memory.available on this node (12Gi)"},
		{name: "the same threshold under 1.36's", huge: 4 * gi, args: []string{"--eviction-hard=memory.available<13Gi", "--feature-gates=HugepageAwareEviction=false"},
			want: []string{off}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCmd(append(node(t, tc.huge), tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			// The document on stdout, the notes on stderr.
			for _, w := range tc.want {
				if !strings.Contains(out+errOut, w) {
					t.Errorf("output lacks %q:\nstdout:\n%s\nstderr:\n%s", w, out, errOut)
				}
			}
			if !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("stderr %q lacks %q", errOut, tc.wantErr)
			}
		})
	}
}

// TestCheckConfigUnreadableHugePages: with kubelet 1.37's memory.available,
// a meminfo whose hugepages cannot be read is a warning that the agent
// would have no memory.available; with 1.36's, a note.
func TestCheckConfigUnreadableHugePages(t *testing.T) {
	dir := t.TempDir()
	tree, err := hosttree.Write(filepath.Join(dir, "host"), hosttree.Node{
		MemTotal: 16 << 30, Root: hosttree.Memory{Usage: 6 << 30}, KubepodsLimit: 10 << 30, NoPSI: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	meminfo := "MemTotal: 16777216 kB\nHugePages_Total: 2\nHugepagesize: 2048 kB\nHugetlb: 4M kB\n"
	if err := os.WriteFile(filepath.Join(tree.Proc, "meminfo"), []byte(meminfo), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"check-config", "--hostname-override=n1", "--proc-root=" + tree.Proc, "--cgroup-mount=" + tree.Cgroup, "--root-dir=" + dir}
	_, errOut, code := runCmd(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := `warning: this node's hugepage capacity cannot be read, so the agent would observe no memory.available: parse ` + tree.Proc + `/meminfo: Hugetlb value "4M"`; !strings.Contains(errOut, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut)
	}
	_, errOut, _ = runCmd(append(args, "--feature-gates=HugepageAwareEviction=false")...)
	if want := "note: this node's hugepage capacity cannot be read (parse "; !strings.Contains(errOut, want) || strings.Contains(errOut, "warning: this node's hugepage") {
		t.Errorf("with the gate off: want %q and no warning:\n%s", want, errOut)
	}
}
