package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/thresholds"
)

// evictd's own configuration file, --config, is an AgentConfiguration of
// config.evictd.io/v1alpha1: component-config style, as the kubelet's
// KubeletConfiguration (kubelet.config.k8s.io) and kube-proxy's
// KubeProxyConfiguration (kubeproxy.config.k8s.io). The group is a
// config. subdomain of evictd.io, as the components' are of k8s.io, so
// that it is not taken for an API the API server serves (evictd.io names
// evictd's taints and conditions); "Agent" because it configures the
// agent, not evictd's other commands; v1alpha1 until its fields have met
// a release or two of operators.
const (
	AgentAPIVersion = "config.evictd.io/v1alpha1"
	AgentKind       = "AgentConfiguration"
)

// dropinSuffix is what a --config-dir file's name ends in to be read, as
// for the kubelet's --config-dir.
const dropinSuffix = ".conf"

// agentDoc is one AgentConfiguration file: the --config file or a drop-in.
type agentDoc struct {
	path string
	kind SourceKind // SourceConfigFile or SourceDropIn
	// fields are the file's top-level keys that are settings, by name,
	// as JSON; null for a field the file unsets.
	fields map[string]json.RawMessage
	// lenient holds what strict decoding refused and lenient decoding let
	// through, nil when the file decoded strictly.
	lenient *LenientDecoding
}

// readAgentConfig reads path, named by flag, as an AgentConfiguration:
// strictly first (YAML or JSON, case-sensitive keys, no duplicate and no
// unknown keys, apiVersion config.evictd.io/v1alpha1 and kind
// AgentConfiguration); when that fails for duplicate or unknown fields
// only, leniently, the last of duplicate keys winning and unknown ones
// ignored, with a warning naming them, as evictd reads a
// KubeletConfiguration and the kubelet its own. A newer evictd's file
// then still starts this one. Anything else (not YAML, another apiVersion
// or kind, a value of the wrong type) is an error naming the file, the
// field and the value. data is the file's content when the caller has
// read it already.
func readAgentConfig(path, flag string, kind SourceKind, data []byte) (*agentDoc, error) {
	if data == nil {
		var err error
		if data, err = readFile(path, flag); err != nil {
			return nil, err
		}
	}
	where := AgentKind + " " + path
	top, strictErrs, err := yamlTop(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if top == nil {
		return nil, fmt.Errorf("%s: not a YAML mapping with apiVersion %s and kind %s", where, AgentAPIVersion, AgentKind)
	}
	apiVersion, k := typeMeta(top)
	if apiVersion != AgentAPIVersion || k != AgentKind {
		return nil, fmt.Errorf("%s: apiVersion %q, kind %q: want apiVersion %q, kind %q", where, apiVersion, k, AgentAPIVersion, AgentKind)
	}
	d := &agentDoc{path: path, kind: kind, fields: make(map[string]json.RawMessage, len(top))}
	var probe Options
	for _, name := range slices.Sorted(maps.Keys(top)) {
		raw := top[name]
		if name == "apiVersion" || name == "kind" {
			continue
		}
		f := fieldsByName[name]
		if f == nil {
			strictErrs = append(strictErrs, fmt.Sprintf("unknown field %q", name))
			continue
		}
		// Every value is checked here, so that a bad one is an error
		// even where a higher layer overrides it.
		if !isNull(raw) {
			if _, err := f.decode(raw, &probe); err != nil {
				return nil, fmt.Errorf("%s: %s: invalid value %s: %w", where, name, yamlText(raw), err)
			}
		}
		d.fields[name] = raw
	}
	if len(strictErrs) > 0 {
		d.lenient = lenientDecodingOf(AgentKind, path, flag, strictErrs)
	}
	return d, nil
}

// yamlTop converts a YAML (or JSON) document to its top-level keys as
// JSON: strictly, or when duplicate keys make that fail, leniently (the
// last of duplicates taken), the strict error returned among strictErrs.
// top is nil for a document that is not a mapping.
func yamlTop(data []byte) (top map[string]json.RawMessage, strictErrs []string, err error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		var lerr error
		if js, lerr = yaml.YAMLToJSON(data); lerr != nil {
			return nil, nil, err
		}
		strictErrs = append(strictErrs, err.Error())
	}
	if err := json.Unmarshal(js, &top); err != nil {
		return nil, strictErrs, nil
	}
	return top, strictErrs, nil
}

// typeMeta returns the document's apiVersion and kind, "" where they are
// missing or not strings.
func typeMeta(top map[string]json.RawMessage) (apiVersion, kind string) {
	_ = json.Unmarshal(top["apiVersion"], &apiVersion)
	_ = json.Unmarshal(top["kind"], &kind)
	return apiVersion, kind
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// readDropins reads the *.conf files under dir (subdirectories included,
// in lexical order, as filepath.WalkDir visits them) as AgentConfiguration
// drop-ins, and the paths of the other files, which are skipped. As for
// the kubelet's --config-dir, a missing directory is an error and each
// drop-in is a whole document (apiVersion and kind) giving only the fields
// it overrides.
func readDropins(dir string) (docs []*agentDoc, skipped []string, err error) {
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if filepath.Ext(d.Name()) != dropinSuffix {
			skipped = append(skipped, path)
			return nil
		}
		doc, err := readAgentConfig(path, "--config-dir", SourceDropIn, nil)
		if err != nil {
			return err
		}
		docs = append(docs, doc)
		return nil
	})
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, nil, fmt.Errorf("read --config-dir %s: %w", dir, err)
		}
		return nil, nil, err
	}
	return docs, skipped, nil
}

