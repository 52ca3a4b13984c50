package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/manager"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/recorder"
	"github.com/evictd/evictd/internal/server"
	"github.com/evictd/evictd/internal/wakeup"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
	"github.com/evictd/evictd/systemd"
)

// Options is what the command line hands the agent besides its
// configuration.
type Options struct {
	// Version and Commit name the build, in the logs, the User-Agent and
	// evictd_build_info.
	Version, Commit string
	// Log is where the agent logs; client-go's own lines (klog) go
	// there too once the agent talks to an API server.
	Log *slog.Logger
	// Listener, when not nil, is the socket systemd passed (socket
	// activation): the endpoints are served on it instead of binding
	// --metrics-bind-address.
	Listener net.Listener
}

// Agent is one evictd on one node: its signals, the container runtime,
// the API server's side, the loop, the wake-ups and the endpoints, built
// by New from a validated configuration. Run runs them all until its
// context ends or one of them fails; Close releases what New opened.
type Agent struct {
	cfg *config.Config
	log *slog.Logger

	reg      *prometheus.Registry
	cgroups  *host.PodStatsReader
	runtime  *runtimeConn
	stats    podStats
	kube     *kube          // nil standalone (no --kubeconfig)
	wakeups  *wakeup.Memory // nil when the memory cgroups cannot be found
	loop     *manager.Manager
	records  *recorder.Recorder // nil with --flight-records=0
	srv      *server.Server
	probes   *server.Server // nil without --healthz-bind-address
	layout   signals.FsLayout
	redialed bool // the runtime was not reachable at start: Run retries it
	// awaited is the optional kubeconfig that did not exist at start
	// (--kubeconfig-optional), "" otherwise: Run reminds of it.
	awaited string
}

// memoryShadows is the source of sources that computes memory.available
// by every formula (host.MemorySource), nil when none does.
func memoryShadows(sources []signals.Source) manager.MemoryShadows {
	for _, src := range sources {
		if sh, ok := src.(manager.MemoryShadows); ok {
			return sh
		}
	}
	return nil
}

