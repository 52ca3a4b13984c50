package testruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"

	"github.com/evictd/evictd/internal/testing/childproc"
)

// PauseImage is the sandbox image of every runtime (the workload binary
// running "sleep"), imported by Start.
const PauseImage = "evictd.test/pause:1"

// Namespace is the containerd namespace of the CRI plugin, where images are
// imported.
const Namespace = "k8s.io"

// ErrNotInstalled is wrapped by Start's error when containerd, ctr, runc or
// the runc shim is missing (run hack/install-runtime.sh as root).
var ErrNotInstalled = errors.New("containerd and runc not installed (run hack/install-runtime.sh as root)")

// Options configures Start. The zero value keeps everything in a new
// temporary directory on the machine's disk.
type Options struct {
	// Root is a directory (a small filesystem from MountTmpfs or MountExt4,
	// for real disk pressure) in which containerd keeps its root at
	// Root/containerd: content store, snapshots (the image filesystem) and
	// metadata. It must exist; Root/containerd must not.
	Root string
	// State is a directory in which containerd keeps its state at
	// State/containerd: task bundles, containers' rootfs mounts, runc's
	// state. Default: in the runtime's temporary directory.
	State string
	// Snapshotter is "overlayfs", "native", or "" for overlayfs when an
	// overlay mount works on Root's filesystem and native otherwise.
	Snapshotter string
	// StatsCollectPeriod is how often, in seconds, the CRI plugin refreshes
	// snapshot usage (ImageFsInfo, containers' writable layers); default 1
	// (containerd's own default is 10).
	StatsCollectPeriod int
	// WorkloadBinary is the static workload binary put into images; default
	// $EVICTD_WORKLOAD_BIN, else built from hack/workload with the go command.
	WorkloadBinary string
	// PodNetwork gives pods a CNI network (a bridge of the runtime's own,
	// from Debian's containernetworking-plugins), so the runtime reports
	// NetworkReady and a kubelet on it reports its node Ready. Without it
	// only hostNetwork pods run.
	PodNetwork bool
	// ReadyTimeout bounds the wait for containerd's CRI to report
	// RuntimeReady; default 30 s.
	ReadyTimeout time.Duration
	// SystemdCgroup has runc make containers' cgroups through systemd
	// (scopes under the pods' slices), for a kubelet with the systemd
	// cgroup driver; it needs systemd as PID 1.
	SystemdCgroup bool
	// PromptGC has containerd collect garbage after every deletion
	// (deletion_threshold 1) and as often as every other collection's
	// length (pause_threshold 0.5), so that a removed container's snapshot
	// is freed at once. By default (0 and 0.02) a deletion triggers no
	// collection and collections are spaced by 50 times their length: on a
	// busy machine a removed container's layer came back after evictd's
	// 5 s reclaim settle, which a test of what reclaim frees cannot tell
	// from evictd's own fault.
	PromptGC bool
	// BinDir is a directory holding the containerd, ctr and
	// containerd-shim-runc-v2 to run (the default lane's,
	// testcluster.ContainerdBinDir); runc stays the one on PATH. Default:
	// all of them from PATH.
	BinDir string
}

// Runtime is a running containerd of its own. Its methods are safe for
// concurrent use.
type Runtime struct {
	opts        Options
	dir         string // temporary: socket, config, log, workload binary, staging
	root, state string // containerd's root and state directories
	socket      string
	snapshotter string
	workload    string
	network     podNetwork
	readyIn     time.Duration
	// configVersion is the version of containerd's config: 2 for
	// containerd 1.6, 3 or 4 for containerd 2.
	configVersion int

	mu      sync.Mutex
	daemon  *childproc.Process
	rs      internalapi.RuntimeService
	is      internalapi.ImageManagerService
	stopped bool
}

