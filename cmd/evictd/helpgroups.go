package main

import (
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/term"
)

// flagGroups are the agent's flags by concern, the sections of --help in
// the order it shows them (cliflag.PrintSections sorts each section's
// flags by name). Every agent flag is in one group
// (TestFlagGroupsCoverEveryFlag); a command's own flags (check-config's
// -o, simulate's --snapshot) come first, under the command's name.
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
	{"Memory wake-up", []string{
		"housekeeping-interval", "kernel-memcg-notification", "fast-poll-interval", "fast-poll-margin",
	}},
	{"Disk, images and local storage", []string{
		"imagefs-path", "minimum-image-ttl-duration", "pod-logs-dir", "volume-stats-agg-period",
		"local-storage-eviction", "local-storage-eviction-burst", "local-storage-eviction-qps",
	}},
	{"Node, cgroup and runtime", []string{
		"hostname-override", "root-dir", "proc-root", "cgroup-mount", "cgroup-root", "cgroup-driver",
		"container-runtime-endpoint", "image-service-endpoint", "runtime-request-timeout",
	}},
	{"API server", []string{
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

// helpSections is fs's flags as --help's sections: the flags in no group,
// a command's own, first under name, then flagGroups' groups in order.
func helpSections(fs *pflag.FlagSet, name string) cliflag.NamedFlagSets {
	grouped := map[string]bool{}
	for _, g := range flagGroups {
		for _, flag := range g.flags {
			grouped[flag] = true
		}
	}
	var fss cliflag.NamedFlagSets
	fs.VisitAll(func(f *pflag.Flag) {
		if !grouped[f.Name] {
			fss.FlagSet(name).AddFlag(f)
		}
	})
	for _, g := range flagGroups {
		for _, flag := range g.flags {
			if f := fs.Lookup(flag); f != nil {
				fss.FlagSet(g.title).AddFlag(f)
			}
		}
	}
	return fss
}

// groupedUsages is fs's flags by flagGroups, as cliflag.PrintSections
// prints them wrapped to cols columns (each section headed "<Name> flags:"),
// a command's own first under name.
func groupedUsages(fs *pflag.FlagSet, name string, cols int) string {
	var b strings.Builder
	cliflag.PrintSections(&b, helpSections(fs, name), cols)
	return rewrap(b.String(), cols)
}

// helpColumns is the width help is wrapped to: the terminal's when w is
// one, else $COLUMNS, else 100.
func helpColumns(w io.Writer) int {
	// TerminalSize fails on a writer that is no terminal (a pipe, a
	// file, a buffer) and may give 0 on a terminal that has no size.
	if cols, _, err := term.TerminalSize(w); err == nil && cols >= 40 {
		return cols
	}
	if cols, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && cols >= 40 {
		return cols
	}
	return 100
}

// rewrap trims the spaces PrintSections leaves after each flag's name and
// type, and wraps again, at spaces and under the same indentation, the
// lines longer than cols. It stays because PrintSections wraps with
// pflag's FlagUsagesWrapped, which stops wrapping a usage at its first
// word longer than the line (less 5 columns of slop) and leaves the rest
// on one line: below 80 columns, --kubeconfig-in-cluster's
// https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (a line of
// 362 columns at 79); below 64, --eviction-hard's example
// memory.available<1Gi,nodefs.available<10%. A word longer than cols
// still gets a line of its own.
func rewrap(usages string, cols int) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(usages, "\n") {
		text := strings.TrimRight(line, " \n")
		if len(text) > cols {
			indent := len(text) - len(strings.TrimLeft(text, " "))
			wrapped := text[:indent]
			for _, word := range strings.Fields(text) {
				if len(wrapped) > indent && len(wrapped)+1+len(word) > cols {
					b.WriteString(wrapped + "\n")
					wrapped = text[:indent]
				}
				if len(wrapped) > indent {
					wrapped += " "
				}
				wrapped += word
			}
			text = wrapped
		}
		b.WriteString(text)
		if strings.HasSuffix(line, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}
