package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/evictd/evictd/internal/config"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
)

const completionHelp = `Usage: evictd completion bash|zsh|fish
       evictd completion man DIR
       evictd completion markdown DIR

Print the shell completion script for bash, zsh or fish, which completes
evictd's commands and each command's flags: for bash,
  evictd completion bash > /etc/bash_completion.d/evictd
The packages install the three. 'man DIR' writes the man pages evictd(8)
and evictd-COMMAND(8) into DIR, as the packages ship them; 'markdown DIR'
the same reference as Markdown, as docs/reference holds it (make docs).
`

// completion is registered here, not in commands' literal, which it reads.
func init() { commands["completion"] = completion }

// commandShort is each command's line in the man pages and completions,
// as the help's usage says it.
var commandShort = map[string]string{
	"check-config": "print the effective configuration, or the error",
	"completion":   "print a shell completion script, or write the man pages",
	"doctor":       "check this node, runtime and API access before rollout",
	"explain":      "explain evictions on this node from its flight records",
	"simulate":     "replay a node snapshot and print what evictd would do",
	"status":       "show what a running agent last saw and decided",
	"version":      "print the version, commit and Go version",
}

// captureUsage, while commandFlags runs a command, receives the flag set
// and help setUsage is given, so completions and man pages have each
// command's flags as its help has them, and no copy of them.
var captureUsage func(fs *pflag.FlagSet, head string)

// commandFlags returns the flag set and help head of the command run: it
// runs it with --help, which parses nothing else and prints to nowhere.
func commandFlags(run func(args []string, stdout, stderr io.Writer) int) (*pflag.FlagSet, string) {
	var fs *pflag.FlagSet
	var head string
	captureUsage = func(f *pflag.FlagSet, h string) {
		if fs == nil {
			fs, head = f, h
		}
	}
	defer func() { captureUsage = nil }()
	run([]string{"--help"}, io.Discard, io.Discard)
	return fs, head
}

// commandTree is evictd's commands and flags as a cobra command tree, for
// cobra's completion scripts, their __complete requests and the man pages
// (cobra/doc); the commands themselves still run as main dispatches them.
func commandTree() *cobra.Command {
	noop := func(*cobra.Command, []string) {}
	fs, _ := commandFlags(agent)
	root := &cobra.Command{
		Use:   "evictd",
		Short: "node-pressure eviction agent for Kubernetes",
		Long: "evictd watches a node's memory, disk, inodes and PIDs, reclaims what the node can free, " +
			"evicts the right pod before the kernel's OOM killer or a full disk does, tells the scheduler " +
			"through node conditions and taints, and shows all of it in Prometheus metrics. " +
			"With no command it runs the agent, whose flags follow the kubelet's names and syntax.",
		Run:               noop,
		DisableAutoGenTag: true,
	}
	root.Flags().AddFlagSet(fs)
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range commands {
			if !yield(name) {
				return
			}
		}
	})
	for _, name := range names {
		f, head := commandFlags(commands[name])
		c := &cobra.Command{Use: name, Short: commandShort[name], Long: strings.TrimSpace(head), Run: noop, DisableAutoGenTag: true}
		if f != nil {
			c.Flags().AddFlagSet(f)
		}
		if name == "completion" {
			c.ValidArgs = []string{"bash", "zsh", "fish", "man", "markdown"}
		}
		root.AddCommand(c)
	}
	root.CompletionOptions.DisableDefaultCmd = true
	return root
}

// docTree is commandTree as the man pages and the Markdown reference
// document it: wherever a command takes the agent's flags, each of them
// also names the field of evictd's configuration file that sets it, or
// says why none does (fileFieldNote). Completions and --help go without.
func docTree() *cobra.Command {
	root := commandTree()
	root.Long += " Each of the agent's flags below ends with the field of evictd's configuration file that sets it, " +
		"as (config file: evictionHard), or with why only the command line sets it; --config names the file, a " +
		config.AgentAPIVersion + " " + config.AgentKind + ", and a flag given on the command line overrides it."
	for _, c := range append([]*cobra.Command{root}, root.Commands()...) {
		fs := c.Flags()
		if !takesAgentFlags(fs) {
			continue
		}
		fs.VisitAll(func(f *pflag.Flag) {
			if note, ok := fileFieldNote(f.Name); ok {
				f.Usage = withNote(f.Usage, note)
			}
		})
	}
	return root
}

