package testcluster

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRequiredVersion(t *testing.T) {
	const gomod = `// Module k8s pins ...
module example.com/tools // a comment

go 1.26.0

require k8s.io/kubernetes v1.36.3

require (
	go.etcd.io/etcd/server/v3 v3.6.8
	k8s.io/api v0.36.3 // indirect
)

replace k8s.io/api => k8s.io/api v0.36.3
`
	path := filepath.Join(t.TempDir(), "go.mod")
	if err := os.WriteFile(path, []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		module, want string
	}{
		{"k8s.io/kubernetes", "v1.36.3"},
		{"go.etcd.io/etcd/server/v3", "v3.6.8"},
		{"k8s.io/api", "v0.36.3"},
		{"k8s.io/client-go", ""},
	} {
		got, err := requiredVersion(path, tc.module)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("requiredVersion(%s) = %q, %v; want %q", tc.module, got, err, tc.want)
		}
	}
	if got, err := modulePath(path); got != "example.com/tools" || err != nil {
		t.Errorf("modulePath = %q, %v; want example.com/tools", got, err)
	}
}

// TestCachePaths checks that, without the environment variables, binaries
// are looked for where hack/build-k8s.sh puts them.
func TestCachePaths(t *testing.T) {
	t.Setenv(EnvK8sBinDir, "")
	t.Setenv(EnvEtcdBin, "")
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		toolDir, tool, module, want string
	}{
		{"k8s", "k8s", "k8s.io/kubernetes", ".cache/bin/k8s-v1.37."},
		{"etcd", "etcd", "go.etcd.io/etcd/server/v3", ".cache/bin/etcd-v"},
		{"k8s-previous", "k8s", "k8s.io/kubernetes", ".cache/bin/k8s-v1.36."},
		{"containerd", "containerd", "github.com/containerd/containerd/v2", ".cache/bin/containerd-v2."},
	} {
		dir, err := cacheDir(tc.toolDir, tc.tool, tc.module)
		if err != nil {
			t.Fatalf("cacheDir(%s): %v", tc.tool, err)
		}
		rel, _ := filepath.Rel(root, dir)
		if len(rel) <= len(tc.want) || rel[:len(tc.want)] != tc.want {
			t.Errorf("cacheDir(%s) = %s, want %s<version> under %s", tc.tool, dir, tc.want, root)
		}
	}
}

// TestLane checks EVICTD_NODE_LANE: the default lane is today's kubelet
// and the cache's containerd; "previous" takes the previous kubelet and
// PATH's containerd; the control plane is the same in both.
func TestLane(t *testing.T) {
	k8s, previous, ctrd := t.TempDir(), t.TempDir(), t.TempDir()
	for dir, names := range map[string][]string{
		k8s:      {"kubelet", "kube-apiserver"},
		previous: {"kubelet"},
		ctrd:     {"containerd", "containerd-shim-runc-v2"},
	} {
		for _, name := range names {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Setenv(EnvK8sBinDir, k8s)
	t.Setenv(EnvK8sPreviousBinDir, previous)
	t.Setenv(EnvContainerdBinDir, ctrd)

	for _, lane := range []string{"", LanePrevious} {
		t.Setenv(EnvNodeLane, lane)
		wantKubelet := filepath.Join(k8s, "kubelet")
		if lane == LanePrevious {
			wantKubelet = filepath.Join(previous, "kubelet")
		}
		if got, err := Binary("kubelet"); got != wantKubelet || err != nil {
			t.Errorf("lane %q: Binary(kubelet) = %q, %v; want %s", lane, got, err, wantKubelet)
		}
		if got, err := Binary("kube-apiserver"); got != filepath.Join(k8s, "kube-apiserver") || err != nil {
			t.Errorf("lane %q: Binary(kube-apiserver) = %q, %v; want the control plane's", lane, got, err)
		}
		if _, err := Binary("kube-scheduler"); !errors.Is(err, ErrNoBinaries) {
			t.Errorf("lane %q: Binary(kube-scheduler), not built: %v; want ErrNoBinaries", lane, err)
		}
	}

	t.Setenv(EnvNodeLane, LanePrevious)
	if dir, err := ContainerdBinDir(); dir != "" || err != nil {
		t.Errorf("previous lane: ContainerdBinDir = %q, %v; want PATH's (\"\")", dir, err)
	}
	t.Setenv(EnvNodeLane, "")
	if _, err := ContainerdBinDir(); !errors.Is(err, ErrNoBinaries) { // no ctr
		t.Errorf("default lane without ctr: ContainerdBinDir: %v; want ErrNoBinaries", err)
	}
	if err := os.WriteFile(filepath.Join(ctrd, "ctr"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if dir, err := ContainerdBinDir(); dir != ctrd || err != nil {
		t.Errorf("default lane: ContainerdBinDir = %q, %v; want %s", dir, err, ctrd)
	}

	t.Setenv(EnvNodeLane, "next")
	if _, err := Binary("kubelet"); err == nil {
		t.Error("EVICTD_NODE_LANE=next: Binary(kubelet) accepted an unknown lane")
	}
	if _, err := ContainerdBinDir(); err == nil {
		t.Error("EVICTD_NODE_LANE=next: ContainerdBinDir accepted an unknown lane")
	}
}
