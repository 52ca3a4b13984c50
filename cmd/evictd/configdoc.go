package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// The document `evictd check-config -o json|yaml` prints: every setting
// of the agent as internal/config completed it, the thresholds with their
// derived values, the capacities they were checked against, and the
// notes, warnings and errors.

// configDoc is check-config's whole document. Its lists are in a fixed
// order: Settings by name, Thresholds as the agent evaluates them,
// Capacity in signal order.
type configDoc struct {
	Settings []settingDoc `json:"settings"`
	// MemoryAvailable says which memory.available is in force, kubelet
	// 1.37's or 1.36's (config.Config.MemoryAvailableSemantics).
	MemoryAvailable string         `json:"memoryAvailable"`
	Thresholds      []thresholdDoc `json:"thresholds"`
	Capacity        []capacityDoc  `json:"capacity"`
	Notes           []string       `json:"notes"`
	Warnings        []string       `json:"warnings"`
	// Errors are the thresholds that cannot hold on the node checked:
	// the agent would set them aside (exit code 1).
	Errors []string `json:"errors"`
}

// settingDoc is one setting of the agent, named by its flag, as in
// force after --node-config, --config and the command line. Settings
// that no flag sets but that the agent derives from others name them in
// DerivedFrom.
type settingDoc struct {
	Name string `json:"name"`
	// Value is a string, bool, number, list of strings or map of strings
	// to strings; durations are Go durations ("5m0s").
	Value any `json:"value"`
	// Unit of a number: "seconds", "bytes", "evictions per second"...
	Unit        string   `json:"unit,omitempty"`
	DerivedFrom []string `json:"derivedFrom,omitempty"`
	// Source is where the value came from (config.Config.Provenance):
	// "default", "--dry-run", "evictionHard in /etc/evictd/config.yaml";
	// a map's keys from several places name each once, in key order.
	// Empty for the settings derived from others.
	Source string `json:"source,omitempty"`
}

// thresholdDoc is one threshold in force, derived ones included.
type thresholdDoc struct {
	Signal   signals.Signal `json:"signal"`
	Operator string         `json:"operator"`
	// Value is as written: "100Mi", "10%", or the stall's "20%".
	Value string `json:"value"`
	// Kind is "hard", "soft" or "soft (as hard)" (a grace period of 0).
	Kind        string `json:"kind"`
	GracePeriod string `json:"gracePeriod,omitempty"`
	MinReclaim  string `json:"minReclaim,omitempty"`
	// Source says where it was set, or what it was derived from.
	Source  string `json:"source"`
	Derived bool   `json:"derived,omitempty"`
	// Quantity is the value in the signal's unit (bytes, inodes, PIDs)
	// against the capacity checked; absent when that capacity is not
	// known or the threshold is a stall's share of time.
	Quantity *int64 `json:"quantity,omitempty"`
}

// capacityDoc is one signal's capacity as the thresholds were checked
// against it, or why they were not.
type capacityDoc struct {
	Signal signals.Signal `json:"signal"`
	// Checked is false when the capacity is not known: neither given by
	// a --node-* flag nor readable on this machine.
	Checked  bool   `json:"checked"`
	Capacity *int64 `json:"capacity,omitempty"`
	// From is the flag that gave it ("--node-memory"), or "this node".
	From string `json:"from,omitempty"`
	// Reason says why it was not checked.
	Reason string `json:"reason,omitempty"`
}

