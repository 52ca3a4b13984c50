package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/metrics"
)

// Config says whose Lease to keep, where, and for how long.
type Config struct {
	// NodeName is the node evictd runs on; the Lease is evictd-<NodeName>.
	NodeName string
	// Namespace is evictd's own namespace (--lease-namespace).
	Namespace string
	// Duration is the Lease's leaseDurationSeconds: the cluster may count
	// evictd dead when renewTime is older (--lease-duration, 2m by
	// default). It is renewed every quarter of it, as the kubelet renews
	// its node Lease (10s of 40s).
	Duration time.Duration
	// NodeUID, when set, returns the UID of the node's Node object, or ""
	// when unknown: the Lease then names the Node as its owner, so the
	// garbage collector deletes it with the Node.
	NodeUID func() types.UID
	// StartWithin spreads the first renewal: it comes at a random time
	// within this long after Run starts (0: at once). A fleet restarted at
	// once then does not renew at once; a Lease renewed before the restart
	// stays valid meanwhile as long as StartWithin is below three
	// quarters of Duration.
	StartWithin time.Duration
	// Retry is the schedule of retries after a failed renewal. Default:
	// 1s doubling to the renewal interval, each delay stretched by up to
	// 100% at random.
	Retry wait.Backoff
	// Clock drives renewals and retries (the real clock by default).
	Clock clock.WithTicker
	// OnAPIError, when set, is called with metrics.APILeaseRenew for every
	// request that failed.
	OnAPIError func(metrics.APIVerb)
}

// Name returns the name of node's Lease.
func Name(node string) string { return "evictd-" + node }

// Keeper renews one node's Lease.
type Keeper struct {
	cfg    Config
	client *kubeclient.Client
	log    *slog.Logger
	lease  *coordinationv1.Lease // the API server's last answer; nil: read it first
	// renewed is when the API server last accepted a renewal (Unix
	// nanoseconds, 0: never), for LastRenewed.
	renewed atomic.Int64
}

