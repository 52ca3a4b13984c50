package main

import (
	"encoding/json"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestHelp checks that help, for evictd and for each command, goes to
// stdout with exit 0, however it is asked for.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    []string // in stdout
		notWant string
	}{
		{[]string{"--help"}, []string{"evictd — node-pressure eviction agent", "evictd status [-o text|json]", "evictd help [COMMAND]", "--eviction-hard", "--log-format", "--version"}, ""},
		{[]string{"-h"}, []string{"evictd — node-pressure eviction agent", "--eviction-hard"}, ""},
		{[]string{"help"}, []string{"evictd — node-pressure eviction agent", "evictd check-config", "--log-level"}, ""},
		{[]string{"help", "--help"}, []string{"evictd — node-pressure eviction agent"}, ""},
		{[]string{"--log-level=debug", "--help"}, []string{"evictd — node-pressure eviction agent"}, ""},
		{[]string{"help", "status"}, []string{"Usage: evictd status", "-o, --output", "--metrics-ca-file"}, "--eviction-hard"},
		{[]string{"status", "--help"}, []string{"Usage: evictd status", "-o, --output"}, "--eviction-hard"},
		{[]string{"status", "-h"}, []string{"Usage: evictd status"}, ""},
		{[]string{"help", "check-config"}, []string{"Usage: evictd check-config", "--eviction-hard"}, "--version"},
		{[]string{"check-config", "--help"}, []string{"Usage: evictd check-config", "--eviction-hard"}, "--version"},
		{[]string{"help", "check-config"}, []string{"--strict", "--node-memory", "-o, --output"}, ""},
		{[]string{"help", "doctor"}, []string{"Usage: evictd doctor", "-o, --output", "--kubeconfig", "--cgroup-driver"}, "--version"},
		{[]string{"doctor", "--help"}, []string{"Usage: evictd doctor"}, ""},
		{[]string{"help"}, []string{"evictd doctor [flags] [-o text|json]"}, ""},
		{[]string{"help", "simulate"}, []string{"Usage: evictd simulate --snapshot FILE", "--snapshot string", "-o, --output", "--eviction-hard"}, ""},
		{[]string{"simulate", "--help"}, []string{"Usage: evictd simulate"}, ""},
		{[]string{"simulate", "--snapshot", "/nonexistent.json", "--help"}, []string{"Usage: evictd simulate"}, ""},
		{[]string{"help", "version"}, []string{"Usage: evictd version", "-o, --output"}, ""},
		{[]string{"version", "--help"}, []string{"Usage: evictd version"}, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := runCmd(tc.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("got exit %d, stderr %q; want 0 and nothing", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if tc.notWant != "" && strings.Contains(out, tc.notWant) {
				t.Errorf("stdout has %q:\n%s", tc.notWant, out)
			}
		})
	}
}

// TestHelpUsageErrors checks that usage errors go to stderr, with where
// the help is, and exit 2, printing nothing on stdout.
func TestHelpUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nope"}, "evictd: unknown flag: --nope\nRun 'evictd --help' for usage.\n"},
		{[]string{"bogus"}, `evictd: unexpected argument "bogus" (the commands are check-config, completion, doctor, explain, simulate, status, version and help)` + "\nRun 'evictd --help' for usage.\n"},
		{[]string{"help", "bogus"}, `evictd help: unknown command "bogus"; the commands are check-config, completion, doctor, explain, simulate, status, version and help` + "\n"},
		{[]string{"help", "status", "simulate"}, `evictd help: want at most one command`},
		{[]string{"status", "--nope"}, "evictd status: unknown flag: --nope\nRun 'evictd status --help' for usage.\n"},
		{[]string{"status", "extra"}, `evictd status: unexpected argument "extra"`},
		{[]string{"status", "-o", "yaml"}, `evictd status: --output "yaml": want text or json`},
		{[]string{"check-config", "--nope"}, "Run 'evictd check-config --help' for usage."},
		{[]string{"simulate"}, "evictd simulate: --snapshot FILE is required\nRun 'evictd simulate --help' for usage.\n"},
		{[]string{"version", "-o", "yaml"}, `evictd version: --output "yaml": want text or json`},
		{[]string{"version", "extra"}, `evictd version: unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := runCmd(tc.args...)
			if code != 2 || out != "" {
				t.Errorf("got exit %d, stdout %q; want 2 and nothing", code, out)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr: got %q, want it to contain %q", errOut, tc.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "v0.1.0", "abc123"
	want := "evictd v0.1.0 (commit abc123, " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	for _, args := range [][]string{
		{"version"},
		{"--version"},
		{"--log-level=debug", "--version", "--housekeeping-interval=5s"},
		// Printed before the configuration is checked.
		{"--housekeeping-interval=0s", "--version"},
	} {
		out, errOut, code := runCmd(args...)
		if code != 0 || out != want || errOut != "" {
			t.Errorf("evictd %v: got exit %d, stdout %q, stderr %q; want 0 and %q", args, code, out, errOut, want)
		}
	}
	out, errOut, code := runCmd("version", "-o", "json")
	var got versionInfo
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("version -o json: exit %d, %v, stdout %q, stderr %q", code, err, out, errOut)
	}
	if w := (versionInfo{"v0.1.0", "abc123", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH}); got != w {
		t.Errorf("version -o json: got %+v, want %+v", got, w)
	}

	// Without -X main.commit, the commit Go stamped, or unknown.
	commit = "unknown"
	out, _, _ = runCmd("version")
	if !regexp.MustCompile(`^evictd v0\.1\.0 \(commit ([0-9a-f]+(-dirty)?|unknown), go`).MatchString(out) {
		t.Errorf("without a commit: got %q", out)
	}
}
