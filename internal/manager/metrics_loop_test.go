package manager

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// TestLoopCreatesAlertedSeriesAtStart drives the loop through evictions,
// refusals, failures, dry-run, the safety limits, local-storage evictions
// and reclaim, and checks that every counter series an alert of
// deploy/monitoring fires on at its first event (alerted) existed, at 0,
// once New had made the loop: rate() and the alerts see that event. No
// other series exists before its first event: a node exports what
// happened on it. Gauges and histograms appear with their first reading
// and are not checked.
func TestLoopCreatesAlertedSeriesAtStart(t *testing.T) {
	hard := func(t *testing.T) []thresholds.Threshold {
		return mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	}
	tests := []struct {
		name   string
		dryRun bool
		ths    func(*testing.T) []thresholds.Threshold
		// pods gives the pods and their stats; nil is defaultPods and
		// defaultStats.
		pods func() (fixedPods, fixedStats)
		tune func(*Config, *Deps)
		run  func(t *testing.T, h *harness)
		// want are series the scenario must have incremented, to show
		// it did what it says.
		want []string
	}{{
		name: "evicted, stopped locally, failed",
		ths:  hard,
		run: func(t *testing.T, h *harness) {
			h.next("start")
			h.src.set(50 * mi)
			h.tick()
			h.next("wake")
			h.ev.err = fmt.Errorf("x: %w", decide.ErrStoppedLocally)
			h.tick()
			h.next("wake")
			h.ev.err = errors.New("the API server said no")
			h.tick()
		},
		want: []string{
			`evictd_passes_total{trigger="start"}`, `evictd_passes_total{trigger="tick"}`, `evictd_passes_total{trigger="wake"}`,
			`evictd_decisions_total{outcome="evict",signal="memory.available"}`,
			`evictd_evictions_total{eviction_signal="memory.available",result="evicted",signal="memory.available"}`,
			`evictd_evictions_total{eviction_signal="memory.available",result="stopped-locally",signal="memory.available"}`,
			`evictd_evictions_not_issued_total{eviction_signal="memory.available",reason="failed"}`,
		},
	}, {
		name: "a budget refuses, at the end of a grace period",
		ths: func(t *testing.T) []thresholds.Threshold {
			return mustParse(t, thresholds.Settings{
				Soft:            map[string]string{"memory.available": "1Gi"},
				SoftGracePeriod: map[string]string{"memory.available": "15s"},
			})
		},
		run: func(t *testing.T, h *harness) {
			h.ev.errFor = map[string]error{"hog": fmt.Errorf("x: %w", decide.ErrDisruptionBudget)}
			h.next("start")
			h.src.set(800 * mi)
			h.tick()
			h.tick()
			h.clock.Step(5 * time.Second)
			h.next("deadline")
			h.next("wake")
		},
		want: []string{
			`evictd_passes_total{trigger="deadline"}`,
			`evictd_evictions_not_issued_total{eviction_signal="memory.available",reason="pdb-blocked"}`,
			`evictd_evictions_total{eviction_signal="memory.available",result="evicted",signal="memory.available"}`,
		},
	}, {
		name:   "dry-run",
		dryRun: true,
		ths:    hard,
		run: func(t *testing.T, h *harness) {
			h.next("start")
			h.src.set(50 * mi)
			h.tick()
		},
		want: []string{
			`evictd_decisions_total{outcome="dry-run",signal="memory.available"}`,
			`evictd_evictions_not_issued_total{eviction_signal="memory.available",reason="dry-run"}`,
		},
	}, {
		name: "the hourly cap, an eviction in flight",
		ths:  hard,
		tune: func(c *Config, d *Deps) {
			c.MaxEvictionsPerHour = 1
			d.Pods = &podsInFlight{fixedPods: defaultPods()}
		},
		run: func(t *testing.T, h *harness) {
			h.next("start")
			h.src.set(50 * mi)
			h.tick()
			h.next("wake")
			h.tick() // capped
			pods := h.m.deps.Pods.(*podsInFlight)
			pods.set(slow(h.clock.Now().Add(time.Minute)))
			h.tick() // in flight
		},
		want: []string{
			`evictd_evictions_withheld_total{reason="hourly-cap"}`,
			`evictd_eviction_cap_reached_total`,
			`evictd_evictions_withheld_total{reason="eviction-in-flight"}`,
		},
	}, {
		name: "no evictable pod; a signal with a threshold and no source",
		pods: func() (fixedPods, fixedStats) { return defaultPods(), fixedStats{} },
		ths: func(t *testing.T) []thresholds.Threshold {
			return mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi", "pid.available": "100"}})
		},
		run: func(t *testing.T, h *harness) {
			h.next("start")
			h.src.set(50 * mi)
			h.tick()
		},
		want: []string{
			`evictd_decisions_total{outcome="none-evictable",signal="memory.available"}`,
			`evictd_signal_errors_total{signal="pid.available"}`,
		},
	}, {
		name: "local-storage limits, rate-limited",
		pods: storagePods,
		tune: func(c *Config, _ *Deps) {
			c.LocalStorageEvictionQPS, c.LocalStorageEvictionBurst = 0.1, 1
		},
		run: func(t *testing.T, h *harness) {
			h.next("start")
			h.next("wake")
		},
		want: []string{
			`evictd_evictions_total{eviction_signal="ephemeralpodfs.limit",result="evicted",signal="ephemeralpodfs.limit"}`,
			`evictd_evictions_withheld_total{reason="rate-limit"}`,
		},
	}, {
		name:   "local-storage limits, dry-run",
		dryRun: true,
		pods:   storagePods,
		run: func(t *testing.T, h *harness) {
			h.next("start")
		},
		want: []string{`evictd_evictions_not_issued_total{eviction_signal="ephemeralpodfs.limit",reason="dry-run"}`},
	}, {
		name: "reclaim",
		ths: func(t *testing.T) []thresholds.Threshold {
			return mustParse(t, thresholds.Settings{
				Hard:           map[string]string{"nodefs.available": "100Mi"},
				MinimumReclaim: map[string]string{"nodefs.available": "50Mi"},
			})
		},
		pods: func() (fixedPods, fixedStats) {
			return fixedPods{{Namespace: "default", Name: "writer", UID: "u1", QOS: signals.BestEffort, Containers: []signals.Container{{Name: "app"}}}},
				fixedStats{"u1": {UID: "u1", Containers: []signals.ContainerStats{{Name: "app",
					Rootfs: &signals.FsUsage{Bytes: 40 * mi, Inodes: 10}, Logs: &signals.FsUsage{Bytes: mi, Inodes: 1}}}}}
		},
		tune: func(_ *Config, d *Deps) {
			disk := &diskScript{free: 50 * mi}
			d.Sources = []signals.Source{disk}
			d.Reclaimer = &freeing{disk: disk, to: 120 * mi, removed: 3}
		},
		run: func(t *testing.T, h *harness) {
			h.next("start")                    // reclaim frees some: settling
			h.clock.Step(decide.ReclaimSettle) // evicts
			h.next("deadline")
			h.next("wake")
			r := h.m.deps.Reclaimer.(*freeing)
			r.disk.set(50 * mi)
			r.to = 500 * mi
			h.tick() // reclaim enough
		},
		want: []string{
			`evictd_decisions_total{outcome="reclaim-settling",signal="nodefs.available"}`,
			`evictd_decisions_total{outcome="reclaim-sufficient",signal="nodefs.available"}`,
			`evictd_reclaim_total{kind="containers",result="ok"}`,
			`evictd_reclaimed_bytes_total{kind="containers"}`,
			`evictd_evictions_total{eviction_signal="nodefs.available",result="evicted",signal="nodefs.available"}`,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ths []thresholds.Threshold
			if tt.ths != nil {
				ths = tt.ths(t)
			}
			pods, stats := defaultPods(), defaultStats()
			if tt.pods != nil {
				pods, stats = tt.pods()
			}
			reg := prometheus.NewRegistry()
			var atStart map[string]float64
			h := newHarnessTuned(t, tt.dryRun, ths, pods, stats, func(c *Config, d *Deps) {
				d.Metrics = metrics.New(reg)
				if tt.tune != nil {
					tt.tune(c, d)
				}
				// What New creates before any pass: a loop of the same
				// configuration on a registry of its own, never run.
				probe := prometheus.NewRegistry()
				pd := *d
				pd.Metrics = metrics.New(probe)
				if _, err := New(*c, pd); err != nil {
					t.Fatalf("New: %v", err)
				}
				atStart = counterSeries(t, probe)
			})
			tt.run(t, h)
			h.stop()
			after := counterSeries(t, reg)
			for _, s := range slices.Sorted(maps.Keys(after)) {
				if _, ok := atStart[s]; alerted(s) && !ok {
					t.Errorf("%s = %v: an alert fires on it, and it did not exist once New had made the loop", s, after[s])
				}
			}
			for _, s := range slices.Sorted(maps.Keys(atStart)) {
				if !alerted(s) {
					t.Errorf("%s: created before its first event, and no alert needs it", s)
				}
			}
			for _, s := range tt.want {
				if after[s] == 0 {
					t.Errorf("%s = %v, want it incremented (the scenario did not do what it says)", s, after[s])
				}
			}
		})
	}
}

