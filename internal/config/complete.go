package config

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// setting is one value that the imported files can also give: its flag
// (also its kubeletArguments key) and its KubeletConfiguration key.
type setting struct {
	flag string
	// key is the KubeletConfiguration JSON key, "" when the file has none.
	key string
	// fromNodeConfig says whether kubeletArguments may set it.
	fromNodeConfig bool
	// fromKubelet sets dst from f and reports whether f gives the value.
	// Like the kubelet's defaulting, a zero duration or empty string counts
	// as not given; a map or list counts as given unless null.
	fromKubelet func(dst *Options, f *kubeletConfigFile) bool
}

// settings lists everything the imported files can set, in flag order.
var settings = []setting{
	{"eviction-hard", "evictionHard", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.evictionHard = f.kc.EvictionHard
			return f.kc.EvictionHard != nil
		}},
	{"eviction-soft", "evictionSoft", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.evictionSoft = f.kc.EvictionSoft
			return f.kc.EvictionSoft != nil
		}},
	{"eviction-soft-grace-period", "evictionSoftGracePeriod", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.softGracePeriod = f.kc.EvictionSoftGracePeriod
			return f.kc.EvictionSoftGracePeriod != nil
		}},
	{"eviction-minimum-reclaim", "evictionMinimumReclaim", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.minimumReclaim = f.kc.EvictionMinimumReclaim
			return f.kc.EvictionMinimumReclaim != nil
		}},
	{"eviction-max-pod-grace-period", "evictionMaxPodGracePeriod", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.maxPodGracePeriod = f.kc.EvictionMaxPodGracePeriod
			return f.keys["evictionMaxPodGracePeriod"]
		}},
	{"eviction-pressure-transition-period", "evictionPressureTransitionPeriod", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.pressureTransitionPeriod = f.kc.EvictionPressureTransitionPeriod.Duration
			return d.pressureTransitionPeriod != 0
		}},
	{"merge-default-eviction-settings", "mergeDefaultEvictionSettings", false,
		func(d *Options, f *kubeletConfigFile) bool {
			if f.kc.MergeDefaultEvictionSettings == nil {
				return false
			}
			d.mergeDefaults = *f.kc.MergeDefaultEvictionSettings
			return true
		}},
	{"kernel-memcg-notification", "kernelMemcgNotification", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.kernelMemcgNotification = f.kc.KernelMemcgNotification
			return f.keys["kernelMemcgNotification"]
		}},
	{"enforce-node-allocatable", "enforceNodeAllocatable", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.enforceNodeAllocatable = f.kc.EnforceNodeAllocatable
			return f.kc.EnforceNodeAllocatable != nil
		}},
	{"system-reserved", "systemReserved", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.systemReserved = f.kc.SystemReserved
			return f.kc.SystemReserved != nil
		}},
	{"kube-reserved", "kubeReserved", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.kubeReserved = f.kc.KubeReserved
			return f.kc.KubeReserved != nil
		}},
	{"root-dir", "", true, nil},
	{"cgroup-root", "cgroupRoot", true,
		func(d *Options, f *kubeletConfigFile) bool { d.cgroupRoot = f.kc.CgroupRoot; return d.cgroupRoot != "" }},
	{"cgroup-driver", "cgroupDriver", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.cgroupDriver = f.kc.CgroupDriver
			return d.cgroupDriver != ""
		}},
	{"container-runtime-endpoint", "containerRuntimeEndpoint", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.containerRuntimeEndpoint = f.kc.ContainerRuntimeEndpoint
			return d.containerRuntimeEndpoint != ""
		}},
	{"image-service-endpoint", "imageServiceEndpoint", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.imageServiceEndpoint = f.kc.ImageServiceEndpoint
			return d.imageServiceEndpoint != ""
		}},
	{"minimum-image-ttl-duration", "imageMinimumGCAge", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.minimumImageTTL = f.kc.ImageMinimumGCAge.Duration
			return d.minimumImageTTL != 0
		}},
	// kubeconfig is a kubelet flag, but the kubelet's kubeconfig is the
	// node's identity: evictd uses its own, so no file sets it.
	{"kubeconfig", "", false, nil},
	{"hostname-override", "", true, nil},
	{"node-status-update-frequency", "nodeStatusUpdateFrequency", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.nodeStatusUpdateFrequency = f.kc.NodeStatusUpdateFrequency.Duration
			return d.nodeStatusUpdateFrequency != 0
		}},
	{"node-status-report-frequency", "nodeStatusReportFrequency", true,
		func(d *Options, f *kubeletConfigFile) bool {
			d.nodeStatusReportFrequency = f.kc.NodeStatusReportFrequency.Duration
			return d.nodeStatusReportFrequency != 0
		}},
}

