package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/cri"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/reclaim"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
)

// runtimeParts is what evictd gets from the container runtime once it can
// reach it: the image filesystem, the pods' disk use, and reclaim.
type runtimeParts struct {
	client    *cri.Client
	imageFs   signals.Source // nil when --imagefs-path names the image fs
	disk      diskSource     // *cri.DiskStats
	reclaimer *reclaim.Reclaimer
	// pending reads afresh the disk stats of the pods that have just
	// started (the same *cri.DiskStats); nil reads none.
	pending pendingSource
}

// runtimeConn reaches the container runtime through the CRI. evictd must
// protect the node even while the runtime is down or not there yet, so the
// connection is retried in the background and every part that needs it
// reports an error (a missing signal, missing disk stats, no reclaim) until
// it is up — never a zero.
type runtimeConn struct {
	cfg *config.Config
	hc  host.Config
	fs  *host.Filesystems
	log *slog.Logger
	// dialLog is log without the endpoint, which the CRI client adds.
	dialLog *slog.Logger
	// reclaimLog is the agent's log with component=reclaim, not cri.
	reclaimLog *slog.Logger
	// met counts the runtime calls that fail (evictd_runtime_errors_total).
	met *metrics.Metrics
	// clock paces the retries.
	clock clock.Clock
	parts atomic.Pointer[runtimeParts]
}

func newRuntimeConn(cfg *config.Config, hc host.Config, fs *host.Filesystems, met *metrics.Metrics, log *slog.Logger) *runtimeConn {
	reclaimLog := log.With("component", "reclaim")
	log = log.With("component", "cri")
	return &runtimeConn{cfg: cfg, hc: hc, fs: fs, met: met, clock: clock.RealClock{}, dialLog: log, reclaimLog: reclaimLog, log: log.With("endpoint", cfg.ContainerRuntimeEndpoint)}
}

// connect dials once; it returns the filesystem layout the runtime shows.
func (r *runtimeConn) connect(ctx context.Context) (signals.FsLayout, error) {
	c, err := cri.Dial(ctx, r.cfg.ContainerRuntimeEndpoint, r.cfg.ImageServiceEndpoint, r.cfg.RuntimeRequestTimeout, r.dialLog)
	if err != nil {
		return signals.SingleFs, err
	}
	parts := &runtimeParts{client: c}
	imageFsPath := r.cfg.ImageFSPath
	layout := signals.SingleFs
	if imageFsPath == "" {
		if parts.imageFs, err = cri.NewImageFsSource(c, r.fs); err != nil {
			c.Close()
			return layout, err
		}
		info, err := c.Filesystems(ctx)
		if err != nil {
			c.Close()
			return layout, err
		}
		imageFsPath = info.ImageMountpoint()
		if layout, err = cri.Layout(ctx, c, r.fs, r.cfg.RootDir); err != nil {
			c.Close()
			return layout, err
		}
	} else if layout, err = r.fs.Layout(r.cfg.RootDir, imageFsPath); err != nil {
		c.Close()
		return layout, err
	}
	ds, err := cri.NewDiskStats(c, cri.DiskStatsConfig{
		KubeletRootDir: r.cfg.RootDir, PodLogsDir: r.cfg.PodLogsDir, MaxAge: r.cfg.VolumeStatsAggPeriod, Cut: r.countCut,
	})
	if err != nil {
		c.Close()
		return layout, err
	}
	parts.disk, parts.pending = ds, ds
	// Sandboxes run the runtime's pause image, which no container names:
	// reclaim must know it or it would delete it as unused. containerd 1.x
	// names it; containerd 2 and CRI-O report it pinned, and reclaim keeps
	// pinned images. When the runtime's answer cannot be read, evictd
	// reclaims nothing rather than risk that.
	if sandboxImage, err := c.SandboxImage(ctx); err != nil {
		r.log.Warn("node-level reclaim disabled: cannot tell the runtime's sandbox image", "err", err)
	} else {
		if sandboxImage == "" {
			r.log.Info("the runtime names no sandbox image: reclaim keeps the images it reports pinned, the sandbox's among them")
		}
		rcfg := reclaim.Config{
			NodeFsPath: r.cfg.RootDir, ImageFsPath: imageFsPath, MinImageAge: r.cfg.MinimumImageTTL,
			SandboxImage: sandboxImage, Timeout: r.cfg.RuntimeRequestTimeout,
		}
		if err := rcfg.Validate(); err != nil {
			c.Close()
			return layout, err
		}
		parts.reclaimer = reclaim.New(rcfg, c.RuntimeService(), c.ImageService(), r.reclaimLog)
	}
	r.parts.Store(parts)
	r.log.Info("connected to the container runtime", "imageFs", imageFsPath, "layout", layout.String())
	return layout, nil
}

