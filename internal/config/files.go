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
}

// readKubeletConfig reads path strictly, as the kubelet's strict decoding
// does: YAML or JSON, case-sensitive keys, no duplicate and no unknown keys,
// apiVersion kubelet.config.k8s.io/v1beta1 and kind KubeletConfiguration.
func readKubeletConfig(path string) (*kubeletConfigFile, error) {
	return readKubeletConfigFlag(path, "--config")
}

// readKubeletConfigFlag is readKubeletConfig for the file of flag.
func readKubeletConfigFlag(path, flag string) (*kubeletConfigFile, error) {
	data, err := readFile(path, flag)
	if err != nil {
		return nil, err
	}
	where := "KubeletConfiguration " + path
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
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
	strict, err := sigsjson.UnmarshalStrict(js, &f.kc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, blameKey(top, err))
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		sort.Strings(msgs)
		return nil, fmt.Errorf("%s: %s", where, strings.Join(msgs, "; "))
	}
	return f, nil
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