// Complete reads evictd's configuration file (--config) and its drop-ins
// (--config-dir), the files it imports (--import-kubelet-config,
// --node-config), applies precedence and validates, returning the
// effective Config. Precedence, per setting, highest first:
//
//  1. a flag given on the command line (fs.Changed): as for the kubelet,
//     whose flags override its file;
//  2. the --config-dir drop-ins, a later one over an earlier one, then
//     the --config file: evictd's own configuration;
//  3. the KubeletConfiguration imported (--import-kubelet-config, or,
//     deprecated, a KubeletConfiguration given to --config), then the
//     OpenShift node-config.yaml (--node-config): another component's
//     files, which evictd's own overrides, the more specific import first
//     as before;
//  4. the default.
//
// A map given by a layer replaces the lower layers' map whole, as the
// kubelet's flags replace its file's, but for the drop-ins, which merge a
// map key by key as the kubelet merges its own (mergeAgentDocs); feature
// gates are merged gate by gate across every layer, as the kubelet does.
// fs must be the FlagSet NewFlagSet returned with o, after Parse; a nil
// fs counts as no flags given.
func (o *Options) Complete(fs *pflag.FlagSet) (*Config, error) {
	if o == nil {
		return nil, fmt.Errorf("config: nil Options")
	}
	changed := func(name string) bool { return fs != nil && fs.Changed(name) }

	// evictd's own files first: they may name the imports.
	var docs []*agentDoc
	var legacy *kubeletConfigFile
	var deprecations, notes []string
	if o.configFile != "" {
		d, kf, err := readConfigFlag(o.configFile)
		if err != nil {
			return nil, err
		}
		if d != nil {
			docs = append(docs, d)
		}
		if kf != nil {
			legacy = kf
			deprecations = append(deprecations, fmt.Sprintf(
				"--config %s is a KubeletConfiguration: evictd imported its eviction settings as before, but a KubeletConfiguration given to --config is deprecated: "+
					"give it as --import-kubelet-config %s (the same import, with the same precedence), and give --config evictd's own configuration file, apiVersion %s, kind %s (docs/CONFIGURATION.md).",
				kf.path, kf.path, AgentAPIVersion, AgentKind))
		}
	}
	var dropIns []string
	if o.configDir != "" {
		ds, skipped, err := readDropins(o.configDir)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			dropIns = append(dropIns, d.path)
		}
		docs = append(docs, ds...)
		if len(skipped) > 0 {
			notes = append(notes, fmt.Sprintf("--config-dir %s: skipped %s, which do not end in %s, as the kubelet does.", o.configDir, strings.Join(skipped, ", "), dropinSuffix))
		}
	}

	// The imports, named on the command line or in evictd's files.
	importPath, nodePath := o.importKubeletConfig, o.nodeConfigFile
	// named says where a file named in evictd's files is named, for the
	// errors in reading it; nothing for the command line's.
	named := func(err error, where string) error {
		if where == "" {
			return err
		}
		return fmt.Errorf("%s: %w", where, err)
	}
	var importWhere, nodeWhere string
	if !changed("import-kubelet-config") {
		importPath, importWhere = lastString(docs, "importKubeletConfig", importPath)
	}
	if !changed("node-config") {
		nodePath, nodeWhere = lastString(docs, "nodeConfig", nodePath)
	}
	kf, kfFlag := legacy, "--config"
	switch {
	case legacy != nil && importPath != "":
		return nil, fmt.Errorf("--config %s is a KubeletConfiguration and --import-kubelet-config %s is given too: evictd imports one KubeletConfiguration; "+
			"give it as --import-kubelet-config and give --config evictd's own configuration file (%s %s)", legacy.path, importPath, AgentAPIVersion, AgentKind)
	case importPath != "":
		f, err := readKubeletConfigFlag(importPath, "--import-kubelet-config")
		if err != nil {
			return nil, named(err, importWhere)
		}
		kf, kfFlag = f, "--import-kubelet-config"
	}
	var nodeOpts *Options
	var nf *nodeConfigFile
	if nodePath != "" {
		f, err := readNodeConfig(nodePath)
		if err != nil {
			return nil, named(err, nodeWhere)
		}
		var nNotes []string
		nf = f
		nodeOpts, nNotes, err = applyKubeletArguments(f)
		if err != nil {
			return nil, named(err, nodeWhere)
		}
		notes = append(notes, nNotes...)
	}

	// The layers below evictd's files: the defaults, then the imports.
	_, below := NewFlagSet("defaults")
	belowOrigins := map[string]origin{}
	// given lists, by flag, every layer that gives the setting, lowest
	// first, as the notes word them.
	given := map[string][]string{}
	for _, s := range settings {
		f := fieldsByFlag[s.flag]
		if nf != nil && s.fromNodeConfig {
			if _, ok := nf.args[s.flag]; ok {
				f.copyTo(below, nodeOpts)
				src := Source{Kind: SourceNodeConfig, File: nf.path, Key: "kubeletArguments." + s.flag}
				belowOrigins[s.flag] = origin{src: src}
				given[s.flag] = append(given[s.flag], src.String())
			}
		}
		if kf != nil && s.fromKubelet != nil {
			var tmp Options
			if s.fromKubelet(&tmp, kf) {
				f.copyTo(below, &tmp)
				src := Source{Kind: SourceKubeletConfig, File: kf.path, Key: s.key}
				belowOrigins[s.flag] = origin{src: src}
				given[s.flag] = append(given[s.flag], src.String())
			}
		}
	}

	// evictd's files over them, then the command line.
	layer, err := mergeAgentDocs(docs, below, belowOrigins)
	if err != nil {
		return nil, err
	}
	notes = append(notes, layer.overridden...)
	eff := *o
	eff.nodeConfigFile, eff.importKubeletConfig = nodePath, importPath
	origins := map[string]origin{}
	sources := map[string]string{}
	for i := range fields {
		f := &fields[i]
		if f.flag == "feature-gates" {
			continue // gate by gate, below
		}
		layers := given[f.flag]
		if lo, ok := layer.set[f.flag]; ok {
			if f.isMap(&eff) && mergedBelow(lo) {
				layers = nil // the drop-in merged the lower layers' map
			}
			origins[f.flag] = lo
			text := lo.src.String()
			if f.isMap(&eff) {
				text = mapSourceText(lo, layer.order)
			}
			layers = append(layers, text)
			f.copyTo(&eff, &layer.opts)
		} else if bo, ok := belowOrigins[f.flag]; ok {
			origins[f.flag] = bo
			f.copyTo(&eff, below)
		}
		if changed(f.flag) {
			origins[f.flag] = origin{src: Source{Kind: SourceCommandLine, Key: "--" + f.flag}}
			layers = append(layers, "--"+f.flag)
			f.copyTo(&eff, o)
		}
		if len(layers) == 0 {
			continue
		}
		top := layers[len(layers)-1]
		sources[f.flag] = top
		for _, lower := range layers[:len(layers)-1] {
			notes = append(notes, fmt.Sprintf("%s is overridden by %s.", lower, top))
		}
	}

	gates, where, gNotes, err := resolveGates(o.gateLayers(changed("feature-gates"), layer, kf, nf, nodeOpts))
	if err != nil {
		return nil, err
	}
	if where != "" {
		sources["feature-gates"] = where
	}
	notes = append(notes, gNotes...)
	kc, err := eff.checkKubelet(kf, kfFlag, gates, where)
	if err != nil {
		return nil, err
	}
	if kf != nil {
		if note := ignoredKeysNote(kf); note != "" {
			notes = append(notes, note)
		}
	}
	c, err := eff.validate(sources, nf, append(notes, kc.notes...))
	if err != nil {
		return nil, err
	}
	c.HugepageAwareEviction = gates
	c.ConfigDir, c.ConfigDropIns = o.configDir, dropIns
	if kf != nil {
		c.ImportedKubeletConfig = kf.path
	}
	c.KubeletConfigFile, c.KubeletConfigDir = eff.kubeletConfig, eff.kubeletConfigDir
	c.KubeletChecked, c.KubeletRaces = kc.checked, kc.races
	if kf != nil && kf.lenient != nil {
		c.Lenient = append(c.Lenient, *kf.lenient)
	}
	for _, d := range docs {
		if d.lenient != nil {
			c.Lenient = append(c.Lenient, *d.lenient)
		}
	}
	for _, l := range kc.lenient {
		c.Lenient = append(c.Lenient, *l)
	}
	c.Deprecations = deprecations
	// The lenient decodings first: they say what evictd did not read;
	// then what is deprecated.
	lenient := make([]string, len(c.Lenient))
	for i, l := range c.Lenient {
		lenient[i] = l.Warning
	}
	c.Warnings = append(append(lenient, deprecations...), c.Warnings...)
	if err := c.resolveLocalStorage(kc); err != nil {
		return nil, err
	}
	for _, r := range c.KubeletRaces {
		c.Warnings = append(c.Warnings, r.Warning)
	}
	c.provenance = provenance(&eff, origins, o.effectiveGates(changed("feature-gates"), layer, kf, nf, nodeOpts))
	return c, nil
}

