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
		{"k8s", "k8s", "k8s.io/kubernetes", ".cache/bin/k8s-v"},
		{"etcd", "etcd", "go.etcd.io/etcd/server/v3", ".cache/bin/etcd-v"},
		{"k8s-1.37", "k8s", "k8s.io/kubernetes", ".cache/bin/k8s-v1.37."},
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

// TestLane checks EVICTD_NODE_LANE: the default lane is today's binaries
// and PATH's containerd; "next" takes the next lane's directories.
func TestLane(t *testing.T) {
	next := t.TempDir()
	for _, name := range []string{"kubelet", "containerd", "containerd-shim-runc-v2"} {
		if err := os.WriteFile(filepath.Join(next, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvK8sBinDir, "/nonexistent/default")
	t.Setenv(EnvK8sNextBinDir, next)
	t.Setenv(EnvContainerdNextBinDir, next)

	t.Setenv(EnvNodeLane, "")
	if dir, err := ContainerdBinDir(); dir != "" || err != nil {
		t.Errorf("default lane: ContainerdBinDir = %q, %v; want PATH's (\"\")", dir, err)
	}
	if _, err := Binary("kubelet"); !errors.Is(err, ErrNoBinaries) || errors.Is(err, ErrNoNextBinaries) {
		t.Errorf("default lane: Binary(kubelet) = %v; want the default lane's ErrNoBinaries", err)
	}

	t.Setenv(EnvNodeLane, LaneNext)
	if got, err := Binary("kubelet"); got != filepath.Join(next, "kubelet") || err != nil {
		t.Errorf("next lane: Binary(kubelet) = %q, %v; want %s", got, err, filepath.Join(next, "kubelet"))
	}
	if _, err := Binary("kube-apiserver"); !errors.Is(err, ErrNoNextBinaries) || !errors.Is(err, ErrNoBinaries) {
		t.Errorf("next lane: Binary(kube-apiserver) = %v; want ErrNoNextBinaries wrapping ErrNoBinaries", err)
	}
	if _, err := ContainerdBinDir(); !errors.Is(err, ErrNoNextBinaries) { // no ctr
		t.Errorf("next lane without ctr: ContainerdBinDir: %v; want ErrNoNextBinaries", err)
	}
	if err := os.WriteFile(filepath.Join(next, "ctr"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if dir, err := ContainerdBinDir(); dir != next || err != nil {
		t.Errorf("next lane: ContainerdBinDir = %q, %v; want %s", dir, err, next)
	}

	t.Setenv(EnvNodeLane, "1.37")
	if _, err := Binary("kubelet"); err == nil {
		t.Error("EVICTD_NODE_LANE=1.37: Binary(kubelet) accepted an unknown lane")
	}
	if _, err := ContainerdBinDir(); err == nil {
		t.Error("EVICTD_NODE_LANE=1.37: ContainerdBinDir accepted an unknown lane")
	}
}
