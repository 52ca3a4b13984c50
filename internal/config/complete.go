package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// setting is one value that the files can also give: its flag (also its
// kubeletArguments key), its KubeletConfiguration key, and how to move it
// between layers.
type setting struct {
	flag string
	// key is the KubeletConfiguration JSON key, "" when the file has none.
	key string
	// fromNodeConfig says whether kubeletArguments may set it.
	fromNodeConfig bool
	// copy moves the value from src to dst.
	copy func(dst, src *Options)
	// fromKubelet sets dst from f and reports whether f gives the value.
	// Like the kubelet's defaulting, a zero duration or empty string counts
	// as not given; a map or list counts as given unless null.
	fromKubelet func(dst *Options, f *kubeletConfigFile) bool
}

// settings lists everything a file can set, in flag order.
var settings = []setting{
	{"eviction-hard", "evictionHard", true,
		func(d, s *Options) { d.evictionHard = s.evictionHard },
		func(d *Options, f *kubeletConfigFile) bool {
			d.evictionHard = f.kc.EvictionHard
			return f.kc.EvictionHard != nil
		}},
	{"eviction-soft", "evictionSoft", true,
		func(d, s *Options) { d.evictionSoft = s.evictionSoft },
		func(d *Options, f *kubeletConfigFile) bool {
			d.evictionSoft = f.kc.EvictionSoft
			return f.kc.EvictionSoft != nil
		}},
	{"eviction-soft-grace-period", "evictionSoftGracePeriod", true,
		func(d, s *Options) { d.softGracePeriod = s.softGracePeriod },
		func(d *Options, f *kubeletConfigFile) bool {
			d.softGracePeriod = f.kc.EvictionSoftGracePeriod
			return f.kc.EvictionSoftGracePeriod != nil
		}},
	{"eviction-minimum-reclaim", "evictionMinimumReclaim", true,
		func(d, s *Options) { d.minimumReclaim = s.minimumReclaim },
		func(d *Options, f *kubeletConfigFile) bool {
			d.minimumReclaim = f.kc.EvictionMinimumReclaim
			return f.kc.EvictionMinimumReclaim != nil
		}},
	{"eviction-max-pod-grace-period", "evictionMaxPodGracePeriod", true,
		func(d, s *Options) { d.maxPodGracePeriod = s.maxPodGracePeriod },
		func(d *Options, f *kubeletConfigFile) bool {
			d.maxPodGracePeriod = f.kc.EvictionMaxPodGracePeriod
			return f.keys["evictionMaxPodGracePeriod"]
		}},
	{"eviction-pressure-transition-period", "evictionPressureTransitionPeriod", true,
		func(d, s *Options) { d.pressureTransitionPeriod = s.pressureTransitionPeriod },
		func(d *Options, f *kubeletConfigFile) bool {
			d.pressureTransitionPeriod = f.kc.EvictionPressureTransitionPeriod.Duration
			return d.pressureTransitionPeriod != 0
		}},
	{"merge-default-eviction-settings", "mergeDefaultEvictionSettings", false,
		func(d, s *Options) { d.mergeDefaults = s.mergeDefaults },
		func(d *Options, f *kubeletConfigFile) bool {
			if f.kc.MergeDefaultEvictionSettings == nil {
				return false
			}
			d.mergeDefaults = *f.kc.MergeDefaultEvictionSettings
			return true
		}},
	{"kernel-memcg-notification", "kernelMemcgNotification", true,
		func(d, s *Options) { d.kernelMemcgNotification = s.kernelMemcgNotification },
		func(d *Options, f *kubeletConfigFile) bool {
			d.kernelMemcgNotification = f.kc.KernelMemcgNotification
			return f.keys["kernelMemcgNotification"]
		}},
	{"enforce-node-allocatable", "enforceNodeAllocatable", true,
		func(d, s *Options) { d.enforceNodeAllocatable = s.enforceNodeAllocatable },
		func(d *Options, f *kubeletConfigFile) bool {
			d.enforceNodeAllocatable = f.kc.EnforceNodeAllocatable
			return f.kc.EnforceNodeAllocatable != nil
		}},
	{"system-reserved", "systemReserved", true,
		func(d, s *Options) { d.systemReserved = s.systemReserved },
		func(d *Options, f *kubeletConfigFile) bool {
			d.systemReserved = f.kc.SystemReserved
			return f.kc.SystemReserved != nil
		}},
	{"kube-reserved", "kubeReserved", true,
		func(d, s *Options) { d.kubeReserved = s.kubeReserved },
		func(d *Options, f *kubeletConfigFile) bool {
			d.kubeReserved = f.kc.KubeReserved
			return f.kc.KubeReserved != nil
		}},
	{"root-dir", "", true, func(d, s *Options) { d.rootDir = s.rootDir }, nil},
	{"cgroup-root", "cgroupRoot", true,
		func(d, s *Options) { d.cgroupRoot = s.cgroupRoot },
		func(d *Options, f *kubeletConfigFile) bool { d.cgroupRoot = f.kc.CgroupRoot; return d.cgroupRoot != "" }},
	{"cgroup-driver", "cgroupDriver", true,
		func(d, s *Options) { d.cgroupDriver = s.cgroupDriver },
		func(d *Options, f *kubeletConfigFile) bool {
			d.cgroupDriver = f.kc.CgroupDriver
			return d.cgroupDriver != ""
		}},
	{"container-runtime-endpoint", "containerRuntimeEndpoint", true,
		func(d, s *Options) { d.containerRuntimeEndpoint = s.containerRuntimeEndpoint },
		func(d *Options, f *kubeletConfigFile) bool {
			d.containerRuntimeEndpoint = f.kc.ContainerRuntimeEndpoint
			return d.containerRuntimeEndpoint != ""
		}},
	{"image-service-endpoint", "imageServiceEndpoint", true,
		func(d, s *Options) { d.imageServiceEndpoint = s.imageServiceEndpoint },
		func(d *Options, f *kubeletConfigFile) bool {
			d.imageServiceEndpoint = f.kc.ImageServiceEndpoint
			return d.imageServiceEndpoint != ""
		}},
	{"minimum-image-ttl-duration", "imageMinimumGCAge", true,
		func(d, s *Options) { d.minimumImageTTL = s.minimumImageTTL },
		func(d *Options, f *kubeletConfigFile) bool {
			d.minimumImageTTL = f.kc.ImageMinimumGCAge.Duration
			return d.minimumImageTTL != 0
		}},
	// kubeconfig is a kubelet flag, but the kubelet's kubeconfig is the
	// node's identity: evictd uses its own, so no file sets it.
	{"kubeconfig", "", false, func(d, s *Options) { d.kubeconfig = s.kubeconfig }, nil},
	{"hostname-override", "", true, func(d, s *Options) { d.hostnameOverride = s.hostnameOverride }, nil},
	{"node-status-update-frequency", "nodeStatusUpdateFrequency", true,
		func(d, s *Options) { d.nodeStatusUpdateFrequency = s.nodeStatusUpdateFrequency },
		func(d *Options, f *kubeletConfigFile) bool {
			d.nodeStatusUpdateFrequency = f.kc.NodeStatusUpdateFrequency.Duration
			return d.nodeStatusUpdateFrequency != 0
		}},
	{"node-status-report-frequency", "nodeStatusReportFrequency", true,
		func(d, s *Options) { d.nodeStatusReportFrequency = s.nodeStatusReportFrequency },
		func(d *Options, f *kubeletConfigFile) bool {
			d.nodeStatusReportFrequency = f.kc.NodeStatusReportFrequency.Duration
			return d.nodeStatusReportFrequency != 0
		}},
}