// countCut counts a pod's walk cut in evictd_pod_disk_walks_cut_total.
func (r *runtimeConn) countCut(reason cri.CutReason) {
	switch reason {
	case cri.CutTime:
		r.met.IncDiskWalkCut(metrics.WalkCutTime)
	case cri.CutEntries:
		r.met.IncDiskWalkCut(metrics.WalkCutEntries)
	}
}

// retry dials until it succeeds or ctx is done: first after first, then
// after twice as long each time, up to most (config.Durations.RuntimeRetry
// and RuntimeRetryMax), so a node with no runtime (or a socket that does
// not speak the CRI) costs next to nothing.
func (r *runtimeConn) retry(ctx context.Context, first, most time.Duration) error {
	wait := first
	for r.parts.Load() == nil {
		select {
		case <-ctx.Done():
			return nil
		case <-r.clock.After(wait):
		}
		if _, err := r.connect(ctx); err != nil {
			r.log.Debug("container runtime still unreachable", "err", err, "nextTry", wait)
			wait = min(2*wait, most)
		}
	}
	return nil
}

func (r *runtimeConn) close() {
	if p := r.parts.Load(); p != nil {
		p.client.Close()
	}
}

func (r *runtimeConn) notConnected() error {
	return fmt.Errorf("container runtime %s not connected", r.cfg.ContainerRuntimeEndpoint)
}

// imageFsSource observes imagefs.* through the runtime.
type imageFsSource struct{ r *runtimeConn }

func (s imageFsSource) Observe(ctx context.Context, now time.Time) ([]signals.Observation, error) {
	p := s.r.parts.Load()
	if p == nil {
		return nil, fmt.Errorf("%s: %w", signals.ImageFsAvailable, s.r.notConnected())
	}
	return p.imageFs.Observe(ctx, now)
}

// runtimeReclaimer reclaims through the runtime once it is connected.
type runtimeReclaimer struct{ r *runtimeConn }

func (rr runtimeReclaimer) Reclaim(ctx context.Context, sig signals.Signal, layout signals.FsLayout) ([]decide.ReclaimAction, error) {
	p := rr.r.parts.Load()
	if p == nil {
		return nil, rr.r.notConnected()
	}
	if p.reclaimer == nil {
		return nil, fmt.Errorf("node-level reclaim is disabled: the runtime at %s did not name its sandbox image", rr.r.cfg.ContainerRuntimeEndpoint)
	}
	return p.reclaimer.Reclaim(ctx, sig, layout)
}

// stopPodContainers stops a pod's running containers through the CRI, for
// a hard eviction the API server has accepted or could not be asked.
func (r *runtimeConn) stopPodContainers(ctx context.Context, pod *signals.Pod, gracePeriodSeconds int64) error {
	p := r.parts.Load()
	if p == nil {
		r.met.IncRuntimeError(metrics.RuntimeStopContainers)
		return r.notConnected()
	}
	n, err := p.client.StopPodContainers(ctx, pod.UID, gracePeriodSeconds)
	if err != nil {
		r.met.IncRuntimeError(metrics.RuntimeStopContainers)
		// The caller logs the error; the containers stopped before it
		// are worth a line of their own only when there are some.
		if n > 0 {
			r.log.Info("stopped some of the evicted pod's containers through the runtime", "pod", pod.Ref(),
				"containers", n, "gracePeriodSeconds", gracePeriodSeconds)
		}
		return err
	}
	r.log.Info("stopped the evicted pod's containers through the runtime", "pod", pod.Ref(),
		"containers", n, "gracePeriodSeconds", gracePeriodSeconds)
	return nil
}

// stopSignal is the signal the runtime's stop sends the container with id
// (cri.Client.StopSignal), SIGTERM, the kubelet's and the runtimes'
// default, when the runtime has not said or is not connected.
func (r *runtimeConn) stopSignal(id string) syscall.Signal {
	if p := r.parts.Load(); p != nil {
		if sig, ok := p.client.StopSignal(id); ok {
			return sig
		}
	}
	return syscall.SIGTERM
}

// podSandboxReady reports whether the runtime still has a ready sandbox of
// the pod with uid (cri.Client.PodSandboxReady); an error while it is not
// connected.
func (r *runtimeConn) podSandboxReady(ctx context.Context, uid string) (bool, error) {
	p := r.parts.Load()
	if p == nil {
		return false, r.notConnected()
	}
	return p.client.PodSandboxReady(ctx, uid)
}

// readySandboxes lists the pods of the runtime's ready sandboxes by UID
// (cri.Client.ReadySandboxes); an error while it is not connected.
func (r *runtimeConn) readySandboxes(ctx context.Context) (map[string]cri.Sandbox, error) {
	p := r.parts.Load()
	if p == nil {
		return nil, r.notConnected()
	}
	return p.client.ReadySandboxes(ctx)
}
