package config

import (
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// Defaults that differ from the type's zero value. The kubelet's defaults
// where the flag is the kubelet's, except kernel-memcg-notification.
const (
	defaultPressureTransitionPeriod  = 5 * time.Minute
	defaultKernelMemcgNotification   = true // the kubelet's is false
	defaultRootDir                   = "/var/lib/kubelet"
	defaultCgroupRoot                = "/"
	defaultCgroupDriver              = "cgroupfs"
	defaultContainerRuntimeEndpoint  = "unix:///run/containerd/containerd.sock"
	defaultMinimumImageTTL           = 2 * time.Minute
	defaultNodeStatusUpdateFrequency = 10 * time.Second
	defaultNodeStatusReportFrequency = 5 * time.Minute
	defaultLeaseDuration             = 2 * time.Minute
	defaultLeaseNamespace            = "kube-system"
	defaultHousekeepingInterval      = 10 * time.Second
	defaultMetricsBindAddress        = "127.0.0.1:9847"
	defaultProcRoot                  = "/proc"
	defaultCgroupMount               = "/sys/fs/cgroup"
	defaultLogLevel                  = "info"
	defaultLogFormat                 = "text"
	defaultTaintEffect               = "NoSchedule"
	defaultRuntimeRequestTimeout     = 5 * time.Second
	defaultPodLogsDir                = "/var/log/pods"
	defaultVolumeStatsAggPeriod      = 10 * time.Second
	defaultFastPollInterval          = 250 * time.Millisecond
	defaultFastPollMargin            = "10%"
	// defaultTimeToExhaustionMargin: half the release estimate's default
	// (decide.DefaultRelease), for a pass's own cost and a reading's age.
	defaultTimeToExhaustionMargin = 500 * time.Millisecond
	// One eviction a minute on average: a few pressure episodes an hour,
	// each needing a few pods, stay well within it, while pressure that no
	// eviction relieves (a leak outside the pods, a file filling the disk
	// behind the kubelet's back) stops after 60 pods instead of emptying
	// the node one pass after another.
	defaultMaxEvictionsPerHour = 60
	defaultStateDir            = "/var/lib/evictd"
	defaultFlightRecords       = 200
	defaultFlightRecordsBytes  = "64Mi"
	// The kubelet evicts every pod over its own local-storage limit in one
	// pass. Five at once covers the usual handful of offenders; more than
	// that at once suggests a measurement or configuration fault, so the
	// rest go at one a housekeeping interval (10 s).
	defaultLocalStorageEvictionQPS   = 0.1
	defaultLocalStorageEvictionBurst = 5
	// defaultLocalKillAfter: long enough to ride out a dropped connection
	// or an API server's restart's first seconds, short next to the
	// seconds a fast allocator needs to go from a hard threshold to the
	// OOM killer; the pod stopped was to be evicted anyway.
	defaultLocalKillAfter = 5 * time.Second
	// defaultHardEvictionStopWait: the kubelet takes the evicted pod over
	// (its pod worker starts terminating it) within a relist or two of
	// its PLEG, one second each; containers stopped before it has may be
	// reported Succeeded.
	defaultHardEvictionStopWait = time.Second
)

// KubeconfigReminder is how often an agent started standalone because its
// optional kubeconfig was not there (--kubeconfig-optional) says so again.
const KubeconfigReminder = 5 * time.Minute

// defaultEnforceNodeAllocatable returns a fresh copy of the kubelet's default.
func defaultEnforceNodeAllocatable() []string { return []string{"pods"} }

// Options holds the values of evictd's flags as parsed, before the files are
// read and precedence applied. Build it with NewFlagSet and turn it into a
// Config with Complete.
type Options struct {
	evictionHard              map[string]string
	evictionSoft              map[string]string
	softGracePeriod           map[string]string
	minimumReclaim            map[string]string
	maxPodGracePeriod         int32
	pressureTransitionPeriod  time.Duration
	kernelMemcgNotification   bool
	enforceNodeAllocatable    []string
	systemReserved            map[string]string
	kubeReserved              map[string]string
	rootDir                   string
	cgroupRoot                string
	cgroupDriver              string
	containerRuntimeEndpoint  string
	imageServiceEndpoint      string
	minimumImageTTL           time.Duration
	kubeconfig                string
	kubeconfigOptional        bool
	kubeconfigInCluster       bool
	standaloneStop            bool
	trustedDSNamespaces       []string
	hostnameOverride          string
	nodeStatusUpdateFrequency time.Duration
	nodeStatusReportFrequency time.Duration
	leaseDuration             time.Duration
	leaseNamespace            string
	impersonateNode           bool
	tokenRenewal              bool
	tokenRenewBefore          time.Duration
	tokenLifetime             time.Duration
	featureGates              map[string]bool

	configFile           string
	configDir            string
	importKubeletConfig  string
	nodeConfigFile       string
	kubeletConfig        string
	kubeletConfigDir     string
	mergeDefaults        bool
	housekeepingInterval time.Duration
	dryRun               bool
	localStop            bool
	directSignal         bool
	localKillAfter       time.Duration
	stopWait             time.Duration
	metricsBindAddress   string
	healthzBindAddress   string
	metricsTLSCert       string
	metricsTLSKey        string
	metricsTokenFile     string
	metricsDelegatedAuth bool
	imageFSPath          string
	procRoot             string
	cgroupMount          string
	logLevel             string
	logFormat            string
	taintEffect          string
	runtimeTimeout       time.Duration
	podLogsDir           string
	volumeStatsAgg       time.Duration
	fastPollInterval     time.Duration
	fastPollMargin       string
	timeToExhaustion     bool
	exhaustionMargin     time.Duration
	maxEvictionsPerHour  int
	stateDir             string
	flightRecords        int
	flightRecordsBytes   string
	localStorageQPS      float64
	localStorageEviction string
	localStorageBurst    int

	// hostname is the node name when --hostname-override is not given;
	// os.Hostname, replaceable in tests.
	hostname func() (string, error)
}

// NewFlagSet returns a fresh FlagSet (ContinueOnError) holding all of
// evictd's flags, and the Options they are parsed into.
func NewFlagSet(name string) (*pflag.FlagSet, *Options) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	o := &Options{hostname: os.Hostname}
	o.addKubeletFlags(fs)
	o.addEvictdFlags(fs)
	return fs, o
}

