package config

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/thresholds"
)

// The kinds of KubeletRace, the values of the kind label of
// evictd_kubelet_eviction_races.
const (
	RaceThreshold    = "threshold"
	RaceLocalStorage = "local-storage"
	RaceImageGC      = "image-gc"
)

// RaceKinds returns every kind of KubeletRace, in the order they are checked.
func RaceKinds() []string { return []string{RaceThreshold, RaceLocalStorage, RaceImageGC} }

// KubeletRace is a setting of the kubelet's that makes the kubelet act on
// the node's pressure too, racing evictd.
type KubeletRace struct {
	// Kind is RaceThreshold, RaceLocalStorage or RaceImageGC.
	Kind string
	// Warning says what the kubelet does and what to set in it.
	Warning string
}

// kubeletDefaultGCHigh and kubeletDefaultGCLow are the kubelet's
// imageGCHighThresholdPercent and imageGCLowThresholdPercent defaults.
const (
	kubeletDefaultGCHigh = 85
	kubeletDefaultGCLow  = 80
)

// kubeletRaces lists what in kc, the kubelet's configuration after its
// drop-ins, would race evictd, as the kubelet reads it: a nil evictionHard
// means the kubelet's defaults, a "0%" or "100%" threshold is ignored,
// localStorageCapacityIsolation and the image GC thresholds default to
// true and 85/80. where names the file(s) in the warnings.
func kubeletRaces(kc *kubeletv1beta1.KubeletConfiguration, where string) []KubeletRace {
	var races []KubeletRace
	hard, defaulted := kc.EvictionHard, false
	if hard == nil {
		hard, defaulted = thresholds.DefaultHard(), true
	} else if kc.MergeDefaultEvictionSettings != nil && *kc.MergeDefaultEvictionSettings {
		merged := thresholds.DefaultHard()
		for k, v := range hard {
			merged[k] = v
		}
		hard = merged
	}
	for _, m := range []struct {
		key       string
		values    map[string]string
		defaulted bool
	}{{"evictionHard", hard, defaulted}, {"evictionSoft", kc.EvictionSoft, false}} {
		active := activeThresholds(m.values)
		if len(active) == 0 {
			continue
		}
		pairs := make([]string, len(active))
		off := make([]string, len(active))
		for i, sig := range active {
			pairs[i] = sig + "<" + m.values[sig]
			off[i] = sig + `: "0%"`
		}
		why := ""
		if m.defaulted {
			why = " (the kubelet's defaults: evictionHard is not set)"
		}
		races = append(races, KubeletRace{Kind: RaceThreshold, Warning: fmt.Sprintf(
			"the kubelet's %s in %s still has %s%s: the kubelet evicts on them too, racing evictd; set %s: {%s} in the kubelet's configuration (0%% disables a signal).",
			m.key, where, strings.Join(pairs, ", "), why, m.key, strings.Join(off, ", "))})
	}
	if kc.LocalStorageCapacityIsolation == nil || *kc.LocalStorageCapacityIsolation {
		races = append(races, KubeletRace{Kind: RaceLocalStorage, Warning: fmt.Sprintf(
			"the kubelet's localStorageCapacityIsolation in %s is true%s: the kubelet evicts pods over their ephemeral-storage limits or emptyDir sizeLimit on every pass, even with no thresholds, racing evictd's local-storage evictions (both evict the same pod: the first wins, the other finds it gone). "+
				"Setting it false stops that, but the kubelet then reports no ephemeral-storage capacity, and pods that request ephemeral storage no longer schedule on the node: "+
				"set it false only where no pod requests ephemeral storage.", where, defaultNote(kc.LocalStorageCapacityIsolation == nil))})
	}
	high, low := int32(kubeletDefaultGCHigh), int32(kubeletDefaultGCLow)
	if kc.ImageGCHighThresholdPercent != nil {
		high = *kc.ImageGCHighThresholdPercent
	}
	if kc.ImageGCLowThresholdPercent != nil {
		low = *kc.ImageGCLowThresholdPercent
	}
	if high < 100 {
		races = append(races, KubeletRace{Kind: RaceImageGC, Warning: fmt.Sprintf(
			"the kubelet's imageGCHighThresholdPercent in %s is %d%s: the kubelet's image GC deletes unused images whenever the image filesystem is over %d%% full, down to %d%%, while evictd reclaims images under imagefs pressure, so both delete at once and each counts on space the other frees; "+
				"set imageGCHighThresholdPercent: 100 in the kubelet's configuration, which disables its disk-use image GC.",
			where, high, defaultNote(kc.ImageGCHighThresholdPercent == nil), high, low)})
	}
	if age := kc.ImageMaximumGCAge.Duration; age > 0 {
		races = append(races, KubeletRace{Kind: RaceImageGC, Warning: fmt.Sprintf(
			"the kubelet's imageMaximumGCAge in %s is %s: the kubelet deletes images unused that long whatever the disk use, alongside evictd's image reclaim; set imageMaximumGCAge: 0s in the kubelet's configuration.", where, age)})
	}
	return races
}

