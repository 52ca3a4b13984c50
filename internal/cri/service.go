package cri

import (
	"context"
	"errors"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeService makes the CRI runtime calls evictd needs over
// k8s.io/cri-api's generated gRPC client, each bounded by the Dial timeout
// as k8s.io/cri-client bounds them (StopContainer by the timeout plus its
// grace period). It satisfies reclaim.Runtime. Errors are the runtime's,
// unwrapped and not logged: callers wrap and log them once.
type RuntimeService struct {
	client  runtimeapi.RuntimeServiceClient
	timeout time.Duration
}

// ImageService makes the CRI image calls evictd needs, bounded like
// RuntimeService's. It satisfies reclaim.Images.
type ImageService struct {
	client  runtimeapi.ImageServiceClient
	timeout time.Duration
}

// errNoConditions is cri-client's answer to a status without both the
// RuntimeReady and NetworkReady conditions.
var errNoConditions = errors.New("RuntimeReady or NetworkReady condition are not set")

// Version returns the runtime's name and version and the CRI version it
// speaks: what `evictd doctor` reports.
func (s *RuntimeService) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.client.Version(ctx, &runtimeapi.VersionRequest{})
}

// ListPodSandbox lists the pod sandboxes that match filter (nil: all).
func (s *RuntimeService) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.GetItems(), nil
}

// StopPodSandbox stops a sandbox's containers and tears down its network.
func (s *RuntimeService) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podSandboxID})
	return err
}

// RemovePodSandbox removes a sandbox and, forcibly, its containers.
func (s *RuntimeService) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podSandboxID})
	return err
}

// ListContainers lists the containers that match filter (nil: all).
func (s *RuntimeService) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.GetContainers(), nil
}

// StopContainer stops a running container: SIGTERM, then SIGKILL after
// gracePeriodSeconds. The call may take the grace period on top of the
// timeout, for the kill and the reply.
func (s *RuntimeService) StopContainer(ctx context.Context, containerID string, gracePeriodSeconds int64) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout+time.Duration(gracePeriodSeconds)*time.Second)
	defer cancel()
	_, err := s.client.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: containerID, Timeout: gracePeriodSeconds})
	return err
}

// ContainerStatus returns a container's state as the runtime knows it.
func (s *RuntimeService) ContainerStatus(ctx context.Context, containerID string) (runtimeapi.ContainerState, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID})
	if err != nil {
		return runtimeapi.ContainerState_CONTAINER_UNKNOWN, err
	}
	return resp.GetStatus().GetState(), nil
}

// RemoveContainer removes a container, forcibly if it runs.
func (s *RuntimeService) RemoveContainer(ctx context.Context, containerID string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: containerID})
	return err
}

// ListContainerStats lists the stats of the containers that match filter
// (nil: all).
func (s *RuntimeService) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.GetStats(), nil
}

// Status returns the runtime's status (with its info map if verbose). As
// with cri-client, a status without both the RuntimeReady and NetworkReady
// conditions is an error.
func (s *RuntimeService) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
	if err != nil {
		return nil, err
	}
	if len(resp.GetStatus().GetConditions()) < 2 {
		return nil, errNoConditions
	}
	return resp, nil
}

// ListImages lists the images that match filter (nil: all).
func (s *ImageService) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.GetImages(), nil
}

// RemoveImage removes an image.
func (s *ImageService) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: image})
	return err
}

// ImageFsInfo returns the filesystems the runtime keeps images (and
// container layers) on.
func (s *ImageService) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.client.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
}
