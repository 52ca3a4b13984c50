package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestPureStagesImportNoSystem keeps the deciding stages pure: thresholds,
// ranking and the signal vocabulary must not reach the file system, the
// container runtime or the API server, directly or through a dependency.
func TestPureStagesImportNoSystem(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	// Banned anywhere in the transitive dependencies.
	bannedDeps := []string{
		"k8s.io/client-go", "k8s.io/cri-api", "k8s.io/cri-client", "google.golang.org/grpc",
		"github.com/containerd/", "github.com/google/cadvisor", "github.com/opencontainers/",
		"github.com/evictd/evictd/signals/host", "github.com/evictd/evictd/internal/",
	}
	// Banned as direct imports: the packages through which code touches files.
	bannedDirect := []string{"os", "os/exec", "io/fs", "io/ioutil", "syscall", "path/filepath", "golang.org/x/sys/unix", "net", "net/http"}

	for _, pkg := range []string{
		"github.com/evictd/evictd/signals",
		"github.com/evictd/evictd/thresholds",
		"github.com/evictd/evictd/ranking",
	} {
		t.Run(pkg, func(t *testing.T) {
			out, err := exec.Command(goBin, "list", "-json", pkg).Output()
			if err != nil {
				t.Fatalf("go list %s: %v", pkg, err)
			}
			var info struct {
				Imports []string
				Deps    []string
			}
			if err := json.Unmarshal(out, &info); err != nil {
				t.Fatalf("decode go list output: %v", err)
			}
			if len(info.Deps) == 0 {
				t.Fatalf("go list reported no dependencies for %s", pkg)
			}
			for _, imp := range info.Imports {
				for _, b := range bannedDirect {
					if imp == b {
						t.Errorf("%s imports %s directly", pkg, imp)
					}
				}
			}
			for _, dep := range info.Deps {
				for _, b := range bannedDeps {
					if strings.HasPrefix(dep, b) {
						t.Errorf("%s depends on %s", pkg, dep)
					}
				}
			}
		})
	}
}

// TestAgentLinksOnlyItsAPIGroups keeps client-go's clientset, informer
// factory and their scheme of every API group out of the agent: linked in,
// their code and registrations more than double its resident memory
// (docs/BENCHMARKS.md, "Cost on a real node").
func TestAgentLinksOnlyItsAPIGroups(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	allowedGroups := map[string]bool{"k8s.io/api/core/v1": true, "k8s.io/api/policy/v1": true}
	banned := []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/informers", "k8s.io/client-go/applyconfigurations", "k8s.io/client-go/discovery"}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list reported no dependencies")
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "k8s.io/api/") && !allowedGroups[dep] {
			t.Errorf("evictd links API group %s; only core/v1 and policy/v1 are used", dep)
		}
		for _, b := range banned {
			if dep == b || strings.HasPrefix(dep, b+"/") {
				t.Errorf("evictd links %s", dep)
			}
		}
	}
}