// New builds the agent from cfg: it opens the node's signals and pod
// cgroups, dials the container runtime once (retried by Run when it is
// down), compares the thresholds with the node's capacities, and, with
// cfg.Kubeconfig, builds the API server's side. An error names what
// could not be set up; whatever New opened before it is closed.
func New(ctx context.Context, cfg *config.Config, opts Options) (*Agent, error) {
	a := &Agent{cfg: cfg, log: opts.Log}
	if err := a.build(ctx, opts); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// build sets up a's parts; New closes what it opened when it fails.
func (a *Agent) build(ctx context.Context, opts Options) (err error) {
	cfg, log := a.cfg, a.log
	if KubeconfigAwaited(cfg) {
		// Standalone until the kubeconfig is written: protected by what
		// evictd can do alone rather than by a unit restarting in a loop.
		log.Warn("the kubeconfig does not exist yet and --kubeconfig-optional is set: running standalone, with no API server; evictd observes, decides and exports metrics, "+cfg.StandaloneActs()+", until the kubeconfig is written and evictd restarted",
			"kubeconfig", cfg.Kubeconfig)
		a.awaited = cfg.Kubeconfig
		c := *cfg
		c.Kubeconfig = ""
		cfg, a.cfg = &c, &c
	}
	var kubeRC *rest.Config
	if cfg.Kubeconfig != "" {
		if kubeRC, err = KubeRestConfig(cfg, os.Getenv); err != nil {
			return fmt.Errorf("cannot use the kubeconfig: %w", err)
		}
	}

	hc := HostConfig(cfg)
	// One mount table for the filesystem signals and the runtime's layout:
	// cadvisor keeps every mount of the node in it.
	fs := host.NewFilesystems()
	sources, err := host.Sources(hc, fs)
	if err != nil {
		return fmt.Errorf("cannot set up the node's signals: %w", err)
	}
	a.reg = prometheus.NewRegistry()
	met, err := newMetrics(a.reg, cfg, opts.Version, opts.Commit)
	if err != nil {
		return fmt.Errorf("cannot register metrics: %w", err)
	}
	if a.cgroups, err = host.NewPodStatsReader(hc); err != nil {
		return fmt.Errorf("cannot read pod cgroups: %w", err)
	}
	oomKills, err := host.NewOOMKillReader(hc)
	if err != nil {
		return fmt.Errorf("cannot read the OOM kill counts: %w", err)
	}

	// The container runtime: image filesystem, pods' disk use, reclaim.
	a.runtime = newRuntimeConn(cfg, hc, fs, met, log)
	if cfg.ImageFSPath == "" {
		sources = append(sources, imageFsSource{a.runtime})
	}
	dialCtx, cancelDial := context.WithTimeout(ctx, cfg.RuntimeRequestTimeout)
	layout, dialErr := a.runtime.connect(dialCtx)
	cancelDial()
	if dialErr != nil {
		if layout, err = LayoutOf(hc, fs); err != nil {
			return fmt.Errorf("cannot tell the node's filesystem layout: %w", err)
		}
		log.Warn("cannot reach the container runtime; retrying in the background. Until then imagefs is not observed (unless --imagefs-path), pods have no disk stats and nothing is reclaimed",
			"endpoint", cfg.ContainerRuntimeEndpoint, "assumedLayout", layout.String(), "err", dialErr)
		a.redialed = true
	}
	a.layout = layout

	warnings, setAside := CheckCapacities(ctx, cfg, sources, layout)
	for _, w := range warnings {
		log.Warn(w)
	}
	if len(setAside) > 0 {
		kept := config.WithoutSetAside(cfg.Thresholds, setAside)
		if len(kept) == 0 {
			errs := make([]error, len(setAside))
			for i, s := range setAside {
				errs[i] = s.Err
			}
			return fmt.Errorf("no threshold can hold on this node; refusing to start: %w", errors.Join(errs...))
		}
		// The others protect the node: the set-aside ones leave the
		// loop's, the wake-ups' and the decision's thresholds alike.
		for _, s := range setAside {
			log.Error("threshold set aside: it cannot hold on this node; the other thresholds protect it", "threshold", s.Threshold.String(), "kind", s.Threshold.Kind(), "err", s.Err)
		}
		c := *cfg
		c.Thresholds = kept
		cfg, a.cfg = &c, &c
	}
	aside := make([]metrics.SetAside, len(setAside))
	for i, s := range setAside {
		aside[i] = metrics.SetAside{Signal: s.Threshold.Signal, Kind: metrics.KindOf(s.Threshold)}
	}
	if err := metrics.RegisterStart(a.reg, aside, cfg.Kubeconfig == ""); err != nil {
		return fmt.Errorf("cannot register metrics: %w", err)
	}

	// Which agent evicts the pods over their own local-storage limits:
	// fixed by the configuration, or decided from the node every pass.
	lsGauge, err := metrics.RegisterLocalStorageAgent(a.reg)
	if err != nil {
		return fmt.Errorf("cannot register metrics: %w", err)
	}
	lsGauge.Set(localStorageByKubelet(cfg))

	// The pods' disk stats are gathered in the background (diskCache),
	// so that no pass waits on the runtime or a slow filesystem.
	a.stats = newPodStats(a.cgroups, a.runtime, cfg.DiskStatsMaxAge)
	deps := manager.Deps{
		Clock:     clock.RealClock{},
		Sources:   sources,
		Pods:      standalonePods{cfg: hc, sandboxes: a.runtime.readySandboxes, spare: cfg.StandaloneStop && !cfg.DryRun},
		Stats:     a.stats,
		Reclaimer: runtimeReclaimer{a.runtime},
		Metrics:   met,
		Log:       log,
		Shadows:   memoryShadows(sources),
		OOMKills:  oomKills,
	}
	if cfg.Kubeconfig == "" && a.awaited == "" {
		log.Warn("no --kubeconfig: running standalone on this host; evictd observes, decides and exports metrics, " + cfg.StandaloneActs())
	}
	if cfg.Kubeconfig == "" && cfg.StandaloneStop && !cfg.DryRun {
		deps.Evicter = standaloneEvicter{stop: a.runtime.stopPodContainers}
	}
	if cfg.Kubeconfig != "" {
		var rt *runtimeConn
		if !cfg.DryRun {
			rt = a.runtime
		}
		// client-go's own lines (klog) through the same handler: in
		// --log-format, with the journal's priorities.
		klog.SetSlogLogger(log.With("component", "client-go"))
		if a.kube, err = newKube(cfg, kubeRC, opts.Version, met, log, rt); err != nil {
			return fmt.Errorf("cannot connect to the API server: %w", err)
		}
		if err := metrics.RegisterInformer(a.reg, "pods", a.kube.pods, nil); err != nil {
			return fmt.Errorf("cannot register the pod informer's metrics: %w", err)
		}
		log.Info("connected to the API server", "kubeconfig", cfg.Kubeconfig, "server", kubeRC.Host, "node", cfg.NodeName)
		for _, s := range setAside {
			a.kube.events.Warn(reasonThresholdSetAside, fmt.Sprintf("evictd set threshold %s aside: %v; the other thresholds protect the node", s.Threshold, s.Err))
		}
		deps.Evicter, deps.Status, deps.Events = a.kube.evicter, a.kube.status, a.kube.events
		deps.DiskReleased = func(uid string) bool {
			_, err := os.Stat(filepath.Join(cfg.RootDir, "pods", uid))
			return errors.Is(err, os.ErrNotExist)
		}
		if cfg.LocalStorageEviction == config.LocalStorageKubelet && cfg.KubeletLocalStorage == nil {
			deps.LocalStorage = &localStorageAgent{node: a.kube.status.EphemeralStorageCapacity, gauge: lsGauge, log: log}
		}
		deps.Pods = newCachedPods(a.kube.pods, func() ([]signals.Pod, error) { return host.DiscoverPods(hc) }, a.runtime.readySandboxes,
			clock.RealClock{}, log)
	}
	if cfg.DryRun {
		log.Info("dry run: decisions are reported, never acted on")
	}
	// Without its recorder the agent still protects the node.
	if a.records, err = newRecorder(cfg, layout, opts.Version, met, log); err != nil {
		log.Error("no flight records are kept", "err", err)
	} else if a.records != nil {
		deps.Recorder = a.records
	}
	// The fast poll's readings go to the flight recorder and to the loop
	// (time to exhaustion); the poll starts only once the loop is made.
	reads := func(o signals.Observation) {
		if a.records != nil {
			a.records.Read(o)
		}
		a.loop.Read(o)
	}
	if a.wakeups = newWakeups(cfg, hc, met, log, reads); a.wakeups != nil {
		deps.Wakeups = a.wakeups
	}

	var readyOnce sync.Once
	deps.AfterPass = func(*manager.Status) {
		readyOnce.Do(func() {
			if err := systemd.Ready(); err != nil {
				log.Warn("cannot notify systemd", "err", err)
			}
		})
	}
	if a.loop, err = manager.New(manager.Config{
		HousekeepingInterval:      cfg.HousekeepingInterval,
		StuckAfter:                cfg.StuckAfter,
		DryRun:                    cfg.DryRun,
		Decider:                   DeciderConfig(cfg, layout),
		MaxEvictionsPerHour:       cfg.MaxEvictionsPerHour,
		LocalStorageEvictionQPS:   cfg.LocalStorageEvictionQPS,
		LocalStorageEvictionBurst: cfg.LocalStorageEvictionBurst,
		CleanupTimeout:            cfg.CleanupTimeout,
	}, deps); err != nil {
		return fmt.Errorf("cannot start the loop: %w", err)
	}

	a.srv = server.New(cfg.MetricsBindAddress, a.reg, a.loop.Ready, func() any { return a.loop.Status() }, log)
	a.srv.SetVersion(opts.Version)
	snapArgs := recorder.Args(DeciderConfig(cfg, layout), cfg.HousekeepingInterval, cfg.HugepageAwareEviction)
	a.srv.HandleSnapshot(func(ctx context.Context) (any, error) {
		return a.loop.Snapshot(ctx, func(p manager.PassRecord) any { return recorder.Snapshot(snapArgs, layout.String(), p) })
	})
	access := server.Access{CertFile: cfg.MetricsTLSCertFile, KeyFile: cfg.MetricsTLSPrivateKeyFile, TokenFile: cfg.MetricsBearerTokenFile}
	if cfg.MetricsDelegatedAuth {
		access.Delegated = a.delegation(met)
	}
	if err := a.srv.Secure(access); err != nil {
		return fmt.Errorf("cannot guard the metrics endpoint: %w", err)
	}
	if ln := opts.Listener; ln != nil {
		// evictd.socket: systemd holds the port, also while evictd
		// restarts, and passes it.
		a.srv.UseListener(ln)
		log.Info("serving the endpoints on the socket systemd passed (socket activation), not binding --metrics-bind-address",
			"socket", ln.Addr().String(), "metricsBindAddress", cfg.MetricsBindAddress)
		if ln.Addr().String() != cfg.MetricsBindAddress {
			log.Warn("the socket systemd passed is not --metrics-bind-address, which `evictd status` asks and the note on an unguarded address checks; set them alike",
				"socket", ln.Addr().String(), "metricsBindAddress", cfg.MetricsBindAddress)
		}
	}
	if cfg.HealthzBindAddress != "" {
		// The kubelet's probes, on a listener that connections to the
		// metrics address cannot crowd out (server.NewProbes). Never the
		// socket systemd passes: under systemd the watchdog, not a probe,
		// tells whether evictd is alive.
		a.probes = server.NewProbes(cfg.HealthzBindAddress, a.loop.Ready, log)
	}
	log.Info("evictd starting", "version", opts.Version, "commit", opts.Commit, "thresholds", len(a.loop.Thresholds()), "layout", layout.String(),
		"housekeepingInterval", cfg.HousekeepingInterval, "maxEvictionsPerHour", cfg.MaxEvictionsPerHour, "metrics", cfg.MetricsBindAddress,
		"healthz", cfg.HealthzBindAddress)
	return nil
}

// delegation is how the API server reviews the scrapers' tokens
// (--metrics-delegated-auth): through evictd's own identity, never the
// node's. Standalone while an optional kubeconfig is awaited, there is no
// API server: every review fails, and the endpoints answer 503 to any
// token but --metrics-bearer-token-file's rather than let them through.
func (a *Agent) delegation(met *metrics.Metrics) *server.Delegation {
	if a.kube == nil {
		a.log.Warn("--metrics-delegated-auth without an API server (the kubeconfig is awaited): /metrics and /status answer 503 to any token but --metrics-bearer-token-file's until evictd restarts with its kubeconfig")
		return &server.Delegation{Tokens: noTokenReviews{}, Access: noAccessReviews{}, Observe: met.ObserveReview}
	}
	return &server.Delegation{Tokens: a.kube.client.TokenReviews(), Access: a.kube.client.SubjectAccessReviews(), Observe: met.ObserveReview}
}

// Run runs every part of the agent until ctx ends, then returns nil, or
// until one part fails, then stops the others and returns that failure.
// Each part starts its own goroutine in one errgroup.
func (a *Agent) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	if a.redialed {
		g.Go(func() error { return a.runtime.retry(ctx, a.cfg.RuntimeRetry, a.cfg.RuntimeRetryMax) })
	}
	g.Go(func() error { return a.stats.disk.run(ctx) })
	if a.awaited != "" {
		g.Go(func() error {
			return remindStandalone(ctx, clock.RealClock{}, config.KubeconfigReminder, a.awaited, a.cfg.StandaloneActs(), a.log)
		})
	}
	if a.kube != nil {
		a.kube.start(ctx, g, a.log)
		g.Go(func() error { return a.kube.forwardRelists(ctx, a.loop.Wake) })
	}
	// The servers retry a port that is taken in the background and do
	// not return meanwhile: a local user who binds it first must not stop
	// the loop, nor the watchdog, which is fed from the loop's readiness.
	g.Go(func() error { return a.srv.Run(ctx) })
	if a.probes != nil {
		g.Go(func() error { return a.probes.Run(ctx) })
	}
	g.Go(func() error { return a.loop.Run(ctx) })
	if a.records != nil {
		g.Go(func() error { return a.records.Run(ctx) })
	}
	g.Go(func() error { return systemd.Watchdog(ctx, func() bool { return a.loop.Ready() == nil }, a.log) })
	if a.wakeups != nil {
		g.Go(func() error { return a.wakeups.Run(ctx, a.loop.Wake) })
	}
	err := g.Wait()
	if serr := systemd.Stopping(); serr != nil {
		a.log.Warn("cannot notify systemd", "err", serr)
	}
	return err
}

