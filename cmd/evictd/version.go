package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/pflag"
)

const versionHelp = `Usage: evictd version [-o text|json]

Print evictd's version, the commit it was built from, and the Go version and
platform it was built with; 'evictd --version' prints the same.
`

// versionInfo is what `evictd version` prints.
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// buildVersion returns the version and commit set at build time; without
// a commit, the one Go stamped from the VCS (go build in a checkout), with
// "-dirty" when the tree had changes.
func buildVersion() versionInfo {
	v := versionInfo{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if v.Commit == "unknown" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			v.Commit = vcsCommit(bi.Settings)
		}
	}
	return v
}

// vcsCommit is vcs.revision, "-dirty" added when vcs.modified, or
// "unknown".
func vcsCommit(settings []debug.BuildSetting) string {
	rev, dirty := "unknown", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && rev != "unknown" {
		rev += "-dirty"
	}
	return rev
}

// String is the version line: evictd v0.1.0 (commit abc123, go1.26.1 linux/amd64).
func (v versionInfo) String() string {
	return fmt.Sprintf("evictd %s (commit %s, %s %s)", v.Version, v.Commit, v.GoVersion, v.Platform)
}

// printVersion is `evictd version`.
func printVersion(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("evictd version", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	output := fs.StringP("output", "o", "text", "Output format: text (one line) or json.")
	setUsage(fs, stdout, versionHelp)
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return 0
		}
		return usageError(stderr, "evictd version", err)
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "evictd version", fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	v := buildVersion()
	switch *output {
	case "text":
		fmt.Fprintln(stdout, v)
	case "json":
		if err := writeJSON(stdout, v); err != nil {
			fmt.Fprintf(stderr, "evictd version: %v\n", err)
			return 1
		}
	default:
		return usageError(stderr, "evictd version", fmt.Errorf("--output %q: want text or json", *output))
	}
	return 0
}

// writeJSON writes v indented, without escaping <, > and & (thresholds
// hold < and >): every JSON evictd's commands print goes through it.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
