package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
)

// HugepageAwareEvictionGate is the kubelet's feature gate (beta and on by
// default from kubelet 1.37, pkg/features/kube_features.go) that makes
// memory.available subtract the node's hugepage capacity. It is the only
// feature gate evictd reads.
const HugepageAwareEvictionGate = "HugepageAwareEviction"

// gateMap is a pflag.Value for --feature-gates, held by the kubelet's own,
// cliflag.MapStringBool: comma-separated name=bool pairs, the bool as
// strconv.ParseBool reads it; the first Set replaces the map and later Sets
// of the flag add to it. As pairMap, it checks a value before handing it
// on, so that an error names the entry or the value at fault.
type gateMap struct {
	m       *map[string]bool
	kubelet *cliflag.MapStringBool // made at the first Set
}

var _ pflag.Value = (*gateMap)(nil)

// Set checks value and adds its gates to the map.
func (g *gateMap) Set(value string) error {
	const want = "name=true or name=false"
	pairs, err := splitPairs(value, "=", want)
	if err != nil {
		return err
	}
	for _, kv := range pairs {
		if _, err := strconv.ParseBool(kv[1]); err != nil {
			return fmt.Errorf("invalid value of %s: %q is not true or false", kv[0], kv[1])
		}
	}
	if g.kubelet == nil {
		g.kubelet = cliflag.NewMapStringBool(g.m)
	}
	return g.kubelet.Set(value)
}

// String returns the gates sorted by name, in the syntax Set accepts.
func (g *gateMap) String() string {
	if g.m == nil {
		return ""
	}
	return cliflag.NewMapStringBool(g.m).String()
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
