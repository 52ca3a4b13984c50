package main

import (
	"context"
	"math"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/testing/fleet"
)

// bench runs the scenarios on one fleet.
type bench struct {
	cfg     config
	f       *fleet.Fleet
	logf    func(string, ...any)
	sampler *sampler
	windows []*window
}

// window is one scenario's time span and what the harness saw in it.
type window struct {
	name     string
	from, to time.Time
	// event is when the fleet is to recover from: the API server back
	// (outage), the agents started (restart); zero otherwise.
	event     time.Time
	eventWhat string
	// pressured are the nodes put under pressure, relieved when each was
	// taken off it (at its first eviction).
	pressured []*fleet.Node
	relieved  map[string]time.Time
	usage     usage
	finished  []fleet.Finished
}

func newBench(cfg config, f *fleet.Fleet, logf func(string, ...any)) *bench {
	return &bench{cfg: cfg, f: f, logf: logf, sampler: newSampler(f, cfg.sampleInterval)}
}

func (b *bench) runScenario(ctx context.Context, name string) error {
	w := &window{name: name, from: time.Now(), relieved: map[string]time.Time{}}
	b.sampler.reset()
	var err error
	switch name {
	case "idle":
		b.logf("idle: %s, nothing happens on any node", b.cfg.idle)
		err = sleep(ctx, b.cfg.idle)
	case "pressure":
		err = b.pressure(ctx, w)
	case "outage":
		err = b.outage(ctx, w)
	case "restart":
		err = b.restart(ctx, w)
	}
	w.to = time.Now()
	w.usage = b.sampler.since()
	for _, fin := range b.f.Finished() {
		if !fin.Terminating.Before(w.from) && fin.Terminating.Before(w.to) {
			w.finished = append(w.finished, fin)
		}
	}
	b.windows = append(b.windows, w)
	b.logf("%s: done (%s)", name, w.to.Sub(w.from).Round(time.Second))
	return err
}

// pressure puts a share of the nodes under memory pressure at once and
// takes each off it when its kubelet sees the first pod evicted from it.
func (b *bench) pressure(ctx context.Context, w *window) error {
	n := len(b.f.Nodes)
	k := max(1, int(math.Round(b.cfg.pressureShare*float64(n))))
	set := map[string]bool{}
	for i := range k {
		node := b.f.Nodes[i*n/k]
		w.pressured = append(w.pressured, node)
		set[node.Name] = true
	}
	var mu sync.Mutex
	b.f.OnEvicted(func(node *fleet.Node, _ *v1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		if !set[node.Name] {
			return
		}
		if _, done := w.relieved[node.Name]; done {
			return
		}
		if err := node.SetPressure(false); err != nil {
			b.logf("pressure: relieve %s: %v", node.Name, err)
			return
		}
		w.relieved[node.Name] = time.Now()
	})
	defer b.f.OnEvicted(nil)
	b.logf("pressure: memory.available 50Mi (hard threshold 100Mi) on %d of %d nodes, relieved at each one's first eviction; %s", k, n, b.cfg.pressure)
	for _, node := range w.pressured {
		if err := node.SetPressure(true); err != nil {
			return err
		}
	}
	err := sleep(ctx, b.cfg.pressure)
	mu.Lock()
	b.logf("pressure: %d of %d nodes relieved", len(w.relieved), k)
	mu.Unlock()
	// A node never relieved stays under pressure no longer than its
	// scenario.
	for _, node := range w.pressured {
		if serr := node.SetPressure(false); serr != nil && err == nil {
			err = serr
		}
	}
	return err
}

// outage stops the API server for cfg.outage and watches the fleet come
// back for cfg.after.
func (b *bench) outage(ctx context.Context, w *window) error {
	b.logf("outage: stopping kube-apiserver for %s", b.cfg.outage)
	if err := b.f.Cluster.StopAPIServer(); err != nil {
		return err
	}
	if err := sleep(ctx, b.cfg.outage); err != nil {
		return err
	}
	// From the start of the process, not from its readiness: it accepts
	// requests (and agents re-watch) before /readyz says so, and those
	// belong to the return as much as the later ones.
	w.event, w.eventWhat = time.Now(), "kube-apiserver started again"
	if err := b.f.Cluster.StartAPIServer(); err != nil {
		return err
	}
	b.logf("outage: kube-apiserver back, ready %s after its start; watching for %s", time.Since(w.event).Round(100*time.Millisecond), b.cfg.after)
	return sleep(ctx, time.Until(w.event.Add(b.cfg.after)))
}

// restart stops every agent and starts them all again at once.
func (b *bench) restart(ctx context.Context, w *window) error {
	b.logf("restart: stopping all %d agents", len(b.f.Nodes))
	if err := b.f.StopAgents(); err != nil {
		return err
	}
	w.event, w.eventWhat = time.Now(), "agents started"
	if err := b.f.StartAgents(ctx, b.cfg.readyTimeout); err != nil {
		return err
	}
	b.logf("restart: all agents ready in %s; watching until %s after the start", time.Since(w.event).Round(100*time.Millisecond), b.cfg.after)
	return sleep(ctx, time.Until(w.event.Add(b.cfg.after)))
}
