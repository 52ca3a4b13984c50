package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/config"
	"github.com/spf13/pflag"
)

// TestCompletionScripts: each shell's script is evictd's, and asks evictd
// itself (__complete) for what to offer.
func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__evictd_", "zsh": "#compdef evictd", "fish": "complete -c evictd"} {
		out, errOut, code := runCmd("completion", shell)
		if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: exit %d, stderr %q, script lacks %q or __complete", shell, code, errOut, want)
		}
	}
	if _, errOut, code := runCmd("completion", "tcsh"); code != 2 || !strings.Contains(errOut, `"tcsh"`) {
		t.Errorf("completion tcsh: exit %d, stderr %q; want 2 naming it", code, errOut)
	}
}

// TestCompleteAnswers: the scripts' requests are answered from each
// command's own flag set: the commands at the top, a command's flags, and
// the agent's after a command that takes them.
func TestCompleteAnswers(t *testing.T) {
	candidates := func(args ...string) []string {
		out, errOut, code := runCmd(append([]string{"__complete"}, args...)...)
		if code != 0 {
			t.Fatalf("__complete %q: exit %d, stderr %q", args, code, errOut)
		}
		var c []string
		for _, line := range strings.Split(out, "\n") {
			if line == "" || strings.HasPrefix(line, ":") {
				continue
			}
			c = append(c, strings.SplitN(line, "\t", 2)[0])
		}
		return c
	}
	for name := range commands {
		if !slices.Contains(candidates(""), name) {
			t.Errorf("the commands offered lack %s", name)
		}
	}
	if got := candidates("check-config", "--str"); !slices.Equal(got, []string{"--strict"}) {
		t.Errorf("check-config --str: got %q, want --strict", got)
	}
	if got := candidates("doctor", "--eviction-so"); !slices.Contains(got, "--eviction-soft") {
		t.Errorf("doctor --eviction-so: got %q, want the agent's --eviction-soft", got)
	}
	if got := candidates("--local-storage-ev"); !slices.Contains(got, "--local-storage-eviction") {
		t.Errorf("--local-storage-ev: got %q, want --local-storage-eviction", got)
	}
	if got := candidates("version", "--"); slices.Contains(got, "--eviction-hard") {
		t.Errorf("version --: got the agent's flags %q", got)
	}
}

// TestManPages: one page per command and evictd(8), each with its flags.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	if _, errOut, code := runCmd("completion", "man", dir); code != 0 {
		t.Fatalf("completion man: exit %d, stderr %q", code, errOut)
	}
	pages := []string{"evictd.8"}
	for name := range commands {
		pages = append(pages, "evictd-"+name+".8")
	}
	for _, p := range pages {
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Errorf("page %s: %v", p, err)
			continue
		}
		if !strings.Contains(string(data), ".TH \"EVICTD\" \"8\"") {
			t.Errorf("page %s has no EVICTD(8) header", p)
		}
	}
	data, _ := os.ReadFile(filepath.Join(dir, "evictd-check-config.8"))
	if !strings.Contains(string(data), "strict") || !strings.Contains(string(data), "eviction-hard") {
		t.Errorf("evictd-check-config(8) lacks --strict or the agent's --eviction-hard")
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "evictd.8")); !strings.Contains(string(data), "(config file: evictionHard)") {
		t.Errorf("evictd(8) does not name --eviction-hard's field in the configuration file")
	}
	// The man pages' Markdown converter takes an unescaped "<" for an
	// HTML tag and drops the text after it.
	if data, _ := os.ReadFile(filepath.Join(dir, "evictd.8")); !strings.Contains(string(data), "signal<quantity pairs") || !strings.Contains(string(data), "memory.available<100Mi") {
		t.Errorf("evictd(8) lost the text after a \"<\" in --eviction-hard's usage or default")
	}
	if _, errOut, code := runCmd("completion", "man", filepath.Join(dir, "none")); code != 1 || !strings.Contains(errOut, "none") {
		t.Errorf("completion man into a missing directory: exit %d, stderr %q; want 1 naming it", code, errOut)
	}
}

// TestReferenceCurrent: docs/reference is what `evictd completion
// markdown` writes from today's flags (make docs writes it again).
func TestReferenceCurrent(t *testing.T) {
	dir := t.TempDir()
	if _, errOut, code := runCmd("completion", "markdown", dir); code != 0 {
		t.Fatalf("completion markdown: exit %d, stderr %q", code, errOut)
	}
	const committed = "../../docs/reference"
	want, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	got, _ := filepath.Glob(filepath.Join(committed, "*.md"))
	if len(got) != len(want) {
		t.Errorf("docs/reference has %d pages, the commands %d: run make docs", len(got), len(want))
	}
	for _, p := range want {
		fresh, _ := os.ReadFile(p)
		old, err := os.ReadFile(filepath.Join(committed, filepath.Base(p)))
		if err != nil || string(old) != string(fresh) {
			t.Errorf("docs/reference/%s is stale: run make docs", filepath.Base(p))
		}
	}
}

