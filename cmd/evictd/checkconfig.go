package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	evictdagent "github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
)

const checkConfigHelp = `Usage: evictd check-config [flags] [-o text|json|yaml] [--strict]
                           [--node-memory Q] [--node-disk Q] [--node-inodes N] [--node-pids N]

Print the agent's whole effective configuration with these flags, after
--node-config, --import-kubelet-config, --config, --config-dir's drop-ins
and the command line in that precedence, each setting with its source: the
thresholds (signal, value as written, grace period, minimum reclaim, hard
or soft, where each came from, and those derived from them), which
memory.available is in force, the capacities the thresholds were checked
against, and every setting. The document alone goes to stdout (-o json
or yaml: one object, settings sorted by name); notes, warnings and errors
go to stderr.

Capacities: by default this machine's, as the agent reads them at start.
To check a fleet's values off the node, give its capacities with
--node-memory, --node-disk, --node-inodes and --node-pids: then only
those are used, never this machine's. A signal whose capacity is not
known is listed as "capacity not checked".

Exit codes: 0 valid; 1 the agent would refuse the configuration, or a
threshold cannot hold on the node checked (at or above its signal's
capacity: the agent would set it aside and start with the others); 2 a
usage error; 3 with --strict, valid but with warnings. The other flags
are the agent's.
`

// Exit codes of check-config beyond 0, 1 (refused, or a threshold set
// aside) and 2 (usage).
const exitStrictWarnings = 3

// checkConfigFlags are check-config's own flags.
type checkConfigFlags struct {
	output string
	strict bool
	// The node's capacities, as quantities, "" when not given.
	memory, disk, inodes, pids string
}

func (f *checkConfigFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&f.output, "output", "o", "text", "Output format: text, json or yaml.")
	fs.BoolVar(&f.strict, "strict", false, "Exit 3 when there is any warning, as for an error, for CI. (default false)")
	fs.StringVar(&f.memory, "node-memory", "",
		"Memory of the node to check the thresholds against instead of this machine's, a quantity (16Gi): memory.available's capacity (the node's MemTotal, less its hugepages under kubelet 1.37's memory.available); allocatableMemory.available's is it less --system-reserved and --kube-reserved memory. (default: this machine's, unless another --node-* flag is given)")
	fs.StringVar(&f.disk, "node-disk", "",
		"Size of the node's filesystems instead of this machine's, a quantity (100Gi): nodefs.available's, imagefs.available's and containerfs.available's capacity, as if images share the kubelet's filesystem. (default: this machine's, unless another --node-* flag is given)")
	fs.StringVar(&f.inodes, "node-inodes", "",
		"Inodes of the node's filesystems instead of this machine's, a count (6553600 or 6.5M): nodefs.inodesFree's, imagefs.inodesFree's and containerfs.inodesFree's capacity. (default: this machine's, unless another --node-* flag is given)")
	fs.StringVar(&f.pids, "node-pids", "",
		"Process IDs of the node instead of this machine's, a count (4194304): pid.available's capacity. (default: this machine's, unless another --node-* flag is given)")
}

// nodeCapacity is a node's capacities given by flags; 0 is not given.
type nodeCapacity struct {
	memory, disk, inodes, pids int64
}

// given reports whether any capacity was given: then the machine is not read.
func (c nodeCapacity) given() bool { return c != nodeCapacity{} }

// parseCapacity parses the --node-* flags.
func (f *checkConfigFlags) parseCapacity() (nodeCapacity, error) {
	var c nodeCapacity
	var errs []error
	for _, q := range []struct {
		flag, v, want string
		dst           *int64
	}{
		{"node-memory", f.memory, "a quantity of bytes such as 16Gi", &c.memory},
		{"node-disk", f.disk, "a quantity of bytes such as 100Gi", &c.disk},
		{"node-inodes", f.inodes, "a count such as 6553600 or 6.5M", &c.inodes},
		{"node-pids", f.pids, "a count such as 4194304", &c.pids},
	} {
		if q.v == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.v)
		if err != nil || v.Sign() <= 0 || v.Value() <= 0 {
			errs = append(errs, fmt.Errorf("--%s: invalid value %q: want %s, above 0", q.flag, q.v, q.want))
			continue
		}
		*q.dst = v.Value()
	}
	return c, errors.Join(errs...)
}