// addKubeletFlags registers the flags evictd shares with the kubelet, with
// the kubelet's names, syntax and defaults. They are also the keys evictd
// reads from node-config.yaml's kubeletArguments.
func (o *Options) addKubeletFlags(fs *pflag.FlagSet) {
	fs.Var(newPairMap(&o.evictionHard, "<", "signal<quantity"), "eviction-hard",
		"Hard eviction thresholds: comma-separated signal<quantity pairs, the quantity a byte or inode or PID count (100Mi, 5k) or a percentage of capacity (10%), e.g. memory.available<1Gi,nodefs.available<10%. "+
			"A map that leaves out a default signal drops that default unless --merge-default-eviction-settings is set; 0% or 100% disables a signal. "+
			"The memory stall signals take > and a percentage of time instead, e.g. memory.pressure.full.avg10>20. "+
			"(default "+defaultHardHelp()+")")
	fs.Var(newPairMap(&o.evictionSoft, "<", "signal<quantity"), "eviction-soft",
		"Soft eviction thresholds: comma-separated signal<quantity pairs as for --eviction-hard; each needs a grace period in --eviction-soft-grace-period. (default none)")
	fs.Var(newPairMap(&o.softGracePeriod, "=", "signal=duration"), "eviction-soft-grace-period",
		"Grace period of each soft threshold: comma-separated signal=duration pairs, the duration in Go syntax (1m30s), e.g. memory.available=1m30s. (default none)")
	fs.Var(newPairMap(&o.minimumReclaim, "=", "signal=quantity"), "eviction-minimum-reclaim",
		"Minimum reclaim per signal: comma-separated signal=quantity pairs (quantity or percentage of capacity), how far past its threshold a signal must recover before pressure ends, e.g. memory.available=0Mi,nodefs.available=500Mi. (default none)")
	fs.Int32Var(&o.maxPodGracePeriod, "eviction-max-pod-grace-period", 0,
		"Maximum termination grace period, in seconds, for pods evicted by a soft threshold; a negative value defers to the pod's own terminationGracePeriodSeconds. (default 0)")
	fs.DurationVar(&o.pressureTransitionPeriod, "eviction-pressure-transition-period", defaultPressureTransitionPeriod,
		"How long, as a Go duration, a pressure condition stays set after its last threshold stops being met.")
	fs.BoolVar(&o.kernelMemcgNotification, "kernel-memcg-notification", defaultKernelMemcgNotification,
		"Start a pass as soon as the kernel reports that a memory threshold is crossed (memcg notification, cgroup v1) instead of waiting for the next housekeeping interval. Note: evictd's default is true, the kubelet's is false.")
	fs.StringSliceVar(&o.enforceNodeAllocatable, "enforce-node-allocatable", defaultEnforceNodeAllocatable(),
		"Comma-separated node allocatable enforcement levels: pods, system-reserved, kube-reserved, system-reserved-compressible, kube-reserved-compressible, or none; with pods, every hard memory.available threshold also yields an allocatableMemory.available threshold.")
	fs.Var(newPairMap(&o.systemReserved, "=", "resource=quantity"), "system-reserved",
		"Resources reserved for system daemons: comma-separated resource=quantity pairs for cpu (cores, 500m), memory (bytes, 1Gi), ephemeral-storage (bytes) and pid (count). (default none)")
	fs.Var(newPairMap(&o.kubeReserved, "=", "resource=quantity"), "kube-reserved",
		"Resources reserved for Kubernetes daemons: comma-separated resource=quantity pairs as for --system-reserved. (default none)")
	fs.StringVar(&o.rootDir, "root-dir", defaultRootDir,
		"Directory path of the kubelet's files; the filesystem holding it is nodefs.")
	fs.StringVar(&o.cgroupRoot, "cgroup-root", defaultCgroupRoot,
		"Cgroup path, relative to the cgroup mount, under which the kubelet creates the pods' cgroups (kubepods).")
	fs.StringVar(&o.cgroupDriver, "cgroup-driver", defaultCgroupDriver,
		"How the kubelet names pod cgroups: cgroupfs or systemd.")
	fs.StringVar(&o.containerRuntimeEndpoint, "container-runtime-endpoint", defaultContainerRuntimeEndpoint,
		"CRI runtime service endpoint, a unix socket URL.")
	fs.StringVar(&o.imageServiceEndpoint, "image-service-endpoint", "",
		"CRI image service endpoint, a unix socket URL. (default: the --container-runtime-endpoint)")
	fs.DurationVar(&o.minimumImageTTL, "minimum-image-ttl-duration", defaultMinimumImageTTL,
		"Minimum age, as a Go duration, of an unused image before reclaim may delete it.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "",
		"Path of the kubeconfig file evictd uses to reach the API server, under its own identity. It, and the client key and token file it names, must be mode 0600 or stricter, owned by root or evictd's user. (default none: standalone, evictd observes and decides but acts on nothing)")
	fs.StringVar(&o.hostnameOverride, "hostname-override", "",
		"Name of this node, lowercased, as the kubelet registers it. (default: the machine's hostname, lowercased)")
	fs.DurationVar(&o.nodeStatusUpdateFrequency, "node-status-update-frequency", defaultNodeStatusUpdateFrequency,
		"How often, as a Go duration, evictd compares its node conditions and taints with the node's; it writes them only when they differ or --node-status-report-frequency has passed.")
	fs.Var(&gateMap{m: &o.featureGates}, "feature-gates",
		"Feature gates, comma-separated name=bool pairs as the kubelet takes them; evictd reads one, "+HugepageAwareEvictionGate+" (kubelet 1.37, beta, default true): "+
			"memory.available is MemTotal minus the node's hugepage capacity minus the root cgroup's working set, as kubelet 1.37 computes it; "+HugepageAwareEvictionGate+"=false computes it as kubelet 1.36, the hugepages left in. "+
			"Per gate, the command line overrides featureGates in the --config-dir drop-ins, which override featureGates in --config, then in --import-kubelet-config, then kubeletArguments.feature-gates in --node-config; other gates are the kubelet's and are ignored. (default "+HugepageAwareEvictionGate+"=true)")
	fs.DurationVar(&o.nodeStatusReportFrequency, "node-status-report-frequency", defaultNodeStatusReportFrequency,
		"How often, as a Go duration, evictd writes its node conditions when nothing changed, each period jittered by ±50% as the kubelet does; a change is written at once.")
}

