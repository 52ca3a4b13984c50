package manager

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// kindsSeen is a PodStatsSource that remembers the kinds each read asked
// for.
type kindsSeen struct {
	fixedStats
	mu    sync.Mutex
	kinds []signals.PodStatsKinds
}

func (k *kindsSeen) PodStats(ctx context.Context, now time.Time, pods []signals.Pod, kinds signals.PodStatsKinds) (map[string]signals.PodStats, error) {
	k.mu.Lock()
	k.kinds = append(k.kinds, kinds)
	k.mu.Unlock()
	return k.fixedStats.PodStats(ctx, now, pods, kinds)
}

// TestSnapshotNow: the loop answers a snapshot between passes, with the
// last pass's observations, every pod and every kind of stats (an idle
// pass reads none but disk), and makes no pass for it.
func TestSnapshotNow(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "500Mi"}})
	stats := &kindsSeen{fixedStats: defaultStats()}
	h := newHarnessTuned(t, false, ths, defaultPods(), defaultStats(), func(_ *Config, d *Deps) {
		d.Stats = stats
		d.Sources[0].(*script).available = 800 * mi
	})
	h.next("start")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := h.m.Snapshot(ctx, func(p PassRecord) any { return p })
	if err != nil {
		t.Fatal(err)
	}
	p := v.(PassRecord)
	if got := p.Obs[signals.MemoryAvailable].Available; got != 800*mi {
		t.Errorf("snapshot's memory.available %d, want the last pass's %d", got, 800*mi)
	}
	if len(p.Pods) != len(defaultPods()) || len(p.Stats) != len(defaultStats()) {
		t.Errorf("snapshot: %d pods, %d stats, want %d and %d", len(p.Pods), len(p.Stats), len(defaultPods()), len(defaultStats()))
	}
	stats.mu.Lock()
	last := stats.kinds[len(stats.kinds)-1]
	stats.mu.Unlock()
	if last != allKinds {
		t.Errorf("snapshot read kinds %b, want every kind %b", last, allKinds)
	}
	select {
	case st := <-h.passes:
		t.Errorf("a pass (%s) for the snapshot", st.Trigger)
	default:
	}

	// A loop that does not answer in time: the caller's deadline.
	h.stop()
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if _, err := h.m.Snapshot(short, func(p PassRecord) any { return p }); err == nil {
		t.Error("a stopped loop answered a snapshot")
	}
}
