package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/manager"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/notify"
	"github.com/evictd/evictd/internal/server"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
	"github.com/evictd/evictd/systemd"
)

// loadConfig parses flags into a validated configuration; ok is false when
// the caller should exit with code: after printing help (head and the
// flags) or the version on stdout, or the error on stderr.
func loadConfig(name, head string, args []string, stdout, stderr io.Writer, extra func(*pflag.FlagSet)) (cfg *config.Config, code int, ok bool) {
	fs, opts := config.NewFlagSet(name)
	fs.SetOutput(stderr)
	setUsage(fs, stdout, head)
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, 0, false
		}
		return nil, usageError(stderr, name, err), false
	}
	if f := fs.Lookup("version"); f != nil && f.Value.String() == "true" {
		fmt.Fprintln(stdout, buildVersion())
		return nil, 0, false
	}
	if fs.NArg() > 0 {
		return nil, usageError(stderr, name, fmt.Errorf("unexpected argument %q (the commands are %s)", fs.Arg(0), commandNames())), false
	}
	cfg, err := opts.Complete(fs)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return nil, 1, false
	}
	return cfg, 0, true
}

func hostConfig(cfg *config.Config) host.Config {
	return host.Config{
		ProcRoot:       cfg.ProcRoot,
		CgroupMount:    cfg.CgroupMount,
		CgroupRoot:     cfg.CgroupRoot,
		CgroupDriver:   cfg.CgroupDriver,
		KubeletRootDir: cfg.RootDir,
		ImageFsPath:    cfg.ImageFSPath,
		ReservedMemory: cfg.SystemReservedMemory + cfg.KubeReservedMemory,
	}
}

func deciderConfig(cfg *config.Config, layout signals.FsLayout) decide.DeciderConfig {
	return decide.DeciderConfig{
		Thresholds:               cfg.Thresholds,
		TransitionPeriod:         cfg.PressureTransitionPeriod,
		MaxObservationAge:        cfg.MaxObservationAge,
		MaxPodGracePeriodSeconds: int64(cfg.MaxPodGracePeriodSeconds),
		Layout:                   layout,
	}
}

