// Command evictd is the node-pressure eviction agent. With no subcommand it
// runs the agent; `check-config`, `simulate` and `status` help an operator
// check settings, replay a node snapshot and ask a running agent.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

const usage = `evictd — node-pressure eviction agent

Usage:
  evictd [flags]                       run the agent
  evictd check-config [flags]          print the effective thresholds, or the error
  evictd simulate --snapshot FILE [flags] [-o text|json]
                                       replay a node snapshot and print what evictd would do
  evictd status [-o text|json] [--metrics-bind-address ADDR] [--metrics-ca-file FILE | --tls]
                [--metrics-bearer-token-file FILE]
                                       show what a running agent last saw and decided
  evictd version [-o text|json]        print the version, commit and Go version
  evictd help [COMMAND]                print this help, or a command's

Run 'evictd help COMMAND' or 'evictd COMMAND --help' for a command's flags.
The agent's flags, below, follow the kubelet's names and syntax.
`

// Set at build time with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

// commands are the subcommands; anything else runs the agent.
var commands = map[string]func(args []string, stdout, stderr io.Writer) int{
	"check-config": checkConfig,
	"simulate":     simulate,
	"status":       status,
	"version":      printVersion,
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the exit code: 0 on success,
// 1 on a failure, 2 on a usage error. Help goes to stdout, usage errors to
// stderr.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if cmd, ok := commands[args[0]]; ok {
			return cmd(args[1:], stdout, stderr)
		}
		if args[0] == "help" {
			return help(args[1:], stdout, stderr)
		}
	}
	return agent(args, stdout, stderr)
}

// help prints evictd's help, or with a command's name that command's.
func help(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0 || (len(args) == 1 && (args[0] == "--help" || args[0] == "-h")):
		return agent([]string{"--help"}, stdout, stderr)
	case len(args) > 1:
		fmt.Fprintf(stderr, "evictd help: want at most one command, got %q\n", args)
		return 2
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "evictd help: unknown command %q; the commands are %s\n", args[0], commandNames())
		return 2
	}
	return cmd([]string{"--help"}, stdout, stderr)
}

func commandNames() string {
	return "check-config, simulate, status, version and help"
}

// setUsage makes fs's help, on --help or -h, head and then fs's flags,
// written to w (stdout).
func setUsage(fs *pflag.FlagSet, w io.Writer, head string) {
	fs.Usage = func() {
		fmt.Fprint(w, head)
		fmt.Fprintf(w, "\nFlags:\n%s", fs.FlagUsages())
	}
}

// usageError writes a usage error for command to stderr, with where to
// find its help, and returns exit code 2.
func usageError(stderr io.Writer, command string, err error) int {
	help := "evictd --help"
	if name, ok := strings.CutPrefix(command, "evictd "); ok {
		help = "evictd " + name + " --help"
	}
	fmt.Fprintf(stderr, "%s: %v\nRun '%s' for usage.\n", command, err, help)
	return 2
}