// Close releases what New opened: the pod cgroups' files, the runtime's
// connection and the event broadcaster. Call it after Run has returned.
func (a *Agent) Close() {
	if a.kube != nil {
		a.kube.stop()
	}
	if a.runtime != nil {
		a.runtime.close()
	}
	if a.cgroups != nil {
		a.cgroups.Close()
	}
}

// newMetrics registers the process's and evictd's own metrics on reg.
func newMetrics(reg *prometheus.Registry, cfg *config.Config, version, revision string) (*metrics.Metrics, error) {
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// client-go's requests, under the kubelet's rest_client_* names.
	if err := metrics.RegisterRESTClient(reg); err != nil {
		return nil, err
	}
	met := metrics.New(reg)
	met.SetBuild(version, revision)
	if cfg.KubeletChecked {
		present := map[string]bool{}
		for _, r := range cfg.KubeletRaces {
			present[r.Kind] = true
		}
		if err := metrics.RegisterKubeletRaces(reg, config.RaceKinds(), present); err != nil {
			return nil, err
		}
	}
	counts := map[string]int{}
	for _, l := range cfg.Lenient {
		for k, n := range l.Fields {
			counts[k] += n
		}
	}
	if err := metrics.RegisterConfigWarnings(reg, config.ConfigWarningKinds(), counts); err != nil {
		return nil, err
	}
	return met, met.Err()
}

