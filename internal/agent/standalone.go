package agent

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
)

// cgroupPods is the pod source of standalone mode: with no API server, the
// pods are the pod cgroups under kubepods, known by UID and QoS class only.
type cgroupPods struct{ cfg host.Config }

func (p cgroupPods) Pods(context.Context) ([]signals.Pod, error) { return host.DiscoverPods(p.cfg) }

// InFlight is always nil: without an API server evictd evicts nothing and
// cannot see a pod's deletion.
func (cgroupPods) InFlight() []decide.InFlight { return nil }

// LayoutOf tells whether the image filesystem is dedicated; without
// --imagefs-path evictd knows of no image filesystem yet and treats the node
// as one filesystem.
func LayoutOf(cfg host.Config, fs *host.Filesystems) (signals.FsLayout, error) {
	if cfg.ImageFsPath == "" {
		return signals.SingleFs, nil
	}
	return fs.Layout(cfg.KubeletRootDir, cfg.ImageFsPath)
}

// KubeconfigAwaited reports whether cfg names a kubeconfig that is
// optional (--kubeconfig-optional) and does not exist: the agent then runs
// standalone until it is written and evictd restarted. Only its absence
// counts; a kubeconfig that exists but cannot be used (unreadable, too
// open, not a kubeconfig) is refused by RestConfig.
func KubeconfigAwaited(cfg *config.Config) bool {
	if cfg.Kubeconfig == "" || !cfg.KubeconfigOptional {
		return false
	}
	_, err := os.Stat(cfg.Kubeconfig)
	return errors.Is(err, fs.ErrNotExist)
}

// remindStandalone says again, every interval on clk until ctx is done,
// that the agent runs standalone while the optional kubeconfig at path is
// awaited, and, once the file is there, that a restart would use it: an
// operator who reads the journal a day later still learns that this node
// has no API server's evictions. It returns nil.
func remindStandalone(ctx context.Context, clk clock.WithTicker, interval time.Duration, path string, log *slog.Logger) error {
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		if _, err := os.Stat(path); err == nil {
			log.Warn("the kubeconfig is there now, but evictd reads it only at start: restart evictd (systemctl restart evictd) to reach the API server; until then it still runs standalone and evicts nothing",
				"kubeconfig", path)
		} else {
			log.Warn("still no kubeconfig: running standalone, evicting nothing; write it (--kubeconfig-optional) and restart evictd",
				"kubeconfig", path)
		}
	}
}

// errNoAPIServer fails the reviews of scrapers while evictd runs
// standalone.
var errNoAPIServer = errors.New("no API server: evictd runs standalone until its kubeconfig is written and it restarts")

// noTokenReviews and noAccessReviews review the scrapers while evictd
// runs standalone: every review fails (503), none lets a token through.
type (
	noTokenReviews  struct{}
	noAccessReviews struct{}
)

func (noTokenReviews) Create(context.Context, *authenticationv1.TokenReview, metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	return nil, errNoAPIServer
}

func (noAccessReviews) Create(context.Context, *authorizationv1.SubjectAccessReview, metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	return nil, errNoAPIServer
}
