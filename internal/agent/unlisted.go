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

// unlistedAfter is how long a pod the pod cache does not hold is left
// alone before it is ranked: the cache has a new pod well before the
// kubelet has made its sandbox and cgroup, so a pod unknown for longer
// means a cache behind the API server. It is counted from the pod's
// sandbox's creation, by the runtime's clock, for a pod the cache has
// never held, and from evictd's first sight of its cgroup for one the
// cache held and dropped (deleted while its cgroup is still being torn
// down, or a sandbox the runtime did not date). Counted from the first
// sight alone, a hog the cache had never seen was first seen by the pass
// at its crossing, when it had run for many seconds, and left unranked
// for 5 s more, in which evictd evicted a Burstable pod within its request
// in its place (TestChaosNode under load).
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
	cache podCache
	// discover lists the pod cgroups (host.DiscoverPods).
	discover  func() ([]signals.Pod, error)
	sandboxes func(context.Context) (map[string]cri.Sandbox, error)
	clock     clock.PassiveClock
	log       *slog.Logger

	mu   sync.Mutex
	seen map[string]*unlisted // pods the cache does not hold, by UID
	// held is the UIDs the cache has held whose cgroups are still there.
	held map[string]bool
}

// podCache is the pod cache cachedPods reads (podsource.Source): its pods,
// and the UIDs of every pod it holds.
type podCache interface {
	manager.PodSource
	KnownUIDs() map[string]bool
}

// newCachedPods returns the pods of cache and, beside them, those whose
// cgroups discover lists and the cache does not hold, named after their
// sandboxes.
func newCachedPods(cache podCache, discover func() ([]signals.Pod, error), sandboxes func(context.Context) (map[string]cri.Sandbox, error),
	clk clock.PassiveClock, log *slog.Logger) *cachedPods {
	return &cachedPods{cache: cache, discover: discover, sandboxes: sandboxes, clock: clk, log: log,
		seen: map[string]*unlisted{}, held: map[string]bool{}}
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
	var unknown []signals.Pod
	current := map[string]bool{}
	for _, f := range found {
		current[f.UID] = true
		if known[f.UID] {
			p.held[f.UID] = true
			continue
		}
		if _, ok := p.seen[f.UID]; !ok {
			p.seen[f.UID] = &unlisted{since: now}
		}
		unknown = append(unknown, f)
	}
	for uid := range p.seen {
		if !current[uid] || known[uid] {
			delete(p.seen, uid)
		}
	}
	for uid := range p.held {
		if !current[uid] {
			delete(p.held, uid) // its cgroup is gone: its UID never comes back
		}
	}
	if len(unknown) == 0 {
		return pods, nil
	}
	// The sandboxes are listed only when the cache lacks a running pod.
	// A static pod's cgroup carries the UID the kubelet gave it from its
	// manifest (the config hash), never its mirror pod's UID in the API,
	// so the cache lacks it on every pass even when it keeps up: on a node
	// with static pods this is one CRI ListPodSandbox per pass, as it was
	// before the wait ran from the sandbox's creation.
	sbs, sbErr := p.sandboxes(ctx)
	var ranked []signals.Pod
	for _, f := range unknown {
		if p.waited(f.UID, sbs[f.UID], now) {
			ranked = append(ranked, f)
		}
	}
	if len(ranked) == 0 {
		return pods, nil
	}
	nameAndSpare(ranked, sbs, sbErr, true)
	for _, r := range ranked {
		if r.Namespace == "" { // no ready sandbox: not running
			continue
		}
		if u := p.seen[r.UID]; !u.said {
			u.said = true
			if r.Static {
				// Not a sign of a cache behind: a static pod's cgroup
				// never carries its mirror pod's UID (see above). The
				// runtime's sandbox, whose config source the kubelet
				// writes, says it is static; it is spared as its mirror
				// pod is.
				p.log.Debug("a static pod running on the node, known by its cgroup and sandbox; ranked as static beside its mirror pod",
					"pod", r.Ref(), "uid", r.UID, "qos", r.QOS)
			} else {
				p.log.Warn("a pod running on the node is not in the pod cache (behind the API server); ranked as standalone evictd ranks it",
					"pod", r.Ref(), "uid", r.UID, "qos", r.QOS, "spared", r.Spared, "unlistedFor", now.Sub(u.since).Round(time.Second),
					"sandboxAge", sandboxAge(sbs[r.UID], now))
			}
		}
		pods = append(pods, r)
	}
	return pods, nil
}

// waited reports whether the pod of uid, which the cache does not hold,
// has been left alone for unlistedAfter at now: since its sandbox sb was
// created when the cache never held it, since its cgroup was first seen
// otherwise (see unlistedAfter).
func (p *cachedPods) waited(uid string, sb cri.Sandbox, now time.Time) bool {
	if now.Sub(p.seen[uid].since) >= unlistedAfter {
		return true
	}
	return !p.held[uid] && !sb.Created.IsZero() && now.Sub(sb.Created) >= unlistedAfter
}

// sandboxAge is how long ago sb was created at now, for the log; 0 when
// the runtime did not say.
func sandboxAge(sb cri.Sandbox, now time.Time) time.Duration {
	if sb.Created.IsZero() {
		return 0
	}
	return now.Sub(sb.Created).Round(time.Second)
}
