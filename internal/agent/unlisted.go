package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/cri"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/manager"
	"github.com/evictd/evictd/signals"
)

// unlistedAfter is how long a pod cgroup the pod cache does not hold is
// left alone before it is ranked: the cache has a new pod well before the
// kubelet has made its cgroup, so a cgroup unknown for longer means a
// cache behind the API server.
const unlistedAfter = 5 * time.Second

// cachedPods is the pod source of an evictd with an API server: the pod
// cache's pods, and beside them the pods running on the node that the
// cache does not hold at all. After an API server outage the informer can
// stay behind for a minute or more (its watch backs off), while the
// kubelet, which reached the server in between, runs pods the cache has
// never seen: a hog among them would grow unranked, evictd would evict a
// pod it knows in its place, and the kernel's OOM killer would end the
// hog (seen on the real node with the API server flapping). Those pods
// are known as standalone evictd knows pods: by their cgroups (UID and
// QoS class) and ready sandboxes (name, namespace, config source), and
// spared as it spares them (standaloneSpare: no priority or requests
// known). Their eviction goes through the API server, which reads them
// back first, or, with the API server away, through the runtime.
type cachedPods struct {
	cache interface {
		manager.PodSource
		KnownUIDs() map[string]bool
	}
	// discover lists the pod cgroups (host.DiscoverPods).
	discover  func() ([]signals.Pod, error)
	sandboxes func(context.Context) (map[string]cri.Sandbox, error)
	clock     clock.PassiveClock
	log       *slog.Logger

	mu   sync.Mutex
	seen map[string]*unlisted // pods the cache does not hold, by UID
}

// unlisted is a pod cgroup the cache does not hold: since when, and
// whether its ranking was said.
type unlisted struct {
	since time.Time
	said  bool
}

func (p *cachedPods) InFlight() []decide.InFlight { return p.cache.InFlight() }

// Relist passes the manager's request on to the cache.
func (p *cachedPods) Relist(reason string) {
	if r, ok := p.cache.(manager.Relister); ok {
		r.Relist(reason)
	}
}

func (p *cachedPods) Pods(ctx context.Context) ([]signals.Pod, error) {
	pods, err := p.cache.Pods(ctx)
	if err != nil {
		return pods, err
	}
	known := p.cache.KnownUIDs()
	found, err := p.discover()
	if err != nil || known == nil {
		return pods, nil // the cgroups unreadable: the cache's pods alone
	}
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	var ranked []signals.Pod
	current := map[string]bool{}
	for _, f := range found {
		if known[f.UID] {
			continue
		}
		current[f.UID] = true
		u, ok := p.seen[f.UID]
		if !ok {
			p.seen[f.UID] = &unlisted{since: now}
			continue
		}
		if now.Sub(u.since) >= unlistedAfter {
			ranked = append(ranked, f)
		}
	}
	for uid := range p.seen {
		if !current[uid] {
			delete(p.seen, uid)
		}
	}
	if len(ranked) == 0 {
		return pods, nil
	}
	sbs, sbErr := p.sandboxes(ctx)
	nameAndSpare(ranked, sbs, sbErr, true)
	for _, r := range ranked {
		if r.Namespace == "" { // no ready sandbox: not running
			continue
		}
		if u := p.seen[r.UID]; !u.said {
			u.said = true
			p.log.Warn("a pod running on the node is not in the pod cache (behind the API server); ranked as standalone evictd ranks it",
				"pod", r.Ref(), "uid", r.UID, "qos", r.QOS, "spared", r.Spared, "unlistedFor", now.Sub(u.since).Round(time.Second))
		}
		pods = append(pods, r)
	}
	return pods, nil
}
