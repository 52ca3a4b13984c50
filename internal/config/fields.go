package config

import (
	"maps"
	"slices"
	"time"
)

// field is one of the agent's settings as evictd's configuration file
// (AgentConfiguration) writes it: its flag, its field name in the file, and
// where Options holds its value.
type field struct {
	flag string
	// name is the JSON (and YAML) key in the file: the KubeletConfiguration
	// field's name where the flag is the kubelet's and the kubelet's file
	// has it, the flag's name in camelCase otherwise (acronyms upper case,
	// as in the kubelet's: metricsTLSCertFile, localStorageEvictionQPS).
	name string
	// ptr returns the address of the Options field the flag sets: a
	// *string, *bool, *int, *int32, *float64, *time.Duration, *[]string,
	// *map[string]string or *map[string]bool.
	ptr func(o *Options) any
}

// fields lists every agent flag that the file can set, in the order of
// docs/CONFIGURATION.md's example. TestEveryFlagHasAField keeps it
// complete: a new flag needs a line here or in commandLineOnly.
var fields = []field{
	// Thresholds.
	{"eviction-hard", "evictionHard", func(o *Options) any { return &o.evictionHard }},
	{"eviction-soft", "evictionSoft", func(o *Options) any { return &o.evictionSoft }},
	{"eviction-soft-grace-period", "evictionSoftGracePeriod", func(o *Options) any { return &o.softGracePeriod }},
	{"eviction-minimum-reclaim", "evictionMinimumReclaim", func(o *Options) any { return &o.minimumReclaim }},
	{"eviction-pressure-transition-period", "evictionPressureTransitionPeriod", func(o *Options) any { return &o.pressureTransitionPeriod }},
	{"merge-default-eviction-settings", "mergeDefaultEvictionSettings", func(o *Options) any { return &o.mergeDefaults }},
	{"enforce-node-allocatable", "enforceNodeAllocatable", func(o *Options) any { return &o.enforceNodeAllocatable }},
	{"system-reserved", "systemReserved", func(o *Options) any { return &o.systemReserved }},
	{"kube-reserved", "kubeReserved", func(o *Options) any { return &o.kubeReserved }},
	{"feature-gates", "featureGates", func(o *Options) any { return &o.featureGates }},
	// Passes and wake-ups.
	{"housekeeping-interval", "housekeepingInterval", func(o *Options) any { return &o.housekeepingInterval }},
	{"kernel-memcg-notification", "kernelMemcgNotification", func(o *Options) any { return &o.kernelMemcgNotification }},
	{"fast-poll-interval", "fastPollInterval", func(o *Options) any { return &o.fastPollInterval }},
	{"fast-poll-margin", "fastPollMargin", func(o *Options) any { return &o.fastPollMargin }},
	{"eviction-time-to-exhaustion", "evictionTimeToExhaustion", func(o *Options) any { return &o.timeToExhaustion }},
	{"eviction-time-to-exhaustion-margin", "evictionTimeToExhaustionMargin", func(o *Options) any { return &o.exhaustionMargin }},
	// Eviction.
	{"eviction-max-pod-grace-period", "evictionMaxPodGracePeriod", func(o *Options) any { return &o.maxPodGracePeriod }},
	{"max-evictions-per-hour", "maxEvictionsPerHour", func(o *Options) any { return &o.maxEvictionsPerHour }},
	{"local-storage-eviction", "localStorageEviction", func(o *Options) any { return &o.localStorageEviction }},
	{"local-storage-eviction-burst", "localStorageEvictionBurst", func(o *Options) any { return &o.localStorageBurst }},
	{"local-storage-eviction-qps", "localStorageEvictionQPS", func(o *Options) any { return &o.localStorageQPS }},
	{"hard-eviction-local-stop", "hardEvictionLocalStop", func(o *Options) any { return &o.localStop }},
	{"hard-eviction-direct-signal", "hardEvictionDirectSignal", func(o *Options) any { return &o.directSignal }},
	{"hard-eviction-stop-wait", "hardEvictionStopWait", func(o *Options) any { return &o.stopWait }},
	{"local-kill-after", "localKillAfter", func(o *Options) any { return &o.localKillAfter }},
	{"dry-run", "dryRun", func(o *Options) any { return &o.dryRun }},
	{"state-dir", "stateDir", func(o *Options) any { return &o.stateDir }},
	{"flight-records", "flightRecords", func(o *Options) any { return &o.flightRecords }},
	{"flight-records-max-bytes", "flightRecordsMaxBytes", func(o *Options) any { return &o.flightRecordsBytes }},
	// Disk, the container runtime and reclaim.
	{"root-dir", "rootDir", func(o *Options) any { return &o.rootDir }},
	{"imagefs-path", "imagefsPath", func(o *Options) any { return &o.imageFSPath }},
	{"container-runtime-endpoint", "containerRuntimeEndpoint", func(o *Options) any { return &o.containerRuntimeEndpoint }},
	{"image-service-endpoint", "imageServiceEndpoint", func(o *Options) any { return &o.imageServiceEndpoint }},
	{"runtime-request-timeout", "runtimeRequestTimeout", func(o *Options) any { return &o.runtimeTimeout }},
	{"minimum-image-ttl-duration", "imageMinimumGCAge", func(o *Options) any { return &o.minimumImageTTL }},
	{"pod-logs-dir", "podLogsDir", func(o *Options) any { return &o.podLogsDir }},
	{"volume-stats-agg-period", "volumeStatsAggPeriod", func(o *Options) any { return &o.volumeStatsAgg }},
	// The node's cgroups and /proc.
	{"cgroup-root", "cgroupRoot", func(o *Options) any { return &o.cgroupRoot }},
	{"cgroup-driver", "cgroupDriver", func(o *Options) any { return &o.cgroupDriver }},
	{"cgroup-mount", "cgroupMount", func(o *Options) any { return &o.cgroupMount }},
	{"proc-root", "procRoot", func(o *Options) any { return &o.procRoot }},
	// API server.
	{"kubeconfig", "kubeconfig", func(o *Options) any { return &o.kubeconfig }},
	{"kubeconfig-optional", "kubeconfigOptional", func(o *Options) any { return &o.kubeconfigOptional }},
	{"kubeconfig-in-cluster", "kubeconfigInCluster", func(o *Options) any { return &o.kubeconfigInCluster }},
	{"trusted-daemonset-namespaces", "trustedDaemonsetNamespaces", func(o *Options) any { return &o.trustedDSNamespaces }},
	{"standalone-stop", "standaloneStop", func(o *Options) any { return &o.standaloneStop }},
	{"hostname-override", "hostnameOverride", func(o *Options) any { return &o.hostnameOverride }},
	{"token-renewal", "tokenRenewal", func(o *Options) any { return &o.tokenRenewal }},
	{"token-renew-before", "tokenRenewBefore", func(o *Options) any { return &o.tokenRenewBefore }},
	{"token-lifetime", "tokenLifetime", func(o *Options) any { return &o.tokenLifetime }},
	{"impersonate-node", "impersonateNode", func(o *Options) any { return &o.impersonateNode }},
	{"node-status-update-frequency", "nodeStatusUpdateFrequency", func(o *Options) any { return &o.nodeStatusUpdateFrequency }},
	{"node-status-report-frequency", "nodeStatusReportFrequency", func(o *Options) any { return &o.nodeStatusReportFrequency }},
	{"pressure-taint-effect", "pressureTaintEffect", func(o *Options) any { return &o.taintEffect }},
	{"lease-duration", "leaseDuration", func(o *Options) any { return &o.leaseDuration }},
	{"lease-namespace", "leaseNamespace", func(o *Options) any { return &o.leaseNamespace }},
	// Metrics and HTTP.
	{"metrics-bind-address", "metricsBindAddress", func(o *Options) any { return &o.metricsBindAddress }},
	{"healthz-bind-address", "healthzBindAddress", func(o *Options) any { return &o.healthzBindAddress }},
	{"metrics-tls-cert-file", "metricsTLSCertFile", func(o *Options) any { return &o.metricsTLSCert }},
	{"metrics-tls-private-key-file", "metricsTLSPrivateKeyFile", func(o *Options) any { return &o.metricsTLSKey }},
	{"metrics-bearer-token-file", "metricsBearerTokenFile", func(o *Options) any { return &o.metricsTokenFile }},
	{"metrics-delegated-auth", "metricsDelegatedAuth", func(o *Options) any { return &o.metricsDelegatedAuth }},
	// Logging.
	{"log-level", "logLevel", func(o *Options) any { return &o.logLevel }},
	{"log-format", "logFormat", func(o *Options) any { return &o.logFormat }},
	// Other files: the imports, read below this file, and the kubelet's
	// own configuration, read only to check it.
	{"import-kubelet-config", "importKubeletConfig", func(o *Options) any { return &o.importKubeletConfig }},
	{"node-config", "nodeConfig", func(o *Options) any { return &o.nodeConfigFile }},
	{"kubelet-config", "kubeletConfig", func(o *Options) any { return &o.kubeletConfig }},
	{"kubelet-config-dir", "kubeletConfigDir", func(o *Options) any { return &o.kubeletConfigDir }},
}

