package cri

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DefaultTimeout bounds each CRI call when Dial is given no timeout.
const DefaultTimeout = 2 * time.Second

// The gRPC connection's settings, k8s.io/cri-client's (pkg/remote_runtime.go
// and utils.go), the kubelet's own.
const (
	// maxMsgSize bounds a reply: 16 MiB, against gRPC's default 4 MiB (a
	// list of every container's stats on a full node).
	maxMsgSize = 16 << 20
	// After a lost connection, reconnecting backs off from baseBackoffDelay
	// to maxBackoffDelay, each try given minConnectTimeout.
	baseBackoffDelay  = 100 * time.Millisecond
	maxBackoffDelay   = 3 * time.Second
	minConnectTimeout = 5 * time.Second
)

// Client talks to a container runtime over the CRI. Every call is bounded by
// the timeout given to Dial, so a slow or stopped runtime makes a call fail,
// never hang. It is safe for concurrent use; after a runtime restart the
// underlying gRPC connection reconnects by itself.
type Client struct {
	endpoint, imageEndpoint string
	timeout                 time.Duration
	// conns are the gRPC connections: one, or two when the image service
	// has an endpoint of its own.
	conns []*grpc.ClientConn
	rs    *RuntimeService
	is    *ImageService
	log   *slog.Logger
	// running is the running containers by pod UID as the last listing
	// found them, so that a stop need not list first.
	running runningContainers
	// stopSignals is the stop signal of each running container, as the
	// runtime's ContainerStatus says it.
	stopSignals stopSignals
	// runtimeName is the runtime's name as its Version answered
	// ("containerd", "cri-o").
	runtimeName string
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
	c := &Client{endpoint: endpoint, imageEndpoint: imageEndpoint, timeout: timeout, log: log.With("endpoint", endpoint)}

	// A gRPC connection to a socket with nothing behind it keeps trying
	// in the background: find a runtime that is not there before making one.
	for _, ep := range []string{endpoint, imageEndpoint} {
		if err := probe(ctx, ep, timeout); err != nil {
			return nil, err
		}
	}

	rconn, err := connect(endpoint)
	if err != nil {
		return nil, fmt.Errorf("CRI runtime service at %s: %w", endpoint, err)
	}
	c.conns = append(c.conns, rconn)
	iconn := rconn
	if imageEndpoint != endpoint {
		if iconn, err = connect(imageEndpoint); err != nil {
			return nil, errors.Join(fmt.Errorf("CRI image service at %s: %w", imageEndpoint, err), c.Close())
		}
		c.conns = append(c.conns, iconn)
	}
	c.rs = &RuntimeService{client: runtimeapi.NewRuntimeServiceClient(rconn), timeout: timeout}
	c.is = &ImageService{client: runtimeapi.NewImageServiceClient(iconn), timeout: timeout}

	// Check that both services speak CRI v1, as cri-client does: a
	// Version call and an ImageFsInfo call.
	vctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	version, err := c.rs.client.Version(vctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("CRI runtime service at %s: validate CRI v1 runtime API: %w", endpoint, err), c.Close())
	}
	c.runtimeName = version.GetRuntimeName()
	if _, err := c.is.client.ImageFsInfo(vctx, &runtimeapi.ImageFsInfoRequest{}); err != nil {
		return nil, errors.Join(fmt.Errorf("CRI image service at %s: validate CRI v1 image API: %w", imageEndpoint, err), c.Close())
	}
	c.log.Info("connected to the container runtime", "image_endpoint", imageEndpoint, "timeout", timeout)
	return c, nil
}

// connect makes the gRPC connection to a unix socket endpoint, with
// cri-client's options; it connects on the first call.
func connect(endpoint string) (*grpc.ClientConn, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "unix" {
		return nil, fmt.Errorf("protocol %q not supported: only unix socket endpoints are", u.Scheme)
	}
	params := grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: minConnectTimeout}
	params.Backoff.BaseDelay = baseBackoffDelay
	params.Backoff.MaxDelay = maxBackoffDelay
	// The passthrough resolver hands the socket path to the dialer as it is.
	return grpc.NewClient("passthrough:///"+u.Path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
		grpc.WithContextDialer(func(ctx context.Context, path string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.ForceCodecV2(replyCodec{encoding.GetCodecV2(grpcproto.Name)})),
		grpc.WithConnectParams(params),
	)
}

// replyCodec is gRPC's protobuf codec but for how it joins a reply that came
// in several HTTP/2 frames (more than 16 KiB) before decoding it. gRPC's
// own takes a buffer for that from its shared pool, whose tier above 32 KiB
// is 1 MiB, and puts it back: a node's container list or stats (past
// 32 KiB at about 60 containers) left 1 MiB in the heap after every
// housekeeping tick, a quarter of the agent's live heap at 110 pods. Here
// the reply is joined into a slice of its own size, garbage once decoded
// (docs/BENCHMARKS.md, "Cost on a real node").
type replyCodec struct{ encoding.CodecV2 }

func (replyCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("CRI reply: %T is not a protobuf message", v)
	}
	return proto.Unmarshal(data.Materialize(), m)
}

// probe checks that a unix socket endpoint accepts connections.
func probe(ctx context.Context, endpoint string, timeout time.Duration) error {
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok {
		return nil // not a unix socket: left to connect to refuse
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

// RuntimeService is the CRI runtime client, for reclaim.Runtime. Each of its
// calls is bounded by the Dial timeout.
func (c *Client) RuntimeService() *RuntimeService { return c.rs }

// ImageService is the CRI image client, for reclaim.Images; its calls are
// bounded like RuntimeService's.
func (c *Client) ImageService() *ImageService { return c.is }

// Close closes the connections.
func (c *Client) Close() error {
	var errs []error
	for _, conn := range c.conns {
		errs = append(errs, conn.Close())
	}
	return errors.Join(errs...)
}

// callContext bounds one call by the client's timeout.
func (c *Client) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
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
	return c.listPodSandboxesWith(ctx, nil)
}

// listPodSandboxesWith calls ListPodSandbox with filter.
func (c *Client) listPodSandboxesWith(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	out, err := c.rs.ListPodSandbox(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("CRI ListPodSandbox at %s: %w", c.endpoint, err)
	}
	return out, nil
}

// listContainers calls ListContainers with no filter.
func (c *Client) listContainers(ctx context.Context) ([]*runtimeapi.Container, error) {
	return c.listContainersWith(ctx, nil)
}

// listContainersWith calls ListContainers with filter.
func (c *Client) listContainersWith(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	out, err := c.rs.ListContainers(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainers at %s: %w", c.endpoint, err)
	}
	return out, nil
}

// listContainerStats calls ListContainerStats with no filter.
func (c *Client) listContainerStats(ctx context.Context) ([]*runtimeapi.ContainerStats, error) {
	return c.listContainerStatsWith(ctx, nil)
}

// listContainerStatsWith calls ListContainerStats with filter.
func (c *Client) listContainerStatsWith(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	out, err := c.rs.ListContainerStats(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainerStats at %s: %w", c.endpoint, err)
	}
	return out, nil
}
