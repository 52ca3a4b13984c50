package config

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// Config is evictd's effective, validated configuration.
type Config struct {
	// Thresholds are the parsed eviction thresholds, hard and soft,
	// including the defaults and derived allocatableMemory.available ones.
	Thresholds []thresholds.Threshold
	// Settings are the eviction maps as written, with where each came from.
	Settings thresholds.Settings
	// MaxPodGracePeriodSeconds caps a soft eviction's grace period, in
	// seconds; negative defers to the pod's terminationGracePeriodSeconds.
	// Default 0.
	MaxPodGracePeriodSeconds int32
	// KernelMemcgNotification wakes a pass on memcg threshold events.
	// Default true (the kubelet's is false).
	KernelMemcgNotification bool
	// EnforceNodeAllocatable lists the enforcement levels. Default [pods].
	EnforceNodeAllocatable []string
	// SystemReserved and KubeReserved are the reservations by resource
	// name (cpu, memory, ephemeral-storage, pid). Default none.
	SystemReserved map[string]resource.Quantity
	KubeReserved   map[string]resource.Quantity
	// SystemReservedMemory and KubeReservedMemory are their memory, in
	// bytes (0 when not reserved).
	SystemReservedMemory int64
	KubeReservedMemory   int64

	// HugepageAwareEviction is the kubelet's feature gate of that name
	// (beta and on by default from kubelet 1.37): memory.available is
	// MemTotal minus the node's hugepage capacity minus the root cgroup's
	// working set. false computes it as kubelet 1.36 does, the hugepages
	// left in. Set by --feature-gates=HugepageAwareEviction=false,
	// featureGates in --config or kubeletArguments.feature-gates in
	// --node-config (Sources["feature-gates"] says which); default true.
	HugepageAwareEviction bool

	// NodeName is --hostname-override or the machine's hostname, lowercased.
	NodeName string
	// RootDir is the kubelet's root directory (nodefs). Default /var/lib/kubelet.
	RootDir string
	// CgroupRoot is the pods' cgroup parent's root. Default "/".
	CgroupRoot string
	// CgroupDriver is "cgroupfs" (default) or "systemd".
	CgroupDriver string
	// ContainerRuntimeEndpoint is the CRI runtime socket URL. Default
	// unix:///run/containerd/containerd.sock.
	ContainerRuntimeEndpoint string
	// ImageServiceEndpoint is the CRI image socket URL; the runtime
	// endpoint unless set.
	ImageServiceEndpoint string
	// Kubeconfig is evictd's own kubeconfig path; "" means in-cluster.
	Kubeconfig string
	// KubeconfigOptional (--kubeconfig-optional) makes a Kubeconfig that
	// does not exist mean standalone rather than a refusal to start.
	KubeconfigOptional bool
	// KubeconfigInCluster (--kubeconfig-in-cluster) reaches the API
	// server at KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT rather
	// than at the Kubeconfig's server. Default false.
	KubeconfigInCluster bool
	// StandaloneStop (--standalone-stop) makes standalone evictd (no
	// Kubeconfig, or an optional one not written yet) kill, through the
	// container runtime, the containers of the pod a hard memory or PID
	// threshold evicts, rather than evicting nothing.
	StandaloneStop bool
	// TrustedDaemonSetNamespaces (--trusted-daemonset-namespaces, default
	// kube-system) are the namespaces whose DaemonSet pods rank after the
	// other pods of their tier.
	TrustedDaemonSetNamespaces []string
	// LeaseNamespace is the namespace of evictd's Lease, a DNS label.
	// --lease-namespace, default kube-system.
	LeaseNamespace string
	// ImpersonateNode reads, deletes and evicts the node's pods as
	// system:node:<node> (--impersonate-node, default true).
	ImpersonateNode bool
	// TokenRenewal renews the kubeconfig's tokenFile when it holds a
	// node-bound ServiceAccount token (--token-renewal, default true);
	// Durations.TokenRenewBefore and TokenLifetime say when and for how
	// long.
	TokenRenewal bool

	// Durations are the duration flags, validated, and every duration
	// derived from them, one field each (cfg.HousekeepingInterval,
	// cfg.MaxObservationAge...).
	Durations

	// DryRun decides and reports but acts on nothing.
	DryRun bool
	// HardEvictionLocalStop also stops a hard eviction's pod's containers
	// through the CRI once the kubelet has taken the pod over, at most
	// HardEvictionStopWait after the eviction began. Default true.
	HardEvictionLocalStop bool
	// HardEvictionDirectSignal sends a hard eviction's SIGTERM to the
	// containers' main processes itself, for pods whose restartPolicy is
	// Always (evict.Config.SignalLocally). Default true.
	HardEvictionDirectSignal bool
	// MetricsBindAddress is host:port for /metrics. Default 127.0.0.1:9847.
	MetricsBindAddress string
	// HealthzBindAddress is host:port for /healthz and /readyz alone, the
	// probes' own listener; its port is not MetricsBindAddress's. Default
	// "": none, the probes ask MetricsBindAddress.
	HealthzBindAddress string
	// MetricsTLSCertFile and MetricsTLSPrivateKeyFile, both or neither,
	// make the endpoints serve TLS; the key file is mode 0600 or
	// stricter (secretfile.Check). Default none.
	MetricsTLSCertFile, MetricsTLSPrivateKeyFile string
	// MetricsBearerTokenFile holds the token /metrics and /status ask
	// for; mode 0600 or stricter (secretfile.Check). Default none.
	MetricsBearerTokenFile string
	// MetricsDelegatedAuth has the API server review the bearer tokens
	// of /metrics and /status (TokenReview, SubjectAccessReview);
	// needs Kubeconfig. Default false.
	MetricsDelegatedAuth bool
	// ImageFSPath is a path on the image filesystem; "" asks the CRI.
	ImageFSPath string
	// ProcRoot and CgroupMount are where procfs and cgroupfs are mounted.
	// Defaults /proc and /sys/fs/cgroup.
	ProcRoot    string
	CgroupMount string
	// LogLevel is the least severe level logged. Default info.
	LogLevel slog.Level
	// LogFormat is how log lines are written: "text" (default) or "json".
	LogFormat string
	// TaintEffect is the effect of evictd's pressure taints: NoSchedule
	// (default), PreferNoSchedule or NoExecute.
	TaintEffect string
	// PodLogsDir holds the containers' logs. Default /var/log/pods.
	PodLogsDir string
	// FastPollMargin is how close to a memory threshold the available
	// memory must come for the fast poll (Durations.FastPollInterval) to
	// run: a quantity in bytes, or a fraction of the signal's capacity.
	// Default 10%.
	FastPollMargin thresholds.Value
	// TimeToExhaustion is --eviction-time-to-exhaustion: act on a hard
	// memory threshold before it is met when the memory runs out sooner
	// than evictd can release it (decide.ExhaustionConfig), with
	// Durations.TimeToExhaustionMargin. Default false.
	TimeToExhaustion bool
	// MaxEvictionsPerHour caps the evictions issued in a sliding hour; 0
	// means no cap. Default 60.
	MaxEvictionsPerHour int
	// StateDir is where evictd keeps its flight records, in records/.
	// Default /var/lib/evictd.
	StateDir string
	// FlightRecords (default 200; 0 keeps none) and FlightRecordsMaxBytes
	// (default 64Mi) bound the flight records kept.
	FlightRecords         int
	FlightRecordsMaxBytes int64
	// LocalStorageEvictionQPS (evictions per second; 0 = no limit, default
	// 0.1) and LocalStorageEvictionBurst (default 5) rate-limit the
	// evictions of pods over their own local-storage limits.
	LocalStorageEvictionQPS   float64
	LocalStorageEvictionBurst int
	// LocalStorageEviction is LocalStorageEvictd (default) or
	// LocalStorageKubelet: which agent evicts the pods over their own
	// local-storage limits (--local-storage-eviction).
	LocalStorageEviction string
	// KubeletLocalStorage is the kubelet's localStorageCapacityIsolation
	// as its configuration says (default true), nil when no kubelet
	// configuration was checked.
	KubeletLocalStorage *bool
	// ConfigFile is --config, evictd's configuration file (or, deprecated,
	// a KubeletConfiguration, then also ImportedKubeletConfig); ConfigDir
	// is --config-dir and ConfigDropIns the drop-ins read from it, in the
	// order they were merged. "" or nil if none.
	ConfigFile    string
	ConfigDir     string
	ConfigDropIns []string
	// ImportedKubeletConfig is the KubeletConfiguration evictd imported
	// settings from: --import-kubelet-config, or a KubeletConfiguration
	// given to --config; NodeConfigFile is --node-config. "" if none.
	ImportedKubeletConfig string
	NodeConfigFile        string
	// KubeletConfigFile and KubeletConfigDir are --kubelet-config and
	// --kubelet-config-dir, "" if not given.
	KubeletConfigFile, KubeletConfigDir string
	// KubeletChecked says whether a kubelet configuration was checked
	// (--kubelet-config, the KubeletConfiguration imported or
	// --kubelet-config-dir given), and KubeletRaces what in it races
	// evictd; each is also in Warnings.
	KubeletChecked bool
	KubeletRaces   []KubeletRace
	// Lenient are the files (the KubeletConfiguration imported, evictd's
	// --config file and its drop-ins, --kubelet-config, the
	// --kubelet-config-dir drop-ins) that strict decoding refused for
	// unknown or duplicate fields only and that were decoded leniently, as
	// the kubelet does its own; each one's Warning is also in Warnings.
	Lenient []LenientDecoding
	// Deprecations say what in the command line or the files is
	// deprecated and what to use instead: a KubeletConfiguration given to
	// --config. Each is also in Warnings, after the lenient decodings'.
	Deprecations []string

	// Sources names, by flag name, where each setting not left at its
	// default came from: "--eviction-hard", "evictionHard in FILE" (the
	// --config file, a drop-in or the KubeletConfiguration imported),
	// "kubeletArguments.eviction-hard in FILE"; for a map that drop-ins
	// merged over a lower layer's, each place, lowest first, joined by
	// " + ". Provenance says it setting by setting, map key by map key.
	Sources map[string]string
	// provenance is what Provenance returns.
	provenance []Setting
	// Notes are sentences for the startup log.
	Notes []string
	// Warnings are settings that are valid but contradict each other (a
	// soft threshold that can never act before its hard one); logged at
	// Warn at startup and printed by check-config.
	Warnings []string
}