// checkConfig prints the effective configuration, or the exact error,
// and exits non-zero on error (and on a warning with --strict). Like the
// agent at start, it refuses a kubeconfig, or credentials it names, that
// others can read (evictdagent.RestConfig), and compares the thresholds
// with the node's capacities.
func checkConfig(args []string, stdout, stderr io.Writer) int {
	var f checkConfigFlags
	cfg, code, ok := loadConfig("evictd check-config", checkConfigHelp, args, stdout, stderr, f.register)
	if !ok {
		return code
	}
	const name = "evictd check-config"
	switch f.output {
	case "text", "json", "yaml":
	default:
		return usageError(stderr, name, fmt.Errorf("-o: invalid value %q: want text, json or yaml", f.output))
	}
	capacity, err := f.parseCapacity()
	if err != nil {
		return usageError(stderr, name, err)
	}
	var standalone string
	switch {
	case evictdagent.KubeconfigAwaited(cfg):
		standalone = fmt.Sprintf("--kubeconfig %s does not exist yet and --kubeconfig-optional is set: the agent would start standalone, with no API server, %s, until it is written and evictd restarted.", cfg.Kubeconfig, cfg.StandaloneActs())
	case cfg.Kubeconfig != "":
		if _, err := evictdagent.KubeRestConfig(cfg, os.Getenv); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
	}
	// The agent refuses a cgroup root its driver cannot name.
	hc := evictdagent.HostConfig(cfg)
	if err := hc.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: the agent would refuse to start: %v\n", name, err)
		return 1
	}

	doc, setAside, caps := configDocFor(cfg, hc, capacity, standalone)
	if len(setAside) > 0 && len(config.WithoutSetAside(cfg.Thresholds, setAside)) == 0 {
		fmt.Fprintf(stderr, "%s: no threshold can hold on %s; the agent would refuse to start:\n", name, caps.node)
		for _, s := range setAside {
			fmt.Fprintf(stderr, "  %v\n", s.Err)
		}
		return 1
	}

	if err := writeConfigDoc(stdout, f.output, cfg, doc); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	for _, n := range doc.Notes {
		textf(stderr, "note: %s\n", n)
	}
	for _, w := range doc.Warnings {
		textf(stderr, "warning: %s\n", w)
	}
	for _, e := range doc.Errors {
		textf(stderr, "error: %s\n", e)
	}
	switch {
	case len(setAside) > 0:
		// The agent starts without them; CI should still fail.
		fmt.Fprintf(stderr, "%s: %d threshold(s) cannot hold on %s; the agent would set them aside and start with the others:\n", name, len(setAside), caps.node)
		for _, s := range setAside {
			fmt.Fprintf(stderr, "  %v\n", s.Err)
		}
		return 1
	case f.strict && len(doc.Warnings) > 0:
		fmt.Fprintf(stderr, "%s: --strict: %d warning(s)\n", name, len(doc.Warnings))
		return exitStrictWarnings
	}
	return 0
}