// decode decodes raw, the field's value in a file, into f's field of o,
// and returns the map it decoded for a map field (nil values for the
// keys raw sets to null), nil otherwise. The types are the kubelet's for
// its fields: a duration is a string in Go's syntax ("1m30s"), a map's
// values are strings (a number is taken as written: pid: 1000).
func (f *field) decode(raw json.RawMessage, o *Options) (map[string]*string, error) {
	dec := func(v any) error {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		return d.Decode(v)
	}
	switch p := f.ptr(o).(type) {
	case *string:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, errors.New("want a string")
		}
		*p = s
	case *bool:
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, errors.New("want true or false")
		}
		*p = b
	case *int, *int32:
		bits := 32
		if _, ok := p.(*int); ok {
			bits = strconv.IntSize
		}
		want := fmt.Errorf("want a whole number from %d to %d", int64(-1)<<(bits-1), int64(math.MaxInt64>>(64-bits)))
		var n json.Number
		if err := dec(&n); err != nil {
			return nil, want
		}
		v, err := strconv.ParseInt(n.String(), 10, bits)
		if err != nil {
			return nil, want
		}
		if q, ok := p.(*int); ok {
			*q = int(v)
		} else {
			*p.(*int32) = int32(v)
		}
	case *float64:
		var n json.Number
		if err := dec(&n); err != nil {
			return nil, errors.New("want a number")
		}
		v, err := strconv.ParseFloat(n.String(), 64)
		if err != nil {
			return nil, errors.New("want a number")
		}
		*p = v
	case *time.Duration:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, errors.New(`want a duration as a string, such as "1m30s"`)
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, err
		}
		*p = d
	case *[]string:
		var l []string
		if err := json.Unmarshal(raw, &l); err != nil || l == nil {
			return nil, errors.New("want a list of strings, such as [pods]")
		}
		*p = l
	case *map[string]string:
		m, err := stringMap(raw)
		if err != nil {
			return nil, err
		}
		*p = make(map[string]string, len(m))
		for k, v := range m {
			if v != nil {
				(*p)[k] = *v
			}
		}
		return m, nil
	case *map[string]bool:
		var m map[string]*bool
		if err := json.Unmarshal(raw, &m); err != nil || m == nil {
			return nil, errors.New("want a mapping of gate names to true or false")
		}
		*p = make(map[string]bool, len(m))
		out := make(map[string]*string, len(m))
		for k, v := range m {
			if v != nil {
				(*p)[k] = *v
				s := strconv.FormatBool(*v)
				out[k] = &s
			} else {
				out[k] = nil
			}
		}
		return out, nil
	default:
		return nil, fmt.Errorf("field of an unknown type %T", p)
	}
	return nil, nil
}

// stringMap decodes a map of strings; a number is taken as written, a
// null value (a drop-in unsetting a key) is nil.
func stringMap(raw json.RawMessage) (map[string]*string, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil {
		return nil, errors.New("want a mapping of names to strings, such as {memory.available: 500Mi}")
	}
	out := make(map[string]*string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch v := m[k].(type) {
		case string:
			out[k] = &v
		case json.Number:
			s := v.String()
			out[k] = &s
		case nil:
			out[k] = nil
		default:
			return nil, fmt.Errorf("%s: want a string, such as \"500Mi\"", k)
		}
	}
	return out, nil
}

// agentLayer is evictd's configuration file (--config) and its drop-ins
// (--config-dir) merged: the settings they give and where each came from.
type agentLayer struct {
	opts Options
	// set are the settings the files give, by flag, with their origin.
	set map[string]origin
	// gates are the feature gates the files set, with the file of each.
	gates map[string]gateSetting
	// overridden are notes on the fields a drop-in overrides.
	overridden []string
	// order is each file's place: 0 for the --config file, then the
	// drop-ins in the order they are merged.
	order map[string]int
}

// gateSetting is a feature gate's value and where it was set.
type gateSetting struct {
	on  bool
	src Source
}

