package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
