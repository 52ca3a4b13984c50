package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/testing/testruntime"
)

// TestPureStagesImportNoSystem keeps the deciding stages pure: thresholds,
// ranking, the decision and the signal vocabulary must not reach the file system, the
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
		"github.com/evictd/evictd/internal/qos",
		"github.com/evictd/evictd/internal/decide",
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
	allowedGroups := map[string]bool{
		"k8s.io/api/core/v1": true, "k8s.io/api/policy/v1": true, "k8s.io/api/coordination/v1": true,
		// TokenReviews and SubjectAccessReviews: --metrics-delegated-auth.
		"k8s.io/api/authentication/v1": true, "k8s.io/api/authorization/v1": true,
	}
	banned := []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/informers", "k8s.io/client-go/applyconfigurations", "k8s.io/client-go/discovery"}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list reported no dependencies")
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "k8s.io/api/") && !allowedGroups[dep] {
			t.Errorf("evictd links API group %s; only core/v1, policy/v1, coordination/v1, authentication/v1 and authorization/v1 are used", dep)
		}
		for _, b := range banned {
			if dep == b || strings.HasPrefix(dep, b+"/") {
				t.Errorf("evictd links %s", dep)
			}
		}
	}
}

// TestAgentLinksNoUnusedLayers keeps out of the agent the libraries it
// linked for nothing but their weight in its resident memory
// (docs/BENCHMARKS.md, "Cost on a real node"): each is named with what
// brought it in. A prefix matches a module's packages.
func TestAgentLinksNoUnusedLayers(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	banned := map[string]string{
		// cri-client wraps the generated CRI clients with klog logging
		// and OpenTelemetry's gRPC tracing, which evictd never turns on;
		// internal/cri calls cri-api's generated clients. (The
		// OpenTelemetry trace API itself stays: k8s.io/kubelet's config
		// types reach it through component-base/metrics.)
		"k8s.io/cri-client/":           "k8s.io/cri-client",
		"go.opentelemetry.io/contrib/": "OpenTelemetry's gRPC instrumentation (through k8s.io/cri-client)",
		"go.opentelemetry.io/auto/":    "OpenTelemetry's auto SDK (through k8s.io/cri-client)",
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps listed %d packages; want evictd's whole graph", len(deps))
	}
	for _, dep := range deps {
		for prefix, what := range banned {
			if strings.HasPrefix(dep+"/", prefix) {
				t.Errorf("evictd links %s: %s", dep, what)
			}
		}
	}
}

// TestReleaseBuildLinksNoTemplates keeps text/template's calls of methods
// by name out of the released agent: once reachable, they make the linker
// keep every exported method of every type, a quarter of the binary. gRPC
// reaches them through golang.org/x/net/trace's html/template unless built
// with grpcnotrace; `make build` and the tests' builds
// (testruntime.BuildTags) must set it.
func TestReleaseBuildLinksNoTemplates(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if want := "TAGS     ?= " + testruntime.BuildTags + "\n"; !strings.Contains(string(makefile), want) {
		t.Errorf("the Makefile does not set %q; testruntime.BuildTags and make build must agree", strings.TrimSpace(want))
	}
	out, err := exec.Command(goBin, "list", "-tags", testruntime.BuildTags, "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps listed %d packages; want evictd's whole graph", len(deps))
	}
	for _, dep := range deps {
		if dep == "golang.org/x/net/trace" || dep == "html/template" {
			t.Errorf("evictd built with -tags %s links %s", testruntime.BuildTags, dep)
		}
	}
}

// TestNoShellingOut keeps evictd from running other programs: no package of
// this module in the binary's dependency graph (test files left out, as
// go list leaves them) imports os/exec, the process helpers of the tests
// are not linked in, and the libraries that do import os/exec are the
// known few below, each for a path evictd does not take. A new one fails
// the test, to be looked at.
func TestNoShellingOut(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	const module = "github.com/evictd/evictd"
	// Third-party packages that import os/exec, and why evictd never gets
	// them to run anything.
	known := map[string]string{
		// The credential plugins a kubeconfig's user may name (exec:);
		// evictd's kubeconfig holds a token or certificate.
		"k8s.io/client-go/plugin/pkg/client/auth/exec": "kubeconfig exec credential plugins",
		// OpenAPI compiler plugins; client-go only parses documents.
		"github.com/google/gnostic-models/compiler": "gnostic plugins",
		// dbus-launch for a session bus; cgroup v1 stats open no bus.
		"github.com/godbus/dbus/v5": "session bus autolaunch",
		// dmsetup and thin_ls for devicemapper storage; evictd stats
		// filesystems by path.
		"github.com/google/cadvisor/devicemapper": "devicemapper thin pools",
	}
	out, err := exec.Command(goBin, "list", "-deps", "-json=ImportPath,Imports", "./").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen, importers := 0, map[string]bool{}
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		seen++
		if strings.HasPrefix(p.ImportPath, module+"/internal/test") {
			t.Errorf("evictd links %s, a package that starts processes for tests", p.ImportPath)
		}
		if !slices.Contains(p.Imports, "os/exec") {
			continue
		}
		importers[p.ImportPath] = true
		switch {
		case strings.HasPrefix(p.ImportPath, module+"/") || p.ImportPath == module:
			t.Errorf("%s imports os/exec: evictd must not run other programs", p.ImportPath)
		case known[p.ImportPath] == "":
			t.Errorf("%s, a new dependency of evictd, imports os/exec: check that evictd never reaches its exec calls and add it here with the reason", p.ImportPath)
		}
	}
	if seen < 100 {
		t.Fatalf("go list -deps listed %d packages; want evictd's whole graph", seen)
	}
	for p := range known {
		if !importers[p] {
			t.Logf("%s no longer imports os/exec or is no longer linked; it can leave the list", p)
		}
	}
}
