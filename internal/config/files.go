package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const (
	kubeletAPIVersion = "kubelet.config.k8s.io/v1beta1"
	kubeletKind       = "KubeletConfiguration"
)

// kubeletConfigFile is a KubeletConfiguration read from a file, with the
// top-level keys the file spells out.
type kubeletConfigFile struct {
	path string
	kc   kubeletv1beta1.KubeletConfiguration
	keys map[string]bool
	// js is the file as JSON, for merging drop-ins over it.
	js []byte
	// lenient holds what strict decoding refused and lenient decoding
	// let through, nil when the file decoded strictly.
	lenient *LenientDecoding
}

// The kinds of field lenient decoding lets through, the values of the
// kind label of evictd_config_warnings.
const (
	WarnUnknownField   = "unknown-field"
	WarnDuplicateField = "duplicate-field"
)

// ConfigWarningKinds returns every kind of field lenient decoding lets
// through.
func ConfigWarningKinds() []string { return []string{WarnUnknownField, WarnDuplicateField} }

// LenientDecoding is a KubeletConfiguration or AgentConfiguration file
// that strict decoding refused for unknown or duplicate fields only, and
// that evictd then decoded leniently, as the kubelet does its own.
type LenientDecoding struct {
	// Path is the file, Flag the flag that named it.
	Path, Flag string
	// Fields counts the fields let through by kind (WarnUnknownField,
	// WarnDuplicateField).
	Fields map[string]int
	// Warning names the fields and says what was done with them.
	Warning string
}

// readKubeletConfigFlag reads path, named by flag, as the kubelet reads its
// configuration file: strictly first (YAML or JSON, case-sensitive keys,
// no duplicate and no unknown keys, apiVersion kubelet.config.k8s.io/v1beta1
// and kind KubeletConfiguration); when that fails for duplicate or unknown
// fields only, leniently, the last of duplicate keys winning and unknown
// ones ignored, with a warning naming them. A newer kubelet's file (a field
// evictd's API types do not know yet) then still starts evictd. Anything
// else (not YAML, another apiVersion or kind, a value of the wrong type)
// stays an error, as it is for the kubelet.
func readKubeletConfigFlag(path, flag string) (*kubeletConfigFile, error) {
	return readKubeletConfigData(path, flag, nil)
}

// readKubeletConfigData is readKubeletConfigFlag with the file's content,
// data, when the caller has read it already (nil: read path).
func readKubeletConfigData(path, flag string, data []byte) (*kubeletConfigFile, error) {
	if data == nil {
		var err error
		if data, err = readFile(path, flag); err != nil {
			return nil, err
		}
	}
	where := "KubeletConfiguration " + path
	var strictErrs []string
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		// Duplicate keys, or not YAML: the lenient conversion tells.
		var lerr error
		if js, lerr = yaml.YAMLToJSON(data); lerr != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		strictErrs = append(strictErrs, err.Error())
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil || top == nil {
		return nil, fmt.Errorf("%s: not a YAML mapping with apiVersion %s and kind %s", where, kubeletAPIVersion, kubeletKind)
	}
	var apiVersion, kind string
	_ = json.Unmarshal(top["apiVersion"], &apiVersion)
	_ = json.Unmarshal(top["kind"], &kind)
	if apiVersion != kubeletAPIVersion || kind != kubeletKind {
		return nil, fmt.Errorf("%s: apiVersion %q, kind %q: want apiVersion %q, kind %q",
			where, apiVersion, kind, kubeletAPIVersion, kubeletKind)
	}

	f := &kubeletConfigFile{path: path, keys: make(map[string]bool, len(top)), js: js}
	for k := range top {
		f.keys[k] = true
	}
	// UnmarshalStrict decodes as the lenient decoding does and lists the
	// strict failures besides: the value is the lenient one.
	strict, err := sigsjson.UnmarshalStrict(js, &f.kc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, blameKey(top, err))
	}
	for _, e := range strict {
		strictErrs = append(strictErrs, e.Error())
	}
	if len(strictErrs) > 0 {
		f.lenient = lenientDecodingOf(kubeletKind, path, flag, strictErrs)
	}
	return f, nil
}

