package reclaim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
)

// DefaultTimeout bounds one CRI call when Config.Timeout is 0.
const DefaultTimeout = 30 * time.Second

// While settling, the filesystem is read every settlePoll and counts as
// settled once space has come back and a reading has not changed for
// settleQuiet since.
const (
	settlePoll  = 100 * time.Millisecond
	settleQuiet = time.Second
)

// Runtime is the part of the CRI runtime service reclaim needs; evictd's
// cri.RuntimeService and k8s.io/cri-client's runtime client satisfy it.
type Runtime interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	StopPodSandbox(ctx context.Context, podSandboxID string) error
	RemovePodSandbox(ctx context.Context, podSandboxID string) error
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	RemoveContainer(ctx context.Context, containerID string) error
}

// Images is the part of the CRI image service reclaim needs; evictd's
// cri.ImageService and k8s.io/cri-client's image client satisfy it.
type Images interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
}

// Measure returns the bytes available to unprivileged users on the
// filesystem holding path (StatfsAvailable does it with statfs(2)).
type Measure func(path string) (availableBytes int64, err error)

// Config configures a Reclaimer.
type Config struct {
	// NodeFsPath is a directory on nodefs, the kubelet's root directory
	// (/var/lib/kubelet); required.
	NodeFsPath string
	// ImageFsPath is a directory on the runtime's image filesystem (for
	// containerd its root, /var/lib/containerd, or the mountpoint ImageFsInfo
	// reports); "" means NodeFsPath (single filesystem).
	ImageFsPath string
	// MinImageAge is how long an image must have been known to this
	// Reclaimer before it may be removed (--minimum-image-ttl-duration);
	// default 0 here, 2m in cmd/evictd as in the kubelet.
	MinImageAge time.Duration
	// SandboxImage is the runtime's sandbox (pause) image, never removed
	// (cri.Client.SandboxImage; "" when the runtime reports it pinned instead);
	// images the runtime reports as pinned are never removed either.
	SandboxImage string
	// Clock tells the time for image ages and paces the settling wait;
	// default the real clock.
	Clock clock.Clock
	// Timeout bounds each CRI call; default DefaultTimeout (30 s).
	Timeout time.Duration
	// Measure reads a filesystem's available bytes; default StatfsAvailable.
	Measure Measure
	// Settle bounds how long, after a kind of reclaim removed something,
	// the filesystem is watched until its available bytes stop changing
	// (for settleQuiet, 1 s): containerd frees a removed container's
	// snapshot in its garbage collector, a few hundred milliseconds later,
	// and both FreedBytes and the loop's observation after reclaim
	// should see it. Default decide.ReclaimSettle (5 s), the loop's own
	// wait after a reclaim; negative: no wait.
	Settle time.Duration
}

// Validate rejects a configuration that cannot work: one without the
// nodefs path. The durations come from internal/config, which has
// checked them; here a negative MinImageAge counts as 0 and a Timeout of
// 0 or less takes the default.
func (c Config) Validate() error {
	if c.NodeFsPath == "" {
		return errors.New("reclaim: the kubelet root directory (nodefs path) must be set")
	}
	return nil
}

// Reclaimer removes dead containers, dead sandboxes and unused images for a
// disk signal. It implements the loop's Reclaimer; its methods are safe for
// concurrent use (calls are serialized).
type Reclaimer struct {
	cfg Config
	rt  Runtime
	img Images
	log *slog.Logger

	mu     sync.Mutex            // serializes Reclaim; guards images
	images map[string]*imageSeen // by image ID: what this Reclaimer knows of each image
}