// Start starts a containerd with a config of its own (from `containerd
// config default`: root, state and socket as above, restrict_oom_score_adj,
// PauseImage as the sandbox image, no CNI config), waits until its CRI
// reports RuntimeReady, and imports PauseImage. ctx bounds the start, not
// containerd's life: it runs until Stop. If Start fails it undoes what it did
// (processes, mounts, directories) and its error carries the end of
// containerd's log when containerd is at fault. It wraps ErrNotInstalled when
// a binary is missing.
func Start(ctx context.Context, opts Options) (*Runtime, error) {
	begin := time.Now()
	for _, bin := range []string{"containerd", "ctr", "runc", "containerd-shim-runc-v2"} {
		if bin != "runc" && opts.BinDir != "" {
			bin = filepath.Join(opts.BinDir, bin)
		}
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s: %w", bin, ErrNotInstalled)
		}
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	if opts.StatsCollectPeriod <= 0 {
		opts.StatsCollectPeriod = 1
	}
	switch opts.Snapshotter {
	case "", "overlayfs", "native":
	default:
		return nil, fmt.Errorf("Options.Snapshotter %q: want overlayfs, native or empty", opts.Snapshotter)
	}
	dir, err := os.MkdirTemp("", "evictd-testruntime-")
	if err != nil {
		return nil, fmt.Errorf("create runtime directory: %w", err)
	}
	r := &Runtime{opts: opts, dir: dir, socket: filepath.Join(dir, "containerd.sock")}
	if err := r.start(ctx); err != nil {
		return nil, errors.Join(err, r.Stop())
	}
	r.readyIn = time.Since(begin)
	return r, nil
}

func (r *Runtime) start(ctx context.Context) error {
	var err error
	if r.root, err = daemonDir(r.opts.Root, r.dir, "root"); err != nil {
		return fmt.Errorf("Options.Root: %w", err)
	}
	if r.state, err = daemonDir(r.opts.State, r.dir, "state"); err != nil {
		return fmt.Errorf("Options.State: %w", err)
	}
	if r.snapshotter = r.opts.Snapshotter; r.snapshotter == "" {
		r.snapshotter = "native"
		if err := overlayWorks(r.root); err == nil {
			r.snapshotter = "overlayfs"
		}
	}
	if r.workload, err = workloadBinary(r.opts.WorkloadBinary, r.dir); err != nil {
		return err
	}
	cfg := daemonConfig{
		root: r.root, state: r.state, socket: r.socket, cniDir: filepath.Join(r.dir, "cni"),
		sandboxImage: PauseImage, snapshotter: r.snapshotter, statsPeriodSec: r.opts.StatsCollectPeriod,
		systemdCgroup: r.opts.SystemdCgroup, promptGC: r.opts.PromptGC,
	}
	if r.opts.BinDir != "" {
		cfg.shim = r.bin("containerd-shim-runc-v2")
	}
	if r.configVersion, err = cfg.write(r.bin("containerd"), r.path("config.toml")); err != nil {
		return fmt.Errorf("containerd config: %w", err)
	}
	if r.opts.PodNetwork {
		if r.network, err = newPodNetwork(); err != nil {
			return err
		}
		if err := r.network.write(cfg.cniDir); err != nil {
			return fmt.Errorf("pod network: %w", err)
		}
	}
	r.mu.Lock()
	err = r.startDaemon(ctx)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return r.importImage(ctx, PauseImage, []string{"sleep"}, 0)
}

// daemonDir returns base/containerd, made new, or dir/name when base is "".
func daemonDir(base, dir, name string) (string, error) {
	if base == "" {
		p := filepath.Join(dir, name)
		return p, os.Mkdir(p, 0o711)
	}
	if fi, err := os.Stat(base); err != nil {
		return "", err
	} else if !fi.IsDir() {
		return "", fmt.Errorf("%s: not a directory", base)
	}
	p := filepath.Join(base, "containerd")
	if err := os.Mkdir(p, 0o711); err != nil {
		return "", fmt.Errorf("%w (left by an earlier runtime?)", err)
	}
	return p, nil
}