// Complete reads the files named by --config and --node-config, applies
// precedence and validates, returning the effective Config. Precedence, per
// setting: a flag given on the command line (fs.Changed), then --config,
// then --node-config, then the default. A map replaces the lower layers'
// map whole, as in the kubelet. fs must be the FlagSet NewFlagSet returned
// with o, after Parse; a nil fs counts as no flags given.
func (o *Options) Complete(fs *pflag.FlagSet) (*Config, error) {
	if o == nil {
		return nil, fmt.Errorf("config: nil Options")
	}
	changed := func(name string) bool { return fs != nil && fs.Changed(name) }

	var kf *kubeletConfigFile
	if o.configFile != "" {
		f, err := readKubeletConfig(o.configFile)
		if err != nil {
			return nil, err
		}
		kf = f
	}
	var nodeOpts *Options
	var nf *nodeConfigFile
	var notes []string
	if o.nodeConfigFile != "" {
		f, err := readNodeConfig(o.nodeConfigFile)
		if err != nil {
			return nil, err
		}
		nf = f
		nodeOpts, notes, err = applyKubeletArguments(f)
		if err != nil {
			return nil, err
		}
	}

	eff := *o
	sources := map[string]string{}
	for _, s := range settings {
		var layers []string // where the setting is given, highest first
		if changed(s.flag) {
			layers = append(layers, "--"+s.flag)
		}
		if kf != nil && s.fromKubelet != nil {
			var tmp Options
			if s.fromKubelet(&tmp, kf) {
				if len(layers) == 0 {
					s.copy(&eff, &tmp)
				}
				layers = append(layers, s.key+" in "+kf.path)
			}
		}
		if nf != nil && s.fromNodeConfig {
			if _, ok := nf.args[s.flag]; ok {
				if len(layers) == 0 {
					s.copy(&eff, nodeOpts)
				}
				layers = append(layers, "kubeletArguments."+s.flag+" in "+nf.path)
			}
		}
		if len(layers) == 0 {
			continue
		}
		sources[s.flag] = layers[0]
		for _, lower := range layers[1:] {
			notes = append(notes, fmt.Sprintf("%s is overridden by %s.", lower, layers[0]))
		}
	}
	gates, where, gNotes, err := resolveGates(o.gateLayers(changed("feature-gates"), kf, nf, nodeOpts))
	if err != nil {
		return nil, err
	}
	if where != "" {
		sources["feature-gates"] = where
	}
	notes = append(notes, gNotes...)
	kc, err := o.checkKubelet(kf, gates, where)
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
	c.KubeletConfigFile, c.KubeletConfigDir = o.kubeletConfig, o.kubeletConfigDir
	c.KubeletChecked, c.KubeletRaces = kc.checked, kc.races
	if kf != nil && kf.lenient != nil {
		c.Lenient = append(c.Lenient, *kf.lenient)
	}
	for _, l := range kc.lenient {
		c.Lenient = append(c.Lenient, *l)
	}
	// The lenient decodings first: they say what evictd did not read.
	lenient := make([]string, len(c.Lenient))
	for i, l := range c.Lenient {
		lenient[i] = l.Warning
	}
	c.Warnings = append(lenient, c.Warnings...)
	if err := c.resolveLocalStorage(kc); err != nil {
		return nil, err
	}
	for _, r := range c.KubeletRaces {
		c.Warnings = append(c.Warnings, r.Warning)
	}
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

// gateLayers lists the layers that set feature gates, highest precedence
// first: the command line's --feature-gates (when given), featureGates in
// the --config file, kubeletArguments.feature-gates in the --node-config.
func (o *Options) gateLayers(onCommandLine bool, kf *kubeletConfigFile, nf *nodeConfigFile, nodeOpts *Options) []gateLayer {
	var layers []gateLayer
	if onCommandLine {
		layers = append(layers, gateLayer{"--feature-gates", o.featureGates})
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
