package manager

import (
	"context"
	"errors"

	"github.com/evictd/evictd/signals"
)

// snapRequest asks the loop for a snapshot of now, converted by convert
// on the loop's goroutine.
type snapRequest struct {
	convert func(PassRecord) any
	reply   chan any
}

// allKinds are every kind of pod stats a snapshot holds, whatever the
// thresholds in force would read.
const allKinds = signals.PodMemory | signals.PodProcesses | signals.PodDisk

// Snapshot asks the loop, between two passes, for the node as it is now:
// the last pass's observations, the pods listed afresh and every kind of
// their stats, read now. It decides and acts on nothing, and does not
// change what the next pass decides. convert runs on the loop's goroutine,
// and must copy what it keeps of the pods and stats. It returns ctx's
// error when the loop does not answer first (a pass under way may take
// as long as an eviction's wait).
func (m *Manager) Snapshot(ctx context.Context, convert func(PassRecord) any) (any, error) {
	req := snapRequest{convert: convert, reply: make(chan any, 1)}
	select {
	case m.snaps <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case v := <-req.reply:
		if err, ok := v.(error); ok {
			return nil, err
		}
		return v, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (m *Manager) snapshot(ctx context.Context, convert func(PassRecord) any) any {
	if m.lastObs == nil {
		return errors.New("no pass has completed yet")
	}
	now := m.deps.Clock.Now()
	// As in a pass: pods that cannot be listed are not in the snapshot
	// (the passes say why in the log), and pods whose stats could not
	// be read have none.
	pods, _ := m.deps.Pods.Pods(ctx)
	var stats map[string]signals.PodStats
	if len(pods) > 0 {
		stats, _ = m.deps.Stats.PodStats(ctx, now, pods, allKinds)
	}
	return convert(PassRecord{Time: now, Trigger: "snapshot", DryRun: m.cfg.DryRun, Obs: m.lastObs, Pods: pods, Stats: stats,
		LocalStorageByKubelet: m.decider.LocalStorageByKubelet()})
}