// newWakeups sets up the sources that start a pass between housekeeping
// ticks: memcg threshold notifications (cgroup v1, --kernel-memcg-notification),
// PSI triggers and memory.events (cgroup v2, /proc/pressure/memory), and the
// fast poll. Nil, with a warning, when the memory cgroups cannot be found:
// passes then run every housekeeping interval only.
func newWakeups(cfg *config.Config, hc host.Config, met *metrics.Metrics, log *slog.Logger, reads func(signals.Observation)) *wakeup.Memory {
	root, kubepods, v2, err := host.MemoryCgroupDirs(hc)
	if err == nil {
		var w *wakeup.Memory
		w, err = wakeup.NewMemory(wakeup.MemoryConfig{
			Thresholds:       cfg.Thresholds,
			RootDir:          root,
			KubepodsDir:      kubepods,
			V2:               v2,
			KernelMemcg:      cfg.KernelMemcgNotification,
			PSIFile:          filepath.Join(cfg.ProcRoot, "pressure", "memory"),
			FastPollInterval: cfg.FastPollInterval,
			FastPollMargin:   cfg.FastPollMargin,
			Clock:            clock.RealClock{},
			Log:              log.With("component", "wakeups"),
			Counter:          met,
			Reads:            reads,
		})
		if err == nil {
			if v2 && cfg.KernelMemcgNotification {
				log.Info("--kernel-memcg-notification has no effect on cgroup v2; PSI triggers, memory.events and the fast poll wake the loop instead")
			}
			return w
		}
	}
	log.Warn("no wake-ups between housekeeping intervals", "interval", cfg.HousekeepingInterval, "err", err)
	return nil
}

