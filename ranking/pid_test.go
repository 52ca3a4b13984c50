package ranking

import (
	"testing"

	"github.com/evictd/evictd/signals"
)

// The SPEC's PID rule: priority first (as the kubelet), then pods without
// stats, then the largest task count.
func TestRankPIDsPriorityFirst(t *testing.T) {
	pid := signals.PIDAvailable
	runRankCases(t, []rankCase{
		{
			name: "a high-priority pod without stats after a low-priority pod with stats",
			sig:  pid,
			pods: []signals.Pod{
				mk("nostats-high", signals.Burstable, prio(1000)),
				mk("low", signals.BestEffort),
				mk("mid", signals.Burstable, prio(500)),
				guaranteed("g", Gi, prio(-10)),
			},
			stats: byUID(procs("low", 10), procs("mid", 9000), procs("g", 10000)),
			want:  []string{"low", "mid", "nostats-high", "g"},
			first: "low",
			keys: map[string]string{
				"low":          "priority 0",
				"mid":          "priority 500",
				"nostats-high": "not Guaranteed (Burstable): no stats",
				"g":            guaranteedNote,
			},
		},
		{
			name: "equal priority: pods without stats first, then the most processes",
			sig:  pid,
			pods: []signals.Pod{
				mk("high-nostats", signals.BestEffort, prio(1000)),
				mk("few", signals.BestEffort),
				mk("nostats", signals.Burstable),
				mk("many", signals.Burstable, memReq(Gi)),
			},
			// A memory reading is no process count.
			stats: byUID(procs("few", 10), procs("many", 500),
				signals.PodStats{UID: "uid-nostats", MemoryWorkingSet: signals.Int64(Gi)}),
			want:  []string{"nostats", "many", "few", "high-nostats"},
			first: "nostats",
			keys: map[string]string{
				"nostats":      "no stats",
				"many":         "processes 500",
				"few":          "priority 0",
				"high-nostats": "priority 1000",
			},
		},
		{
			name: "DaemonSet pods after the other non-Guaranteed pods, Guaranteed last",
			sig:  pid,
			pods: []signals.Pod{
				guaranteed("g", Gi),
				mk("ds-many", signals.BestEffort, daemonSet),
				mk("high-many", signals.Burstable, prio(1000)),
				mk("few", signals.BestEffort),
				mk("many", signals.Burstable, memReq(Gi)),
				mk("nostats", signals.Burstable, prio(1000)),
			},
			stats: byUID(procs("g", 10000), procs("ds-many", 800), procs("high-many", 9000), procs("few", 10),
				procs("many", 500), signals.PodStats{UID: "uid-nostats", MemoryWorkingSet: signals.Int64(Gi)}),
			want:  []string{"many", "few", "nostats", "high-many", "ds-many", "g"},
			first: "many",
			keys: map[string]string{
				"many":    "processes 500",
				"few":     "priority 0",
				"nostats": "no stats",
				"ds-many": daemonSetNote + "; not Guaranteed (BestEffort): processes 800",
				"g":       guaranteedNote,
			},
		},
	})
}
