package testruntime

import (
	"context"
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
			if _, err := runCommand("runc", "--root", filepath.Join(root, ns.Name()), "delete", "--force", id.Name()); err != nil {
				errs = append(errs, err)
			}
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
