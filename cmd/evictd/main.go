// Command evictd is the node-pressure eviction agent. With no subcommand it
// runs the agent; `check-config`, `doctor`, `simulate` and `status` help an
// operator check settings, check a node before rollout, replay a node
// snapshot and ask a running agent.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// commands are the subcommands; anything else runs the agent.
var commands = map[string]func(args []string, stdout, stderr io.Writer) int{
	"check-config": checkConfig,
	"doctor":       doctor,
	"explain":      explain,
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
		if args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd {
			return complete(args, stdout, stderr)
		}
		if cmd, ok := commands[args[0]]; ok {
			return cmd(args[1:], stdout, stderr)
		}
		if args[0] == "help" {
			return printHelp(args[1:], stdout, stderr)
		}
	}
	return agent(args, stdout, stderr)
}

// printHelp prints evictd's help, or with a command's name that command's.
func printHelp(args []string, stdout, stderr io.Writer) int {
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
