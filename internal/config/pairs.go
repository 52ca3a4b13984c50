package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// pairMap is a pflag.Value for a comma-separated list of key<sep>value pairs,
// the syntax of the kubelet's map flags: "<" for --eviction-hard and
// --eviction-soft (cliflag.LangleSeparatedMapStringString), "=" for the others
// (cliflag.MapStringString). As in the kubelet, the first Set replaces the
// map's previous content (its default) and later Sets of the same flag add to
// it; an empty value gives an empty, non-nil map.
type pairMap struct {
	m    *map[string]string
	sep  string
	want string // the expected form, for errors: "signal<quantity"
	set  bool
}

var _ pflag.Value = (*pairMap)(nil)

func newPairMap(m *map[string]string, sep, want string) *pairMap {
	return &pairMap{m: m, sep: sep, want: want}
}

// Set parses value and adds its pairs to the map.
func (p *pairMap) Set(value string) error {
	parsed, err := parsePairs(value, p.sep, p.want)
	if err != nil {
		return err
	}
	if !p.set || *p.m == nil {
		*p.m = make(map[string]string, len(parsed))
		p.set = true
	}
	for k, v := range parsed {
		(*p.m)[k] = v
	}
	return nil
}

// String returns the pairs sorted by key, in the syntax Set accepts.
func (p *pairMap) String() string {
	if p.m == nil {
		return ""
	}
	return formatPairs(*p.m, p.sep)
}

// Type names the value in usage text, as the kubelet does.
func (p *pairMap) Type() string { return "mapStringString" }

// parsePairs parses "k1<sep>v1,k2<sep>v2". Blank entries are skipped; an
// entry without the separator, or with an empty key or value, is an error
// that quotes the entry. A repeated key keeps its last value.
func parsePairs(value, sep, want string) (map[string]string, error) {
	out := map[string]string{}
	for _, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		k, v, ok := cutPair(entry, sep)
		if !ok {
			return nil, fmt.Errorf("malformed pair %q: want %s%s", entry, want, onlySeparator(sep))
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "" {
			return nil, fmt.Errorf("malformed pair %q: empty name before %q, want %s", entry, sep, want)
		}
		if v == "" {
			return nil, fmt.Errorf("malformed pair %q: empty value after %q, want %s", entry, sep, want)
		}
		out[k] = v
	}
	return out, nil
}

// cutPair splits entry at sep. For "<" maps it also splits a stall
// threshold, "memory.pressure.full.avg10>20", at its ">", which stays at
// the front of the value (">20") for thresholds.Parse to read.
func cutPair(entry, sep string) (k, v string, ok bool) {
	if sep != "<" {
		return strings.Cut(entry, sep)
	}
	i := strings.IndexAny(entry, "<>")
	switch {
	case i < 0:
		return entry, "", false
	case entry[i] == '>':
		return entry[:i], ">" + strings.TrimSpace(entry[i+1:]), true
	}
	return entry[:i], entry[i+1:], true
}

func onlySeparator(sep string) string {
	if sep == "<" {
		return ` ("<" is the only separator)`
	}
	return ""
}

func formatPairs(m map[string]string, sep string) string {
	pairs := make([]string, 0, len(m))
	for k, v := range m {
		if sep == "<" && strings.HasPrefix(v, ">") {
			pairs = append(pairs, k+v) // a stall threshold keeps its ">"
			continue
		}
		pairs = append(pairs, k+sep+v)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}
