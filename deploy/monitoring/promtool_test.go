package monitoring

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtool finds promtool, or skips the test when it is missing; under
// CI=true a missing promtool fails it (hack/install-prometheus.sh installs
// it, `make monitoring-check` runs that first).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("promtool not found and CI=true: run hack/install-prometheus.sh (as root)")
	}
	t.Skip("promtool not found (Debian's prometheus package; hack/install-prometheus.sh installs it as root)")
	return ""
}

// TestRulesCheck runs `promtool check rules` on the rule file: syntax,
// PromQL, templates, and no duplicate rules.
func TestRulesCheck(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", rulesFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", rulesFile, err, out)
	}
}

// TestRulesUnit runs the promtool unit tests of tests/: every alert firing
// and not firing, and the recording rules' values.
func TestRulesUnit(t *testing.T) {
	files, err := filepath.Glob("tests/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no tests/*.yaml (err %v)", err)
	}
	out, err := exec.Command(promtool(t), append([]string{"test", "rules"}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestDashboardQueriesParse has promtool parse every query of the
// dashboards, their variables put in (dashboard.expand), as the
// expressions of recording rules: a query Prometheus would refuse fails
// here, not on a blank panel.
func TestDashboardQueriesParse(t *testing.T) {
	promtool := promtool(t)
	for _, file := range []string{dashboardFile, fleetDashboardFile} {
		t.Run(file, func(t *testing.T) {
			d := readDashboard(t, file)
			type rule struct {
				Record string `json:"record"`
				Expr   string `json:"expr"`
			}
			var rules []rule
			for _, where := range slices.Sorted(maps.Keys(d.exprs)) {
				rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", len(rules)), Expr: d.expand(d.exprs[where])})
			}
			b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "queries.yaml")
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(promtool, "check", "rules", "--lint=none", path).CombinedOutput(); err != nil {
				t.Errorf("promtool check rules on the queries of %s: %v\n%s\n%s", file, err, out, strings.TrimSpace(string(b)))
			}
		})
	}
}