// The values of --local-storage-eviction.
const (
	LocalStorageEvictd  = "evictd"
	LocalStorageKubelet = "kubelet"
)

// resolveLocalStorage sets KubeletLocalStorage from the kubelet's own
// configuration (--kubelet-config, --kubelet-config-dir; not --config taken
// for it, which may be a copy written for evictd). With the pods over
// their local-storage limits left to the kubelet there is no race to warn
// of: evictd evicts them only where the kubelet does not.
func (c *Config) resolveLocalStorage(kc kubeletCheck) error {
	known := kc.checked && kc.explicit
	if known {
		on := kc.localStorage
		c.KubeletLocalStorage = &on
	}
	if c.LocalStorageEviction != LocalStorageKubelet {
		return nil
	}
	c.KubeletRaces = slices.DeleteFunc(slices.Clone(c.KubeletRaces), func(r KubeletRace) bool { return r.Kind == RaceLocalStorage })
	switch {
	case known && kc.localStorage:
		c.Notes = append(c.Notes, fmt.Sprintf("pods over their own local-storage limits are left to the kubelet, whose localStorageCapacityIsolation in %s is on (--local-storage-eviction=kubelet): it evicts them once it has measured them, every --volume-stats-agg-period of its own (1m by default).", kc.where))
	case known:
		c.Notes = append(c.Notes, fmt.Sprintf("evictd evicts the pods over their own local-storage limits although --local-storage-eviction=kubelet: the kubelet's localStorageCapacityIsolation in %s is off, so it does not.", kc.where))
	default:
		c.Notes = append(c.Notes, "pods over their own local-storage limits are left to the kubelet while its node reports an ephemeral-storage capacity, which it does only with localStorageCapacityIsolation on, and evicted by evictd otherwise (--local-storage-eviction=kubelet, no --kubelet-config).")
	}
	return nil
}

