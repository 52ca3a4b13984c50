package manager

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// TestDiskEvictionWaitsForTheDiskReleased: a pod evicted for a disk signal
// holds back the next disk eviction until its directory is gone
// (Deps.DiskReleased), though its object is gone at once (the fake
// evicter's pods never show as in flight): the disk stays full until then,
// and a pass in between would evict a second pod for nothing. Once the
// directory is gone, or after the cleanup timeout, the next eviction goes.
func TestDiskEvictionWaitsForTheDiskReleased(t *testing.T) {
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"nodefs.available": "100Mi"}})
	for _, tc := range []struct {
		name string
		// step advances the clock before the third pass; released is
		// the disk's state then.
		step     time.Duration
		released bool
		want     int // evictions after the third pass
	}{
		{"directory still there: withheld", 10 * time.Second, false, 1},
		{"directory gone: the next eviction", 10 * time.Second, true, 2},
		{"past the cleanup timeout: the next eviction", 31 * time.Second, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk := &diskScript{free: 50 * mi}
			ev := &recorder{}
			passes := make(chan *Status, 8)
			// The writer ranks first; the other would be next.
			pod := func(name, uid string) signals.Pod {
				return signals.Pod{Namespace: "default", Name: name, UID: uid, QOS: signals.BestEffort, Containers: []signals.Container{{Name: "app"}}}
			}
			usage := func(uid string, bytes int64) signals.PodStats {
				return signals.PodStats{UID: uid, Containers: []signals.ContainerStats{{Name: "app",
					Rootfs: &signals.FsUsage{Bytes: bytes, Inodes: 10}, Logs: &signals.FsUsage{Bytes: mi, Inodes: 1}}}}
			}
			stats := fixedStats{"u1": usage("u1", 40*mi), "u2": usage("u2", 20*mi)}
			var released atomic.Bool
			clk := clocktesting.NewFakeClock(t0)
			m, err := New(Config{HousekeepingInterval: 10 * time.Second, StuckAfter: 30 * time.Second, CleanupTimeout: 30 * time.Second,
				Decider: decide.DeciderConfig{Thresholds: ths, TransitionPeriod: time.Minute}},
				Deps{
					Clock: clk, Sources: []signals.Source{disk},
					Pods: fixedPods{pod("writer", "u1"), pod("other", "u2")}, Stats: stats, Evicter: ev,
					Metrics: metrics.New(prometheus.NewRegistry()), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
					AfterPass:    func(st *Status) { passes <- st },
					DiskReleased: func(string) bool { return released.Load() },
				})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- m.Run(ctx) }()
			defer func() {
				cancel()
				for {
					select {
					case <-passes:
						continue
					case <-done:
					}
					return
				}
			}()
			if st := <-passes; len(ev.evicted()) != 1 {
				t.Fatalf("the first pass: %d evictions (%s), want the writer's", len(ev.evicted()), st.Decision.Reason)
			}
			// The pass the eviction wakes sees the same moment's disk: no
			// fresh observation, no decision. The next ones are the test's.
			released.Store(tc.released)
			// With the directory there, a pass within the cleanup timeout
			// is withheld; the passes are read until one at the new time.
			clk.Step(tc.step)
			var st *Status
			for st = <-passes; !st.Time.Equal(clk.Now()); st = <-passes {
			}
			if !tc.released && tc.step < 30*time.Second && !strings.HasPrefix(st.Result, "withheld") {
				t.Errorf("pass at %s: result %q, want withheld while the writer's disk is not released", tc.step, st.Result)
			}
			if got := len(ev.evicted()); got != tc.want {
				t.Errorf("after %s with the directory released %t: %d evictions, want %d", tc.step, tc.released, got, tc.want)
			}
		})
	}
}
