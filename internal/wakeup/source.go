package wakeup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/evictd/evictd/internal/metrics"
)

// Source is one way of learning that a pass should run now. Run blocks,
// calling wake at each event, until ctx is done (then it returns nil) or the
// source fails; it releases everything it opened before returning.
type Source interface {
	Run(ctx context.Context, wake func()) error
}

// Counter counts wake-ups by source kind; *metrics.Metrics is one.
type Counter interface {
	IncWakeup(source metrics.WakeupSource)
}

// Source kinds: the values of evictd_wakeups_total's source label, which
// internal/metrics declares (metrics.WakeupSources lists them).
const (
	KindMemcg        = metrics.WakeupMemcg
	KindPSI          = metrics.WakeupPSI
	KindMemoryEvents = metrics.WakeupMemoryEvents
	KindFastPoll     = metrics.WakeupFastPoll
)

// Group runs sources side by side and passes their wake-ups on, counted.
type Group struct {
	log     *slog.Logger
	counter Counter
	members []member
}

type member struct {
	name string
	kind metrics.WakeupSource
	src  Source
	n    *atomic.Uint64
}

// NewGroup returns an empty Group logging to log; counter may be nil.
func NewGroup(log *slog.Logger, counter Counter) *Group {
	return &Group{log: log, counter: counter}
}

// Add adds src under a name for the logs (unique in the group) and its kind
// (one of the Kind constants) for the counter. Add must not be called once
// Run has started.
func (g *Group) Add(name string, kind metrics.WakeupSource, src Source) {
	g.members = append(g.members, member{name: name, kind: kind, src: src, n: new(atomic.Uint64)})
}

// names lists the sources added, in order.
func (g *Group) names() []string {
	out := make([]string, len(g.members))
	for i, m := range g.members {
		out[i] = m.name
	}
	return out
}

// count is how many wake-ups the named source has given.
func (g *Group) count(name string) uint64 {
	for _, m := range g.members {
		if m.name == name {
			return m.n.Load()
		}
	}
	return 0
}

// Run runs every source until ctx is done. A source that fails is logged
// and dropped (its wake-ups stop; the housekeeping tick still runs passes),
// so Run returns nil once ctx is done and every source has returned.
func (g *Group) Run(ctx context.Context, wake func()) error {
	if wake == nil {
		return errors.New("notify: nil wake function")
	}
	var wg sync.WaitGroup
	for _, m := range g.members {
		g.log.Info("wake-up source active", "source", m.name, "kind", m.kind)
		wg.Go(func() {
			err := m.src.Run(ctx, func() {
				m.n.Add(1)
				if g.counter != nil {
					g.counter.IncWakeup(m.kind)
				}
				g.log.Debug("woken", "source", m.name, "kind", m.kind)
				wake()
			})
			if err != nil && ctx.Err() == nil {
				g.log.Warn("wake-up source failed; passes still run every housekeeping interval", "source", m.name, "err", err)
			}
		})
	}
	wg.Wait()
	return nil
}

// errClosed is returned by a source used after it was closed.
var errClosed = errors.New("closed")

func wrapPath(op, path string, err error) error {
	return fmt.Errorf("%s %s: %w", op, path, err)
}