// HostConfig is where the node's signals and pod cgroups are read, from
// cfg.
func HostConfig(cfg *config.Config) host.Config {
	return host.Config{
		ProcRoot:       cfg.ProcRoot,
		CgroupMount:    cfg.CgroupMount,
		CgroupRoot:     cfg.CgroupRoot,
		CgroupDriver:   cfg.CgroupDriver,
		KubeletRootDir: cfg.RootDir,
		ImageFsPath:    cfg.ImageFSPath,
		ReservedMemory: cfg.SystemReservedMemory + cfg.KubeReservedMemory,
		// kubelet 1.37's memory.available, less the hugepages, unless
		// --feature-gates=HugepageAwareEviction=false.
		DisableHugepageAwareEviction: !cfg.HugepageAwareEviction,
	}
}

// DeciderConfig is the decision's configuration from cfg, for a node
// with layout; `evictd simulate` decides with the same.
func DeciderConfig(cfg *config.Config, layout signals.FsLayout) decide.DeciderConfig {
	return decide.DeciderConfig{
		Thresholds:               cfg.Thresholds,
		TransitionPeriod:         cfg.PressureTransitionPeriod,
		MaxObservationAge:        cfg.MaxObservationAge,
		MaxPodGracePeriodSeconds: int64(cfg.MaxPodGracePeriodSeconds),
		Layout:                   layout,
		Exhaustion:               decide.ExhaustionConfig{Enabled: cfg.TimeToExhaustion, Margin: cfg.TimeToExhaustionMargin},
		LocalStorageByKubelet:    localStorageByKubelet(cfg),
	}
}

