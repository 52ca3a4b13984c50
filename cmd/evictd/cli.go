package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/internal/config"
)

// The command line's shared parts: the agent's help, the build's version,
// flag parsing into a validated configuration, usage errors and JSON output.

const usage = `evictd — node-pressure eviction agent

Usage:
  evictd [flags]                       run the agent
  evictd check-config [flags] [-o text|json|yaml] [--strict] [--node-memory Q ...]
                                       print the effective configuration, or the error
  evictd doctor [flags] [-o text|json] check this node, runtime and API access before rollout
  evictd simulate --snapshot FILE [flags] [-o text|json]
                                       replay a node snapshot and print what evictd would do
  evictd explain [POD] [--last N] [--state-dir DIR | --record FILE] [-o text|json]
                                       explain evictions on this node from its flight records
  evictd status [-o text|json] [--metrics-bind-address ADDR] [--metrics-ca-file FILE | --tls]
                [--metrics-bearer-token-file FILE] [--agent-user USER]
                                       show what a running agent last saw and decided
  evictd version [-o text|json]        print the version, commit and Go version
  evictd completion bash|zsh|fish      print a shell completion script (man DIR: the man pages)
  evictd help [COMMAND]                print this help, or a command's

Run 'evictd help COMMAND' or 'evictd COMMAND --help' for a command's flags.
The agent's flags, below, follow the kubelet's names and syntax.
`

// Set at build time with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

func commandNames() string {
	return "check-config, completion, doctor, explain, simulate, status, version and help"
}

// setUsage makes fs's help, on --help or -h, head and then fs's flags,
// written to w (stdout) and wrapped to its width: the agent's flags by
// concern (flagGroups), after the command's own.
func setUsage(fs *pflag.FlagSet, w io.Writer, head string) {
	if captureUsage != nil {
		captureUsage(fs, head)
	}
	fs.Usage = func() {
		fmt.Fprint(w, head)
		cols := helpColumns(w)
		if fs.Lookup("eviction-hard") == nil {
			fmt.Fprintf(w, "\nFlags:\n%s", fs.FlagUsagesWrapped(cols))
			return
		}
		fmt.Fprint(w, groupedUsages(fs, strings.TrimPrefix(fs.Name(), "evictd "), cols))
	}
}

// usageError writes a usage error for command to stderr, with where to
// find its help, and returns exit code 2.
func usageError(stderr io.Writer, command string, err error) int {
	helpCmd := "evictd --help"
	if name, ok := strings.CutPrefix(command, "evictd "); ok {
		helpCmd = "evictd " + name + " --help"
	}
	fmt.Fprintf(stderr, "%s: %v\nRun '%s' for usage.\n", command, err, helpCmd)
	return 2
}

// loadConfig parses flags into a validated configuration; ok is false when
// the caller should exit with code: after printing help (head and the
// flags) or the version on stdout, or the error on stderr.
func loadConfig(name, head string, args []string, stdout, stderr io.Writer, extra func(*pflag.FlagSet)) (cfg *config.Config, code int, ok bool) {
	fs, opts := config.NewFlagSet(name)
	fs.SetOutput(stderr)
	setUsage(fs, stdout, head)
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, 0, false
		}
		return nil, usageError(stderr, name, err), false
	}
	if f := fs.Lookup("version"); f != nil && f.Value.String() == "true" {
		fmt.Fprintln(stdout, buildVersion())
		return nil, 0, false
	}
	if fs.NArg() > 0 {
		return nil, usageError(stderr, name, fmt.Errorf("unexpected argument %q (the commands are %s)", fs.Arg(0), commandNames())), false
	}
	cfg, err := opts.Complete(fs)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return nil, 1, false
	}
	return cfg, 0, true
}

// versionInfo is what `evictd version` prints.
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// buildVersion returns the version and commit set at build time; without
// a commit, the one Go stamped from the VCS (go build in a checkout), with
// "-dirty" when the tree had changes (buildinfo.Revision, which
// evictd_build_info's revision also comes from).
func buildVersion() versionInfo {
	return versionInfo{Version: version, Commit: buildinfo.Revision(commit), GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// String is the version line: evictd v0.1.0 (commit abc123, go1.26.1 linux/amd64).
func (v versionInfo) String() string {
	return fmt.Sprintf("evictd %s (commit %s, %s %s)", v.Version, v.Commit, v.GoVersion, v.Platform)
}

// writeJSON writes v indented, without escaping <, > and & (thresholds
// hold < and >): every JSON evictd's commands print goes through it.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
