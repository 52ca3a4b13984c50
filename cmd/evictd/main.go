// Command evictd is the node-pressure eviction agent. With no subcommand it
// runs the agent; `check-config`, `simulate` and `status` help an operator
// check settings, replay a node snapshot and ask a running agent.
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `evictd — node-pressure eviction agent

Usage:
  evictd [flags]                       run the agent
  evictd check-config [flags]          print the effective thresholds, or the error
  evictd simulate --snapshot FILE [flags] [--output text|json]
                                       replay a node snapshot and print what evictd would do
  evictd status [--metrics-bind-address ADDR] [--metrics-ca-file FILE | --tls]
                [--metrics-bearer-token-file FILE]
                                       show what a running agent last saw and decided
  evictd version                       print the version

Run 'evictd --help' for the flags, which follow the kubelet's names and syntax.
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the exit code: 0 on success,
// 1 on a failure, 2 on a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "check-config":
			return checkConfig(args[1:], stdout, stderr)
		case "simulate":
			return simulate(args[1:], stdout, stderr)
		case "status":
			return status(args[1:], stdout, stderr)
		case "version":
			fmt.Fprintln(stdout, "evictd", version)
			return 0
		case "help":
			fmt.Fprint(stdout, usage)
			return 0
		}
	}
	return agent(args, stdout, stderr)
}