// addEvictdFlags registers the flags that are evictd's own.
func (o *Options) addEvictdFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.kubeconfigOptional, "kubeconfig-optional", false,
		"Start standalone, as without --kubeconfig, while the --kubeconfig file does not exist, instead of refusing to start: the package's environment file sets it, so that a node where the kubeconfig is not written yet runs evictd, warning at start and every "+KubeconfigReminder.String()+" that it has no API server (evictd_standalone 1), until the file is written and evictd restarted. "+
			"A kubeconfig that exists but cannot be used is still refused. (default false)")
	fs.BoolVar(&o.kubeconfigInCluster, "kubeconfig-in-cluster", false,
		"Reach the API server at https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, the kubernetes Service's address the kubelet gives every container (as client-go's in-cluster configuration does), instead of the --kubeconfig's server: "+
			"no cluster DNS needed. The --kubeconfig still names the credentials and the CA, checked as always; needs --kubeconfig. (default false)")
	fs.BoolVar(&o.standaloneStop, "standalone-stop", false,
		"While evictd runs standalone (no --kubeconfig, or --kubeconfig-optional before the file is written), stop the pod a hard memory or PID threshold evicts by killing its containers through the container runtime, as the kernel's OOM killer would but before it: the kubelet restarts them as the pod's restart policy says. With no priorities or requests to rank by, only pods from the API server outside kube-system and not Guaranteed may be stopped; soft and disk thresholds are reported, not acted on. The package's environment file sets it. (default false: standalone evictd acts on nothing)")
	fs.StringSliceVar(&o.trustedDSNamespaces, "trusted-daemonset-namespaces", []string{"kube-system"},
		"Comma-separated namespaces whose DaemonSet pods rank after the other pods of their tier, as node agents the node needs: whoever may create a DaemonSet there is trusted with that later turn. A DaemonSet pod of any other namespace ranks as any other pod; empty: none is set apart.")
	fs.StringVar(&o.configFile, "config", "",
		"Path of evictd's configuration file (kind "+AgentKind+", apiVersion "+AgentAPIVersion+") holding any of the agent's settings under the names docs/CONFIGURATION.md lists (evictionHard, housekeepingInterval...); "+
			"its --config-dir drop-ins override it and flags given on the command line override both. "+
			"Deprecated: a KubeletConfiguration (kubelet.config.k8s.io/v1beta1) given here is imported as --import-kubelet-config imports it, with a warning. (default none)")
	fs.StringVar(&o.configDir, "config-dir", "",
		"Directory path of drop-ins for --config, as the kubelet's --config-dir: its *.conf files (subdirectories included, in lexical order), each a partial "+AgentKind+", are merged over the --config file, "+
			"a later file overriding the fields, and the map keys, it sets; flags given on the command line override them. (default none)")
	fs.StringVar(&o.importKubeletConfig, "import-kubelet-config", "",
		"Path of a KubeletConfiguration file (kubelet.config.k8s.io/v1beta1) to import evictd's eviction settings from (evictionHard, evictionSoft, cgroupDriver...; the rest is ignored): "+
			"the --config file, its drop-ins and flags given on the command line override it, and it overrides --node-config. (default none)")
	fs.StringVar(&o.nodeConfigFile, "node-config", "",
		"Path of an OpenShift node-config.yaml to take the kubeletArguments from; --import-kubelet-config, --config and flags given on the command line override it. (default none)")
	fs.StringVar(&o.kubeletConfig, "kubelet-config", "",
		"Path of the kubelet's own KubeletConfiguration file, read only to warn (at start, in check-config and in evictd_kubelet_eviction_races) of settings with which the kubelet would act on pressure too, racing evictd: "+
			"eviction thresholds, localStorageCapacityIsolation, image GC. (default: the --import-kubelet-config file, if any)")
	fs.StringVar(&o.kubeletConfigDir, "kubelet-config-dir", "",
		"Directory path of the kubelet's --config-dir drop-ins: its *.conf files, in lexical order, are merged over --kubelet-config as the kubelet merges them, before the check. (default none)")
	fs.DurationVar(&o.leaseDuration, "lease-duration", defaultLeaseDuration,
		"Duration, as a Go duration, of the coordination.k8s.io Lease evictd-<node> that shows evictd alive; it is renewed every quarter of it, with jitter. At least 20s.")
	fs.StringVar(&o.leaseNamespace, "lease-namespace", defaultLeaseNamespace,
		"Namespace of evictd's Lease: evictd's own, where its ServiceAccount is.")
	fs.BoolVar(&o.impersonateNode, "impersonate-node", true,
		"Read, delete and evict the node's pods as the node's own identity, system:node:<node>, by constrained impersonation (Kubernetes 1.36 or later, or 1.35 with the ConstrainedImpersonation feature gate): "+
			"the API server's Node authorizer and NodeRestriction then refuse every pod bound to another node. false: as evictd's ServiceAccount, which deploy/rbac-before-1.36.yaml must grant (deploy/README.md).")
	fs.BoolVar(&o.tokenRenewal, "token-renewal", true,
		"Renew the --kubeconfig's tokenFile when it holds a ServiceAccount token bound to a Node (kubectl create token --bound-object-kind Node): before it expires, evictd requests its successor through the TokenRequest API (same ServiceAccount, Node and audiences) and writes it over the file (mode 0600, atomically), "+
			"which deploy/rbac.yaml's Role evictd-token grants and deploy/policy.yaml bounds to the node's own token. Any other credential is left alone. false: renewed by hand.")
	fs.DurationVar(&o.tokenRenewBefore, "token-renew-before", 0,
		"How long, as a Go duration, before the token's expiry --token-renewal renews it; failed attempts are retried from 10s, doubling up to 5m. (default 0: once a third of the token's lifetime is left, 240h of 720h)")
	fs.DurationVar(&o.tokenLifetime, "token-lifetime", 0,
		"Lifetime, as a Go duration, that --token-renewal asks for each new token: from 10m (the API server's minimum) to 720h (deploy/policy.yaml's maximum); the API server may grant less. (default 0: the current token's own lifetime, at most 720h)")
	fs.BoolVar(&o.mergeDefaults, "merge-default-eviction-settings", false,
		"Add every default hard threshold that a partial --eviction-hard map leaves out (KubeletConfiguration mergeDefaultEvictionSettings). (default false)")
	fs.DurationVar(&o.housekeepingInterval, "housekeeping-interval", defaultHousekeepingInterval,
		"How often, as a Go duration, a pass observes the signals and decides; must be positive.")
	fs.BoolVar(&o.dryRun, "dry-run", false,
		"Decide and report everything but evict, reclaim, taint and post nothing. (default false)")
	fs.BoolVar(&o.localStop, "hard-eviction-local-stop", true,
		"For a hard eviction, also stop the pod's containers through the container runtime with the same grace period, as soon as the kubelet has taken the evicted pod over "+
			"(at most --hard-eviction-stop-wait after the eviction began), instead of waiting for the kubelet to stop them; their preStop hooks may then not run.")
	fs.BoolVar(&o.directSignal, "hard-eviction-direct-signal", true,
		"For a hard eviction of a pod whose restartPolicy is Always, send each of its containers' main process its stop signal at once (the one the runtime reports, SIGTERM where it has not said), through pidfds on the processes of the containers' own cgroups, "+
			"before the API requests and the stop through the container runtime (about a millisecond after the decision rather than 25 ms or more); needs CAP_KILL and the host's PID namespace. "+
			"Pods of another restartPolicy, and pods whose processes evictd cannot see, get their first signal from the runtime's stop.")
	fs.DurationVar(&o.stopWait, "hard-eviction-stop-wait", defaultHardEvictionStopWait,
		"How long, as a Go duration, a hard eviction's stop through the container runtime (--hard-eviction-local-stop) waits for the kubelet to take the evicted pod over before it stops the containers anyway; must be positive. "+
			"Containers that exit 0 before the kubelet has taken the pod over may be reported Succeeded, as a completion, rather than Failed and Evicted.")
	fs.DurationVar(&o.localKillAfter, "local-kill-after", defaultLocalKillAfter,
		"How long, as a Go duration, a hard eviction keeps retrying an API server that does not answer (connection refused, timeout, 5xx) before it owes the eviction, completed once the API server answers again, "+
			"and stops the pod's containers through the container runtime if --hard-eviction-local-stop has not already; until then the kubelet may restart them, and their preStop hooks do not run. 0 disables: the eviction fails and the next pass decides again.")
	fs.StringVar(&o.metricsBindAddress, "metrics-bind-address", defaultMetricsBindAddress,
		"host:port to serve /metrics, /healthz, /readyz and /status on; an empty host means all interfaces. "+
			"Beyond loopback, guard it with --metrics-tls-cert-file and --metrics-bearer-token-file or --metrics-delegated-auth.")
	fs.StringVar(&o.healthzBindAddress, "healthz-bind-address", "",
		"host:port to answer the kubelet's liveness and readiness probes on: /healthz and /readyz alone, plain HTTP, on a listener of their own that connections to --metrics-bind-address cannot crowd out "+
			"(the DaemonSet's probes ask 127.0.0.1:9848); its port must differ from --metrics-bind-address's. /healthz and /readyz are served on --metrics-bind-address too. (default none: no listener of their own)")
	fs.StringVar(&o.metricsTLSCert, "metrics-tls-cert-file", "",
		"Path of the PEM certificate (chain) to serve /metrics and the other endpoints over TLS with; needs --metrics-tls-private-key-file. (default none: plain HTTP)")
	fs.StringVar(&o.metricsTLSKey, "metrics-tls-private-key-file", "",
		"Path of the PEM private key of --metrics-tls-cert-file; mode 0600 or stricter, owned by root or evictd's user. The pair is re-read when either file changes. (default none)")
	fs.StringVar(&o.metricsTokenFile, "metrics-bearer-token-file", "",
		"Path of a file holding the bearer token that /metrics and /status ask for (Authorization: Bearer); /healthz and /readyz stay open for probes. Mode 0600 or stricter, owned by root or evictd's user; re-read when it changes. (default none: no token asked)")
	fs.BoolVar(&o.metricsDelegatedAuth, "metrics-delegated-auth", false,
		"Accept on /metrics and /status a bearer token the API server accepts (a TokenReview) for a user it allows to get that path (a SubjectAccessReview of the non-resource URL, verb get), as the kubelet's webhook authentication and authorization do: "+
			"401 without a token or with one it does not accept, 403 for a user not allowed, 503 when it does not answer within 5s. Answers are kept 2m (tokens), 5m (allowed) and 30s (denied). "+
			"With --metrics-bearer-token-file, either token is accepted. The reviews are made as evictd's own identity, which needs create on tokenreviews and subjectaccessreviews (ClusterRole system:auth-delegator); needs --kubeconfig. (default false)")
	fs.StringVar(&o.imageFSPath, "imagefs-path", "",
		`Directory path on the container runtime's image filesystem, the filesystem imagefs.* signals observe. (default "": imagefs not observed)`)
	fs.StringVar(&o.procRoot, "proc-root", defaultProcRoot,
		"Directory path where procfs is mounted.")
	fs.StringVar(&o.cgroupMount, "cgroup-mount", defaultCgroupMount,
		"Directory path where the cgroup filesystem is mounted.")
	fs.StringVar(&o.logLevel, "log-level", defaultLogLevel,
		"Least severe log level written: debug, info, warn or error.")
	fs.StringVar(&o.logFormat, "log-format", defaultLogFormat,
		"Format of the log lines on stderr: text (key=value) or json (one object a line). Under systemd, with stderr connected to the journal, each line starts with its syslog priority (<3> error to <7> debug), which journald strips and records.")
	fs.DurationVar(&o.runtimeTimeout, "runtime-request-timeout", defaultRuntimeRequestTimeout,
		"Timeout, as a Go duration, of each request to the container runtime (the kubelet's default, 2m, would stall a pass; evictd's is short).")
	fs.StringVar(&o.podLogsDir, "pod-logs-dir", defaultPodLogsDir,
		"Directory path where the kubelet keeps container logs (<namespace>_<name>_<uid>/<container>/), counted in pods' disk use.")
	fs.DurationVar(&o.volumeStatsAgg, "volume-stats-agg-period", defaultVolumeStatsAggPeriod,
		"How long, as a Go duration, a measurement of a pod's log and volume directories is reused before they are walked again (the kubelet's default is 1m).")
	fs.DurationVar(&o.fastPollInterval, "fast-poll-interval", defaultFastPollInterval,
		"How often at most, as a Go duration, evictd reads the memory cgroups' working set (while a memory threshold is within --fast-poll-margin on cgroup v1 with memcg notifications; at all times where a threshold has no kernel notification, as on cgroup v2), starting a pass as soon as one is crossed either way; it reads sooner (down to 10ms) when memory grows fast enough to use a quarter of the headroom left in between. 0 disables the fast poll.")
	fs.StringVar(&o.fastPollMargin, "fast-poll-margin", defaultFastPollMargin,
		"How close to a memory.available or allocatableMemory.available threshold the available memory must come for the fast poll to run where memcg notifications watch every memory threshold (cgroup v1): a quantity (2Gi) or a percentage of the signal's capacity (10%). It should exceed what a workload can allocate in one --housekeeping-interval.")
	fs.BoolVar(&o.timeToExhaustion, "eviction-time-to-exhaustion", false,
		"Act on a hard memory.available or allocatableMemory.available threshold before it is met when the memory's growth, fitted to the last second of readings (the fast poll's and the passes'), says the signal reaches 0 available (the OOM point) sooner than evictd's own measured time from a decision to the victim's memory released (the 90th percentile of the last 20, 1s before any) plus --eviction-time-to-exhaustion-margin: "+
			"the same ranking and hard grace period, the decision log, the Evicted event and evictd_predicted_evictions_total saying it was predicted. The threshold stays the floor: never later than it. No effect without a hard memory threshold. (default false)")
	fs.DurationVar(&o.exhaustionMargin, "eviction-time-to-exhaustion-margin", defaultTimeToExhaustionMargin,
		"Margin, as a Go duration, that --eviction-time-to-exhaustion adds to the measured release time; from 0 to 1m.")
	fs.StringVar(&o.stateDir, "state-dir", defaultStateDir,
		"Directory, absolute, where evictd keeps its flight records (in records/, mode 0700, files 0600) for the explain and simulate commands; created when missing. A full or read-only disk is logged and counted, never fatal.")
	fs.IntVar(&o.flightRecords, "flight-records", defaultFlightRecords,
		"Most flight records kept in --state-dir, one per decision to evict (carried out, refused, withheld or in dry run); the oldest are removed first. 0 keeps none.")
	fs.StringVar(&o.flightRecordsBytes, "flight-records-max-bytes", defaultFlightRecordsBytes,
		"Most bytes the flight records in --state-dir take together, a quantity (64Mi, at least 1Mi); the oldest are removed first.")
	fs.IntVar(&o.maxEvictionsPerHour, "max-evictions-per-hour", defaultMaxEvictionsPerHour,
		"Most evictions evictd issues in any sliding hour (evicted, or stopped locally); once reached, no pod is evicted until the oldest of them is an hour old, and a Warning event EvictionCapReached goes on the node. 0 means no cap.")
	fs.Float64Var(&o.localStorageQPS, "local-storage-eviction-qps", defaultLocalStorageEvictionQPS,
		"Rate, in evictions per second, at which pods over their own local-storage limits are evicted once --local-storage-eviction-burst is spent; the others wait for later passes. 0 evicts them all in one pass, as the kubelet does.")
	fs.StringVar(&o.localStorageEviction, "local-storage-eviction", LocalStorageEvictd,
		"Which agent evicts the pods over their own ephemeral-storage limits or an emptyDir's sizeLimit: "+
			"evictd evicts them itself, whether or not the kubelet's localStorageCapacityIsolation has it evict them too (the kubelet measures emptyDirs once a --volume-stats-agg-period, 1m by default, so evictd is usually first); "+
			"kubelet leaves them to the kubelet while its localStorageCapacityIsolation is on (as --kubelet-config says; without it, while the kubelet reports the node's ephemeral-storage capacity, which it does only then) and evicts them itself while it is off, so that one agent always does.")
	fs.IntVar(&o.localStorageBurst, "local-storage-eviction-burst", defaultLocalStorageEvictionBurst,
		"Most pods over their own local-storage limits evicted at once, before --local-storage-eviction-qps paces the rest; at least 1 when the rate is set.")
	fs.StringVar(&o.taintEffect, "pressure-taint-effect", defaultTaintEffect,
		"Effect of the evictd.io/*-pressure taints evictd puts on its node while under pressure: NoSchedule, PreferNoSchedule or NoExecute.")
}

// defaultHardHelp writes the kubelet's default hard thresholds as the
// flag takes them, in signal order.
func defaultHardHelp() string {
	def := thresholds.DefaultHard()
	var pairs []string
	for _, sig := range signals.All() {
		if v, ok := def[string(sig)]; ok {
			pairs = append(pairs, string(sig)+"<"+v)
		}
	}
	return strings.Join(pairs, ",")
}