// mergeAgentDocs merges docs, the --config file first then its drop-ins
// in order, as the kubelet merges its --config-dir drop-ins over its
// file (cmd/kubelet/app/server.go, mergeKubeletConfigurations: each
// drop-in a JSON merge patch, RFC 7386, over the configuration so far):
// a field a later file sets replaces the earlier value, a list whole; a
// map (evictionHard, systemReserved, featureGates...) is merged key by
// key, a key set to null removed; a field set to null is unset. As the
// kubelet merges drop-ins over its file with every default filled in
// (evictionHard's too), a drop-in that sets a map the --config file does
// not merges its keys over the map in force below the files, which below
// gives (the imports' or the default: a drop-in that sets one hard
// threshold keeps the others), with their origins belowOrigins.
func mergeAgentDocs(docs []*agentDoc, below *Options, belowOrigins map[string]origin) (*agentLayer, error) {
	l := &agentLayer{set: map[string]origin{}, gates: map[string]gateSetting{}, order: map[string]int{}}
	for i, d := range docs {
		l.order[d.path] = i
		for _, name := range slices.Sorted(maps.Keys(d.fields)) {
			raw := d.fields[name]
			f := fieldsByName[name]
			src := Source{Kind: d.kind, File: d.path, Key: name}
			if isNull(raw) {
				delete(l.set, f.flag)
				if f.flag == "feature-gates" {
					l.gates = map[string]gateSetting{}
				}
				continue
			}
			if prev, ok := l.set[f.flag]; ok && !f.isMap(&l.opts) && f.flag != "feature-gates" {
				l.overridden = append(l.overridden, fmt.Sprintf("%s is overridden by %s.", prev.src, src))
			}
			var tmp Options
			m, err := f.decode(raw, &tmp)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %s: invalid value %s: %w", AgentKind, d.path, name, yamlText(raw), err)
			}
			switch {
			case f.flag == "feature-gates":
				for _, k := range slices.Sorted(maps.Keys(m)) {
					v := m[k]
					if prev, ok := l.gates[k]; ok && v != nil {
						l.overridden = append(l.overridden, fmt.Sprintf("%s for %s is overridden by %s.", prev.src, k, src))
					}
					if v == nil {
						delete(l.gates, k)
						continue
					}
					l.gates[k] = gateSetting{on: *v == "true", src: src}
				}
				l.set[f.flag] = origin{src: src}
			case f.isMap(&tmp):
				l.mergeMap(f, m, src, d.kind == SourceDropIn, below, belowOrigins)
			default:
				f.copyTo(&l.opts, &tmp)
				l.set[f.flag] = origin{src: src}
			}
		}
	}
	return l, nil
}

// mergeMap merges m, a map field's value in the file of src, into the
// layer: over the layer's map when an earlier file set it; for a drop-in,
// over the map in force below the files (materialized: the default
// thresholds for evictionHard); for the --config file, in place of it.
func (l *agentLayer) mergeMap(f *field, m map[string]*string, src Source, dropIn bool, below *Options, belowOrigins map[string]origin) {
	cur := f.ptr(&l.opts).(*map[string]string)
	o, ok := l.set[f.flag]
	switch {
	case ok:
	case dropIn:
		base := maps.Clone(*f.ptr(below).(*map[string]string))
		bo, set := belowOrigins[f.flag]
		if !set {
			bo = origin{src: Source{Kind: SourceDefault}}
		}
		if base == nil && f.flag == "eviction-hard" {
			base = thresholds.DefaultHard()
		}
		if base == nil {
			base = map[string]string{}
		}
		*cur = base
		o = origin{src: src, keys: map[string]Source{}}
		for k := range base {
			if ks, ok := bo.keys[k]; ok {
				o.keys[k] = ks
			} else {
				o.keys[k] = bo.src
			}
		}
	default:
		*cur = map[string]string{}
		o = origin{src: src, keys: map[string]Source{}}
	}
	if o.keys == nil {
		o.keys = map[string]Source{}
		for k := range *cur {
			o.keys[k] = o.src
		}
	}
	for k, v := range m {
		if v == nil {
			delete(*cur, k)
			delete(o.keys, k)
			continue
		}
		(*cur)[k] = *v
		o.keys[k] = src
	}
	o.src = src
	l.set[f.flag] = o
}

// mapSourceText words where a map's entries came from: one source, or
// each source that gives some key, lowest first (evictd's files in the
// order they are merged, order), joined by " + ".
func mapSourceText(o origin, order map[string]int) string {
	if len(o.keys) == 0 {
		return o.src.String()
	}
	seen := map[Source]bool{}
	var srcs []Source
	for _, s := range o.keys {
		if !seen[s] {
			seen[s] = true
			srcs = append(srcs, s)
		}
	}
	if len(srcs) == 1 {
		return srcs[0].String()
	}
	rank := func(s Source) int { return slices.Index(sourceOrder, s.Kind) }
	sort.Slice(srcs, func(i, j int) bool {
		if a, b := rank(srcs[i]), rank(srcs[j]); a != b {
			return a < b
		}
		return order[srcs[i].File] < order[srcs[j].File]
	})
	text := make([]string, len(srcs))
	for i, s := range srcs {
		text[i] = s.String()
	}
	return strings.Join(text, " + ")
}

// sourceOrder is the kinds of Source, lowest precedence first.
var sourceOrder = []SourceKind{SourceDefault, SourceNodeConfig, SourceKubeletConfig, SourceConfigFile, SourceDropIn, SourceCommandLine}
