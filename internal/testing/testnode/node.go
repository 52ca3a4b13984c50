package testnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/evictd/evictd/internal/testing/childproc"
	"github.com/evictd/evictd/internal/testing/testcluster"
	"github.com/evictd/evictd/internal/testing/testruntime"
)

// WorkloadImage is the image of every test pod: the static workload binary
// of hack/workload (sleep, alloc, write, files, procs) at /workload.
const WorkloadImage = "evictd.test/workload:1"

// DefaultPodsMemory is the default limit of the kubepods cgroup: small
// enough that memory pressure never reaches the rest of the machine.
const DefaultPodsMemory = 2 << 30

// termGrace is how long a component gets to exit after SIGTERM.
const termGrace = 10 * time.Second

// Options configures Start. The zero value gives a node named
// "evictd-node" whose pods may use DefaultPodsMemory, with the kubelet's
// own eviction thresholds disabled and everything on the machine's disk.
type Options struct {
	// Name is the node's name; default "evictd-node".
	Name string
	// PodsMemory is the memory limit in bytes of the kubepods cgroup: the
	// kubelet's systemReserved.memory is MemTotal − PodsMemory, with
	// enforceNodeAllocatable [pods]. Default DefaultPodsMemory.
	PodsMemory int64
	// Kubelet is the kubelet's eviction configuration; see KubeletOptions.
	Kubelet KubeletOptions
	// NodeFs is a directory (a small filesystem from testruntime.MountExt4
	// or MountTmpfs, for real disk pressure) that holds the kubelet's root
	// directory and the pods' logs. Default: in the node's temporary
	// directory.
	NodeFs string
	// ImageFs is a directory that holds containerd's root (the image
	// filesystem); NodeFs for a single filesystem. Default: in the
	// runtime's temporary directory.
	ImageFs string
	// ReadyTimeout bounds the wait for the node to register and be Ready;
	// default 90 s.
	ReadyTimeout time.Duration
	// ControlPlane is a control plane started elsewhere (by the host of a
	// test guest) for the node to join; without it Start starts one.
	ControlPlane *Remote
	// SystemdDriver runs the kubelet, runc and evictd with the systemd
	// cgroup driver, the pods under kubepods.slice at the hierarchy's top
	// (cgroup root "/"): it needs systemd as PID 1 and the unified
	// hierarchy, as in a test guest, whose cgroups it may leave behind.
	// Default: the cgroupfs driver under a cgroup root of the node's own.
	SystemdDriver bool
}

// Remote is a control plane a node joins instead of starting its own: how
// its clients reach the API server.
type Remote struct {
	// Admin is the path of a kubeconfig with the cluster admin's rights.
	Admin string
	// Kubelet is the path of the kubelet's kubeconfig (a user of the
	// system:nodes group named system:node:<Options.Name>).
	Kubelet string
	// Evictd returns the path of evictd's kubeconfig. It is called once
	// the kubelet has registered the node, since evictd's token is bound
	// to the Node object, and may wait for the file to be written.
	Evictd func(ctx context.Context) (string, error)
}

// Node is a running single-node cluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, containerd and a kubelet, with
// evictd beside it once StartEvictd is called. Its methods are safe for
// concurrent use.
type Node struct {
	name       string
	opts       Options
	dir        string
	cluster    *testcluster.Cluster
	runtime    *testruntime.Runtime
	admin      kubernetes.Interface
	cgroupRoot string // the kubelet's --cgroup-root, e.g. /evictd-node-1a2b3c4d
	rootDir    string // the kubelet's --root-dir
	podLogsDir string
	memTotal   int64
	evictdBin  string
	evictdKube string // kubeconfig of the evictd ServiceAccount, token bound to the node
	readyIn    time.Duration
	phases     []string // how long each step of Start took

	mu      sync.Mutex
	kubelet *childproc.Process
	kcfg    KubeletOptions
	evictd  *childproc.Process
	evUnit  string // SetEvictdUnit's unit: evictd run by systemd
	// evUnitUp: StartEvictd started evUnit and it has not been stopped.
	evUnitUp bool
	evArgs   []string
	metrics  string // host:port of evictd's /metrics
	stopped  bool

	evLog atomic.Pointer[string] // evictd's log when not in dir (SetEvictdLog)
}

