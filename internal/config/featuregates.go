package config

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// HugepageAwareEvictionGate is the kubelet's feature gate (beta and on by
// default from kubelet 1.37, pkg/features/kube_features.go) that makes
// memory.available subtract the node's hugepage capacity. It is the only
// feature gate evictd reads.
const HugepageAwareEvictionGate = "HugepageAwareEviction"

// gateMap is a pflag.Value for --feature-gates, with the kubelet's syntax
// (cliflag.MapStringBool): comma-separated name=bool pairs, the bool as
// strconv.ParseBool reads it. As in the kubelet, the first Set replaces the
// map and later Sets of the flag add to it; blank entries are skipped.
type gateMap struct {
	m   *map[string]bool
	set bool
}

var _ pflag.Value = (*gateMap)(nil)

// Set parses value and adds its gates to the map.
func (g *gateMap) Set(value string) error {
	parsed := map[string]bool{}
	for _, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		k, v, ok := strings.Cut(entry, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return fmt.Errorf("malformed pair %q: want name=true or name=false", entry)
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("invalid value of %s: %q is not true or false", k, v)
		}
		parsed[k] = b
	}
	if !g.set || *g.m == nil {
		*g.m = make(map[string]bool, len(parsed))
		g.set = true
	}
	maps.Copy(*g.m, parsed)
	return nil
}

// String returns the gates sorted by name, in the syntax Set accepts.
func (g *gateMap) String() string {
	if g.m == nil {
		return ""
	}
	pairs := make([]string, 0, len(*g.m))
	for k, v := range *g.m {
		pairs = append(pairs, k+"="+strconv.FormatBool(v))
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

// Type names the value in usage text, as the kubelet does.
func (g *gateMap) Type() string { return "mapStringBool" }

// gateLayer is one place that can set feature gates: where (for notes and
// errors) and the gates it sets.
type gateLayer struct {
	where string
	gates map[string]bool
}

// resolveGates returns HugepageAwareEviction from the layers, highest
// precedence first, as the kubelet merges them: per gate, so the first
// layer that names the gate sets it (the kubelet lays its --feature-gates
// over its config file's featureGates gate by gate, and --config-dir
// drop-ins merge featureGates key by key). Default true, kubelet 1.37's.
// It also returns where the gate was set ("" for the default) and notes:
// the layers it overrides, and the gates evictd does not read (the
// kubelet's own; the kubelet rejects the names it does not know, evictd
// leaves them to it). A name that is HugepageAwareEviction but for case is
// an error, as the kubelet would reject it.
func resolveGates(layers []gateLayer) (on bool, where string, notes []string, err error) {
	on = true
	var setBy []string
	for _, l := range layers {
		var others []string
		for _, name := range slices.Sorted(maps.Keys(l.gates)) {
			switch {
			case name == HugepageAwareEvictionGate:
				if len(setBy) == 0 {
					on, where = l.gates[name], l.where
				}
				setBy = append(setBy, l.where)
			case strings.EqualFold(name, HugepageAwareEvictionGate):
				return false, "", nil, fmt.Errorf("%s: unrecognized feature gate %q: feature gate names are case-sensitive, did you mean %s?", l.where, name, HugepageAwareEvictionGate)
			default:
				others = append(others, name)
			}
		}
		if len(others) > 0 {
			notes = append(notes, fmt.Sprintf("%s: ignored %s: evictd reads only the feature gate %s, the others are the kubelet's.",
				l.where, strings.Join(others, ", "), HugepageAwareEvictionGate))
		}
	}
	for _, lower := range setBy[min(1, len(setBy)):] {
		notes = append(notes, fmt.Sprintf("%s for %s is overridden by %s.", lower, HugepageAwareEvictionGate, setBy[0]))
	}
	return on, where, notes, nil
}

// MemoryAvailableSemantics says which memory.available is in force, kubelet
// 1.37's or 1.36's, and why: what `evictd check-config` prints.
func (c *Config) MemoryAvailableSemantics() string {
	where := c.Sources["feature-gates"]
	if !c.HugepageAwareEviction {
		return fmt.Sprintf("memory.available is kubelet 1.36's (%s=false, from %s): MemTotal minus the root cgroup's working set; the node's hugepage capacity is not subtracted.",
			HugepageAwareEvictionGate, where)
	}
	why := fmt.Sprintf("%s on, the default as in kubelet 1.37; --feature-gates=%s=false for kubelet 1.36's", HugepageAwareEvictionGate, HugepageAwareEvictionGate)
	if where != "" {
		why = fmt.Sprintf("%s=true, from %s", HugepageAwareEvictionGate, where)
	}
	return fmt.Sprintf("memory.available is kubelet 1.37's (%s): MemTotal minus the node's hugepage capacity minus the root cgroup's working set.", why)
}
