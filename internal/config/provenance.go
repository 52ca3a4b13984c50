package config

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/evictd/evictd/thresholds"
)

// SourceKind is the kind of place a setting's value came from.
type SourceKind string

// The kinds of Source, lowest precedence first.
const (
	// SourceDefault: evictd's default.
	SourceDefault SourceKind = "default"
	// SourceNodeConfig: kubeletArguments in the --node-config file.
	SourceNodeConfig SourceKind = "node-config"
	// SourceKubeletConfig: the KubeletConfiguration imported
	// (--import-kubelet-config, or --config holding a KubeletConfiguration).
	SourceKubeletConfig SourceKind = "kubelet-config"
	// SourceConfigFile: evictd's own configuration file, --config.
	SourceConfigFile SourceKind = "config-file"
	// SourceDropIn: a drop-in of --config-dir.
	SourceDropIn SourceKind = "drop-in"
	// SourceCommandLine: a flag given on the command line.
	SourceCommandLine SourceKind = "command-line"
)

// Source says where a value came from.
type Source struct {
	Kind SourceKind
	// File is the file read, "" for SourceDefault and SourceCommandLine.
	File string
	// Key is what set the value in File, or on the command line: the
	// field ("evictionHard"), kubeletArguments' entry
	// ("kubeletArguments.eviction-hard") or the flag ("--eviction-hard");
	// "" for SourceDefault.
	Key string
}

// String words s as evictd's notes and errors do: "default",
// "--eviction-hard", "evictionHard in /etc/evictd/config.yaml",
// "kubeletArguments.eviction-hard in /etc/origin/node/node-config.yaml".
func (s Source) String() string {
	switch {
	case s.Kind == SourceDefault || s.Kind == "":
		return thresholds.SourceDefault
	case s.File == "":
		return s.Key
	}
	return s.Key + " in " + s.File
}

// Setting is one effective setting and where its value came from.
type Setting struct {
	// Name is the setting's field in evictd's configuration file
	// ("evictionHard"); Flag is its flag, without dashes ("eviction-hard").
	Name, Flag string
	// Key is the map key of one entry of a map setting (evictionHard,
	// systemReserved, featureGates...): "memory.available". A map gives
	// one Setting per key, sorted; an empty map one Setting whose Key and
	// Value are "". Key is "" for the other settings.
	Key string
	// Value is the value as text, in the flag's syntax: "5m0s", "true",
	// "pods,kube-reserved" for a list, "500Mi" for a map entry. A setting
	// whose empty value means something derived (imageServiceEndpoint:
	// the runtime's; hostnameOverride: the hostname) is "" here; the
	// Config's fields hold what is derived.
	Value string
	// Source is where the value came from.
	Source Source
}

// origin is where one setting's value came from: src for the whole
// setting, and for a map set key by key (a drop-in merged over what is
// below it) the source of each key.
type origin struct {
	src  Source
	keys map[string]Source
}

// provenance lists every setting of eff, in the order of fields, each
// with its origin in origins (by flag; none: the default). gates are the
// feature gates of every layer merged, with the source of each.
func provenance(eff *Options, origins map[string]origin, gates map[string]gateSetting) []Setting {
	var out []Setting
	for i := range fields {
		f := &fields[i]
		o, ok := origins[f.flag]
		if !ok {
			o = origin{src: Source{Kind: SourceDefault}}
		}
		switch v := f.ptr(eff).(type) {
		case *map[string]string:
			m := *v
			if m == nil && f.flag == "eviction-hard" {
				m = thresholds.DefaultHard()
			}
			out = append(out, mapSettings(f, m, o)...)
		case *map[string]bool:
			for _, k := range slices.Sorted(maps.Keys(gates)) {
				g := gates[k]
				out = append(out, Setting{Name: f.name, Flag: f.flag, Key: k, Value: strconv.FormatBool(g.on), Source: g.src})
			}
		default:
			out = append(out, Setting{Name: f.name, Flag: f.flag, Value: valueText(f.ptr(eff)), Source: o.src})
		}
	}
	return out
}

// mapSettings gives one Setting per key of m, or one with no key for an
// empty map.
func mapSettings(f *field, m map[string]string, o origin) []Setting {
	if len(m) == 0 {
		return []Setting{{Name: f.name, Flag: f.flag, Source: o.src}}
	}
	out := make([]Setting, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		src, ok := o.keys[k]
		if !ok {
			src = o.src
		}
		out = append(out, Setting{Name: f.name, Flag: f.flag, Key: k, Value: m[k], Source: src})
	}
	return out
}

// valueText writes the value p points at in its flag's syntax.
func valueText(p any) string {
	switch v := p.(type) {
	case *string:
		return *v
	case *bool:
		return strconv.FormatBool(*v)
	case *int:
		return strconv.Itoa(*v)
	case *int32:
		return strconv.FormatInt(int64(*v), 10)
	case *float64:
		return strconv.FormatFloat(*v, 'g', -1, 64)
	case *time.Duration:
		return v.String()
	case *[]string:
		return strings.Join(*v, ",")
	}
	return ""
}

// Provenance returns every setting the agent runs with, one per field of
// evictd's configuration file (a map one per key), in the order of
// docs/CONFIGURATION.md's example, with its value as text and where it
// came from: the default, the --node-config file, the KubeletConfiguration
// imported, the --config file, a --config-dir drop-in or the command line.
// The slice is a copy.
func (c *Config) Provenance() []Setting {
	if c == nil {
		return nil
	}
	return slices.Clone(c.provenance)
}
