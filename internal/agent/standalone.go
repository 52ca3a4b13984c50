package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/cri"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
)

// standalonePods is the pod source of standalone mode: with no API server,
// the pods are the pod cgroups under kubepods, known by UID and QoS class,
// named after their ready sandboxes in the container runtime. Their
// priorities and requests are not known, so when evictd stops pods
// (spare: --standalone-stop) only those a stop may hit without them are
// left evictable (standaloneSpare) and the others are Spared; otherwise
// its decisions are a dry run's, on what it knows.
type standalonePods struct {
	cfg       host.Config
	sandboxes func(context.Context) (map[string]cri.Sandbox, error)
	spare     bool
}

func (p standalonePods) Pods(ctx context.Context) ([]signals.Pod, error) {
	pods, err := host.DiscoverPods(p.cfg)
	if err != nil {
		return nil, err
	}
	sbs, err := p.sandboxes(ctx)
	nameAndSpare(pods, sbs, err, p.spare)
	return pods, nil
}

// nameAndSpare names each pod after its ready sandbox in sbs and marks
// the static ones; with spare it also spares those standalone evictd must
// leave alone, and with sbErr (the runtime did not answer) all of them.
func nameAndSpare(pods []signals.Pod, sbs map[string]cri.Sandbox, sbErr error, spare bool) {
	for i := range pods {
		pod := &pods[i]
		if sbErr != nil {
			if spare {
				pod.Spared = "standalone: the container runtime did not list its sandbox"
			}
			continue
		}
		var sb *cri.Sandbox
		if s, ok := sbs[pod.UID]; ok {
			sb = &s
			pod.Namespace, pod.Name = s.Namespace, s.Name
			// The kubelet's own record of where the pod came from:
			// a static pod is critical as it is to the kubelet.
			pod.Static = s.Source != "" && s.Source != cri.ConfigSourceAPI
		}
		if spare {
			pod.Spared = standaloneSpare(pod, sb)
		}
	}
}

// standaloneSpare says why standalone evictd must leave pod p alone, its
// ready sandbox being sb (nil: none), or "" when it may stop it. With no
// API server it knows neither the pod's priority nor its requests, so it
// stops only pods the kubelet ranks by usage whatever those are: not
// static, not in kube-system (where the critical add-ons run, whose
// priority it cannot see), and not Guaranteed (whose usage never exceeds
// its request, so the kubelet evicts it after every pod that does).
func standaloneSpare(p *signals.Pod, sb *cri.Sandbox) string {
	switch {
	case sb == nil:
		return "standalone: no ready sandbox in the container runtime"
	case sb.Source == "":
		return "standalone: the kubelet recorded no config source"
	case sb.Source != cri.ConfigSourceAPI:
		return "" // Static says it
	case sb.Namespace == metav1.NamespaceSystem:
		return "standalone: kube-system, priority unknown"
	case p.QOS == signals.Guaranteed:
		return "standalone: Guaranteed, requests unknown"
	}
	return ""
}

// InFlight is always nil: without an API server evictd cannot see a pod's
// deletion; a stopped pod's containers are gone when Evict returns.
func (standalonePods) InFlight() []decide.InFlight { return nil }

// standaloneEvicter carries out, with no API server, the evictions a stop
// through the runtime can carry out alone (--standalone-stop): those of a
// hard memory or PID threshold, whose pod's containers it kills at once
// (grace period 0: exit code 137, so no Job counts the pod a success, as
// after the kernel's OOM killer, and earlier). The pod stays on the node
// and the kubelet restarts its containers as its restart policy says,
// after its back-off. Nothing is owed: with no API server there is no
// eviction to complete.
type standaloneEvicter struct {
	stop func(ctx context.Context, pod *signals.Pod, gracePeriodSeconds int64) error
}

func (e standaloneEvicter) Evict(ctx context.Context, r decide.Request) error {
	if why := standaloneRefusal(r); why != "" {
		return fmt.Errorf("%w: %s", decide.ErrNotActed, why)
	}
	if err := e.stop(ctx, r.Pod, 0); err != nil {
		return fmt.Errorf("standalone stop of %s through the container runtime: %w", r.Pod.Ref(), err)
	}
	return decide.ErrStoppedStandalone
}

// standaloneRefusal says why standalone evictd cannot carry out r, or ""
// when a stop through the runtime does: a stop frees a pod's memory and
// PIDs, but neither its disk (its writable layer and volumes stay until
// the pod is deleted) nor, for a soft threshold, anything a grace period
// and the pod's own end would not.
func standaloneRefusal(r decide.Request) string {
	switch {
	case !r.Hard:
		return "a soft threshold's eviction needs the API server"
	case r.Signal.Pressure() == signals.DiskPressure:
		return "a stop frees no disk: a disk eviction needs the API server"
	}
	return ""
}

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
// that the agent runs standalone (doing acts) while the optional kubeconfig at path is
// awaited, and, once the file is there, that a restart would use it: an
// operator who reads the journal a day later still learns that this node
// has no API server's evictions. It returns nil.
func remindStandalone(ctx context.Context, clk clock.WithTicker, interval time.Duration, path, acts string, log *slog.Logger) error {
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		if _, err := os.Stat(path); err == nil {
			log.Warn("the kubeconfig is there now, but evictd reads it only at start: restart evictd (systemctl restart evictd) to reach the API server; until then it still runs standalone, "+acts,
				"kubeconfig", path)
		} else {
			log.Warn("still no kubeconfig: running standalone, "+acts+"; write it (--kubeconfig-optional) and restart evictd",
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