// New returns a Reclaimer removing containers and sandboxes through rt and
// images through img. Zero fields of cfg take their defaults; cfg should have
// passed Validate.
func New(cfg Config, rt Runtime, img Images, log *slog.Logger) *Reclaimer {
	if cfg.ImageFsPath == "" {
		cfg.ImageFsPath = cfg.NodeFsPath
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Measure == nil {
		cfg.Measure = StatfsAvailable
	}
	if cfg.Settle == 0 {
		cfg.Settle = decide.ReclaimSettle
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reclaimer{cfg: cfg, rt: rt, img: img, log: log, images: map[string]*imageSeen{}}
}

// Plan returns the kinds of reclaim to run, in order, for a disk signal under
// a layout, and the error for a signal that is not a disk signal:
//
//	layout             nodefs.*             imagefs.*            containerfs.*
//	single             containers, images   containers, images   containers, images
//	dedicated imagefs  containers (*)       containers, images   containers, images
//	split imagefs      containers           images               containers
//
// (*) the kubelet runs nothing there; see the package documentation.
func Plan(sig signals.Signal, layout signals.FsLayout) ([]decide.ReclaimKind, error) {
	if sig.Pressure() != signals.DiskPressure {
		return nil, fmt.Errorf("reclaim for %s: not a disk signal", sig)
	}
	fs := fsOf(sig)
	switch layout {
	case signals.SingleFs:
		return []decide.ReclaimKind{decide.ReclaimContainers, decide.ReclaimImages}, nil
	case signals.DedicatedImageFs:
		if fs == nodeFs {
			return []decide.ReclaimKind{decide.ReclaimContainers}, nil
		}
		return []decide.ReclaimKind{decide.ReclaimContainers, decide.ReclaimImages}, nil
	case signals.SplitImageFs:
		if fs == imageFs {
			return []decide.ReclaimKind{decide.ReclaimImages}, nil
		}
		return []decide.ReclaimKind{decide.ReclaimContainers}, nil
	}
	return nil, fmt.Errorf("reclaim for %s: unknown filesystem layout %d", sig, layout)
}

type fsKind int

const (
	nodeFs fsKind = iota
	imageFs
	containerFs
)

func fsOf(sig signals.Signal) fsKind {
	switch sig {
	case signals.ImageFsAvailable, signals.ImageFsInodesFree:
		return imageFs
	case signals.ContainerFsAvailable, signals.ContainerFsInodesFree:
		return containerFs
	}
	return nodeFs
}

// measurePath is the directory whose filesystem is measured around a kind of
// reclaim for sig. Images live on imagefs, so images are measured there.
// Containers are measured on the filesystem under pressure, since that is
// what the reclaim is for: a dead container's writable layer is on imagefs
// with a dedicated imagefs and on nodefs otherwise, its logs always on
// nodefs; so with a dedicated imagefs nodefs.* is measured on nodefs (the
// logs) and imagefs.*/containerfs.* on imagefs (the writable layers), and
// in the other layouts every container reclaim is measured on nodefs.
func (r *Reclaimer) measurePath(kind decide.ReclaimKind, sig signals.Signal, layout signals.FsLayout) string {
	if kind == decide.ReclaimImages {
		return r.cfg.ImageFsPath
	}
	if layout == signals.DedicatedImageFs && fsOf(sig) != nodeFs {
		return r.cfg.ImageFsPath
	}
	return r.cfg.NodeFsPath
}

// Reclaim runs the reclaim Plan gives for sig and layout, one action per
// kind. A kind that fails (wholly or in part) carries its error in its
// action and the next kind still runs. The error is for a signal or layout
// reclaim does not handle.
func (r *Reclaimer) Reclaim(ctx context.Context, sig signals.Signal, layout signals.FsLayout) ([]decide.ReclaimAction, error) {
	kinds, err := Plan(sig, layout)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	log := r.log.With("signal", sig, "layout", layout)
	var actions []decide.ReclaimAction
	for _, kind := range kinds {
		if err := ctx.Err(); err != nil {
			actions = append(actions, decide.ReclaimAction{Kind: kind, Err: fmt.Errorf("reclaim %s: %w", kind, err)})
			continue
		}
		path := r.measurePath(kind, sig, layout)
		before, errBefore := r.cfg.Measure(path)
		var a decide.ReclaimAction
		switch kind {
		case decide.ReclaimContainers:
			a = r.removeDeadContainers(ctx, log)
		case decide.ReclaimImages:
			a = r.removeUnusedImages(ctx, log)
		}
		after, errAfter := r.cfg.Measure(path)
		if errAfter == nil && errBefore == nil && a.Removed > 0 {
			after, errAfter = r.settle(ctx, path, before, after)
		}
		if err := errors.Join(errBefore, errAfter); err != nil {
			log.Warn("cannot measure what reclaim freed", "kind", kind, "path", path, "err", err)
		} else if a.FreedBytes = after - before; a.FreedBytes < 0 {
			// Something else wrote meanwhile; a counter takes no negative.
			log.Debug("filesystem lost space during reclaim", "kind", kind, "path", path, "bytes", -a.FreedBytes)
			a.FreedBytes = 0
		}
		actions = append(actions, a)
	}
	return actions, nil
}

// settle reads path's filesystem until its available bytes have risen
// above before and not changed for settleQuiet since, at most for the
// configured Settle, and returns the last reading (last is the one just
// taken).
func (r *Reclaimer) settle(ctx context.Context, path string, before, last int64) (int64, error) {
	if r.cfg.Settle < 0 {
		return last, nil
	}
	clk := r.cfg.Clock
	deadline, quietSince := clk.Now().Add(r.cfg.Settle), clk.Now()
	// Quiet counts only once some space has come back: on a busy node
	// containerd's collector may not have run for seconds after the
	// removal, and a filesystem that has not changed yet is not settled.
	for clk.Now().Before(deadline) && (last <= before || clk.Since(quietSince) < settleQuiet) {
		select {
		case <-ctx.Done():
			return last, nil
		case <-clk.After(settlePoll):
		}
		v, err := r.cfg.Measure(path)
		if err != nil {
			return last, err
		}
		if v != last {
			last, quietSince = v, clk.Now()
		}
	}
	return last, nil
}

// call runs one CRI call bounded by the configured timeout.
func (r *Reclaimer) call(ctx context.Context, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	return f(ctx)
}
