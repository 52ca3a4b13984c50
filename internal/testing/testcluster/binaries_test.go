package testcluster

import (
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
		tool, module, want string
	}{
		{"k8s", "k8s.io/kubernetes", ".cache/bin/k8s-v"},
		{"etcd", "go.etcd.io/etcd/server/v3", ".cache/bin/etcd-v"},
	} {
		dir, err := cacheDir(tc.tool, tc.module)
		if err != nil {
			t.Fatalf("cacheDir(%s): %v", tc.tool, err)
		}
		rel, _ := filepath.Rel(root, dir)
		if len(rel) <= len(tc.want) || rel[:len(tc.want)] != tc.want {
			t.Errorf("cacheDir(%s) = %s, want %s<version> under %s", tc.tool, dir, tc.want, root)
		}
	}
}