// manTree is docTree with the flags' usages and defaults escaped for the
// Markdown that cobra's man pages go through: unescaped, its converter
// reads "signal<quantity" as the start of an HTML tag and drops the text
// up to the next ">", which left --eviction-hard's usage without its
// syntax and its default empty.
func manTree() *cobra.Command {
	root := docTree()
	escape := strings.NewReplacer("<", `\<`, ">", `\>`)
	for _, c := range append([]*cobra.Command{root}, root.Commands()...) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			f.Usage = escape.Replace(f.Usage)
			f.DefValue = escape.Replace(f.DefValue)
		})
	}
	return root
}

// takesAgentFlags reports whether fs holds every flag of the agent, as the
// flag sets of the agent, check-config, doctor and simulate do: there a
// flag with an agent flag's name is that flag, which the configuration
// file sets too; elsewhere (status's --metrics-bind-address, explain's
// --state-dir) it is the command's own.
func takesAgentFlags(fs *pflag.FlagSet) bool {
	agent, _ := config.NewFlagSet("evictd")
	all := true
	agent.VisitAll(func(f *pflag.Flag) {
		all = all && fs.Lookup(f.Name) != nil
	})
	return all
}

// fileFieldNote is what the reference adds to an agent flag's usage: the
// field of evictd's configuration file that sets it, "(config file:
// evictionHard)", or why the file has none, "(command line only: it names
// the file itself)"; ok is false for a flag that is not the agent's.
func fileFieldNote(flag string) (note string, ok bool) {
	if name, ok := config.FileField(flag); ok {
		return "(config file: " + name + ")", true
	}
	if reason, ok := config.CommandLineOnly(flag); ok {
		return "(command line only: " + reason + ")", true
	}
	return "", false
}

// withNote returns usage with note added before the "(default ...)" that
// ends it, if one does, so that the note always comes just before the
// default, whether the usage says it or pflag adds it after the usage.
func withNote(usage, note string) string {
	if i := strings.LastIndex(usage, " (default"); i >= 0 && closesAtEnd(usage[i+1:]) {
		return usage[:i] + " " + note + usage[i:]
	}
	return usage + " " + note
}

// closesAtEnd reports whether s, which starts with "(", is one
// parenthesised group: its parenthesis closes at its last byte, no sooner.
func closesAtEnd(s string) bool {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i == len(s)-1
			}
		}
	}
	return false
}

// completion is `evictd completion`.
func completion(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("evictd completion", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, stdout, completionHelp)
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return 0
		}
		return usageError(stderr, "evictd completion", err)
	}
	if captureUsage != nil {
		return 0
	}
	var err error
	switch {
	case fs.NArg() == 1 && fs.Arg(0) == "bash":
		err = commandTree().GenBashCompletionV2(stdout, true)
	case fs.NArg() == 1 && fs.Arg(0) == "zsh":
		err = commandTree().GenZshCompletion(stdout)
	case fs.NArg() == 1 && fs.Arg(0) == "fish":
		err = commandTree().GenFishCompletion(stdout, true)
	case fs.NArg() == 2 && fs.Arg(0) == "man":
		err = writeManPages(fs.Arg(1))
	case fs.NArg() == 2 && fs.Arg(0) == "markdown":
		err = writeMarkdown(fs.Arg(1))
	default:
		return usageError(stderr, "evictd completion", fmt.Errorf("want bash, zsh, fish, man DIR or markdown DIR, got %q", fs.Args()))
	}
	if err != nil {
		fmt.Fprintf(stderr, "evictd completion: %v\n", err)
		return 1
	}
	return 0
}

// writeManPages writes evictd(8) and evictd-COMMAND(8) into dir, which
// must exist.
func writeManPages(dir string) error {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("man pages' directory %q: not a directory (%v)", dir, err)
	}
	return doc.GenManTree(manTree(), &doc.GenManHeader{Title: "EVICTD", Section: "8", Source: "evictd " + buildVersion().Version, Manual: "System Administration"}, dir)
}

// writeMarkdown writes the command reference as Markdown into dir, which
// must exist: evictd.md and evictd_COMMAND.md, linked to each other.
func writeMarkdown(dir string) error {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("reference's directory %q: not a directory (%v)", dir, err)
	}
	return doc.GenMarkdownTree(docTree(), dir)
}

// complete answers a completion script's request (`evictd __complete
// ARGS...`) from the command tree.
func complete(args []string, stdout, stderr io.Writer) int {
	root := commandTree()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		return 1
	}
	return 0
}
