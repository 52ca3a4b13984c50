// Package guestnode joins a node in the cgroup v2 guest of testvm to a
// control plane on this machine: the host's side (Host: the control
// plane, the guest's kubeconfigs and binaries, the boot with the API
// server's port forwarded, evictd's kubeconfig once the guest's kubelet
// has registered its Node) and the guest's (Remote: where its node finds
// those kubeconfigs). e2e/node's TestKubeletV2Node and hack/benchnode's
// --guest both run their node this way.
package guestnode

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/evictd/evictd/internal/testing/testcluster"
	"github.com/evictd/evictd/internal/testing/testnode"
	"github.com/evictd/evictd/internal/testing/testruntime"
	"github.com/evictd/evictd/internal/testing/testvm"
)

// APIPort is the port the guest reaches the host's API server on, at
// testvm.ForwardAddr.
const APIPort = 6443

// The kubeconfigs the host writes in the shared directory.
const (
	adminFile   = "admin.kubeconfig"
	kubeletFile = "kubelet.kubeconfig"
	evictdFile  = "evictd.kubeconfig"
)

// evictdWait bounds the guest's wait for evictd's kubeconfig once its
// kubelet has registered the node.
const evictdWait = 2 * time.Minute

// evictdRenewEvery is how often the host writes evictd's kubeconfig again
// with a fresh token (of an hour's lifetime): evictd started just before
// a rewrite has 40 minutes left.
const evictdRenewEvery = 20 * time.Minute

// Host is the host's side of a guest node: a control plane on this
// machine and the directory the guest shares.
type Host struct {
	// Cluster is the control plane the guest's node joins.
	Cluster *testcluster.Cluster
	// Shared is the directory the guest sees at testvm.GuestDir: the
	// kubeconfigs, and whatever the caller puts there.
	Shared string
	// Env is the guest's environment for a node like this machine's:
	// evictd's and the workload's binaries (built here: under emulation
	// that would take minutes) and the node lane with its binaries.
	Env []string

	dir     string
	node    string
	apiHost string
}

// Start starts a control plane whose node user for node has a token, with
// the controller manager and the scheduler, in dir (the caller's, for
// testvm.Run), and writes the guest's admin and kubelet kubeconfigs.
// testcluster.ErrNoBinaries is returned as it is. The caller stops the
// host (Stop), also when Run fails.
func Start(ctx context.Context, dir, node string) (*Host, error) {
	env, err := guestEnv(filepath.Join(dir, "bins"))
	if err != nil {
		return nil, err
	}
	c, err := testcluster.Start(ctx, testcluster.Options{
		Tokens:            map[string][]string{testnode.NodeUser(node): {"system:nodes"}},
		ControllerManager: true,
		Scheduler:         true,
	})
	if err != nil {
		return nil, err
	}
	h := &Host{Cluster: c, Shared: filepath.Join(dir, "shared"), Env: env, dir: dir, node: node}
	if err := h.prepare(); err != nil {
		return nil, errors.Join(err, h.Stop())
	}
	return h, nil
}

// prepare makes the shared directory and writes the guest's admin and
// kubelet kubeconfigs in it.
func (h *Host) prepare() error {
	u, err := url.Parse(h.Cluster.URL())
	if err != nil {
		return fmt.Errorf("the API server's URL %q: %w", h.Cluster.URL(), err)
	}
	h.apiHost = u.Host
	if err := os.MkdirAll(h.Shared, 0o755); err != nil {
		return err
	}
	for file, user := range map[string]string{adminFile: testcluster.AdminUser, kubeletFile: testnode.NodeUser(h.node)} {
		if err := h.Cluster.WriteKubeconfigVia(filepath.Join(h.Shared, file), h.Cluster.Token(user), server(), "localhost"); err != nil {
			return err
		}
	}
	return nil
}

// server is the API server's address as the guest reaches it; the
// serving certificate is checked for its name on this machine.
func server() string { return "https://" + testvm.ForwardAddr + ":" + strconv.Itoa(APIPort) }

