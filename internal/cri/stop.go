package cri

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// stopTries is how many times StopPodContainers asks the runtime to stop
// a container whose stop fails, stopRetryPause the pause between.
const (
	stopTries      = 3
	stopRetryPause = 200 * time.Millisecond
)

// StopPodContainers stops the running containers of the pod with uid as the
// kubelet's kill does: SIGTERM, then SIGKILL after gracePeriodSeconds. It
// returns how many the runtime reported stopped: containerd 2 reports a
// container removed meanwhile stopped too (the CRI's StopContainer is
// idempotent), where containerd 1.6 answers NotFound, not counted. The
// sandbox is left to the kubelet, which removes it once it sees the pod
// deleted.
//
// The node comes first, so the SIGTERM goes out without a listing: the
// containers the last listing (the disk usage's, every few seconds) found
// running in the pod are stopped at once, all in parallel, while the
// runtime is listed again for any started since; those are stopped as
// soon as the listing names them. A known container that has gone
// meanwhile is no error, nor is a failed call for a container the runtime
// then reports exited; a failed call is made again (stopTries).
func (c *Client) StopPodContainers(ctx context.Context, uid string, gracePeriodSeconds int64) (int, error) {
	if uid == "" {
		return 0, errors.New("stop pod containers: empty pod UID")
	}
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		errs    []error
		stopped int
		asked   = map[string]bool{}
	)
	stop := func(id, name string, known bool) {
		mu.Lock()
		if asked[id] {
			mu.Unlock()
			return
		}
		asked[id] = true
		mu.Unlock()
		wg.Go(func() {
			// StopContainer waits for the container to exit, up to the
			// grace period and then after its SIGKILL: no call timeout
			// of our own.
			err := c.rs.StopContainer(ctx, id, gracePeriodSeconds)
			exited := false
			for try := 1; err != nil && status.Code(err) != codes.NotFound; try++ {
				// The kubelet may be stopping the same container, and
				// containerd 1.6 can fail the call as the container
				// exits under it ("ttrpc: closed": its shim went, and
				// containerd then cleans the container up). A container
				// the runtime reports exited is stopped; else the stop
				// is tried again, as the kubelet's next sync would.
				state, serr := c.rs.ContainerStatus(ctx, id)
				if exited = serr == nil && state == runtimeapi.ContainerState_CONTAINER_EXITED; exited || try == stopTries {
					break
				}
				select {
				case <-ctx.Done():
				case <-time.After(stopRetryPause):
				}
				err = c.rs.StopContainer(ctx, id, gracePeriodSeconds)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil || exited:
				stopped++
			case known && status.Code(err) == codes.NotFound:
				// Removed since the last listing: nothing to stop.
			default:
				errs = append(errs, fmt.Errorf("CRI StopContainer %s (%s) of pod %s: %w", id, name, uid, err))
			}
		})
	}
	for _, k := range c.running.of(uid) {
		stop(k.id, k.name, true)
	}
	lctx, cancel := c.callContext(ctx)
	containers, err := c.rs.ListContainers(lctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{labelPodUID: uid},
	})
	cancel()
	if err != nil {
		mu.Lock()
		errs = append(errs, fmt.Errorf("CRI ListContainers of pod %s at %s: %w", uid, c.endpoint, err))
		mu.Unlock()
	}
	for _, ctr := range containers {
		stop(ctr.GetId(), ctr.GetMetadata().GetName(), false)
	}
	wg.Wait()
	return stopped, errors.Join(errs...)
}

// knownContainer is a running container as a listing found it.
type knownContainer struct{ id, name string }

// runningContainers holds the running containers by pod UID from the
// runtime's last full listing.
type runningContainers struct {
	mu    sync.Mutex
	byPod map[string][]knownContainer
}

// learn replaces what is known with the running containers of a listing,
// by their sandbox's pod UID (its io.kubernetes.pod.uid label, else its
// metadata's UID).
func (r *runningContainers) learn(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) {
	uidOf := sandboxPodUIDs(sandboxes)
	byPod := map[string][]knownContainer{}
	for _, ctr := range containers {
		uid := uidOf[ctr.GetPodSandboxId()]
		if uid == "" || ctr.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		byPod[uid] = append(byPod[uid], knownContainer{id: ctr.GetId(), name: ctr.GetMetadata().GetName()})
	}
	r.mu.Lock()
	r.byPod = byPod
	r.mu.Unlock()
}

// of returns the running containers last known of the pod with uid.
func (r *runningContainers) of(uid string) []knownContainer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byPod[uid]
}

// PodSandboxReady reports whether the runtime still has a ready sandbox of
// the pod with uid: the kubelet stops it once it is done with the pod,
// and only then may the pod's exited containers, and their writable
// layers, be removed.
func (c *Client) PodSandboxReady(ctx context.Context, uid string) (bool, error) {
	if uid == "" {
		return false, errors.New("pod sandbox ready: empty pod UID")
	}
	sbs, err := c.listPodSandboxesWith(ctx, &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{labelPodUID: uid},
	})
	if err != nil {
		return false, err
	}
	return len(sbs) > 0, nil
}