func defaultNote(isDefault bool) string {
	if isDefault {
		return " (the default)"
	}
	return ""
}

// activeThresholds returns the signals of m the kubelet keeps, sorted: all
// but those at "0%" or "100%".
func activeThresholds(m map[string]string) []string {
	var out []string
	for sig, v := range m {
		if v = strings.TrimSpace(v); v == "0%" || v == "100%" {
			continue
		}
		out = append(out, sig)
	}
	sort.Strings(out)
	return out
}

// ignoredKubeletKeys are the KubeletConfiguration keys that bear on
// eviction but that evictd does not take from --config: it has no such
// setting, or its own flag only (--volume-stats-agg-period). The races
// among them are warned about separately.
var ignoredKubeletKeys = []string{
	"imageGCHighThresholdPercent",
	"imageGCLowThresholdPercent",
	"imageMaximumGCAge",
	"kubeReservedCgroup",
	"localStorageCapacityIsolation",
	"reservedMemory",
	"systemReservedCgroup",
	"volumeStatsAggPeriod",
}

// ignoredKeysNote says which of ignoredKubeletKeys f sets, "" if none.
func ignoredKeysNote(f *kubeletConfigFile) string {
	var set []string
	for _, k := range ignoredKubeletKeys {
		if f.keys[k] {
			set = append(set, k)
		}
	}
	if len(set) == 0 {
		return ""
	}
	return fmt.Sprintf("%s sets %s, which bear on eviction but which evictd does not take from it.", f.path, strings.Join(set, ", "))
}

// mergedKubeletConfig is the kubelet's configuration after its drop-ins.
type mergedKubeletConfig struct {
	kc kubeletv1beta1.KubeletConfiguration
	// files are the files read, the main file first.
	files []string
	// skipped are the files in the drop-in directory without .conf.
	skipped []string
	// lenient are the drop-ins decoded leniently.
	lenient []*LenientDecoding
}

// mergeKubeletDropins merges the *.conf files under dir (recursively, in
// lexical order) over base (nil: no main file) as the kubelet 1.30+ does
// with --config-dir: each file a JSON merge patch (RFC 7386) over the
// result so far, so that a later file overrides the fields it sets and, in
// a map, the keys it sets. As the kubelet does before merging, a base
// without evictionHard gets the kubelet's default thresholds, so a drop-in
// that sets one signal keeps the other defaults.
func mergeKubeletDropins(base *kubeletConfigFile, dir string) (*mergedKubeletConfig, error) {
	m := &mergedKubeletConfig{}
	if base != nil {
		m.kc = base.kc
		m.files = append(m.files, base.path)
	}
	if m.kc.EvictionHard == nil {
		m.kc.EvictionHard = thresholds.DefaultHard()
	}
	if dir == "" {
		return m, nil
	}
	js, err := json.Marshal(&m.kc)
	if err != nil {
		return nil, fmt.Errorf("kubelet configuration %s: %w", strings.Join(m.files, ", "), err)
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if filepath.Ext(d.Name()) != ".conf" {
			m.skipped = append(m.skipped, path)
			return nil
		}
		f, err := readKubeletConfigFlag(path, "--kubelet-config-dir")
		if err != nil {
			return err
		}
		if f.lenient != nil {
			m.lenient = append(m.lenient, f.lenient)
		}
		if js, err = jsonpatch.MergePatch(js, f.js); err != nil {
			return fmt.Errorf("KubeletConfiguration %s: merge: %w", path, err)
		}
		m.files = append(m.files, path)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read --kubelet-config-dir %s: %w", dir, err)
	}
	m.kc = kubeletv1beta1.KubeletConfiguration{}
	if err := json.Unmarshal(js, &m.kc); err != nil {
		return nil, fmt.Errorf("kubelet configuration %s merged: %w", strings.Join(m.files, ", "), err)
	}
	if m.kc.EvictionHard == nil {
		m.kc.EvictionHard = thresholds.DefaultHard()
	}
	return m, nil
}

