package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

const versionHelp = `Usage: evictd version [-o text|json]

Print evictd's version, the commit it was built from, and the Go version and
platform it was built with; 'evictd --version' prints the same.
`

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