// readConfigFlag reads the --config file: evictd's AgentConfiguration, or,
// deprecated, a KubeletConfiguration, told apart by its kind.
func readConfigFlag(path string) (*agentDoc, *kubeletConfigFile, error) {
	data, err := readFile(path, "--config")
	if err != nil {
		return nil, nil, err
	}
	top, _, yerr := yamlTop(data)
	apiVersion, kind := typeMeta(top)
	switch {
	case kind == kubeletKind:
		kf, err := readKubeletConfigData(path, "--config", data)
		return nil, kf, err
	case yerr == nil && top != nil && kind != AgentKind:
		return nil, nil, fmt.Errorf("--config %s: apiVersion %q, kind %q: want evictd's configuration, apiVersion %q, kind %q (or, deprecated, a KubeletConfiguration, apiVersion %q, which --import-kubelet-config imports)",
			path, apiVersion, kind, AgentAPIVersion, AgentKind, kubeletAPIVersion)
	}
	d, err := readAgentConfig(path, "--config", SourceConfigFile, data)
	return d, nil, err
}

// lastString returns the string field name as the last of docs that sets
// it gives it ("" when it sets null), and where ("name in FILE"), or def
// and "" when none does. The field's value was checked when docs were
// read.
func lastString(docs []*agentDoc, name, def string) (value, where string) {
	value = def
	for _, d := range docs {
		raw, ok := d.fields[name]
		switch {
		case !ok:
		case isNull(raw):
			value, where = def, ""
		default:
			var tmp Options
			_, _ = fieldsByName[name].decode(raw, &tmp)
			value, where = *fieldsByName[name].ptr(&tmp).(*string), name+" in "+d.path
		}
	}
	return value, where
}

// mergedBelow reports whether a map's origin in evictd's files keeps
// entries of the layers below them: a drop-in merged over them.
func mergedBelow(o origin) bool {
	for _, s := range o.keys {
		switch s.Kind {
		case SourceDefault, SourceNodeConfig, SourceKubeletConfig:
			return true
		}
	}
	return false
}