// effectiveSettings lists every setting of cfg, sorted by name: each of
// the agent's flags (TestSettingsCoverEveryFlag keeps the list whole) and
// the durations derived from them.
func effectiveSettings(cfg *config.Config) []settingDoc {
	dur := func(d time.Duration) string { return d.String() }
	list := func(l []string) []string {
		if l == nil {
			return []string{}
		}
		return slices.Clone(l)
	}
	ev := evictionMaps(cfg)
	reserved := func(flag string) map[string]string {
		m := cfg.SystemReserved
		if flag == "kube-reserved" {
			m = cfg.KubeReserved
		}
		out := map[string]string{}
		for k, q := range m {
			out[k] = q.String()
		}
		return out
	}
	hk := []string{"housekeeping-interval"}
	out := []settingDoc{
		{Name: "eviction-hard", Value: ev.hard},
		{Name: "eviction-soft", Value: ev.soft},
		{Name: "eviction-soft-grace-period", Value: ev.grace},
		{Name: "eviction-minimum-reclaim", Value: ev.reclaim},
		{Name: "eviction-max-pod-grace-period", Value: cfg.MaxPodGracePeriodSeconds, Unit: "seconds"},
		{Name: "eviction-pressure-transition-period", Value: dur(cfg.PressureTransitionPeriod)},
		{Name: "merge-default-eviction-settings", Value: cfg.Settings.MergeDefaults},
		{Name: "kernel-memcg-notification", Value: cfg.KernelMemcgNotification},
		{Name: "enforce-node-allocatable", Value: list(cfg.EnforceNodeAllocatable)},
		{Name: "system-reserved", Value: reserved("system-reserved")},
		{Name: "kube-reserved", Value: reserved("kube-reserved")},
		{Name: "root-dir", Value: cfg.RootDir},
		{Name: "cgroup-root", Value: cfg.CgroupRoot},
		{Name: "cgroup-driver", Value: cfg.CgroupDriver},
		{Name: "container-runtime-endpoint", Value: cfg.ContainerRuntimeEndpoint},
		{Name: "image-service-endpoint", Value: cfg.ImageServiceEndpoint},
		{Name: "minimum-image-ttl-duration", Value: dur(cfg.MinimumImageTTL)},
		{Name: "kubeconfig", Value: cfg.Kubeconfig},
		{Name: "kubeconfig-optional", Value: cfg.KubeconfigOptional},
		{Name: "kubeconfig-in-cluster", Value: cfg.KubeconfigInCluster},
		{Name: "standalone-stop", Value: cfg.StandaloneStop},
		{Name: "trusted-daemonset-namespaces", Value: list(cfg.TrustedDaemonSetNamespaces)},
		// The node name in force: --hostname-override, or the machine's
		// hostname, lowercased.
		{Name: "hostname-override", Value: cfg.NodeName},
		{Name: "node-status-update-frequency", Value: dur(cfg.NodeStatusUpdateFrequency)},
		{Name: "node-status-report-frequency", Value: dur(cfg.NodeStatusReportFrequency)},
		{Name: "feature-gates", Value: map[string]bool{config.HugepageAwareEvictionGate: cfg.HugepageAwareEviction}},
		{Name: "config", Value: cfg.ConfigFile},
		{Name: "config-dir", Value: cfg.ConfigDir},
		{Name: "import-kubelet-config", Value: cfg.ImportedKubeletConfig},
		{Name: "node-config", Value: cfg.NodeConfigFile},
		{Name: "kubelet-config", Value: cfg.KubeletConfigFile},
		{Name: "kubelet-config-dir", Value: cfg.KubeletConfigDir},
		{Name: "lease-duration", Value: dur(cfg.LeaseDuration)},
		{Name: "lease-namespace", Value: cfg.LeaseNamespace},
		{Name: "impersonate-node", Value: cfg.ImpersonateNode},
		{Name: "token-renewal", Value: cfg.TokenRenewal},
		{Name: "token-renew-before", Value: dur(cfg.TokenRenewBefore)},
		{Name: "token-lifetime", Value: dur(cfg.TokenLifetime)},
		{Name: "housekeeping-interval", Value: dur(cfg.HousekeepingInterval)},
		{Name: "dry-run", Value: cfg.DryRun},
		{Name: "hard-eviction-local-stop", Value: cfg.HardEvictionLocalStop},
		{Name: "hard-eviction-direct-signal", Value: cfg.HardEvictionDirectSignal},
		{Name: "hard-eviction-stop-wait", Value: dur(cfg.HardEvictionStopWait)},
		{Name: "local-kill-after", Value: dur(cfg.LocalKillAfter)},
		{Name: "metrics-bind-address", Value: cfg.MetricsBindAddress},
		{Name: "healthz-bind-address", Value: cfg.HealthzBindAddress},
		{Name: "metrics-tls-cert-file", Value: cfg.MetricsTLSCertFile},
		{Name: "metrics-tls-private-key-file", Value: cfg.MetricsTLSPrivateKeyFile},
		{Name: "metrics-bearer-token-file", Value: cfg.MetricsBearerTokenFile},
		{Name: "metrics-delegated-auth", Value: cfg.MetricsDelegatedAuth},
		{Name: "imagefs-path", Value: cfg.ImageFSPath},
		{Name: "proc-root", Value: cfg.ProcRoot},
		{Name: "cgroup-mount", Value: cfg.CgroupMount},
		{Name: "log-level", Value: logLevelName(cfg.LogLevel)},
		{Name: "log-format", Value: cfg.LogFormat},
		{Name: "runtime-request-timeout", Value: dur(cfg.RuntimeRequestTimeout)},
		{Name: "pod-logs-dir", Value: cfg.PodLogsDir},
		{Name: "volume-stats-agg-period", Value: dur(cfg.VolumeStatsAggPeriod)},
		{Name: "fast-poll-interval", Value: dur(cfg.FastPollInterval)},
		{Name: "fast-poll-margin", Value: cfg.FastPollMargin.String()},
		{Name: "eviction-time-to-exhaustion", Value: cfg.TimeToExhaustion},
		{Name: "eviction-time-to-exhaustion-margin", Value: dur(cfg.TimeToExhaustionMargin)},
		{Name: "state-dir", Value: cfg.StateDir},
		{Name: "flight-records", Value: cfg.FlightRecords},
		{Name: "flight-records-max-bytes", Value: cfg.FlightRecordsMaxBytes, Unit: "bytes"},
		{Name: "max-evictions-per-hour", Value: cfg.MaxEvictionsPerHour, Unit: "evictions per hour"},
		{Name: "local-storage-eviction-qps", Value: cfg.LocalStorageEvictionQPS, Unit: "evictions per second"},
		{Name: "local-storage-eviction", Value: cfg.LocalStorageEviction},
		{Name: "local-storage-eviction-burst", Value: cfg.LocalStorageEvictionBurst, Unit: "evictions"},
		{Name: "pressure-taint-effect", Value: cfg.TaintEffect},

		// Derived by internal/config (config.Durations), no flag of their own.
		{Name: "max-observation-age", Value: dur(cfg.MaxObservationAge), DerivedFrom: hk},
		{Name: "stuck-after", Value: dur(cfg.StuckAfter), DerivedFrom: hk},
		{Name: "disk-stats-max-age", Value: dur(cfg.DiskStatsMaxAge), DerivedFrom: hk},
		{Name: "runtime-retry", Value: dur(cfg.RuntimeRetry), DerivedFrom: hk},
		{Name: "runtime-retry-max", Value: dur(cfg.RuntimeRetryMax), DerivedFrom: hk},
		{Name: "cleanup-timeout", Value: dur(cfg.CleanupTimeout), DerivedFrom: []string{"the kubelet's podCleanupTimeout"}},
		{Name: "system-reserved-memory", Value: cfg.SystemReservedMemory, Unit: "bytes", DerivedFrom: []string{"system-reserved"}},
		{Name: "kube-reserved-memory", Value: cfg.KubeReservedMemory, Unit: "bytes", DerivedFrom: []string{"kube-reserved"}},
	}
	sources := settingSources(cfg)
	for i := range out {
		switch src, ok := sources[out[i].Name]; {
		case len(out[i].DerivedFrom) > 0:
		case ok:
			out[i].Source = src
		case out[i].Value != "":
			// --config and --config-dir: on the command line alone.
			out[i].Source = "--" + out[i].Name
		default:
			out[i].Source = "default"
		}
	}
	slices.SortFunc(out, func(a, b settingDoc) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// settingSources is where each flag's value came from, by flag name, from
// cfg's provenance: a map set key by key from several places names each
// place once, in key order.
func settingSources(cfg *config.Config) map[string]string {
	byFlag := map[string][]string{}
	for _, s := range cfg.Provenance() {
		src := s.Source.String()
		if !slices.Contains(byFlag[s.Flag], src) {
			byFlag[s.Flag] = append(byFlag[s.Flag], src)
		}
	}
	out := make(map[string]string, len(byFlag))
	for flag, srcs := range byFlag {
		out[flag] = strings.Join(srcs, ", ")
	}
	return out
}

// evictionSettings are the eviction maps in force, signal to value, as
// --eviction-hard and the others write them: the thresholds the operator
// set (as written) or the defaults, without the derived ones. A stall
// threshold's value keeps its operator (">20"): the others' is "<".
type evictionSettings struct {
	hard, soft, grace, reclaim map[string]string
}

func evictionMaps(cfg *config.Config) evictionSettings {
	e := evictionSettings{hard: map[string]string{}, soft: map[string]string{}, grace: map[string]string{}, reclaim: map[string]string{}}
	for _, th := range cfg.Thresholds {
		if th.Source == thresholds.SourceAllocatable {
			continue
		}
		sig := string(th.Signal)
		v := writtenValue(cfg, th)
		if th.Operator == thresholds.GreaterThan {
			v = ">" + v // a stall's: memory.pressure.full.avg10>20
		}
		if th.Soft {
			e.soft[sig] = v
			e.grace[sig] = th.GracePeriod.String()
			if raw, ok := cfg.Settings.SoftGracePeriod[sig]; ok {
				e.grace[sig] = raw
			}
		} else {
			e.hard[sig] = v
		}
		if th.MinReclaim != nil {
			e.reclaim[sig] = th.MinReclaim.String()
			if raw, ok := cfg.Settings.MinimumReclaim[sig]; ok {
				e.reclaim[sig] = raw
			}
		}
	}
	return e
}

// logLevelName is a slog level as --log-level takes it.
func logLevelName(l slog.Level) string { return strings.ToLower(l.String()) }

// thresholdDocs describes ths, the thresholds in force for layout with
// the containerfs ones derived, each with its quantity where obs gives
// its signal's capacity. raw are the settings as written.
func thresholdDocs(cfg *config.Config, layout signals.FsLayout, obs signals.Observations) []thresholdDoc {
	own := map[thresholds.Key]bool{}
	for _, th := range cfg.Thresholds {
		own[th.Key()] = th.Source != thresholds.SourceAllocatable
	}
	all := thresholds.DeriveContainerFs(cfg.Thresholds, layout)
	out := make([]thresholdDoc, 0, len(all))
	for _, th := range all {
		d := thresholdDoc{
			Signal:   th.Signal,
			Operator: th.Operator.String(),
			Value:    writtenValue(cfg, th),
			Kind:     th.Kind(),
			Source:   th.Source,
			Derived:  !own[th.Key()],
		}
		if th.Soft {
			d.GracePeriod = th.GracePeriod.String()
			if th.GracePeriod == 0 {
				d.Kind = "soft (as hard)"
			}
		}
		if th.MinReclaim != nil {
			d.MinReclaim = th.MinReclaim.String()
			if raw, ok := cfg.Settings.MinimumReclaim[string(th.Signal)]; ok {
				d.MinReclaim = raw
			}
		}
		if o, ok := obs[th.Signal]; ok && o.Capacity > 0 && !th.Signal.Stall() {
			q := thresholds.Quantity(th.Value, o.Capacity)
			d.Quantity = &q
		}
		out = append(out, d)
	}
	return out
}

// writtenValue is th's value as the operator wrote it in the map it came
// from, else as thresholds formats it.
func writtenValue(cfg *config.Config, th thresholds.Threshold) string {
	m, src := cfg.Settings.Hard, cmp.Or(cfg.Settings.HardSource, "--eviction-hard")
	if th.Soft {
		m, src = cfg.Settings.Soft, cmp.Or(cfg.Settings.SoftSource, "--eviction-soft")
	}
	if raw, ok := m[string(th.Signal)]; ok && th.Source == src {
		return strings.TrimPrefix(raw, ">")
	}
	return thresholds.FormatValue(th)
}

// String writes a capacity line for the text output.
func (c capacityDoc) String() string {
	if !c.Checked {
		return fmt.Sprintf("%s: capacity not checked: %s", c.Signal, c.Reason)
	}
	return fmt.Sprintf("%s: %s (%s)", c.Signal, amount(c.Signal, *c.Capacity), c.From)
}