// validate checks the merged options in one place, collecting every error,
// then parses the eviction thresholds with thresholds.Parse, whose error
// (the kubelet's text after the source's name) is returned as is.
func (o *Options) validate(sources map[string]string, nf *nodeConfigFile, notes []string) (*Config, error) {
	src := func(flag string) string {
		if s, ok := sources[flag]; ok {
			return s
		}
		return "--" + flag
	}
	var errs []error
	bad := func(flag, value, why string) {
		errs = append(errs, fmt.Errorf("%s: invalid value %q: %s", src(flag), value, why))
	}
	c := &Config{
		MaxPodGracePeriodSeconds:   o.maxPodGracePeriod,
		KernelMemcgNotification:    o.kernelMemcgNotification,
		EnforceNodeAllocatable:     slices.Clone(o.enforceNodeAllocatable),
		RootDir:                    o.rootDir,
		CgroupRoot:                 o.cgroupRoot,
		CgroupDriver:               o.cgroupDriver,
		Kubeconfig:                 o.kubeconfig,
		KubeconfigOptional:         o.kubeconfigOptional,
		KubeconfigInCluster:        o.kubeconfigInCluster,
		StandaloneStop:             o.standaloneStop,
		TrustedDaemonSetNamespaces: slices.Clone(o.trustedDSNamespaces),
		LeaseNamespace:             o.leaseNamespace,
		ImpersonateNode:            o.impersonateNode,
		TokenRenewal:               o.tokenRenewal,
		DryRun:                     o.dryRun,
		HardEvictionLocalStop:      o.localStop,
		HardEvictionDirectSignal:   o.directSignal,
		MetricsBindAddress:         o.metricsBindAddress,
		HealthzBindAddress:         o.healthzBindAddress,
		ImageFSPath:                o.imageFSPath,
		PodLogsDir:                 o.podLogsDir,
		MaxEvictionsPerHour:        o.maxEvictionsPerHour,
		TimeToExhaustion:           o.timeToExhaustion,
		StateDir:                   o.stateDir,
		FlightRecords:              o.flightRecords,
		LocalStorageEvictionQPS:    o.localStorageQPS,
		LocalStorageEvictionBurst:  o.localStorageBurst,
		LocalStorageEviction:       o.localStorageEviction,
		ProcRoot:                   o.procRoot,
		CgroupMount:                o.cgroupMount,
		ConfigFile:                 o.configFile,
		NodeConfigFile:             o.nodeConfigFile,
		Sources:                    sources,
		Notes:                      notes,
	}
	// Every duration is checked and derived in durations.go.
	c.Durations = o.durations(bad)
	if o.kubeconfigOptional && o.kubeconfig == "" {
		c.Notes = append(c.Notes, "--kubeconfig-optional has no effect without --kubeconfig: evictd runs standalone.")
	}
	if o.kubeconfigInCluster && o.kubeconfig == "" {
		bad("kubeconfig-in-cluster", "true", "needs "+src("kubeconfig")+", which names the credentials and the CA")
	}

	if o.flightRecords < 0 {
		bad("flight-records", strconv.Itoa(o.flightRecords), "must not be negative (0 keeps none)")
	}
	if q, err := resource.ParseQuantity(o.flightRecordsBytes); err != nil || q.Cmp(resource.MustParse("1Mi")) < 0 || q.Cmp(resource.MustParse("1Ti")) > 0 {
		bad("flight-records-max-bytes", o.flightRecordsBytes, "must be a quantity from 1Mi to 1Ti, such as 64Mi")
	} else {
		c.FlightRecordsMaxBytes = q.Value()
	}
	if o.maxEvictionsPerHour < 0 {
		bad("max-evictions-per-hour", strconv.Itoa(o.maxEvictionsPerHour), "must not be negative (0 means no cap)")
	}
	if q := o.localStorageQPS; q < 0 || q-q != 0 {
		bad("local-storage-eviction-qps", strconv.FormatFloat(q, 'g', -1, 64), "must be a non-negative number of evictions per second (0 means no limit)")
	} else if q > 0 && o.localStorageBurst < 1 {
		bad("local-storage-eviction-burst", strconv.Itoa(o.localStorageBurst), "must be at least 1 while --local-storage-eviction-qps is set")
	}

	switch o.localStorageEviction {
	case LocalStorageEvictd, LocalStorageKubelet:
	default:
		bad("local-storage-eviction", o.localStorageEviction, "must be evictd or kubelet")
	}

	margin, marginErr := parseMargin(o.fastPollMargin)
	if marginErr != nil {
		bad("fast-poll-margin", o.fastPollMargin, marginErr.Error())
	}
	c.FastPollMargin = margin

	if c.CgroupDriver != "cgroupfs" && c.CgroupDriver != "systemd" {
		bad("cgroup-driver", c.CgroupDriver, `must be "cgroupfs" or "systemd"`)
	}
	if c.CgroupRoot == "" {
		c.CgroupRoot = "/"
	}
	if !strings.HasPrefix(c.CgroupRoot, "/") {
		bad("cgroup-root", c.CgroupRoot, `must be a cgroup path starting with "/"`)
	}
	// enforce-node-allocatable is checked by thresholds.Parse, with the
	// kubelet's texts.

	var err error
	if c.SystemReserved, c.SystemReservedMemory, err = parseReserved(o.systemReserved); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", src("system-reserved"), err))
	}
	if c.KubeReserved, c.KubeReservedMemory, err = parseReserved(o.kubeReserved); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", src("kube-reserved"), err))
	}

	for _, p := range []struct{ flag, v string }{
		{"root-dir", o.rootDir}, {"proc-root", o.procRoot}, {"cgroup-mount", o.cgroupMount}, {"imagefs-path", o.imageFSPath}, {"pod-logs-dir", o.podLogsDir},
		{"state-dir", o.stateDir},
	} {
		if p.v == "" && p.flag == "imagefs-path" {
			continue
		}
		if !filepath.IsAbs(p.v) {
			bad(p.flag, p.v, "must be an absolute directory path")
		}
	}

	var note string
	if c.ContainerRuntimeEndpoint, note, err = checkEndpoint(o.containerRuntimeEndpoint); err != nil {
		bad("container-runtime-endpoint", o.containerRuntimeEndpoint, err.Error())
	} else if note != "" {
		c.Notes = append(c.Notes, src("container-runtime-endpoint")+note)
	}
	c.ImageServiceEndpoint = c.ContainerRuntimeEndpoint
	if o.imageServiceEndpoint != "" {
		if c.ImageServiceEndpoint, note, err = checkEndpoint(o.imageServiceEndpoint); err != nil {
			bad("image-service-endpoint", o.imageServiceEndpoint, err.Error())
		} else if note != "" {
			c.Notes = append(c.Notes, src("image-service-endpoint")+note)
		}
	}

	if err := checkHostPort(o.metricsBindAddress); err != nil {
		bad("metrics-bind-address", o.metricsBindAddress, err.Error())
	}
	if o.healthzBindAddress != "" {
		if err := checkHostPort(o.healthzBindAddress); err != nil {
			bad("healthz-bind-address", o.healthzBindAddress, err.Error())
		} else if port, ok := samePort(o.healthzBindAddress, o.metricsBindAddress); ok {
			bad("healthz-bind-address", o.healthzBindAddress, fmt.Sprintf("port %s is %s's: the probes need a port of their own", port, src("metrics-bind-address")))
		}
	}
	o.checkMetricsAccess(c, src, bad, func(err error) { errs = append(errs, err) })
	if c.LogLevel, err = parseLogLevel(o.logLevel); err != nil {
		bad("log-level", o.logLevel, err.Error())
	}
	switch c.LogFormat = strings.ToLower(o.logFormat); c.LogFormat {
	case "text", "json":
	default:
		bad("log-format", o.logFormat, "want text or json")
	}
	switch o.taintEffect {
	case "NoSchedule", "PreferNoSchedule", "NoExecute":
		c.TaintEffect = o.taintEffect
	default:
		bad("pressure-taint-effect", o.taintEffect, "want NoSchedule, PreferNoSchedule or NoExecute")
	}
	if msgs := validation.IsDNS1123Label(o.leaseNamespace); len(msgs) > 0 {
		bad("lease-namespace", o.leaseNamespace, strings.Join(msgs, "; "))
	}
	for _, ns := range o.trustedDSNamespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			bad("trusted-daemonset-namespaces", ns, "not a namespace name: "+strings.Join(msgs, "; "))
		}
	}
	if c.NodeName, err = o.nodeName(); err != nil {
		errs = append(errs, err)
	} else if msgs := validation.IsDNS1123Subdomain(c.NodeName); len(msgs) > 0 {
		name := src("hostname-override")
		if o.hostnameOverride == "" {
			name = "the machine's hostname (set --hostname-override)"
		}
		errs = append(errs, fmt.Errorf("%s: invalid node name %q: %s", name, c.NodeName, strings.Join(msgs, "; ")))
	}
	if nf != nil && nf.nodeName != "" && strings.ToLower(strings.TrimSpace(nf.nodeName)) != c.NodeName {
		c.Notes = append(c.Notes, fmt.Sprintf("%s sets nodeName %q but evictd watches node %q; set --hostname-override if the kubelet registers this node as %q.",
			nf.path, nf.nodeName, c.NodeName, nf.nodeName))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	src2 := func(flag string) string { return sources[flag] }
	c.Settings = thresholds.Settings{
		Hard:                   maps.Clone(o.evictionHard),
		HardSource:             src2("eviction-hard"),
		Soft:                   maps.Clone(o.evictionSoft),
		SoftSource:             src2("eviction-soft"),
		SoftGracePeriod:        maps.Clone(o.softGracePeriod),
		SoftGracePeriodSource:  src2("eviction-soft-grace-period"),
		MinimumReclaim:         maps.Clone(o.minimumReclaim),
		MinimumReclaimSource:   src2("eviction-minimum-reclaim"),
		MergeDefaults:          o.mergeDefaults,
		EnforceNodeAllocatable: slices.Clone(o.enforceNodeAllocatable),
	}
	c.Settings.EnforceNodeAllocatableSource = src2("enforce-node-allocatable")
	parsed, err := thresholds.Parse(c.Settings)
	if err != nil {
		return nil, err
	}
	c.Thresholds = parsed.Thresholds
	c.Notes = append(c.Notes, parsed.Notes...)
	c.Warnings = softBelowHard(c.Thresholds)
	if c.TimeToExhaustion && !slices.ContainsFunc(c.Thresholds, hardMemory) {
		c.Notes = append(c.Notes, src("eviction-time-to-exhaustion")+" has no effect: no hard memory.available or allocatableMemory.available threshold to act on early.")
	}
	return c, nil
}

