package testruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Stop removes every pod sandbox through the CRI, stops containerd by PID
// (SIGTERM, SIGKILL after a bounded wait), deletes with `runc delete
// --force` the containers runc still knows (their processes and cgroups),
// kills by PID what is left of the shims and what runs below them (found by
// the shims' -address argument), deletes the pod network's bridge, unmounts everything below containerd's
// root and state and the runtime's directory, and removes them. Calling it
// again does nothing.
func (r *Runtime) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	r.stopped = true
	// A sandbox the CRI cannot stop (its shim's connection lost across a
	// containerd restart: "ttrpc: closed") is cleaned up below, by runc and
	// by PID; the CRI's error counts only when that cleanup fails too.
	var criErr error
	if r.daemon != nil && !r.daemon.Exited() && r.rs != nil {
		criErr = r.removeSandboxes()
	}
	errs := []error{r.stopDaemon()}
	var byPID []error
	if r.state != "" {
		byPID = append(byPID, runcDeleteAll(filepath.Join(r.state, "runc")))
	}
	if _, err := killShims(r.socket); err != nil {
		byPID = append(byPID, fmt.Errorf("kill shims: %w", err))
	}
	if err := errors.Join(byPID...); err != nil {
		errs = append(errs, criErr, err)
	}
	errs = append(errs, r.network.remove())
	for _, d := range []string{r.state, r.root, r.dir} {
		if d == "" {
			continue
		}
		if err := UnmountUnder(d); err != nil {
			errs = append(errs, err)
		} else if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// removeSandboxes stops and removes every pod sandbox (and so its
// containers), within a minute in all.
func (r *Runtime) removeSandboxes() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, err := r.rs.ListPodSandbox(ctx, nil)
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var errs []error
	for _, p := range pods {
		if err := r.rs.StopPodSandbox(ctx, p.GetId()); err != nil {
			errs = append(errs, fmt.Errorf("stop pod sandbox %s: %w", p.GetId(), err))
		}
		if err := r.rs.RemovePodSandbox(ctx, p.GetId()); err != nil {
			errs = append(errs, fmt.Errorf("remove pod sandbox %s: %w", p.GetId(), err))
		}
	}
	return errors.Join(errs...)
}

// runcDeleteAll runs `runc delete --force` on every container runc still
// knows under root (one directory per containerd namespace): it kills the
// container's processes and removes its cgroups and state, which a shim
// killed with its containerd would leave behind.
func runcDeleteAll(root string) error {
	namespaces, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range namespaces {
		ids, err := os.ReadDir(filepath.Join(root, ns.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range ids {
			dir := filepath.Join(root, ns.Name())
			paths := cgroupPaths(filepath.Join(dir, id.Name(), "state.json"))
			if _, err := runCommand("runc", "--root", dir, "delete", "--force", id.Name()); err != nil {
				errs = append(errs, err)
			}
			errs = append(errs, removeCgroups(paths, 10*time.Second))
		}
	}
	return errors.Join(errs...)
}

// cgroupPaths are the cgroups of a runc container, from its state file;
// none when it cannot be read.
func cgroupPaths(stateFile string) []string {
	data, err := os.ReadFile(stateFile)
	if err != nil {
		return nil
	}
	var st struct {
		CgroupPaths map[string]string `json:"cgroup_paths"`
	}
	if json.Unmarshal(data, &st) != nil {
		return nil
	}
	var out []string
	for _, p := range st.CgroupPaths {
		out = append(out, p)
	}
	return out
}

// removeCgroups removes the cgroups that `runc delete --force` left: it
// kills the processes and removes the cgroups, but gives up on a cgroup
// whose killed processes have not exited yet (a loaded machine), which
// then stays behind. Each is retried until it is gone or wait is over.
func removeCgroups(paths []string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	var errs []error
	for _, p := range paths {
		for {
			err := os.Remove(p)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", p, err))
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// stopDaemon closes the CRI clients and stops containerd; r.mu is held.
func (r *Runtime) stopDaemon() error {
	var errs []error
	ctx := context.Background()
	if r.rs != nil {
		errs = append(errs, r.rs.Close(ctx), r.is.Close(ctx))
		r.rs, r.is = nil, nil
	}
	if r.daemon != nil {
		errs = append(errs, r.daemon.Stop(termGrace))
	}
	return errors.Join(errs...)
}

// StopContainerd stops containerd alone (SIGTERM, by PID), leaving its
// shims and containers running as a real containerd restart does, to test
// what clients do while it is away. StartContainerd brings it back.
func (r *Runtime) StopContainerd() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopDaemon()
}
