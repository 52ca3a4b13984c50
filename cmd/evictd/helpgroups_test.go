package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/internal/config"
)

// TestFlagGroupsCoverEveryFlag: each agent flag is in exactly one group
// of --help, and each group's flags are the agent's.
func TestFlagGroupsCoverEveryFlag(t *testing.T) {
	fs, _ := config.NewFlagSet("evictd")
	fs.Bool("version", false, "the agent's own, added by agent()")
	seen := map[string]string{}
	for _, g := range flagGroups {
		for _, name := range g.flags {
			if other, ok := seen[name]; ok {
				t.Errorf("--%s is in %q and in %q", name, other, g.title)
			}
			seen[name] = g.title
			if fs.Lookup(name) == nil {
				t.Errorf("group %q names --%s, which is not an agent flag", g.title, name)
			}
		}
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if _, ok := seen[f.Name]; !ok {
			t.Errorf("--%s is in no group of --help (flagGroups)", f.Name)
		}
	})
}

// TestHelpGroupedAndWrapped: the agent's help shows the groups in order,
// each under cliflag.PrintSections' "<title> flags:", wrapped to $COLUMNS
// but for single words longer than a line, with no trailing spaces. At 72
// columns pflag alone leaves --kubeconfig-in-cluster's usage unwrapped
// after its URL (rewrap).
func TestHelpGroupedAndWrapped(t *testing.T) {
	for _, cols := range []string{"72", "80", "132"} {
		t.Setenv("COLUMNS", cols)
		out, _, code := runCmd("--help")
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		start := strings.Index(out, "\nThresholds and evictions flags:\n")
		if start < 0 {
			t.Fatalf("COLUMNS=%s: no \"Thresholds and evictions flags:\" heading:\n%s", cols, out)
		}
		flags := out[start:]
		last := -1
		for _, g := range flagGroups {
			i := strings.Index(flags, "\n"+g.title+" flags:\n")
			if i <= last {
				t.Errorf("COLUMNS=%s: group %q missing or out of order", cols, g.title)
			}
			last = i
		}
		for _, line := range strings.Split(flags, "\n") {
			if len(line) > atoi(t, cols) && len(strings.Fields(line)) > 1 {
				t.Errorf("COLUMNS=%s: line of %d columns: %q", cols, len(line), line)
			}
			if strings.HasSuffix(line, " ") {
				t.Errorf("COLUMNS=%s: trailing spaces: %q", cols, line)
			}
		}
	}
	out, _, _ := runCmd("check-config", "--help")
	if i, j := strings.Index(out, "\nCheck-config flags:\n"), strings.Index(out, "\nThresholds and evictions flags:\n"); i < 0 || j < i || !strings.Contains(out[i:j], "--strict") {
		t.Errorf("check-config --help: its own flags (--strict) should come first, before the agent's groups:\n%s", out)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
