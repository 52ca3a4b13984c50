package main

import (
	"context"
	"fmt"
	"io"
	"os"

	evictdagent "github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
)

const checkConfigHelp = `Usage: evictd check-config [flags]

Print the thresholds the agent would enforce with these flags, after
--node-config, --config and the command line in that precedence: signal,
value as written, grace period, minimum reclaim, hard or soft, and where
each came from; which memory.available is in force, kubelet 1.37's (the
node's hugepages subtracted) or 1.36's, and this node's hugepages; then
notes and warnings. A configuration the agent would refuse prints the
exact error and exits 1. A threshold that cannot hold on this node (at or
above its signal's capacity) is printed as an error and makes the exit
code 1 too, for CI, though the agent would start without it, protected by
the others. The flags are the agent's.
`

// checkConfig prints the effective thresholds, or the exact error, and
// exits non-zero on error. Like the agent at start, it refuses a
// kubeconfig, or credentials it names, that others can read (evictdagent.RestConfig),
// and compares the thresholds with this node's capacities.
func checkConfig(args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := loadConfig("evictd check-config", checkConfigHelp, args, stdout, stderr, nil)
	if !ok {
		return code
	}
	var standalone string
	switch {
	case evictdagent.KubeconfigAwaited(cfg):
		standalone = fmt.Sprintf("--kubeconfig %s does not exist yet and --kubeconfig-optional is set: the agent would start standalone, with no API server, %s, until it is written and evictd restarted.", cfg.Kubeconfig, cfg.StandaloneActs())
	case cfg.Kubeconfig != "":
		if _, err := evictdagent.KubeRestConfig(cfg, os.Getenv); err != nil {
			fmt.Fprintf(stderr, "evictd check-config: %v\n", err)
			return 1
		}
	}
	capWarnings, setAside, capNote := checkConfigCapacities(cfg)
	if len(setAside) > 0 && len(config.WithoutSetAside(cfg.Thresholds, setAside)) == 0 {
		fmt.Fprintf(stderr, "evictd check-config: no threshold can hold on this node; the agent would refuse to start:\n")
		for _, s := range setAside {
			fmt.Fprintf(stderr, "  %v\n", s.Err)
		}
		return 1
	}
	if err := config.FormatThresholds(stdout, cfg); err != nil {
		fmt.Fprintf(stderr, "evictd check-config: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, cfg.MemoryAvailableSemantics())
	hugeNote, hugeWarning := checkConfigHugePages(cfg)
	for _, note := range cfg.Notes {
		textf(stdout, "note: %s\n", note)
	}
	for _, note := range []string{capNote, hugeNote} {
		if note != "" {
			textf(stdout, "note: %s\n", note)
		}
	}
	if hugeWarning != "" {
		capWarnings = append(capWarnings, hugeWarning)
	}
	if standalone != "" {
		capWarnings = append(capWarnings, standalone)
	}
	for _, w := range append(cfg.Warnings, capWarnings...) {
		textf(stdout, "warning: %s\n", w)
	}
	if len(setAside) == 0 {
		return 0
	}
	// The agent starts without them; CI should still fail.
	for _, s := range setAside {
		textf(stdout, "error: %v: the agent sets %s aside and starts with the other thresholds\n", s.Err, s.Threshold)
	}
	fmt.Fprintf(stderr, "evictd check-config: %d threshold(s) cannot hold on this node; the agent would set them aside and start with the others:\n", len(setAside))
	for _, s := range setAside {
		fmt.Fprintf(stderr, "  %v\n", s.Err)
	}
	return 1
}

// checkConfigHugePages says how many hugepages this node has and what
// memory.available makes of them: a note; or, when kubelet 1.37's
// memory.available is in force and they cannot be read, a warning, since
// the agent would then have no memory.available.
func checkConfigHugePages(cfg *config.Config) (note, warning string) {
	huge, err := host.HugePages(evictdagent.HostConfig(cfg))
	switch {
	case err != nil && cfg.HugepageAwareEviction:
		return "", fmt.Sprintf("this node's hugepage capacity cannot be read, so the agent would observe no memory.available: %v", err)
	case err != nil:
		return fmt.Sprintf("this node's hugepage capacity cannot be read (%v); with %s=false memory.available does not need it.", err, config.HugepageAwareEvictionGate), ""
	case huge == 0:
		return "this node has no hugepages: kubelet 1.37's memory.available and 1.36's are the same here.", ""
	case cfg.HugepageAwareEviction:
		return fmt.Sprintf("this node has %s of hugepages (Hugetlb in %s/meminfo): memory.available and its capacity are that much lower than kubelet 1.36's.",
			human(huge, signals.ResourceMemory), cfg.ProcRoot), ""
	}
	return fmt.Sprintf("this node has %s of hugepages (Hugetlb in %s/meminfo), left in memory.available as kubelet 1.36 does: kubelet 1.37, by default, would see that much less.",
		human(huge, signals.ResourceMemory), cfg.ProcRoot), ""
}

// checkConfigCapacities compares the thresholds with this node's
// capacities, as the agent does at start: the thresholds that cannot hold
// (always met), which the agent sets aside, and warnings for soft
// thresholds not beyond their hard ones. A node whose signals cannot be
// observed here gets a note instead.
func checkConfigCapacities(cfg *config.Config) (warnings []string, setAside []config.SetAside, note string) {
	hc := evictdagent.HostConfig(cfg)
	fs := host.NewFilesystems()
	sources, err := host.Sources(hc, fs)
	var layout signals.FsLayout
	if err == nil {
		layout, err = evictdagent.LayoutOf(hc, fs)
	}
	if err != nil {
		return nil, nil, fmt.Sprintf("cannot observe this node's signals, so the thresholds are not checked against its capacities: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.RuntimeRequestTimeout)
	defer cancel()
	warnings, setAside = evictdagent.CheckCapacities(ctx, cfg, sources, layout)
	return warnings, setAside, ""
}