// LastRenewed returns when the API server last accepted a renewal (or the
// Lease's creation), the zero time before the first: a sign that the API
// server answers evictd, every renewal interval.
func (k *Keeper) LastRenewed() time.Time {
	if n := k.renewed.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// New checks cfg and returns a Keeper ready to Run.
func New(cfg Config, client *kubeclient.Client, log *slog.Logger) (*Keeper, error) {
	if client == nil || log == nil {
		return nil, errors.New("lease: client and logger are required")
	}
	if errs := validation.IsDNS1123Subdomain(Name(cfg.NodeName)); cfg.NodeName == "" || len(errs) > 0 {
		return nil, fmt.Errorf("lease: node name %q does not make a Lease name: %v", cfg.NodeName, errs)
	}
	if errs := validation.IsDNS1123Label(cfg.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("lease: namespace %q: %v", cfg.Namespace, errs)
	}
	if cfg.Duration < 4*time.Second {
		return nil, fmt.Errorf("lease: duration %s is too short (at least 4s)", cfg.Duration)
	}
	if cfg.StartWithin < 0 || cfg.StartWithin >= cfg.Duration*3/4 {
		return nil, fmt.Errorf("lease: first renewal within %s: want 0 or more and below three quarters of the duration %s", cfg.StartWithin, cfg.Duration)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.OnAPIError == nil {
		cfg.OnAPIError = func(metrics.APIVerb) {}
	}
	if cfg.NodeUID == nil {
		cfg.NodeUID = func() types.UID { return "" }
	}
	if cfg.Retry.Duration <= 0 {
		cfg.Retry = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 1, Steps: math.MaxInt32, Cap: cfg.Duration / 4}
	}
	return &Keeper{cfg: cfg, client: client, log: log.With("lease", cfg.Namespace+"/"+Name(cfg.NodeName))}, nil
}

// interval is the time between two renewals.
func (k *Keeper) interval() time.Duration { return k.cfg.Duration / 4 }

// Run renews the Lease until ctx ends: at once (or within StartWithin),
// then every quarter of its duration stretched by up to 10% at random, so
// that agents started together drift apart; after a renewal that ends a
// run of failures, within half to one and a half quarters. A failed renewal is retried on Config.Retry's
// jittered schedule, and after a 429 or 5xx with Retry-After not before
// the server asks. Failures are logged once per episode. It returns nil
// when ctx ends.
func (k *Keeper) Run(ctx context.Context) error {
	failures := 0
	bo := k.cfg.Retry
	if d := k.cfg.StartWithin; d > 0 && !k.sleep(ctx, time.Duration(rand.Int64N(int64(d)))) {
		return nil
	}
	for {
		err := k.renew(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var delay time.Duration
		switch {
		case err == nil && failures > 0:
			// The first success after an outage: agents that were
			// retrying come back together (an API server accepts the
			// waiting requests at once when it is up), so draw the next
			// renewal anywhere in [0.5, 1.5) intervals to break the wave,
			// instead of keeping them in phase for many renewals.
			k.log.Info("lease renewed after failed attempts", "failed_attempts", failures)
			failures, bo = 0, k.cfg.Retry
			delay = k.interval()/2 + time.Duration(rand.Int64N(int64(k.interval())))
		case err == nil:
			delay = wait.Jitter(k.interval(), 0.1)
		default:
			failures++
			delay = bo.Step()
			if s, ok := apierrors.SuggestsClientDelay(err); ok && time.Duration(s)*time.Second > delay {
				delay = time.Duration(s) * time.Second
			}
			if failures == 1 {
				k.log.Warn("could not renew the lease; retrying with backoff", "err", err, "retry_in", delay)
			} else {
				k.log.Debug("could not renew the lease", "err", err, "attempt", failures, "retry_in", delay)
			}
		}
		if !k.sleep(ctx, delay) {
			return nil
		}
	}
}

// sleep waits d by the keeper's clock and reports whether ctx is still
// live.
func (k *Keeper) sleep(ctx context.Context, d time.Duration) bool {
	t := k.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// renew makes one attempt: an update from the last answer, without a
// read; the Lease is read (and created if missing) only at start and
// after an update fails.
func (k *Keeper) renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, k.interval())
	defer cancel()
	leases := k.client.Leases(k.cfg.Namespace)
	name := Name(k.cfg.NodeName)
	if k.lease == nil {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			l, err = leases.Create(ctx, k.desired(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.cfg.Namespace}}), metav1.CreateOptions{})
			if err != nil {
				k.cfg.OnAPIError(metrics.APILeaseRenew)
				return fmt.Errorf("create lease %s/%s: %w", k.cfg.Namespace, name, err)
			}
			k.lease = l
			k.renewed.Store(time.Now().UnixNano())
			k.log.Info("lease created", "duration", k.cfg.Duration)
			return nil
		case err != nil:
			k.cfg.OnAPIError(metrics.APILeaseRenew)
			return fmt.Errorf("get lease %s/%s: %w", k.cfg.Namespace, name, err)
		}
		k.lease = l
	}
	l, err := leases.Update(ctx, k.desired(k.lease.DeepCopy()), metav1.UpdateOptions{})
	if err != nil {
		k.cfg.OnAPIError(metrics.APILeaseRenew)
		k.lease = nil // read it again: it changed, or went
		return fmt.Errorf("renew lease %s/%s: %w", k.cfg.Namespace, name, err)
	}
	k.lease = l
	k.renewed.Store(time.Now().UnixNano())
	return nil
}

// desired returns l held by this node's evictd, renewed now, owned by the
// node when its UID is known.
func (k *Keeper) desired(l *coordinationv1.Lease) *coordinationv1.Lease {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels["app.kubernetes.io/name"] = "evictd"
	l.Spec.HolderIdentity = ptr.To(k.cfg.NodeName)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(k.cfg.Duration / time.Second))
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(k.cfg.Clock.Now()))
	if uid := k.cfg.NodeUID(); uid != "" && len(l.OwnerReferences) == 0 {
		l.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: v1.SchemeGroupVersion.String(), Kind: "Node", Name: k.cfg.NodeName, UID: uid,
		}}
	}
	return l
}