// localStorageByKubelet says whether the pods over their own local-storage
// limits are left to the kubelet as far as the configuration alone says:
// with --local-storage-eviction=kubelet, while the kubelet's own
// configuration has localStorageCapacityIsolation on; without that
// configuration it is decided from the node while running
// (localStorageAgent), and is evictd's in a replay, whose records say it
// (recorder.WithLocalStorage).
func localStorageByKubelet(cfg *config.Config) bool {
	return cfg.LocalStorageEviction == config.LocalStorageKubelet && cfg.KubeletLocalStorage != nil && *cfg.KubeletLocalStorage
}

// localStorageAgent decides, before each pass, whether the kubelet evicts
// the pods over their own local-storage limits: it does while it reports
// the node's ephemeral-storage capacity, which it does only with
// localStorageCapacityIsolation on. Until the node is known, evictd
// leaves them to it as well: that is the kubelet's default, and evicting
// them too could evict a pod twice. Each change is logged and exported.
type localStorageAgent struct {
	node  func() (reported, known bool)
	gauge *metrics.LocalStorageAgent
	log   *slog.Logger
	last  string
}

func (a *localStorageAgent) ByKubelet() bool {
	reported, known := a.node()
	by, why := true, "the node is not known yet"
	switch {
	case known && reported:
		why = "its node reports an ephemeral-storage capacity: the kubelet's localStorageCapacityIsolation is on"
	case known:
		by, why = false, "its node reports no ephemeral-storage capacity: the kubelet's localStorageCapacityIsolation is off"
	}
	if why != a.last {
		a.last = why
		a.gauge.Set(by)
		if by {
			a.log.Info("pods over their own local-storage limits are left to the kubelet", "why", why)
		} else {
			a.log.Info("evictd evicts the pods over their own local-storage limits", "why", why)
		}
	}
	return by
}