// hardMemory reports whether th is a hard threshold on a memory amount,
// the kind --eviction-time-to-exhaustion acts on early.
func hardMemory(th thresholds.Threshold) bool {
	return th.Hard() && th.Operator == thresholds.LessThan &&
		(th.Signal == signals.MemoryAvailable || th.Signal == signals.AllocatableMemoryAvailable)
}

// parseReserved parses a --system-reserved or --kube-reserved map with the
// kubelet's rules: only cpu, memory, ephemeral-storage and pid, each a
// non-negative quantity. It also returns the memory in bytes.
func parseReserved(m map[string]string) (map[string]resource.Quantity, int64, error) {
	if len(m) == 0 {
		return nil, 0, nil
	}
	out := make(map[string]resource.Quantity, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch k {
		case "cpu", "memory", "ephemeral-storage", "pid":
		default:
			return nil, 0, fmt.Errorf("invalid value %q: cannot reserve %q resource, want cpu, memory, ephemeral-storage or pid", k+"="+v, k)
		}
		q, err := thresholds.ParseQuantity(v)
		if err != nil {
			return nil, 0, fmt.Errorf("invalid value %q: %w", k+"="+v, err)
		}
		if q.Sign() < 0 {
			return nil, 0, fmt.Errorf("invalid value %q: resource quantity for %q cannot be negative", k+"="+v, k)
		}
		if q.CmpInt64(math.MaxInt64) >= 0 {
			return nil, 0, fmt.Errorf("invalid value %q: resource quantity for %q must be less than 9223372036854775807", k+"="+v, k)
		}
		out[k] = q
	}
	mem := out["memory"]
	return out, mem.Value(), nil
}

