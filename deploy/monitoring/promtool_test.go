package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