// commandLineOnly are the agent's flags that the file cannot set, with
// the reason.
var commandLineOnly = map[string]string{
	"config":     "it names the file itself",
	"config-dir": "it names the drop-ins' directory, read with the file",
	// cmd/evictd adds it to the agent's flags.
	"version": "it prints the version and exits, a command rather than a setting",
}

// fieldsByFlag and fieldsByName index fields.
var fieldsByFlag, fieldsByName = func() (map[string]*field, map[string]*field) {
	byFlag, byName := make(map[string]*field, len(fields)), make(map[string]*field, len(fields))
	for i := range fields {
		f := &fields[i]
		byFlag[f.flag], byName[f.name] = f, f
	}
	return byFlag, byName
}()

// FileField returns the name of flag's field in evictd's configuration
// file (AgentConfiguration), e.g. "evictionHard" for "eviction-hard"; ok is
// false for a flag the file cannot set (CommandLineOnly) or no agent flag.
func FileField(flag string) (name string, ok bool) {
	if f := fieldsByFlag[flag]; f != nil {
		return f.name, true
	}
	return "", false
}

// CommandLineOnly says why flag, an agent flag, has no field in evictd's
// configuration file; ok is false for every other flag.
func CommandLineOnly(flag string) (reason string, ok bool) {
	reason, ok = commandLineOnly[flag]
	return reason, ok
}

// copyTo sets f in dst to its value in src; maps and lists are copied, not
// shared.
func (f *field) copyTo(dst, src *Options) {
	switch d := f.ptr(dst).(type) {
	case *string:
		*d = *f.ptr(src).(*string)
	case *bool:
		*d = *f.ptr(src).(*bool)
	case *int:
		*d = *f.ptr(src).(*int)
	case *int32:
		*d = *f.ptr(src).(*int32)
	case *float64:
		*d = *f.ptr(src).(*float64)
	case *time.Duration:
		*d = *f.ptr(src).(*time.Duration)
	case *[]string:
		*d = slices.Clone(*f.ptr(src).(*[]string))
	case *map[string]string:
		*d = maps.Clone(*f.ptr(src).(*map[string]string))
	case *map[string]bool:
		*d = maps.Clone(*f.ptr(src).(*map[string]bool))
	default:
		panic("config: field " + f.name + " of an unknown type")
	}
}

// isMap reports whether f is a map of strings, merged key by key by the
// drop-ins.
func (f *field) isMap(o *Options) bool {
	_, ok := f.ptr(o).(*map[string]string)
	return ok
}