// Start brings the node up and returns once the kubelet has registered the
// node and reports it Ready. If Start fails it stops what it started; the
// error wraps testcluster.ErrNoBinaries or testruntime.ErrNotInstalled when
// something is not built or installed.
func Start(ctx context.Context, opts Options) (*Node, error) {
	begin := time.Now()
	if opts.Name == "" {
		opts.Name = "evictd-node"
	}
	if opts.PodsMemory == 0 {
		opts.PodsMemory = DefaultPodsMemory
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 90 * time.Second
	}
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if opts.SystemdDriver && !unified() {
		return nil, errors.New("Options.SystemdDriver: wants the unified cgroup hierarchy and systemd as PID 1")
	}
	memTotal, err := readMemTotal("/proc/meminfo")
	if err != nil {
		return nil, err
	}
	if opts.PodsMemory < 256<<20 || opts.PodsMemory > memTotal/2 {
		return nil, fmt.Errorf("Options.PodsMemory %d: want from 256 MiB to half of MemTotal (%d)", opts.PodsMemory, memTotal)
	}
	dir, err := os.MkdirTemp("", "evictd-testnode-")
	if err != nil {
		return nil, fmt.Errorf("create node directory: %w", err)
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	n := &Node{
		name: opts.Name, opts: opts, dir: dir, memTotal: memTotal,
		cgroupRoot: "/evictd-" + opts.Name + "-" + hex.EncodeToString(suffix),
		kcfg:       opts.Kubelet,
	}
	if opts.SystemdDriver {
		n.cgroupRoot = "/"
	}
	if err := n.start(ctx); err != nil {
		return nil, errors.Join(err, n.Stop())
	}
	n.readyIn = time.Since(begin)
	return n, nil
}

// ErrNotRoot is returned by Start when not running as root.
var ErrNotRoot = errors.New("a node needs root (cgroups, mounts, containerd)")

// phase records how long a step of Start took since the last one.
func (n *Node) phase(name string, since *time.Time) {
	n.phases = append(n.phases, fmt.Sprintf("%s %s", name, time.Since(*since).Round(10*time.Millisecond)))
	*since = time.Now()
}

// Phases returns how long each step of Start took.
func (n *Node) Phases() []string { return n.phases }

func (n *Node) start(ctx context.Context) error {
	t0 := time.Now()
	base := n.dir
	if n.opts.NodeFs != "" {
		base = n.opts.NodeFs
	}
	n.rootDir = filepath.Join(base, "kubelet")
	n.podLogsDir = filepath.Join(base, "pod-logs")
	for _, d := range []string{n.rootDir, n.podLogsDir} {
		if err := os.Mkdir(d, 0o750); err != nil {
			return fmt.Errorf("node directory: %w", err)
		}
	}
	var err error
	n.evictdBin = os.Getenv(EnvEvictdBin)
	if n.evictdBin == "" {
		n.evictdBin = filepath.Join(n.dir, "evictd")
		if err := testruntime.GoBuild("github.com/evictd/evictd/cmd/evictd", n.evictdBin); err != nil {
			return fmt.Errorf("evictd binary: %w (or set %s)", err, EnvEvictdBin)
		}
	}
	n.phase("evictd-build", &t0)
	if remote := n.opts.ControlPlane; remote != nil {
		cfg, err := clientcmd.BuildConfigFromFlags("", remote.Admin)
		if err != nil {
			return fmt.Errorf("Options.ControlPlane.Admin: %w", err)
		}
		if n.admin, err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
	} else {
		n.cluster, err = testcluster.Start(ctx, testcluster.Options{
			Tokens:            map[string][]string{NodeUser(n.name): {"system:nodes"}},
			ControllerManager: true,
			Scheduler:         true,
		})
		if err != nil {
			return err
		}
		if n.admin, err = kubernetes.NewForConfig(n.cluster.AdminConfig()); err != nil {
			return err
		}
		n.phase("control-plane", &t0)
	}
	// The lane's containerd: the cache's, PATH's ("") in the previous lane.
	containerdDir, err := testcluster.ContainerdBinDir()
	if err != nil {
		return err
	}
	n.runtime, err = testruntime.Start(ctx, testruntime.Options{Root: n.opts.ImageFs, PodNetwork: true, SystemdCgroup: n.opts.SystemdDriver, BinDir: containerdDir,
		// Under emulation (a test guest) containerd's start alone can take
		// half a minute: it gets the node's time.
		ReadyTimeout: n.opts.ReadyTimeout})
	if err != nil {
		return err
	}
	if err := n.runtime.ImportImage(ctx, WorkloadImage, 0); err != nil {
		return err
	}
	n.phase("containerd", &t0)
	if !n.opts.SystemdDriver {
		if err := createCgroupRoot(n.cgroupRoot); err != nil {
			return err
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	err = n.startKubelet(ctx)
	n.phase("kubelet", &t0)
	if err != nil {
		return err
	}
	// evictd's identity: a token bound to the Node object the kubelet has
	// just registered, under deploy/'s RBAC and admission policy.
	return n.writeEvictdIdentity(ctx, true)
}

// writeEvictdIdentity writes evictd's kubeconfig with a fresh token bound
// to the node (in a guest: takes the one the host keeps fresh). A token
// lasts an hour and evictd reads it once, at its start, so StartEvictd
// calls this each time: a node up for hours (a benchmark grid) would
// otherwise start evictd with an expired token. The first call also
// creates deploy/'s RBAC and policy and waits until they are enforced.
func (n *Node) writeEvictdIdentity(ctx context.Context, first bool) error {
	if remote := n.opts.ControlPlane; remote != nil {
		path, err := remote.Evictd(ctx)
		if err != nil {
			return err
		}
		n.evictdKube = path
		return nil
	}
	var token string
	var err error
	if first {
		token, err = n.cluster.EvictdNodeToken(ctx, n.name)
	} else {
		token, err = testcluster.NodeBoundToken(ctx, n.admin, "kube-system", "evictd", n.name)
	}
	if err != nil {
		return fmt.Errorf("evictd's token: %w", err)
	}
	n.evictdKube = filepath.Join(n.dir, "evictd.kubeconfig")
	return n.cluster.WriteKubeconfig(n.evictdKube, token)
}

// Stop stops evictd, the kubelet, containerd (with every pod's containers)
// and the control plane by PID, removes the node's cgroups and its
// temporary directory. Calling it again does nothing.
func (n *Node) Stop() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return nil
	}
	n.stopped = true
	var errs []error
	if n.evictd != nil {
		errs = append(errs, n.evictd.Stop(termGrace))
	}
	errs = append(errs, n.stopEvictdUnit())
	if n.kubelet != nil {
		errs = append(errs, n.kubelet.Stop(termGrace))
	}
	if n.runtime != nil {
		errs = append(errs, n.runtime.Stop())
	}
	if !n.opts.SystemdDriver { // the root is the hierarchy's: systemd's slices stay
		errs = append(errs, unmountCgroupTree(n.cgroupRoot), RemoveCgroupTree(n.cgroupRoot))
	}
	if n.cluster != nil {
		errs = append(errs, n.cluster.Stop())
	}
	// The kubelet bind-mounts its root directory onto itself (rshared).
	for _, d := range []string{n.rootDir, n.podLogsDir, n.dir} {
		if d == "" {
			continue
		}
		if err := testruntime.UnmountUnder(d); err != nil {
			errs = append(errs, err)
		} else if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove node directory: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Name returns the node's name.
func (n *Node) Name() string { return n.name }

// Cluster returns the control plane, or nil when the node joined
// Options.ControlPlane.
func (n *Node) Cluster() *testcluster.Cluster { return n.cluster }

// Runtime returns the node's containerd.
func (n *Node) Runtime() *testruntime.Runtime { return n.runtime }

// Admin returns a client with the cluster admin's rights.
func (n *Node) Admin() kubernetes.Interface { return n.admin }

// CgroupRoot returns the kubelet's --cgroup-root (pods live below
// <root>/kubepods in every cgroup v1 hierarchy).
func (n *Node) CgroupRoot() string { return n.cgroupRoot }

// PodsMemoryCgroup returns the directory of the kubepods memory cgroup:
// in the v1 memory hierarchy, or in the unified one.
func (n *Node) PodsMemoryCgroup() string {
	if unified() {
		if n.opts.SystemdDriver {
			return filepath.Join(cgroupMount, "kubepods.slice")
		}
		return filepath.Join(cgroupMount, n.cgroupRoot, "kubepods")
	}
	return filepath.Join(cgroupMount, "memory", n.cgroupRoot, "kubepods")
}

// RootDir returns the kubelet's root directory (nodefs).
func (n *Node) RootDir() string { return n.rootDir }

// PodLogsDir returns the kubelet's podLogsDir.
func (n *Node) PodLogsDir() string { return n.podLogsDir }

// SystemReserved returns the kubelet's systemReserved memory in bytes.
func (n *Node) SystemReserved() int64 { return n.memTotal - n.opts.PodsMemory }

// Dir returns the node's temporary directory: logs, kubeconfigs, configs.
func (n *Node) Dir() string { return n.dir }

// ReadyIn returns how long Start took.
func (n *Node) ReadyIn() time.Duration { return n.readyIn }

// Logs returns the last n lines of each component's log, by name.
func (n *Node) Logs(lines int) map[string]string {
	logs := map[string]string{}
	if n.cluster != nil {
		logs = n.cluster.Logs(lines)
	}
	for _, name := range []string{"kubelet", "evictd"} {
		if _, err := os.Stat(n.logPath(name)); err == nil {
			logs[name] = childproc.Tail(n.logPath(name), lines)
		}
	}
	logs["containerd"] = childproc.Tail(n.runtime.LogPath(), lines)
	return logs
}

// LogPath returns the log file of "kubelet" or "evictd".
func (n *Node) LogPath(component string) string { return n.logPath(component) }

func (n *Node) logPath(component string) string {
	if p := n.evLog.Load(); p != nil && component == "evictd" {
		return *p
	}
	return filepath.Join(n.dir, component+".log")
}

// WaitPod polls the pod until cond holds, returning the last pod seen.
func (n *Node) WaitPod(ctx context.Context, namespace, name string, timeout time.Duration, cond func(*v1.Pod) bool) (*v1.Pod, error) {
	var last *v1.Pod
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := n.admin.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // keep polling through transient errors
		}
		last = p
		return cond(p), nil
	})
	if err != nil {
		return last, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	return last, nil
}

// NodeUser is the user name of the kubelet of node name: the control
// plane gives it the group system:nodes.
func NodeUser(name string) string { return "system:node:" + name }