// agent runs evictd until SIGINT or SIGTERM.
func agent(args []string, stdout, stderr io.Writer) int {
	refusal := stderr
	if f, ok := stderr.(*os.File); ok && systemd.IsJournalStream(f) {
		refusal = systemd.ErrorLines(stderr)
	}
	cfg, code, ok := loadConfig("evictd", usage, args, stdout, refusal, func(fs *pflag.FlagSet) {
		fs.Bool("version", false, "Print the version, commit and Go version, and exit. (default false)")
	})
	if !ok {
		return code
	}
	log := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	for _, note := range cfg.Notes {
		log.Info(note)
	}
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	// Taken first, before anything could start a child that would inherit
	// the socket or LISTEN_FDS.
	passed, err := systemd.Listener()
	if err != nil {
		log.Error("cannot use the socket systemd passed", "err", err)
		return 1
	}
	var kubeRC *rest.Config
	if cfg.Kubeconfig != "" {
		if kubeRC, err = restConfig(cfg.Kubeconfig); err != nil {
			log.Error("cannot use the kubeconfig; refusing to start", "err", err)
			return 1
		}
	}

	hc := hostConfig(cfg)
	// One mount table for the filesystem signals and the runtime's layout:
	// cadvisor keeps every mount of the node in it.
	fs := host.NewFilesystems()
	sources, err := host.Sources(hc, fs)
	if err != nil {
		log.Error("cannot set up the node's signals", "err", err)
		return 1
	}
	reg := prometheus.NewRegistry()
	if err := registerProcessMetrics(reg); err != nil {
		log.Error("cannot register process metrics", "err", err)
		return 1
	}
	met := metrics.New(reg)
	met.SetVersion(version)
	if cfg.KubeletChecked {
		present := map[string]bool{}
		for _, r := range cfg.KubeletRaces {
			present[r.Kind] = true
		}
		if err := metrics.RegisterKubeletRaces(reg, config.RaceKinds(), present); err != nil {
			log.Error("cannot register metrics", "err", err)
			return 1
		}
	}
	if err := met.Err(); err != nil {
		log.Error("cannot register metrics", "err", err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	hs, err := host.NewPodStatsReader(hc)
	if err != nil {
		log.Error("cannot read pod cgroups", "err", err)
		return 1
	}
	defer hs.Close()
	// Every long-running part sends its result here; the first failure
	// brings the others down.
	errc := make(chan error, 16)
	running := 0

	// The container runtime: image filesystem, pods' disk use, reclaim.
	rc := newRuntimeConn(cfg, hc, fs, met, log)
	defer rc.close()
	if cfg.ImageFSPath == "" {
		sources = append(sources, imageFsSource{rc})
	}
	dialCtx, cancelDial := context.WithTimeout(ctx, cfg.RuntimeRequestTimeout)
	layout, dialErr := rc.connect(dialCtx)
	cancelDial()
	if dialErr != nil {
		layout, err = layoutOf(hc, fs)
		if err != nil {
			log.Error("cannot tell the node's filesystem layout", "err", err)
			return 1
		}
		log.Warn("cannot reach the container runtime; retrying in the background. Until then imagefs is not observed (unless --imagefs-path), pods have no disk stats and nothing is reclaimed",
			"endpoint", cfg.ContainerRuntimeEndpoint, "assumedLayout", layout.String(), "err", dialErr)
		go func() { errc <- rc.retry(ctx, cfg.RuntimeRetry, cfg.RuntimeRetryMax) }()
		running++
	}

	warnings, err := checkCapacities(ctx, cfg, sources, layout)
	for _, w := range warnings {
		log.Warn(w)
	}
	if err != nil {
		log.Error("thresholds contradict this node's capacity; refusing to start", "err", err)
		return 1
	}

	// The pods' disk stats are gathered in the background (diskCache),
	// so that no pass waits on the runtime or a slow filesystem.
	podStats := newPodStats(hs, rc, cfg.DiskStatsMaxAge)
	go func() { errc <- podStats.disk.run(ctx) }()
	running++
	deps := manager.Deps{
		Clock:     clock.RealClock{},
		Sources:   sources,
		Pods:      cgroupPods{hc},
		Stats:     podStats,
		Reclaimer: runtimeReclaimer{rc},
		Metrics:   met,
		Log:       log,
	}
	var relisted <-chan struct{} // the pod cache listed afresh: a pass at once
	if cfg.Kubeconfig == "" {
		log.Warn("no --kubeconfig: running standalone on this host; evictd observes, decides and exports metrics but evicts nothing")
	} else {
		var stopLocally func(context.Context, *signals.Pod, int64) error
		if !cfg.DryRun {
			stopLocally = rc.stopPodContainers
		}
		// client-go's own lines (klog) through the same handler: in
		// --log-format, with the journal's priorities.
		klog.SetSlogLogger(log.With("component", "client-go"))
		k, err := newKube(cfg, kubeRC, met, log, stopLocally)
		if err != nil {
			log.Error("cannot connect to the API server", "err", err)
			return 1
		}
		defer k.stop()
		if err := metrics.RegisterInformer(reg, "pods", k.pods, nil); err != nil {
			log.Error("cannot register the pod informer's metrics", "err", err)
			return 1
		}
		log.Info("connected to the API server", "kubeconfig", cfg.Kubeconfig, "node", cfg.NodeName)
		running += k.start(ctx, log, errc)
		deps.Pods, deps.Evicter, deps.Status, deps.Events = k.pods, k.evicter, k.status, k.events
		relisted = k.relisted
	}
	if cfg.DryRun {
		log.Info("dry run: decisions are reported, never acted on")
	}
	wakeups := newWakeups(cfg, hc, met, log)
	if wakeups != nil {
		deps.Wakeups = wakeups
	}

	var readyOnce sync.Once
	deps.AfterPass = func(*manager.Status) {
		readyOnce.Do(func() {
			if err := systemd.Ready(); err != nil {
				log.Warn("cannot notify systemd", "err", err)
			}
		})
	}
	m, err := manager.New(manager.Config{
		HousekeepingInterval:      cfg.HousekeepingInterval,
		StuckAfter:                cfg.StuckAfter,
		DryRun:                    cfg.DryRun,
		Decider:                   deciderConfig(cfg, layout),
		MaxEvictionsPerHour:       cfg.MaxEvictionsPerHour,
		LocalStorageEvictionQPS:   cfg.LocalStorageEvictionQPS,
		LocalStorageEvictionBurst: cfg.LocalStorageEvictionBurst,
		CleanupTimeout:            cfg.CleanupTimeout,
	}, deps)
	if err != nil {
		log.Error("cannot start the loop", "err", err)
		return 1
	}
	log.Info("evictd starting", "version", version, "commit", buildVersion().Commit, "thresholds", len(m.Thresholds()), "layout", layout.String(),
		"housekeepingInterval", cfg.HousekeepingInterval, "maxEvictionsPerHour", cfg.MaxEvictionsPerHour, "metrics", cfg.MetricsBindAddress)

	srv := server.New(cfg.MetricsBindAddress, reg, m.Ready, func() any { return m.Status() }, log)
	if err := srv.Secure(server.Access{CertFile: cfg.MetricsTLSCertFile, KeyFile: cfg.MetricsTLSPrivateKeyFile, TokenFile: cfg.MetricsBearerTokenFile}); err != nil {
		log.Error("cannot guard the metrics endpoint", "err", err)
		return 1
	}
	if passed != nil {
		// evictd.socket: systemd holds the port, also while evictd
		// restarts, and passes it.
		srv.UseListener(passed)
		log.Info("serving the endpoints on the socket systemd passed (socket activation), not binding --metrics-bind-address",
			"socket", passed.Addr().String(), "metricsBindAddress", cfg.MetricsBindAddress)
		if passed.Addr().String() != cfg.MetricsBindAddress {
			log.Warn("the socket systemd passed is not --metrics-bind-address, which `evictd status` asks and the note on an unguarded address checks; set them alike",
				"socket", passed.Addr().String(), "metricsBindAddress", cfg.MetricsBindAddress)
		}
	}

	// The server retries a port that is taken in the background and does
	// not return meanwhile: a local user who binds it first must not stop
	// the loop, nor the watchdog, which is fed from the loop's readiness.
	go func() { errc <- srv.Run(ctx) }()
	go func() { errc <- m.Run(ctx) }()
	go func() { errc <- systemd.Watchdog(ctx, func() bool { return m.Ready() == nil }, log) }()
	running += 3
	if wakeups != nil {
		go func() { errc <- wakeups.Run(ctx, m.Wake) }()
		running++
	}
	if relisted != nil {
		go func() {
			for {
				select {
				case <-ctx.Done():
					errc <- nil
					return
				case <-relisted:
					m.Wake()
				}
			}
		}()
		running++
	}

	var first error
	for range running {
		if err := <-errc; err != nil && first == nil {
			first = err
			stop()
		}
	}
	if err := systemd.Stopping(); err != nil {
		log.Warn("cannot notify systemd", "err", err)
	}
	if first != nil {
		log.Error("evictd stopped", "err", first)
		return 1
	}
	log.Info("evictd stopped")
	return 0
}

// newWakeups sets up the sources that start a pass between housekeeping
// ticks: memcg threshold notifications (cgroup v1, --kernel-memcg-notification),
// PSI triggers and memory.events (cgroup v2, /proc/pressure/memory), and the
// fast poll. Nil, with a warning, when the memory cgroups cannot be found:
// passes then run every housekeeping interval only.
func newWakeups(cfg *config.Config, hc host.Config, met *metrics.Metrics, log *slog.Logger) *notify.Memory {
	root, kubepods, v2, err := host.MemoryCgroupDirs(hc)
	if err == nil {
		var w *notify.Memory
		w, err = notify.NewMemory(notify.MemoryConfig{
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

func registerProcessMetrics(reg *prometheus.Registry) error {
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// statusTimeout bounds how long `evictd status` waits for the agent.
const statusTimeout = 5 * time.Second
