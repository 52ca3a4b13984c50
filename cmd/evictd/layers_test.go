package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// The layers of evictd, bottom up, as docs/ARCHITECTURE.md draws them: a
// package imports packages of the layers below its own and none of its
// own layer, unless sameLayer lists the import (test files left out).
var layers = []struct {
	name     string
	packages []string
}{
	{"vocabulary", []string{"signals", "internal/buildinfo"}},
	{"pure stages", []string{"thresholds", "ranking", "internal/qos"}},
	{"decision", []string{"internal/decide"}},
	{"instruments", []string{"internal/metrics"}},
	// What the adapters share: the node's files, the API server's
	// client, credential files, systemd's protocol.
	{"system access", []string{"signals/host", "internal/kubeclient", "internal/secretfile", "systemd"}},
	// The loop and the adapters side by side: neither imports the other;
	// the loop declares the interfaces the adapters meet.
	{"loop and adapters", []string{
		"internal/manager",
		"internal/wakeup", "internal/cri", "reclaim",
		"internal/podsource", "internal/evict", "internal/nodestatus", "internal/lease", "internal/tokenrenew",
		"internal/config", "internal/snapshot", "internal/server",
	}},
	// What the loop's passes become after the fact: the flight recorder
	// reads the loop's PassRecord and writes simulate's snapshots.
	{"records", []string{"internal/recorder"}},
	{"assembly", []string{"internal/agent"}},
	{"main", []string{"cmd/evictd"}},
	// Test infrastructure and tools, linked into no agent.
	{"test harnesses", []string{
		"internal/testing/childproc", "internal/testing/testalloc", "internal/testing/testcluster",
		"internal/testing/testruntime", "internal/testing/testnode", "internal/testing/hosttree",
		"internal/testing/fleet", "internal/testing/testvm", "internal/testing/guestnode", "internal/testing/testagent",
	}},
	{"tools and suites", []string{"hack/benchnode", "hack/benchfleet", "hack/costnode", "hack/demo", "hack/image", "hack/package", "hack/release", "hack/soak", "hack/workload", "deploy", "deploy/monitoring", "docs", "e2e/..."}},
}

// allowedImports are the imports the rules below would refuse and the map
// allows, each with why.
var allowedImports = map[string]string{
	// `evictd status` decodes the loop's Status document.
	"cmd/evictd -> internal/manager": "main reads the loop's Status",
	// The flight recorder is the loop's Recorder and reads its PassRecord.
	"internal/recorder -> internal/manager": "the recorder reads the loop's PassRecord",
}

// openLayers are the layers whose packages may import each other.
var openLayers = map[string]bool{"test harnesses": true, "tools and suites": true}

// layerOf returns the index of pkg's layer; a package under a listed
// "dir/..." belongs to its layer.
func layerOf(pkg string) (int, bool) {
	for i, l := range layers {
		for _, p := range l.packages {
			if p == pkg {
				return i, true
			}
			if dir, ok := strings.CutSuffix(p, "/..."); ok && (pkg == dir || strings.HasPrefix(pkg, dir+"/")) {
				return i, true
			}
		}
	}
	return 0, false
}

// TestLayering keeps the import graph flowing one way, down the layers
// above: nothing imports a layer above its own, nothing in the loop's and
// adapters' layer imports another package of it, only the assembly and
// main import the loop, and every package of the module has its place,
// so a new one must be placed.
func TestLayering(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	const module = "github.com/evictd/evictd/"
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
		for _, msg := range misplaced(pkg, p.Imports, module) {
			t.Error(msg)
		}
	}
	if seen < 20 {
		t.Fatalf("go list listed %d packages; want the whole module", seen)
	}
}

// misplaced says what is wrong with pkg importing imports.
func misplaced(pkg string, imports []string, module string) []string {
	li, ok := layerOf(pkg)
	if !ok {
		return []string{pkg + " has no layer: place it in cmd/evictd/layers_test.go and docs/ARCHITECTURE.md"}
	}
	var out []string
	for _, imp := range imports {
		dep, ours := strings.CutPrefix(imp, module)
		if !ours {
			continue
		}
		ld, ok := layerOf(dep)
		switch {
		case !ok:
			// Reported when dep itself is listed.
		case ld > li:
			out = append(out, fmt.Sprintf("%s (%s) imports %s (%s), a layer above it", pkg, layers[li].name, dep, layers[ld].name))
		case dep == "internal/manager" && pkg != "internal/agent" && allowedImports[pkg+" -> "+dep] == "":
			out = append(out, fmt.Sprintf("%s imports the loop; only the assembly (internal/agent) may", pkg))
		case ld == li && !openLayers[layers[li].name] && allowedImports[pkg+" -> "+dep] == "":
			out = append(out, fmt.Sprintf("%s imports %s, another package of its own layer (%s): the map does not allow it", pkg, dep, layers[li].name))
		}
	}
	return out
}

// TestLayeringRefuses checks that the rules catch what they are for: a
// deliberately misplaced import of each kind is refused.
func TestLayeringRefuses(t *testing.T) {
	const module = "github.com/evictd/evictd/"
	for _, tc := range []struct {
		pkg, imp string
		want     string // "" when allowed
	}{
		{"internal/evict", "internal/podsource", "another package of its own layer"},
		{"internal/cri", "internal/manager", "imports the loop"},
		{"internal/manager", "internal/evict", "another package of its own layer"},
		{"signals", "thresholds", "a layer above it"},
		{"internal/decide", "internal/metrics", "a layer above it"},
		{"internal/agent", "cmd/evictd", "a layer above it"},
		{"internal/newthing", "signals", "has no layer"},
		{"internal/evict", "internal/kubeclient", ""},
		{"internal/agent", "internal/manager", ""},
		{"cmd/evictd", "internal/manager", ""},
		{"e2e/node", "internal/testing/testnode", ""},
	} {
		got := strings.Join(misplaced(tc.pkg, []string{module + tc.imp}, module), "; ")
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s importing %s: got %q, want %q", tc.pkg, tc.imp, got, tc.want)
		}
	}
}