// configDocFor builds check-config's document for cfg: its capacities
// (given, or this machine's through hc), the thresholds set aside, and
// every note and warning, standalone's among them when not "".
func configDocFor(cfg *config.Config, hc host.Config, given nodeCapacity, standalone string) (configDoc, []config.SetAside, capacities) {
	caps := capacitiesOf(cfg, given)
	capWarnings, setAside := config.CheckCapacity(cfg.Thresholds, caps.obs, caps.layout)
	doc := configDoc{
		Settings:        effectiveSettings(cfg),
		MemoryAvailable: cfg.MemoryAvailableSemantics(),
		Thresholds:      thresholdDocs(cfg, caps.layout, caps.obs),
		Capacity:        caps.docs,
		Notes:           slices.Clone(cfg.Notes),
		Warnings:        slices.Clone(cfg.Warnings),
		Errors:          []string{},
	}
	doc.Notes = append(doc.Notes, caps.notes...)
	doc.Warnings = append(doc.Warnings, capWarnings...)
	if !given.given() {
		hugeNote, hugeWarning := checkConfigHugePages(cfg)
		doc.Notes = appendNonEmpty(doc.Notes, hugeNote)
		doc.Warnings = appendNonEmpty(doc.Warnings, hugeWarning)
		doc.Notes, doc.Warnings = driverFinding(hc, doc.Notes, doc.Warnings)
	}
	doc.Warnings = appendNonEmpty(doc.Warnings, standalone)
	sw, sn := suspicious(cfg)
	doc.Warnings = append(doc.Warnings, sw...)
	doc.Notes = append(doc.Notes, sn...)
	for _, s := range setAside {
		doc.Errors = append(doc.Errors, fmt.Sprintf("%v: the agent sets %s aside and starts with the other thresholds", s.Err, s.Threshold))
	}
	return doc, setAside, caps
}

func appendNonEmpty(l []string, s string) []string {
	if s == "" {
		return l
	}
	return append(l, s)
}

// driverFinding adds what the cgroup tree says of --cgroup-driver: a
// warning when the other driver's kubepods exists instead, a note when
// neither does or the tree cannot be read.
func driverFinding(hc host.Config, notes, warnings []string) ([]string, []string) {
	f, err := findKubepods(hc)
	if err != nil {
		return append(notes, fmt.Sprintf("--cgroup-driver not checked against this machine's cgroups: %v", err)), warnings
	}
	switch status, msg := f.verdict(); status {
	case statusFail:
		warnings = append(warnings, msg)
	case statusWarn:
		notes = append(notes, msg)
	}
	return notes, warnings
}

// writeConfigDoc writes doc as format: text (thresholds, capacities and
// settings as tables), json or yaml.
func writeConfigDoc(w io.Writer, format string, cfg *config.Config, doc configDoc) error {
	switch format {
	case "json":
		return writeJSON(w, doc)
	case "yaml":
		b, err := yaml.Marshal(doc)
		if err != nil {
			return fmt.Errorf("write yaml: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	if err := config.FormatThresholds(w, cfg); err != nil {
		return err
	}
	fmt.Fprintln(w, doc.MemoryAvailable)
	fmt.Fprintln(w, "\nCAPACITY")
	if len(doc.Capacity) == 0 {
		fmt.Fprintln(w, "(no threshold on a signal with a capacity)")
	}
	for _, c := range doc.Capacity {
		textf(w, "%s\n", c.String())
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tVALUE\tSOURCE")
	for _, s := range doc.Settings {
		v := settingText(s.Name, s.Value)
		if s.Unit != "" {
			v += " " + s.Unit
		}
		if len(s.DerivedFrom) > 0 {
			v += " (derived from " + strings.Join(s.DerivedFrom, ", ") + ")"
		}
		textf(tw, "%s\t%s\t%s\n", s.Name, v, s.Source)
	}
	return tw.Flush()
}

// settingText writes a setting's value for the text output: maps as
// sorted key=value pairs (signal<value for the eviction thresholds) and
// lists joined by commas, as the flags take them; an empty string as "".
func settingText(name string, v any) string {
	switch v := v.(type) {
	case string:
		if v == "" {
			return `""`
		}
		return v
	case []string:
		return strings.Join(v, ",")
	case map[string]string:
		var pairs []string
		for _, k := range slices.Sorted(maps.Keys(v)) {
			switch {
			case name != "eviction-hard" && name != "eviction-soft":
				pairs = append(pairs, k+"="+v[k])
			case strings.HasPrefix(v[k], ">"):
				pairs = append(pairs, k+v[k])
			default:
				pairs = append(pairs, k+"<"+v[k])
			}
		}
		return strings.Join(pairs, ",")
	case map[string]bool:
		var pairs []string
		for _, k := range slices.Sorted(maps.Keys(v)) {
			pairs = append(pairs, fmt.Sprintf("%s=%t", k, v[k]))
		}
		return strings.Join(pairs, ",")
	}
	return fmt.Sprint(v)
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
