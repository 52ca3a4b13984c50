package cri

import (
	"context"
	"errors"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StopPodContainers stops the running containers of the pod with uid as the
// kubelet's kill does: SIGTERM, then SIGKILL after gracePeriodSeconds. It
// returns how many it stopped. The sandbox is left to the kubelet, which
// removes it once it sees the pod deleted.
func (c *Client) StopPodContainers(ctx context.Context, uid string, gracePeriodSeconds int64) (int, error) {
	if uid == "" {
		return 0, errors.New("stop pod containers: empty pod UID")
	}
	lctx, cancel := c.callContext(ctx)
	containers, err := c.rs.ListContainers(lctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{labelPodUID: uid},
	})
	cancel()
	if err != nil {
		return 0, fmt.Errorf("CRI ListContainers of pod %s at %s: %w", uid, c.endpoint, err)
	}
	var errs []error
	stopped := 0
	for _, ctr := range containers {
		// StopContainer waits for the container to exit, up to the grace
		// period and then after its SIGKILL: no call timeout of our own.
		if err := c.rs.StopContainer(ctx, ctr.GetId(), gracePeriodSeconds); err != nil {
			errs = append(errs, fmt.Errorf("CRI StopContainer %s (%s) of pod %s: %w", ctr.GetId(), ctr.GetMetadata().GetName(), uid, err))
			continue
		}
		stopped++
	}
	return stopped, errors.Join(errs...)
}
