package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// The layers of evictd, bottom up: a package imports packages of its own
// layer or below, never above (test files left out). docs/ARCHITECTURE.md
// draws the same map.
var layers = []struct {
	name     string
	packages []string
}{
	{"vocabulary", []string{"signals"}},
	{"pure stages", []string{"thresholds", "ranking", "internal/qos"}},
	{"decision", []string{"internal/decide"}},
	{"instruments", []string{"internal/metrics"}},
	{"loop", []string{"internal/manager"}},
	{"adapters", []string{
		"signals/host", "internal/notify", "internal/cri", "reclaim",
		"internal/kubeclient", "internal/podsource", "internal/evict", "internal/nodestatus", "internal/lease",
		"internal/config", "internal/secretfile", "internal/snapshot", "internal/server", "systemd",
	}},
	{"main", []string{"cmd/evictd"}},
	// Test infrastructure and tools, linked into no agent.
	{"test harnesses", []string{
		"internal/testing/childproc", "internal/testing/testalloc", "internal/testing/testcluster",
		"internal/testing/testruntime", "internal/testing/testnode", "internal/testing/hosttree",
		"internal/testing/fleet", "internal/testing/testvm",
	}},
	{"tools and suites", []string{"hack/benchnode", "hack/benchfleet", "hack/costnode", "hack/demo", "hack/image", "hack/package", "hack/release", "hack/soak", "hack/workload", "deploy", "deploy/monitoring", "e2e"}},
}

// TestLayering keeps the import graph flowing one way: signals, then
// thresholds and ranking, then the decision, then the loop, then the
// adapters, then main; nothing but main imports the loop; every package of
// the module has its place above, so a new one must be placed.
func TestLayering(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	const module = "github.com/evictd/evictd/"
	layerOf := map[string]int{}
	for i, l := range layers {
		for _, p := range l.packages {
			layerOf[p] = i
		}
	}
	out, err := exec.Command(goBin, "list", "-json=ImportPath,Imports", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		seen++
		pkg := strings.TrimPrefix(p.ImportPath, module)
		li, ok := layerOf[pkg]
		if !ok {
			t.Errorf("%s has no layer: place it in cmd/evictd/layers_test.go and docs/ARCHITECTURE.md", pkg)
			continue
		}
		for _, imp := range p.Imports {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			ld, ok := layerOf[dep]
			switch {
			case !ok:
				// Reported when dep itself is listed.
			case ld > li:
				t.Errorf("%s (%s) imports %s (%s), a layer above it", pkg, layers[li].name, dep, layers[ld].name)
			case dep == "internal/manager" && pkg != "cmd/evictd":
				t.Errorf("%s imports the loop; only cmd/evictd may", pkg)
			}
		}
	}
	if seen < 20 {
		t.Fatalf("go list listed %d packages; want the whole module", seen)
	}
}