// alerted reports whether an alert of deploy/monitoring/evictd-rules.yaml
// fires on series s at its first event, with no "for": EvictdEvicting
// (evictions issued, and dry runs), EvictdEvictionsFailing,
// EvictdHourlyCapReached; and EvictdNoPasses, which sums
// evictd_passes_total while no pass ends. The cap's counter has no label:
// it exists from the start as any plain counter. A threshold's decisions
// count too: the dashboard takes increase() of them.
func alerted(s string) bool {
	switch {
	case strings.HasPrefix(s, "evictd_evictions_total{"):
		return true
	case strings.HasPrefix(s, "evictd_evictions_not_issued_total{"):
		return strings.Contains(s, `reason="failed"`) || strings.Contains(s, `reason="dry-run"`)
	case strings.HasPrefix(s, "evictd_decisions_total{"):
		// The dashboard's "Decisions by outcome" takes increase() of
		// them: a threshold's, not a local-storage limit's.
		return !strings.Contains(s, `.limit"`)
	}
	return s == `evictd_evictions_withheld_total{reason="hourly-cap"}` || s == `evictd_passes_total{trigger="tick"}` ||
		s == "evictd_eviction_cap_reached_total"
}

// counterSeries returns the value of every counter series on reg, by
// name{label="value",…} with the labels sorted by name.
func counterSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetType() != dto.MetricType_COUNTER {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			name := mf.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			out[name] = m.GetCounter().GetValue()
		}
	}
	return out
}