// kubeletCheck is what checkKubelet finds.
type kubeletCheck struct {
	races   []KubeletRace
	checked bool
	// localStorage is the kubelet's localStorageCapacityIsolation, its
	// default (true) when not set; meaningful when checked.
	localStorage bool
	where        string
	// explicit: the kubelet's own files were named (--kubelet-config,
	// --kubelet-config-dir), not --config taken for them.
	explicit bool
	notes    []string
	// lenient are the files read only for this check (--kubelet-config
	// when it is not --config, the drop-ins) that were decoded leniently.
	lenient []*LenientDecoding
}

// checkKubelet reads the kubelet's configuration named by
// --kubelet-config (or, when not given, the KubeletConfiguration imported,
// kf, which kfFlag named) and --kubelet-config-dir, and returns its races
// with evictd and notes, among them one when the kubelet's featureGates
// set HugepageAwareEviction otherwise than evictd's gate (hugepageAware,
// set in gateWhere or by default). It returns nothing when neither names
// a file.
func (o *Options) checkKubelet(kf *kubeletConfigFile, kfFlag string, hugepageAware bool, gateWhere string) (kubeletCheck, error) {
	var k kubeletCheck
	var base *kubeletConfigFile
	switch {
	case o.kubeletConfig != "" && kf != nil && o.kubeletConfig == kf.path:
		base = kf
	case o.kubeletConfig != "":
		var err error
		if base, err = readKubeletConfigFlag(o.kubeletConfig, "--kubelet-config"); err != nil {
			return kubeletCheck{}, err
		}
		if base.lenient != nil {
			k.lenient = append(k.lenient, base.lenient)
		}
	case kf != nil:
		base = kf
		k.notes = append(k.notes, fmt.Sprintf("--kubelet-config is not given: evictd checks the %s file %s as the kubelet's configuration.", kfFlag, kf.path))
	}
	if base == nil && o.kubeletConfigDir == "" {
		return kubeletCheck{}, nil
	}
	m, err := mergeKubeletDropins(base, o.kubeletConfigDir)
	if err != nil {
		return kubeletCheck{}, err
	}
	k.lenient = append(k.lenient, m.lenient...)
	if len(m.skipped) > 0 {
		k.notes = append(k.notes, fmt.Sprintf("--kubelet-config-dir %s: skipped %s, which do not end in .conf, as the kubelet does.", o.kubeletConfigDir, strings.Join(m.skipped, ", ")))
	}
	where := strings.Join(m.files, " + ")
	if where == "" {
		where = "the kubelet's defaults (--kubelet-config-dir " + o.kubeletConfigDir + " has no .conf file)"
	}
	if kubelet, ok := m.kc.FeatureGates[HugepageAwareEvictionGate]; ok && kubelet != hugepageAware {
		if gateWhere == "" {
			gateWhere = "the default"
		}
		k.notes = append(k.notes, fmt.Sprintf("the kubelet's featureGates in %s set %s=%t but evictd's is %t (%s): on a node with hugepages the kubelet's memory.available and evictd's differ by the hugepage capacity; "+
			"give evictd --feature-gates=%s=%t to compute it as this kubelet does.",
			where, HugepageAwareEvictionGate, kubelet, hugepageAware, gateWhere, HugepageAwareEvictionGate, kubelet))
	}
	k.races, k.checked = kubeletRaces(&m.kc, where), true
	k.localStorage = m.kc.LocalStorageCapacityIsolation == nil || *m.kc.LocalStorageCapacityIsolation
	k.where = where
	k.explicit = o.kubeletConfig != "" || o.kubeletConfigDir != ""
	return k, nil
}
