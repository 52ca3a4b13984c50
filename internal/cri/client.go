package cri

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/go-logr/logr"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
)

// DefaultTimeout bounds each CRI call when Dial is given no timeout.
const DefaultTimeout = 2 * time.Second

// Client talks to a container runtime over the CRI. Every call is bounded by
// the timeout given to Dial, so a slow or stopped runtime makes a call fail,
// never hang. It is safe for concurrent use; after a runtime restart the
// underlying gRPC connection reconnects by itself.
type Client struct {
	endpoint, imageEndpoint string
	timeout                 time.Duration
	rs                      internalapi.RuntimeService
	is                      internalapi.ImageManagerService
	log                     *slog.Logger
	// du caches PodDiskStats' directory walks.
	du *dirUsage
}

// Dial connects to the runtime service at endpoint ("unix:///run/containerd/
// containerd.sock", or a bare socket path) and to the image service at
// imageEndpoint ("" for the same endpoint), and checks that both answer.
// timeout bounds the check and, later, every call (DefaultTimeout if <= 0).
func Dial(ctx context.Context, endpoint, imageEndpoint string, timeout time.Duration, log *slog.Logger) (*Client, error) {
	if endpoint == "" {
		return nil, errors.New("CRI: no runtime endpoint")
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	endpoint = normalize(endpoint)
	if imageEndpoint == "" {
		imageEndpoint = endpoint
	}
	imageEndpoint = normalize(imageEndpoint)
	c := &Client{endpoint: endpoint, imageEndpoint: imageEndpoint, timeout: timeout, log: log.With("endpoint", endpoint),
		du: newDirUsage(DefaultMaxAge, DefaultMaxEntries)}

	// cri-client leaves its gRPC connection open (and reconnecting) when
	// the runtime does not answer its first call, so a runtime that is not
	// there must be found out before any client is made: dial the sockets.
	for _, ep := range []string{endpoint, imageEndpoint} {
		if err := probe(ctx, ep, timeout); err != nil {
			return nil, err
		}
	}

	dctx, cancel := c.callContext(ctx)
	defer cancel()
	rs, err := remote.NewRemoteRuntimeService(dctx, endpoint, timeout, nil, false)
	if err != nil {
		return nil, fmt.Errorf("CRI runtime service at %s: %w", endpoint, err)
	}
	ictx, icancel := c.callContext(ctx)
	defer icancel()
	is, err := remote.NewRemoteImageService(ictx, imageEndpoint, timeout, nil, false)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("CRI image service at %s: %w", imageEndpoint, err), rs.Close(ctx))
	}
	c.rs, c.is = rs, is
	c.log.Info("connected to the container runtime", "image_endpoint", imageEndpoint, "timeout", timeout)
	return c, nil
}

// probe checks that a unix socket endpoint accepts connections.
func probe(ctx context.Context, endpoint string, timeout time.Duration) error {
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok {
		return nil // not a unix socket: left to the client to reach
	}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return fmt.Errorf("CRI endpoint %s: %w", endpoint, err)
	}
	return conn.Close()
}

// normalize gives a bare socket path the unix:// scheme.
func normalize(endpoint string) string {
	if strings.Contains(endpoint, "://") {
		return endpoint
	}
	return "unix://" + endpoint
}

// Endpoint returns the runtime service endpoint.
func (c *Client) Endpoint() string { return c.endpoint }

// RuntimeService is the CRI runtime client, for reclaim.Runtime. Each of its
// calls is bounded by the Dial timeout (cri-client's own per-call timeout).
func (c *Client) RuntimeService() internalapi.RuntimeService { return c.rs }

// ImageService is the CRI image client, for reclaim.Images; its calls are
// bounded like RuntimeService's.
func (c *Client) ImageService() internalapi.ImageManagerService { return c.is }

// Close closes both connections.
func (c *Client) Close() error {
	ctx := klog.NewContext(context.Background(), logr.Discard())
	return errors.Join(c.rs.Close(ctx), c.is.Close(ctx))
}

// callContext bounds one call by the client's timeout and silences
// cri-client's own logging of failed calls: the error is returned, and
// logged once by whoever handles it.
func (c *Client) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	return klog.NewContext(ctx, logr.Discard()), cancel
}

// imageFsInfo calls ImageFsInfo.
func (c *Client) imageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.is.ImageFsInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("CRI ImageFsInfo at %s: %w", c.imageEndpoint, err)
	}
	return resp, nil
}

// listPodSandboxes calls ListPodSandbox with no filter.
func (c *Client) listPodSandboxes(ctx context.Context) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	out, err := c.rs.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("CRI ListPodSandbox at %s: %w", c.endpoint, err)
	}
	return out, nil
}

// listContainers calls ListContainers with no filter.
func (c *Client) listContainers(ctx context.Context) ([]*runtimeapi.Container, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	out, err := c.rs.ListContainers(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainers at %s: %w", c.endpoint, err)
	}
	return out, nil
}

// listContainerStats calls ListContainerStats with no filter.
func (c *Client) listContainerStats(ctx context.Context) ([]*runtimeapi.ContainerStats, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	out, err := c.rs.ListContainerStats(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainerStats at %s: %w", c.endpoint, err)
	}
	return out, nil
}