// parseMargin parses --fast-poll-margin: a non-negative quantity, or a
// percentage of capacity from 0% to 100%.
func parseMargin(s string) (thresholds.Value, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 32)
		if err != nil || f < 0 || f > 100 || f != f {
			return thresholds.Value{}, errors.New("want a percentage of capacity from 0% to 100%")
		}
		return thresholds.Value{Percentage: float32(f / 100)}, nil
	}
	q, err := thresholds.ParseQuantity(s)
	if err != nil {
		return thresholds.Value{}, errors.New("want a quantity such as 2Gi or a percentage of capacity such as 10%")
	}
	if q.Sign() < 0 {
		return thresholds.Value{}, errors.New("must not be negative")
	}
	return thresholds.Value{Quantity: &q}, nil
}

// checkEndpoint accepts a CRI endpoint as the kubelet does on Linux: a
// unix:///path URL, or a bare absolute path taken as one (with a note).
func checkEndpoint(ep string) (string, string, error) {
	if strings.HasPrefix(ep, "/") {
		return "unix://" + ep, fmt.Sprintf(" %q has no scheme: using unix://%s.", ep, ep), nil
	}
	u, err := url.Parse(ep)
	if err != nil {
		return "", "", err
	}
	if u.Scheme != "unix" || u.Host != "" || !strings.HasPrefix(u.Path, "/") {
		return "", "", fmt.Errorf("want a unix socket URL such as %s", defaultContainerRuntimeEndpoint)
	}
	return ep, "", nil
}

