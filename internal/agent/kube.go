package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/evict"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/lease"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/nodestatus"
	"github.com/evictd/evictd/internal/podsource"
	"github.com/evictd/evictd/internal/secretfile"
	"github.com/evictd/evictd/internal/tokenrenew"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
)

// initialSyncTimeout bounds how long the agent waits for its first list of
// pods before it starts deciding anyway: evictd must protect the node even
// when the API server is away at start.
const initialSyncTimeout = 5 * time.Second

// kube is evictd's side of the API server: the node's pods, the node's
// conditions and taints, and evictions. The pods are read, evicted and
// deleted as the node's own identity (cfg.ImpersonateNode), everything
// else under evictd's own.
type kube struct {
	// client is evictd's own identity, never the node's: the reviews
	// of the scrapers of /metrics (--metrics-delegated-auth).
	client      *kubeclient.Client
	pods        *podsource.Source
	status      *nodestatus.Publisher
	lease       *lease.Keeper
	evicter     *evict.Evicter
	events      nodeEvents
	broadcaster record.EventBroadcaster
	// renewer renews the kubeconfig's node-bound token; nil when it is
	// not one, or --token-renewal=false.
	renewer *tokenrenew.Renewer
	// relisted says that the pod cache was listed afresh, for a pass at once.
	relisted chan struct{}
}

// RestConfig reads the kubeconfig at path as client-go does (its current
// context, relative paths taken from the kubeconfig's directory) and
// refuses credentials that group or others can read or write, or that
// another user owns (secretfile.Check): the kubeconfig itself, and the
// client-key and tokenFile it names. The client-certificate and the
// certificate-authority it names are public: no check. The agent and
// check-config call it before anything else, so a refusal comes before
// any eviction.
//
// Rotation needs no code here; client-go v0.36 (k8s.io/client-go/transport)
// already does it for files given by path, though without checking their
// modes again:
//   - tokenFile becomes rest.Config.BearerTokenFile, which
//     NewBearerAuthWithRefreshRoundTripper (round_trippers.go) reads
//     through NewCachedFileTokenSource (token_source.go): read again about
//     once a minute (a minute's expiry, 10 s early), keeping the last good
//     token when a read fails or the file is empty. evictd's own renewal
//     (--token-renewal, tokenrenew.Renewer) writes it with days to spare
//     by default, and the old token stays valid until it expires, so that
//     minute costs nothing;
//   - client-certificate and client-key set TLS.ReloadTLSFiles
//     (transport.go, loadTLSFiles): each new handshake loads the pair
//     again, at most once a second (cachingCertificateLoader), and
//     cert_rotation.go looks every 5 minutes and closes the connections
//     when the pair changed. A pair that fails to load fails new
//     handshakes (open connections stay): there is no last good pair.
//
// A kubeconfig that embeds its credentials (token, client-key-data) has
// nothing to reload: evictd must be restarted to use new ones.
func RestConfig(path string) (*rest.Config, error) {
	if err := secretfile.Check("--kubeconfig", path); err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
	}
	for _, f := range []struct{ kind, path string }{
		{"client-key", rc.KeyFile},
		{"tokenFile", rc.BearerTokenFile},
	} {
		if f.path == "" {
			continue
		}
		if err := secretfile.Check(f.kind, f.path); err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
		}
	}
	return rc, nil
}

// KubeRestConfig is RestConfig of cfg.Kubeconfig, reaching the API
// server at InClusterServer's address instead of the kubeconfig's server
// with cfg.KubeconfigInCluster. getenv is os.Getenv.
func KubeRestConfig(cfg *config.Config, getenv func(string) string) (*rest.Config, error) {
	rc, err := RestConfig(cfg.Kubeconfig)
	if err != nil || !cfg.KubeconfigInCluster {
		return rc, err
	}
	if rc.Host, err = InClusterServer(getenv); err != nil {
		return nil, fmt.Errorf("--kubeconfig-in-cluster: %w", err)
	}
	return rc, nil
}

// InClusterServer is the API server's address as a pod reaches it without
// cluster DNS, from the variables the kubelet sets in every container (as
// client-go's rest.InClusterConfig reads them):
// https://KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT, an IPv6 host in
// brackets. A variable missing or malformed is an error naming it.
func InClusterServer(getenv func(string) string) (string, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	switch {
	case host == "" && port == "":
		return "", errors.New("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: evictd does not run in a pod")
	case host == "":
		return "", errors.New("KUBERNETES_SERVICE_HOST is not set")
	case port == "":
		return "", errors.New("KUBERNETES_SERVICE_PORT is not set")
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", fmt.Errorf("KUBERNETES_SERVICE_PORT %q is not a port number from 1 to 65535", port)
	}
	if net.ParseIP(host) == nil {
		if len(host) > 253 || !validHostName(host) {
			return "", fmt.Errorf("KUBERNETES_SERVICE_HOST %q is not an IP address or host name", host)
		}
	}
	return "https://" + net.JoinHostPort(host, port), nil
}