// lenientDecodingOf counts and words what strict decoding of path, a file
// of kind (KubeletConfiguration or AgentConfiguration), refused:
// sigs.k8s.io/json's `unknown field "a.b"` and `duplicate field "c"`, and
// the YAML conversion's `key "d" already set in map` lines.
func lenientDecodingOf(kind, path, flag string, strictErrs []string) *LenientDecoding {
	l := &LenientDecoding{Path: path, Flag: flag, Fields: map[string]int{}}
	var unknown, dup []string
	for _, e := range strictErrs {
		switch {
		case strings.HasPrefix(e, "unknown field "):
			unknown = append(unknown, strings.TrimPrefix(e, "unknown field "))
		case strings.HasPrefix(e, "duplicate field "):
			dup = append(dup, strings.TrimPrefix(e, "duplicate field "))
		default:
			for _, line := range strings.Split(e, "\n") {
				if k, ok := strings.CutSuffix(strings.TrimSpace(line), " already set in map"); ok {
					if _, k, ok = strings.Cut(k, "key "); ok {
						dup = append(dup, k)
					}
				}
			}
		}
	}
	sort.Strings(unknown)
	sort.Strings(dup)
	l.Fields[WarnUnknownField], l.Fields[WarnDuplicateField] = len(unknown), len(dup)
	var parts []string
	newer, as := "a newer kubelet", "as the kubelet does"
	if kind == AgentKind {
		newer, as = "a newer evictd", "as the kubelet decodes its own"
	}
	if len(unknown) > 0 {
		parts = append(parts, fmt.Sprintf("ignored unknown field(s) %s (from %s, or misspelt: a misspelt setting keeps its default)", strings.Join(unknown, ", "), newer))
	}
	if len(dup) > 0 {
		parts = append(parts, fmt.Sprintf("took the last of duplicate field(s) %s", strings.Join(dup, ", ")))
	}
	if len(parts) == 0 {
		parts = append(parts, strings.Join(strictErrs, "; "))
	}
	l.Warning = fmt.Sprintf("%s %s (%s) is not valid strictly, so evictd decoded it leniently, %s: %s.",
		kind, path, flag, as, strings.Join(parts, "; "))
	return l
}

// maxFileSize bounds what evictd reads from a configuration file, so that a
// wrong path (a device, a huge log) fails fast instead of eating memory.
const maxFileSize = 4 << 20

func readFile(path, flag string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s file: %w", flag, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s file: %w", flag, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("read %s file %s: larger than %d MiB", flag, path, maxFileSize>>20)
	}
	return data, nil
}

// blameKey finds which top-level key made decoding fail, so that the error
// names it and its value: errors from a field's own UnmarshalJSON (such as
// time: invalid duration "5x") do not.
func blameKey(top map[string]json.RawMessage, err error) error {
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		one, mErr := json.Marshal(map[string]json.RawMessage{k: top[k]})
		if mErr != nil {
			continue
		}
		var kc kubeletv1beta1.KubeletConfiguration
		if kErr := sigsjson.UnmarshalCaseSensitivePreserveInts(one, &kc); kErr != nil {
			return fmt.Errorf("%s: invalid value %s: %w", k, yamlText(top[k]), kErr)
		}
	}
	return err
}

// yamlText shows a decoded value in an error as the operator would read
// it: JSON without HTML escapes ("a<b", not "a\u003cb"), shortened.
func yamlText(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return shorten(string(raw))
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return shorten(string(raw))
	}
	return shorten(strings.TrimSpace(b.String()))
}

// shorten keeps error messages readable when a value is a large object.
func shorten(s string) string {
	const limit = 80
	r := []rune(s)
	if len(r) <= limit {
		return s
	}
	return string(r[:limit]) + "…"
}

// nodeConfigFile is the part of an OpenShift node-config.yaml evictd reads.
type nodeConfigFile struct {
	path string
	// args is kubeletArguments: kubelet flag name → its values.
	args map[string][]string
	// bad holds the keys whose value is not a list of scalars, with the
	// reason; an error only if evictd uses the key.
	bad map[string]string
	// nodeName is the top-level nodeName, for a note when it differs.
	nodeName string
}

// readNodeConfig reads path leniently (it is the operator's whole node
// configuration, with many sections evictd does not know) and keeps
// kubeletArguments and nodeName.
func readNodeConfig(path string) (*nodeConfigFile, error) {
	data, err := readFile(path, "--node-config")
	if err != nil {
		return nil, err
	}
	var doc struct {
		NodeName         any                        `json:"nodeName"`
		KubeletArguments map[string]json.RawMessage `json:"kubeletArguments"`
	}
	js, err := yaml.YAMLToJSON(data)
	if err == nil {
		err = json.Unmarshal(js, &doc)
	}
	if err != nil {
		return nil, fmt.Errorf("node-config %s: %w", path, err)
	}
	f := &nodeConfigFile{path: path, args: map[string][]string{}, bad: map[string]string{}}
	if s, ok := doc.NodeName.(string); ok {
		f.nodeName = s
	}
	for k, raw := range doc.KubeletArguments {
		vals, err := stringList(raw)
		if err != nil {
			f.bad[k] = err.Error()
			continue
		}
		f.args[k] = vals
	}
	return f, nil
}

// stringList decodes a kubeletArguments value: a list of scalars, each taken
// as the text it is written with (so [30] reads as "30").
func stringList(raw json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var items []any
	if err := dec.Decode(&items); err != nil || items == nil {
		return nil, fmt.Errorf("value %s is not a list of strings, e.g. [\"5m\"]", yamlText(raw))
	}
	out := make([]string, len(items))
	for i, it := range items {
		switch v := it.(type) {
		case string:
			out[i] = v
		case json.Number:
			out[i] = v.String()
		case bool:
			out[i] = strconv.FormatBool(v)
		default:
			return nil, errors.New("value " + yamlText(raw) + " is not a list of strings")
		}
	}
	return out, nil
}