// gateLayers lists the layers that set feature gates, highest precedence
// first: the command line's --feature-gates (when given), featureGates in
// evictd's files (each file with the gates it has the last word on, the
// last drop-in first), in the KubeletConfiguration imported, then
// kubeletArguments.feature-gates in the --node-config.
func (o *Options) gateLayers(onCommandLine bool, l *agentLayer, kf *kubeletConfigFile, nf *nodeConfigFile, nodeOpts *Options) []gateLayer {
	var layers []gateLayer
	if onCommandLine {
		layers = append(layers, gateLayer{"--feature-gates", o.featureGates})
	}
	if l != nil {
		byFile := map[Source]map[string]bool{}
		for name, g := range l.gates {
			if byFile[g.src] == nil {
				byFile[g.src] = map[string]bool{}
			}
			byFile[g.src][name] = g.on
		}
		srcs := slices.Collect(maps.Keys(byFile))
		sort.Slice(srcs, func(i, j int) bool { return l.order[srcs[i].File] > l.order[srcs[j].File] })
		for _, s := range srcs {
			layers = append(layers, gateLayer{s.String(), byFile[s]})
		}
	}
	if kf != nil && kf.kc.FeatureGates != nil {
		layers = append(layers, gateLayer{"featureGates in " + kf.path, kf.kc.FeatureGates})
	}
	if nf != nil && nodeOpts != nil {
		if _, ok := nf.args["feature-gates"]; ok {
			layers = append(layers, gateLayer{"kubeletArguments.feature-gates in " + nf.path, nodeOpts.featureGates})
		}
	}
	return layers
}

// effectiveGates merges the feature gates of every layer, gate by gate,
// with the source of each: HugepageAwareEviction on by default, then
// --node-config's, the import's, evictd's files' and the command line's.
func (o *Options) effectiveGates(onCommandLine bool, l *agentLayer, kf *kubeletConfigFile, nf *nodeConfigFile, nodeOpts *Options) map[string]gateSetting {
	gates := map[string]gateSetting{HugepageAwareEvictionGate: {on: true, src: Source{Kind: SourceDefault}}}
	if nf != nil && nodeOpts != nil {
		if _, ok := nf.args["feature-gates"]; ok {
			for k, v := range nodeOpts.featureGates {
				gates[k] = gateSetting{v, Source{Kind: SourceNodeConfig, File: nf.path, Key: "kubeletArguments.feature-gates"}}
			}
		}
	}
	if kf != nil {
		for k, v := range kf.kc.FeatureGates {
			gates[k] = gateSetting{v, Source{Kind: SourceKubeletConfig, File: kf.path, Key: "featureGates"}}
		}
	}
	maps.Copy(gates, l.gates)
	if onCommandLine {
		for k, v := range o.featureGates {
			gates[k] = gateSetting{v, Source{Kind: SourceCommandLine, Key: "--feature-gates"}}
		}
	}
	return gates
}

// applyKubeletArguments parses each kubeletArguments entry evictd uses
// exactly as its flag: the list joined with commas. It returns the parsed
// values and notes on the keys it ignores.
func applyKubeletArguments(f *nodeConfigFile) (*Options, []string, error) {
	fs, o := NewFlagSet("node-config")
	// feature-gates is read gate by gate (gateLayers), not as a setting.
	used := map[string]bool{"feature-gates": true}
	for _, s := range settings {
		if s.fromNodeConfig {
			used[s.flag] = true
		}
	}
	var ignored, notes []string
	keys := make([]string, 0, len(f.args)+len(f.bad))
	for k := range f.args {
		keys = append(keys, k)
	}
	for k := range f.bad {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case k == "kubeconfig":
			notes = append(notes, fmt.Sprintf("kubeletArguments.kubeconfig in %s is ignored: it is the kubelet's identity, evictd uses its own (--kubeconfig).", f.path))
		case !used[k]:
			ignored = append(ignored, k)
		case f.bad[k] != "":
			return nil, nil, fmt.Errorf("node-config %s: kubeletArguments.%s: %s", f.path, k, f.bad[k])
		default:
			value := strings.Join(f.args[k], ",")
			if err := fs.Lookup(k).Value.Set(value); err != nil {
				return nil, nil, fmt.Errorf("node-config %s: kubeletArguments.%s: invalid value %q: %w", f.path, k, value, err)
			}
		}
	}
	if len(keys) == 0 {
		notes = append(notes, fmt.Sprintf("%s has no kubeletArguments: evictd takes nothing from it.", f.path))
	}
	if len(ignored) > 0 {
		notes = append(notes, fmt.Sprintf("kubeletArguments in %s: ignored %s, which are not kubelet flags evictd reads.", f.path, strings.Join(ignored, ", ")))
	}
	return o, notes, nil
}