// validHostName reports whether s is made of DNS labels.
func validHostName(s string) bool {
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return false
			}
		}
	}
	return true
}

// newKube connects to the API server with rc, from RestConfig of
// cfg.Kubeconfig, for evictd at version. The runtime rt, when not nil,
// stops a hard eviction's containers on the node
// (evict.Config.StopLocally), as cfg.HardEvictionLocalStop and
// cfg.LocalKillAfter say, and tells whether an evicted pod's sandbox is
// stopped (evict.Config.SandboxReady).
func newKube(cfg *config.Config, rc *rest.Config, version string, met *metrics.Metrics, log *slog.Logger, rt *runtimeConn) (*kube, error) {
	var (
		stopLocally  func(context.Context, *signals.Pod, int64) error
		sandboxReady func(context.Context, string) (bool, error)
	)
	if rt != nil {
		stopLocally, sandboxReady = rt.stopPodContainers, rt.podSandboxReady
	}
	signalLocally := directSignal(cfg, rt, log)
	rc = rest.CopyConfig(rc)
	rc.UserAgent = "evictd/" + version
	// Every client made from rc, the node's impersonating one too, counts
	// the requests refused for their credentials (401, 403).
	rc.Wrap(met.CountRefusals)
	// When the token and client certificate expire, read at each scrape.
	met.SetCredentialExpiries(func() map[metrics.Credential]time.Time {
		token, cert := kubeclient.Expiry(rc)
		return map[metrics.Credential]time.Time{metrics.CredentialToken: token, metrics.CredentialClientCert: cert}
	})
	client, err := kubeclient.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
	}

	renewer := newRenewer(cfg, rc, client, met, log)

	// The node's pods: read, evicted and deleted as the node itself, so
	// that the API server refuses any pod bound to another node whatever
	// evictd asks.
	podClient := client
	if cfg.ImpersonateNode {
		if podClient, err = kubeclient.NewForConfigAsNode(rc, cfg.NodeName); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
	}

	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(client.EventSink())
	recorder := broadcaster.NewRecorder(client.Scheme(), v1.EventSource{Component: "evictd", Host: cfg.NodeName})

	status, err := nodestatus.New(nodestatus.Config{
		NodeName:        cfg.NodeName,
		TaintEffect:     v1.TaintEffect(cfg.TaintEffect),
		UpdateFrequency: cfg.NodeStatusUpdateFrequency,
		ReportFrequency: cfg.NodeStatusReportFrequency,
		OnAPIError:      met.IncAPIError,
	}, client, recorder, log.With("component", "nodestatus"))
	if err != nil {
		broadcaster.Shutdown()
		return nil, err
	}
	keeper, err := lease.New(lease.Config{
		NodeName:  cfg.NodeName,
		Namespace: cfg.LeaseNamespace,
		Duration:  cfg.LeaseDuration,
		// The first renewal within one renewal interval: a fleet
		// restarted at once spreads its Lease writes over it.
		StartWithin: cfg.LeaseDuration / 4,
		NodeUID:     status.NodeUID,
		OnAPIError:  met.IncAPIError,
	}, client, log.With("component", "lease"))
	if err != nil {
		broadcaster.Shutdown()
		return nil, err
	}
	// podsource names itself (component=podsource).
	pods := podsource.New(podClient, cfg.NodeName, 0, log)
	// A mirror pod counts as the node's own only with the Node's UID in
	// its ownerReference, as the node's watch shows it.
	pods.SetNodeUID(status.NodeUID)
	pods.SetTrustedDaemonSetNamespaces(cfg.TrustedDaemonSetNamespaces)
	// A pod watch silent while the Lease renewals succeed is stale: the
	// source relists, and the loop looks at the new list at once.
	relisted := make(chan struct{}, 1)
	pods.SetStaleness(keeper.LastRenewed, func() {
		select {
		case relisted <- struct{}{}:
		default:
		}
	})
	return &kube{
		client:   client,
		renewer:  renewer,
		relisted: relisted,
		pods:     pods,
		status:   status,
		lease:    keeper,
		evicter: evict.New(evict.Config{
			NodeName:   cfg.NodeName,
			Pods:       pods,
			OnAPIError: met.IncAPIError,
			OnIssued: func(r decide.Request, d time.Duration) {
				met.ObserveIssueLatency(r.Signal, d)
			},
			CleanupTimeout: cfg.CleanupTimeout,
			StopLocally:    stopLocally,
			SignalLocally:  signalLocally,
			OnSignalled: func(r decide.Request, path metrics.SignalPath, d time.Duration) {
				met.ObserveSignalLatency(r.Signal, path, d)
			},
			SandboxReady:   sandboxReady,
			StopWhenIssued: cfg.HardEvictionLocalStop,
			LocalKillAfter: cfg.LocalKillAfter,
			OnOwed:         met.SetOwed,
			AsNode:         podClient,
		}, client, recorder, log.With("component", "evict")),
		events:      newNodeEvents(recorder, cfg.NodeName),
		broadcaster: broadcaster,
	}, nil
}

