package reclaim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evictd/evictd/internal/decide"
)

// removeDeadContainers removes, as the kubelet's container GC does when
// eviction calls it (DeleteAllUnusedContainers, evictNonDeletedPods=true):
//
//   - every sandbox that is not ready (its pod no longer runs), stopped
//     first and then removed with its containers; but not one that still
//     holds a container the runtime reports running, created or unknown,
//     which may be alive and is left for the kubelet;
//   - in a ready sandbox, every exited container except the newest exited
//     instance of each container name: the kubelet keeps that one
//     (MaxPerPodContainer=1) for `kubectl logs --previous` and the restart
//     count; removing it would take from a running pod what it still uses;
//   - every exited container whose sandbox the runtime no longer lists.
//
// Only containers in state EXITED are removed on their own: CREATED is about
// to be started by the kubelet and UNKNOWN may still be running.
// Removed counts containers and sandboxes.
func (r *Reclaimer) removeDeadContainers(ctx context.Context, log *slog.Logger) decide.ReclaimAction {
	a := decide.ReclaimAction{Kind: decide.ReclaimContainers}
	var sandboxes []*runtimeapi.PodSandbox
	var containers []*runtimeapi.Container
	err := r.call(ctx, func(ctx context.Context) (err error) {
		sandboxes, err = r.rt.ListPodSandbox(ctx, nil)
		return err
	})
	if err != nil {
		a.Err = fmt.Errorf("reclaim containers: list pod sandboxes: %w", err)
		return a
	}
	err = r.call(ctx, func(ctx context.Context) (err error) {
		containers, err = r.rt.ListContainers(ctx, nil)
		return err
	})
	if err != nil {
		a.Err = fmt.Errorf("reclaim containers: list containers: %w", err)
		return a
	}
	plan := planContainers(sandboxes, containers)
	var errs []error
	for _, c := range plan.containers {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		err := r.call(ctx, func(ctx context.Context) error { return r.rt.RemoveContainer(ctx, c.GetId()) })
		if err != nil {
			errs = append(errs, fmt.Errorf("remove container %s (%s): %w", c.GetId(), c.GetMetadata().GetName(), err))
			continue
		}
		a.Removed++
		log.Debug("removed dead container", "container", c.GetId(), "name", c.GetMetadata().GetName(), "sandbox", c.GetPodSandboxId())
	}
	for _, s := range plan.sandboxes {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		name := s.GetMetadata().GetNamespace() + "/" + s.GetMetadata().GetName()
		if err := r.call(ctx, func(ctx context.Context) error { return r.rt.StopPodSandbox(ctx, s.GetId()) }); err != nil {
			errs = append(errs, fmt.Errorf("stop pod sandbox %s (%s): %w", s.GetId(), name, err))
			continue
		}
		if err := r.call(ctx, func(ctx context.Context) error { return r.rt.RemovePodSandbox(ctx, s.GetId()) }); err != nil {
			errs = append(errs, fmt.Errorf("remove pod sandbox %s (%s): %w", s.GetId(), name, err))
			continue
		}
		n := plan.inSandbox[s.GetId()]
		a.Removed += 1 + n
		log.Debug("removed sandbox of a pod no longer running", "sandbox", s.GetId(), "pod", name, "containers", n)
	}
	for _, s := range plan.busy {
		log.Info("not removing a sandbox that is not ready: it holds a container that may be alive",
			"sandbox", s.GetId(), "pod", s.GetMetadata().GetNamespace()+"/"+s.GetMetadata().GetName())
	}
	if len(errs) > 0 {
		a.Err = fmt.Errorf("reclaim containers: %w", errors.Join(errs...))
	}
	return a
}

// containerPlan is what removeDeadContainers removes.
type containerPlan struct {
	containers []*runtimeapi.Container  // exited, removed one by one
	sandboxes  []*runtimeapi.PodSandbox // not ready, stopped and removed
	inSandbox  map[string]int           // containers removed with each sandbox
	busy       []*runtimeapi.PodSandbox // not ready but holding a live container
}

// planContainers chooses what to remove from what the runtime lists (see
// removeDeadContainers), oldest first.
func planContainers(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) containerPlan {
	p := containerPlan{inSandbox: map[string]int{}}
	state := map[string]runtimeapi.PodSandboxState{}
	for _, s := range sandboxes {
		state[s.GetId()] = s.GetState()
	}
	alive := map[string]bool{} // sandboxes holding a container not known dead
	for _, c := range containers {
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
			alive[c.GetPodSandboxId()] = true
		}
	}
	type key struct{ sandbox, name string }
	exited := map[key][]*runtimeapi.Container{}
	for _, c := range containers {
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
			continue
		}
		st, listed := state[c.GetPodSandboxId()]
		switch {
		case !listed:
			p.containers = append(p.containers, c)
		case st == runtimeapi.PodSandboxState_SANDBOX_READY:
			k := key{c.GetPodSandboxId(), c.GetMetadata().GetName()}
			exited[k] = append(exited[k], c)
		case !alive[c.GetPodSandboxId()]:
			p.inSandbox[c.GetPodSandboxId()]++
		}
	}
	for _, cs := range exited {
		// Newest first: by attempt, then creation time.
		slices.SortFunc(cs, func(a, b *runtimeapi.Container) int {
			if c := cmp.Compare(b.GetMetadata().GetAttempt(), a.GetMetadata().GetAttempt()); c != 0 {
				return c
			}
			return cmp.Compare(b.GetCreatedAt(), a.GetCreatedAt())
		})
		p.containers = append(p.containers, cs[1:]...)
	}
	slices.SortFunc(p.containers, func(a, b *runtimeapi.Container) int {
		return cmp.Or(cmp.Compare(a.GetCreatedAt(), b.GetCreatedAt()), cmp.Compare(a.GetId(), b.GetId()))
	})
	for _, s := range sandboxes {
		if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		if alive[s.GetId()] {
			p.busy = append(p.busy, s)
			continue
		}
		p.sandboxes = append(p.sandboxes, s)
	}
	slices.SortFunc(p.sandboxes, func(a, b *runtimeapi.PodSandbox) int {
		return cmp.Or(cmp.Compare(a.GetCreatedAt(), b.GetCreatedAt()), cmp.Compare(a.GetId(), b.GetId()))
	})
	return p
}
