package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/evictd/evictd/internal/testing/childproc"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// agentStopGrace is how long an agent gets to exit after SIGTERM.
const agentStopGrace = 10 * time.Second

// agent is one running evictd.
type agent struct {
	node *Node
	proc *childproc.Process
}

// agentArgs are evictd's flags on n: its kubeconfig and name, its tree in
// place of /proc and the cgroup mount, temporary directories for nodefs
// and imagefs, a container runtime that does not exist (the agent retries
// it in the background) and a metrics address of its own.
func (f *Fleet) agentArgs(n *Node) []string {
	return append([]string{
		"--kubeconfig", n.kubeconfig,
		"--hostname-override", n.Name,
		"--proc-root", n.Tree.Proc,
		"--cgroup-mount", n.Tree.Cgroup,
		"--cgroup-root", "/",
		"--cgroup-driver", "cgroupfs",
		"--root-dir", filepath.Join(n.dir, "root"),
		"--state-dir", filepath.Join(n.dir, "state"),
		"--imagefs-path", filepath.Join(n.dir, "imagefs"),
		"--container-runtime-endpoint", "unix://" + filepath.Join(n.dir, "no-runtime.sock"),
		"--metrics-bind-address", n.metrics,
	}, f.opts.EvictdArgs...)
}

// StartAgents starts one evictd per node, all at once, and waits until
// every one answers /readyz (at most timeout).
func (f *Fleet) StartAgents(ctx context.Context, timeout time.Duration) error {
	if f.opts.EvictdBin == "" {
		return fmt.Errorf("no evictd binary: set %s (make build)", EnvEvictdBin)
	}
	ports, err := testcluster.FreePorts(len(f.Nodes))
	if err != nil {
		return err
	}
	f.mu.Lock()
	for i, n := range f.Nodes {
		if f.agents[n.Name] != nil {
			f.mu.Unlock()
			return fmt.Errorf("agent of %s already running", n.Name)
		}
		n.metrics = "127.0.0.1:" + strconv.Itoa(ports[i])
		p, err := childproc.Start("evictd-"+n.Name, f.opts.EvictdBin, f.agentArgs(n), filepath.Join(n.dir, "evictd.log"))
		if err != nil {
			f.mu.Unlock()
			return err
		}
		f.agents[n.Name] = &agent{node: n, proc: p}
	}
	f.mu.Unlock()
	return f.waitReady(ctx, timeout)
}

// waitReady polls every agent's /readyz until all answer 200.
func (f *Fleet) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	pending := map[string]*agent{}
	f.mu.Lock()
	for name, a := range f.agents {
		pending[name] = a
	}
	f.mu.Unlock()
	for len(pending) > 0 {
		for name, a := range pending {
			if a.proc.Exited() {
				return fmt.Errorf("evictd of %s: %w", name, a.proc.ExitError())
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.node.metrics+"/readyz", nil)
			if err != nil {
				return err
			}
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					delete(pending, name)
				}
			}
		}
		if len(pending) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d agents not ready: %w", len(pending), len(f.Nodes), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	return nil
}

// StopAgents stops every agent by PID (SIGTERM, SIGKILL after a grace), all
// at once, and waits for them.
func (f *Fleet) StopAgents() error {
	f.mu.Lock()
	agents := f.agents
	f.agents = map[string]*agent{}
	f.mu.Unlock()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, a := range agents {
		wg.Go(func() {
			if err := a.proc.Stop(agentStopGrace); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("stop evictd of %s: %w", a.node.Name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// AgentPIDs returns the running agents' PIDs by node.
func (f *Fleet) AgentPIDs() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	pids := make(map[string]int, len(f.agents))
	for name, a := range f.agents {
		if !a.proc.Exited() {
			pids[name] = a.proc.PID()
		}
	}
	return pids
}

// ExitedAgents returns the nodes whose agent has exited on its own.
func (f *Fleet) ExitedAgents() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for name, a := range f.agents {
		if a.proc.Exited() {
			out = append(out, name)
		}
	}
	return out
}

// AgentLog is the path of n's agent log.
func (n *Node) AgentLog() string { return filepath.Join(n.dir, "evictd.log") }