// guestEnv is Host.Env, with the binaries this machine does not have yet
// built into bins.
func guestEnv(bins string) ([]string, error) {
	if err := os.MkdirAll(bins, 0o755); err != nil {
		return nil, err
	}
	workload, err := testruntime.WorkloadBinary(bins)
	if err != nil {
		return nil, err
	}
	evictd := os.Getenv(testnode.EnvEvictdBin)
	if evictd == "" {
		evictd = filepath.Join(bins, "evictd")
		if err := testruntime.GoBuild("github.com/evictd/evictd/cmd/evictd", evictd); err != nil {
			return nil, err
		}
	}
	env := []string{testnode.EnvEvictdBin + "=" + evictd, testruntime.EnvWorkloadBin + "=" + workload}
	for _, name := range []string{testcluster.EnvNodeLane, testcluster.EnvK8sBinDir, testcluster.EnvK8sPreviousBinDir, testcluster.EnvContainerdBinDir} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env, nil
}

// Run boots the guest with opts, Host.Env added to its environment and
// the API server's port forwarded, and writes evictd's kubeconfig, with a
// token bound to the Node, once the guest's kubelet has registered it
// (and again with a fresh token while the guest runs). It returns testvm.Run's result and its error joined with the
// kubeconfig's.
func (h *Host) Run(ctx context.Context, opts testvm.Options) (*testvm.Result, error) {
	opts.Env = append(append([]string(nil), h.Env...), opts.Env...)
	opts.Forward = map[int]string{APIPort: h.apiHost}
	vmCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	tokenDone := make(chan error, 1)
	go func() { tokenDone <- h.keepEvictdKubeconfig(vmCtx) }()
	res, err := testvm.Run(ctx, h.dir, opts)
	cancel()
	if tokenErr := <-tokenDone; tokenErr != nil && !errors.Is(tokenErr, context.Canceled) {
		err = errors.Join(err, fmt.Errorf("evictd's kubeconfig for the guest: %w", tokenErr))
	}
	return res, err
}

// keepEvictdKubeconfig writes evictd's kubeconfig in the shared
// directory once the guest's kubelet has registered the node, then again
// with a fresh token every evictdRenewEvery until ctx ends: a token lasts
// an hour, and the guest's testnode reads the file at each start of
// evictd, so a guest up for hours (a benchmark grid) never starts evictd
// with an expired one. Its error is ctx's once ctx ends.
func (h *Host) keepEvictdKubeconfig(ctx context.Context) error {
	path := filepath.Join(h.Shared, evictdFile)
	for {
		err := h.Cluster.WriteEvictdKubeconfigVia(ctx, h.node, path, server(), "localhost")
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(evictdRenewEvery):
		}
	}
}

// Stop stops the control plane.
func (h *Host) Stop() error {
	if err := h.Cluster.Stop(); err != nil {
		return fmt.Errorf("stop the control plane: %w", err)
	}
	return nil
}

// Script is a guest's script that runs argv in the directory wd, each
// word quoted for sh.
func Script(wd string, argv ...string) string {
	s := "cd " + testvm.ShellQuote(wd) + " && exec"
	for _, a := range argv {
		s += " " + testvm.ShellQuote(a)
	}
	return s
}

// Remote is, in the guest, the control plane of the kubeconfigs Host
// wrote in the shared directory shared (testvm.GuestDir there): evictd's
// is waited for, at most two minutes after the node's registration.
func Remote(shared string) *testnode.Remote {
	return &testnode.Remote{
		Admin:   filepath.Join(shared, adminFile),
		Kubelet: filepath.Join(shared, kubeletFile),
		Evictd: func(ctx context.Context) (string, error) {
			path := filepath.Join(shared, evictdFile)
			ctx, cancel := context.WithTimeout(ctx, evictdWait)
			defer cancel()
			for {
				if _, err := os.Stat(path); err == nil {
					return path, nil
				}
				select {
				case <-ctx.Done():
					return "", fmt.Errorf("waiting for %s: %w", path, ctx.Err())
				case <-time.After(200 * time.Millisecond):
				}
			}
		},
	}
}