// directSignal returns evict.Config.SignalLocally: a host.PodSignaller's
// stop signal, each container's as the runtime rt reports it (SIGTERM
// where it has not said), when cfg.HardEvictionDirectSignal is set and
// evictd acts on the node (rt is set: not a dry run); nil otherwise, or
// when the signaller cannot be made (said in the log: the runtime's stop
// remains).
func directSignal(cfg *config.Config, rt *runtimeConn, log *slog.Logger) func(*signals.Pod) (host.Signalled, error) {
	if !cfg.HardEvictionDirectSignal || rt == nil {
		return nil
	}
	s, err := host.NewPodSignaller(HostConfig(cfg))
	if err != nil {
		log.Warn("hard evictions' stop signal goes through the container runtime alone", "err", err)
		return nil
	}
	return func(p *signals.Pod) (host.Signalled, error) {
		return s.SignalEach(*p, func(c signals.Container) syscall.Signal { return rt.stopSignal(c.ID) })
	}
}

// newRenewer returns the Renewer of rc's tokenFile when cfg.TokenRenewal
// is set and the file holds a ServiceAccount token bound to a Node, nil
// otherwise, saying why in the log. Its requests go through client, under
// evictd's own identity.
func newRenewer(cfg *config.Config, rc *rest.Config, client *kubeclient.Client, met *metrics.Metrics, log *slog.Logger) *tokenrenew.Renewer {
	switch {
	case rc.BearerTokenFile == "":
		return nil
	case !cfg.TokenRenewal:
		log.Info("--token-renewal=false: the kubeconfig's tokenFile is renewed by hand", "tokenFile", rc.BearerTokenFile)
		return nil
	}
	r, err := tokenrenew.NewRenewer(tokenrenew.RenewerConfig{
		Path:        rc.BearerTokenFile,
		RenewBefore: cfg.TokenRenewBefore,
		Lifetime:    cfg.TokenLifetime,
		Log:         log.With("component", "token"),
		OnRenewal:   met.CountTokenRenewal,
	}, client)
	if err != nil {
		log.Info("the kubeconfig's tokenFile is not renewed by evictd", "reason", err)
		return nil
	}
	before, lifetime := "a third of its lifetime", "its own, at most 720h"
	if cfg.TokenRenewBefore > 0 {
		before = cfg.TokenRenewBefore.String()
	}
	if cfg.TokenLifetime > 0 {
		lifetime = cfg.TokenLifetime.String()
	}
	log.Info("renewing the kubeconfig's node-bound token before it expires", "tokenFile", rc.BearerTokenFile,
		"renewBefore", before, "lifetime", lifetime)
	return r
}

// start runs the informers, the status writer, the Lease and the owed
// evictions' retries in g until ctx is done, and waits (bounded) for the
// first list of pods.
func (k *kube) start(ctx context.Context, g *errgroup.Group, log *slog.Logger) {
	g.Go(func() error { return k.pods.Run(ctx) })
	g.Go(func() error { return k.status.Run(ctx) })
	g.Go(func() error { return k.evicter.Run(ctx) })
	g.Go(func() error { return k.lease.Run(ctx) })
	if k.renewer != nil {
		g.Go(func() error { return k.renewer.Run(ctx) })
	}
	syncCtx, cancel := context.WithTimeout(ctx, initialSyncTimeout)
	defer cancel()
	if err := k.pods.WaitForSync(syncCtx); err != nil {
		log.Warn("starting without a list of the node's pods; evictions wait until it arrives", "err", err)
	}
}

// forwardRelists calls wake each time the pod cache was listed afresh,
// for a pass at once, until ctx is done; it returns nil.
func (k *kube) forwardRelists(ctx context.Context, wake func()) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-k.relisted:
			wake()
		}
	}
}

func (k *kube) stop() { k.broadcaster.Shutdown() }
