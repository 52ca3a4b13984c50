package config

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
)

// pairMap is a pflag.Value for a map flag, held by the kubelet's own:
// cliflag.LangleSeparatedMapStringString for "<" (--eviction-hard,
// --eviction-soft), cliflag.MapStringString for "=" (the others). They own
// the map as in the kubelet: the first Set replaces its previous content
// (its default), later Sets of the flag add to it, an empty value gives an
// empty, non-nil map. pairMap checks a value before handing it on
// (splitPairs), so that an error names the entry at fault, and reads
// evictd's stall thresholds, "memory.pressure.full.avg10>20", which the
// map holds as ">20" for thresholds.Parse.
type pairMap struct {
	kubelet pflag.Value
	m       *map[string]string
	sep     string
	want    string // the expected form, for errors: "signal<quantity"
}

var _ pflag.Value = (*pairMap)(nil)

func newPairMap(m *map[string]string, sep, want string) *pairMap {
	var kubelet pflag.Value = cliflag.NewMapStringString(m)
	if sep == "<" {
		kubelet = cliflag.NewLangleSeparatedMapStringString(m)
	}
	return &pairMap{kubelet: kubelet, m: m, sep: sep, want: want}
}

// Set checks value and adds its pairs to the map.
func (p *pairMap) Set(value string) error {
	pairs, err := splitPairs(value, p.sep, p.want)
	if err != nil {
		return err
	}
	entries := make([]string, len(pairs))
	for i, kv := range pairs {
		// A stall threshold's ">20" is handed on as "<>20": the kubelet's
		// map cuts at the "<" and keeps ">20".
		entries[i] = kv[0] + p.sep + kv[1]
	}
	return p.kubelet.Set(strings.Join(entries, ","))
}

// String returns the pairs sorted by key, in the syntax Set accepts: the
// kubelet's, but for a stall threshold, which keeps its ">".
func (p *pairMap) String() string {
	if p.kubelet == nil || p.m == nil {
		return ""
	}
	s := p.kubelet.String()
	if p.sep != "<" || !strings.Contains(s, "<>") {
		return s
	}
	pairs := strings.Split(s, ",")
	for i, pair := range pairs {
		if k, v, _ := strings.Cut(pair, "<"); strings.HasPrefix(v, ">") {
			pairs[i] = k + v
		}
	}
	return strings.Join(pairs, ",")
}

// Type names the value in usage text, as the kubelet does.
func (p *pairMap) Type() string { return "mapStringString" }

// splitPairs splits "k1<sep>v1,k2<sep>v2" into its pairs as the kubelet's
// map flags do: at every comma, empty entries skipped, each entry cut at
// its first sep and both sides trimmed of white space. Where the kubelet
// answers only "malformed pair", the error quotes the entry: one without
// sep, a blank one (the kubelet trims after skipping empty entries), and
// one with an empty key or value, which the kubelet takes here and rejects
// later. For "<" maps an entry may be a stall threshold,
// "memory.pressure.full.avg10>20", cut at its ">", which stays at the
// front of the value (">20").
func splitPairs(value, sep, want string) ([][2]string, error) {
	var out [][2]string
	for _, entry := range strings.Split(value, ",") {
		if entry == "" {
			continue
		}
		k, v, ok := cutPair(entry, sep)
		if !ok {
			return nil, fmt.Errorf("malformed pair %q: want %s%s", quoted(entry), want, onlySeparator(sep))
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "" {
			return nil, fmt.Errorf("malformed pair %q: empty name before %q, want %s", quoted(entry), sep, want)
		}
		if v == "" || (sep == "<" && v == ">") {
			return nil, fmt.Errorf("malformed pair %q: empty value after %q, want %s", quoted(entry), sep, want)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

// quoted is the entry as an error quotes it: trimmed, unless it is blank.
func quoted(entry string) string {
	if t := strings.TrimSpace(entry); t != "" {
		return t
	}
	return entry
}

// cutPair cuts entry at sep. For "<" maps it also cuts a stall threshold
// at its ">", which it leaves at the front of the value.
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