// TestReferenceNamesFileFields: in the Markdown reference, every agent
// flag of every command that takes them ends with the field of evictd's
// configuration file that sets it, or with why the command line alone
// does, just before its default; other commands' flags of the same name,
// the completions and --help go without.
func TestReferenceNamesFileFields(t *testing.T) {
	dir := t.TempDir()
	if _, errOut, code := runCmd("completion", "markdown", dir); code != 0 {
		t.Fatalf("completion markdown: exit %d, stderr %q", code, errOut)
	}
	page := func(name string) string {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("page %s: %v", name, err)
		}
		return string(data)
	}
	// flagLine is the line of page's options that documents --flag.
	flagLine := func(page, flag string) (string, bool) {
		for _, line := range strings.Split(page, "\n") {
			f := strings.Fields(line)
			if len(f) > 1 && strings.HasPrefix(f[0], "-") && strings.HasSuffix(f[0], ",") {
				f = f[1:]
			}
			if len(f) > 0 && f[0] == "--"+flag {
				return line, true
			}
		}
		return "", false
	}
	// hasNote reports whether line ends with note, or has it just before
	// the default that ends it.
	hasNote := func(line, note string) bool {
		return strings.HasSuffix(line, note) || strings.Contains(line, note+" (default")
	}

	for _, tc := range []struct {
		page, flag string
		want       string // "": no note at all
	}{
		{"evictd.md", "eviction-hard", "(config file: evictionHard)"},
		{"evictd.md", "eviction-pressure-transition-period", "(config file: evictionPressureTransitionPeriod)"},
		{"evictd.md", "minimum-image-ttl-duration", "(config file: imageMinimumGCAge)"},
		{"evictd.md", "local-storage-eviction-qps", "(config file: localStorageEvictionQPS)"},
		{"evictd.md", "hostname-override", "(config file: hostnameOverride)"},
		{"evictd.md", "config", "(command line only: it names the file itself)"},
		{"evictd.md", "version", "(command line only: it prints the version and exits, a command rather than a setting)"},
		{"evictd.md", "help", ""},
		{"evictd_check-config.md", "eviction-soft", "(config file: evictionSoft)"},
		{"evictd_check-config.md", "strict", ""},
		{"evictd_doctor.md", "kubeconfig", "(config file: kubeconfig)"},
		{"evictd_simulate.md", "root-dir", "(config file: rootDir)"},
		// Flags of the same name that are the command's own.
		{"evictd_status.md", "metrics-bind-address", ""},
		{"evictd_status.md", "metrics-bearer-token-file", ""},
		{"evictd_explain.md", "state-dir", ""},
	} {
		line, ok := flagLine(page(tc.page), tc.flag)
		switch {
		case !ok:
			t.Errorf("%s: no --%s", tc.page, tc.flag)
		case tc.want == "" && (strings.Contains(line, "(config file:") || strings.Contains(line, "(command line only:")):
			t.Errorf("%s: --%s, not the agent's, names a field of the file:\n%s", tc.page, tc.flag, line)
		case tc.want != "" && !hasNote(line, tc.want):
			t.Errorf("%s: --%s does not end with %s before its default:\n%s", tc.page, tc.flag, tc.want, line)
		}
	}

	// Every agent flag, on every page of a command that takes them.
	agentFlags, _ := config.NewFlagSet("evictd")
	for _, p := range []string{"evictd.md", "evictd_check-config.md", "evictd_doctor.md", "evictd_simulate.md"} {
		text := page(p)
		agentFlags.VisitAll(func(f *pflag.Flag) {
			var want string
			if name, ok := config.FileField(f.Name); ok {
				want = "(config file: " + name + ")"
			} else if reason, ok := config.CommandLineOnly(f.Name); ok {
				want = "(command line only: " + reason + ")"
			} else {
				t.Errorf("--%s has no field in %s and is not command-line-only", f.Name, config.AgentKind)
				return
			}
			if line, ok := flagLine(text, f.Name); !ok || !hasNote(line, want) {
				t.Errorf("%s: --%s does not end with %s before its default (docTree)", p, f.Name, want)
			}
		})
	}

	if out, _, _ := runCmd("--help"); strings.Contains(out, "(config file:") {
		t.Errorf("evictd --help names the file's fields: only the reference does")
	}
	if out, _, _ := runCmd("__complete", "--eviction-h"); strings.Contains(out, "(config file:") {
		t.Errorf("the completions name the file's fields: only the reference does")
	}
}