// startDaemon starts containerd and waits until its CRI reports
// RuntimeReady; r.mu is held.
func (r *Runtime) startDaemon(ctx context.Context) error {
	d, err := childproc.Start("containerd", r.bin("containerd"), []string{"--config", r.path("config.toml")}, r.LogPath())
	if err != nil {
		return err
	}
	r.daemon = d
	ctx, cancel := context.WithTimeout(ctx, r.opts.ReadyTimeout)
	defer cancel()
	quiet := klog.NewContext(ctx, logr.Discard()) // the CRI client logs every failed try
	var last error
	for {
		if d.Exited() {
			return d.ExitError()
		}
		if last = r.ready(quiet); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerd (pid %d) not ready after %s: %w; last lines of %s:\n%s",
				d.PID(), r.opts.ReadyTimeout, last, r.LogPath(), childproc.Tail(r.LogPath(), 30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ready connects the CRI clients if need be and asks for the runtime's
// status.
func (r *Runtime) ready(ctx context.Context) error {
	if _, err := os.Stat(r.socket); err != nil {
		return err
	}
	if r.rs == nil {
		// The tests' own requests (a sandbox's start, a container's):
		// 30 s, as a busy machine's containerd can take seconds to start
		// a container (the kubelet's default is 2m).
		rs, err := remote.NewRemoteRuntimeService(ctx, r.Endpoint(), 30*time.Second, nil, false)
		if err != nil {
			return err
		}
		is, err := remote.NewRemoteImageService(ctx, r.Endpoint(), 5*time.Second, nil, false)
		if err != nil {
			return errors.Join(err, rs.Close(ctx))
		}
		r.rs, r.is = rs, is
	}
	st, err := r.rs.Status(ctx, false)
	if err != nil {
		return err
	}
	for _, c := range st.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.RuntimeReady && c.GetStatus() {
			return nil
		}
	}
	return fmt.Errorf("CRI status: RuntimeReady not true: %v", st.GetStatus().GetConditions())
}

// StartContainerd starts containerd again with the same config, root, state
// and socket, and waits until its CRI is ready.
func (r *Runtime) StartContainerd(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.stopped:
		return errors.New("runtime stopped")
	case r.daemon != nil && !r.daemon.Exited():
		return fmt.Errorf("containerd (pid %d) already running", r.daemon.PID())
	}
	return r.startDaemon(ctx)
}

// Socket returns the path of containerd's gRPC socket (the CRI endpoint).
func (r *Runtime) Socket() string { return r.socket }

// Endpoint returns the CRI endpoint, unix://<Socket()>, as the kubelet's
// containerRuntimeEndpoint takes it.
func (r *Runtime) Endpoint() string { return "unix://" + r.socket }

// RootDir returns containerd's root directory (the image filesystem is the
// filesystem holding it).
func (r *Runtime) RootDir() string { return r.root }

// StateDir returns containerd's state directory.
func (r *Runtime) StateDir() string { return r.state }

// Dir returns the runtime's temporary directory: socket, config.toml and
// containerd.log.
func (r *Runtime) Dir() string { return r.dir }

// Snapshotter returns the snapshotter in use: "overlayfs" or "native".
func (r *Runtime) Snapshotter() string { return r.snapshotter }

// LogPath returns the path of containerd's log.
func (r *Runtime) LogPath() string { return r.path("containerd.log") }

// ReadyIn returns how long Start took, the pause image's import included.
func (r *Runtime) ReadyIn() time.Duration { return r.readyIn }

// PID returns containerd's process ID, or 0 when it is not running.
func (r *Runtime) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.daemon == nil || r.daemon.Exited() {
		return 0
	}
	return r.daemon.PID()
}

// RuntimeService returns the runtime's CRI runtime client (k8s.io/cri-client),
// valid until Stop or StopContainerd.
func (r *Runtime) RuntimeService() internalapi.RuntimeService {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rs
}

// ImageService returns the runtime's CRI image client, valid until Stop or
// StopContainerd.
func (r *Runtime) ImageService() internalapi.ImageManagerService {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.is
}

func (r *Runtime) path(name string) string { return filepath.Join(r.dir, name) }

// bin returns the command to run for containerd, ctr or
// containerd-shim-runc-v2: Options.BinDir's, else the name, looked up on
// PATH.
func (r *Runtime) bin(name string) string {
	if r.opts.BinDir == "" {
		return name
	}
	return filepath.Join(r.opts.BinDir, name)
}

// BinDir returns Options.BinDir: "" when containerd is the one on PATH.
func (r *Runtime) BinDir() string { return r.opts.BinDir }
