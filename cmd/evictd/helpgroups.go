package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// flagGroups are the agent's flags by concern, in the order --help shows
// them. Every agent flag is in one group (TestFlagGroupsCoverEveryFlag);
// a command's own flags (check-config's -o, simulate's --snapshot) come
// first, under the command's name.
var flagGroups = []struct {
	title string
	flags []string
}{
	{"Thresholds and evictions", []string{
		"eviction-hard", "eviction-soft", "eviction-soft-grace-period", "eviction-minimum-reclaim",
		"eviction-pressure-transition-period", "eviction-max-pod-grace-period", "merge-default-eviction-settings",
		"enforce-node-allocatable", "system-reserved", "kube-reserved", "feature-gates",
		"eviction-time-to-exhaustion", "eviction-time-to-exhaustion-margin", "trusted-daemonset-namespaces",
	}},
	{"Hard evictions and safety limits", []string{
		"hard-eviction-direct-signal", "hard-eviction-local-stop", "hard-eviction-stop-wait", "local-kill-after",
		"max-evictions-per-hour", "dry-run",
	}},
	{"Waking up on memory", []string{
		"housekeeping-interval", "kernel-memcg-notification", "fast-poll-interval", "fast-poll-margin",
	}},
	{"Disk, images and local storage", []string{
		"imagefs-path", "minimum-image-ttl-duration", "pod-logs-dir", "volume-stats-agg-period",
		"local-storage-eviction", "local-storage-eviction-burst", "local-storage-eviction-qps",
	}},
	{"The node, its cgroups and its runtime", []string{
		"hostname-override", "root-dir", "proc-root", "cgroup-mount", "cgroup-root", "cgroup-driver",
		"container-runtime-endpoint", "image-service-endpoint", "runtime-request-timeout",
	}},
	{"The API server", []string{
		"kubeconfig", "kubeconfig-optional", "kubeconfig-in-cluster", "impersonate-node",
		"token-renewal", "token-renew-before", "token-lifetime", "standalone-stop",
		"node-status-update-frequency", "node-status-report-frequency", "pressure-taint-effect",
		"lease-duration", "lease-namespace",
	}},
	{"Metrics, status and flight records", []string{
		"metrics-bind-address", "metrics-tls-cert-file", "metrics-tls-private-key-file", "metrics-bearer-token-file",
		"metrics-delegated-auth", "healthz-bind-address", "state-dir", "flight-records", "flight-records-max-bytes",
	}},
	{"Configuration files", []string{
		"config", "config-dir", "import-kubelet-config", "node-config", "kubelet-config", "kubelet-config-dir",
	}},
	{"Logging and version", []string{"log-level", "log-format", "version"}},
}

// groupedUsages is fs's flags by flagGroups, each group's wrapped to cols
// columns; the flags in no group, a command's own, first under title.
func groupedUsages(fs *pflag.FlagSet, title string, cols int) string {
	grouped := map[string]bool{}
	var b strings.Builder
	section := func(name string, flags []*pflag.Flag) {
		if len(flags) == 0 {
			return
		}
		sub := pflag.NewFlagSet(name, pflag.ContinueOnError)
		sub.SortFlags = false
		for _, f := range flags {
			sub.AddFlag(f)
		}
		fmt.Fprintf(&b, "\n%s:\n%s", name, rewrap(sub.FlagUsagesWrapped(cols), cols))
	}
	for _, g := range flagGroups {
		for _, name := range g.flags {
			grouped[name] = true
		}
	}
	var own []*pflag.Flag
	fs.VisitAll(func(f *pflag.Flag) {
		if !grouped[f.Name] {
			own = append(own, f)
		}
	})
	section(title, own)
	for _, g := range flagGroups {
		var flags []*pflag.Flag
		for _, name := range g.flags {
			if f := fs.Lookup(name); f != nil {
				flags = append(flags, f)
			}
		}
		section(g.title, flags)
	}
	return b.String()
}

// helpColumns is the width help is wrapped to: the terminal's when w is
// one, else $COLUMNS, else 100.
func helpColumns(w io.Writer) int {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols >= 40 {
			return cols
		}
	}
	if cols, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && cols >= 40 {
		return cols
	}
	return 100
}

// rewrap wraps again, at spaces and under the same indentation, the lines
// of pflag's wrapped usages longer than cols: pflag stops wrapping a
// usage at the first word longer than its column (an example such as
// memory.available<1Gi,nodefs.available<10%), leaving the rest on one line.
func rewrap(usages string, cols int) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(usages, "\n") {
		text := strings.TrimSuffix(line, "\n")
		if len(text) <= cols {
			b.WriteString(line)
			continue
		}
		// The indentation of the description: the spaces before the
		// text on a continuation line, or the flag's column on its first.
		indent := len(text) - len(strings.TrimLeft(text, " "))
		if !strings.HasPrefix(strings.TrimLeft(text, " "), "-") {
			indent = len(text) - len(strings.TrimLeft(text, " "))
		} else if i := strings.Index(text, "   "); i > 0 {
			rest := text[i:]
			indent = i + len(rest) - len(strings.TrimLeft(rest, " "))
		}
		pad := strings.Repeat(" ", indent)
		cur := text[:indent]
		width := indent
		for _, word := range strings.Fields(text[indent:]) {
			if width > indent && width+1+len(word) > cols {
				b.WriteString(strings.TrimRight(cur, " ") + "\n")
				cur, width = pad, indent
			}
			if width > indent {
				cur += " "
				width++
			}
			cur += word
			width += len(word)
		}
		b.WriteString(cur)
		if strings.HasSuffix(line, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}