// checkHostPort accepts host:port with a numeric port; the host may be empty.
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port: %w", err)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("bad host %q", host)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// samePort returns the port a and b (both host:port) share, unless it is
// 0 (a free port each) or they do not parse.
func samePort(a, b string) (string, bool) {
	_, pa, errA := net.SplitHostPort(a)
	_, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb || pa == "0" {
		return "", false
	}
	return pa, true
}

func parseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, errors.New("want debug, info, warn or error")
}

// nodeName is --hostname-override or the machine's hostname, trimmed and
// lowercased as the kubelet does.
func (o *Options) nodeName() (string, error) {
	name := o.hostnameOverride
	if name == "" {
		if o.hostname == nil {
			return "", errors.New("no --hostname-override and no way to read the hostname")
		}
		h, err := o.hostname()
		if err != nil {
			return "", fmt.Errorf("read hostname (set --hostname-override): %w", err)
		}
		name = h
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return "", errors.New("empty node name: set --hostname-override")
	}
	return name, nil
}

// StandaloneActs says what evictd does about a pressure while it runs
// standalone with c: with --standalone-stop (and not --dry-run) it stops
// pods for hard memory and PID thresholds, otherwise it evicts nothing.
func (c *Config) StandaloneActs() string {
	if c.StandaloneStop && !c.DryRun {
		return "stopping pods through the container runtime for hard memory and PID thresholds only (--standalone-stop)"
	}
	return "evicting nothing"
}
