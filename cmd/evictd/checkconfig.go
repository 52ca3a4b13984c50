package main

import (
	"context"
	"fmt"
	"io"

	evictdagent "github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
)

const checkConfigHelp = `Usage: evictd check-config [flags]

Print the thresholds the agent would enforce with these flags, after
--node-config, --config and the command line in that precedence: signal,
value as written, grace period, minimum reclaim, hard or soft, and where
each came from; then notes and warnings. A configuration the agent would
refuse prints the exact error and exits 1. The flags are the agent's.
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
	if cfg.Kubeconfig != "" {
		if _, err := evictdagent.RestConfig(cfg.Kubeconfig); err != nil {
			fmt.Fprintf(stderr, "evictd check-config: %v\n", err)
			return 1
		}
	}
	capWarnings, capNote, err := checkConfigCapacities(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "evictd check-config: %v\n", err)
		return 1
	}
	if err := config.FormatThresholds(stdout, cfg); err != nil {
		fmt.Fprintf(stderr, "evictd check-config: %v\n", err)
		return 1
	}
	for _, note := range cfg.Notes {
		fmt.Fprintf(stdout, "note: %s\n", note)
	}
	if capNote != "" {
		fmt.Fprintf(stdout, "note: %s\n", capNote)
	}
	for _, w := range append(cfg.Warnings, capWarnings...) {
		fmt.Fprintf(stdout, "warning: %s\n", w)
	}
	return 0
}

// checkConfigCapacities compares the thresholds with this node's
// capacities, as the agent does at start: an error for a threshold that
// would always be met, warnings for soft thresholds not beyond their hard
// ones. A node whose signals cannot be observed here gets a note, not an
// error.
func checkConfigCapacities(cfg *config.Config) (warnings []string, note string, err error) {
	hc := evictdagent.HostConfig(cfg)
	fs := host.NewFilesystems()
	sources, err := host.Sources(hc, fs)
	var layout signals.FsLayout
	if err == nil {
		layout, err = evictdagent.LayoutOf(hc, fs)
	}
	if err != nil {
		return nil, fmt.Sprintf("cannot observe this node's signals, so the thresholds are not checked against its capacities: %v", err), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.RuntimeRequestTimeout)
	defer cancel()
	warnings, err = evictdagent.CheckCapacities(ctx, cfg, sources, layout)
	return warnings, "", err
}
