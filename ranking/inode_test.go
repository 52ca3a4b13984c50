package ranking

import (
	"testing"

	"github.com/evictd/evictd/signals"
)

// inodes is the stats of pod name with one container "app" whose writable
// layer holds n inodes.
func inodes(name string, n int64) signals.PodStats {
	return diskStats(name, fu(Mi, n), fu(0, 0), nil)
}

// The SPEC's inode rule, after seed 001 ("If the node is responding to
// inode starvation, it will reclaim inodes by evicting pods with the lowest
// quality of service first"): the lowest QoS class first (BestEffort, then
// Burstable, then Guaranteed), then priority, then largest inode usage.
func TestRankInodesQoSFirst(t *testing.T) {
	nodefs := signals.NodeFsInodesFree
	runRankCases(t, []rankCase{
		{
			name: "a small BestEffort pod before a big Burstable one, whatever the priority; Guaranteed last",
			sig:  nodefs, layout: signals.SingleFs,
			pods: []signals.Pod{
				guaranteed("g", Gi, prio(-10)),
				mk("burst-big", signals.Burstable),
				mk("be-small", signals.BestEffort),
				mk("be-high", signals.BestEffort, prio(1000)),
				mk("burst-low", signals.Burstable, prio(-5)),
			},
			stats: byUID(inodes("g", 1000000), inodes("burst-big", 90000), inodes("be-small", 100),
				inodes("be-high", 50), inodes("burst-low", 200)),
			want:  []string{"be-small", "be-high", "burst-low", "burst-big", "g"},
			first: "be-small",
			keys: map[string]string{
				"be-small":  "priority 0",
				"be-high":   "QoS BestEffort before Burstable (lowest QoS class first): inodes 50",
				"burst-low": "priority -5",
				"burst-big": "QoS Burstable before Guaranteed (lowest QoS class first): inodes 90000",
				"g":         guaranteedNote,
			},
		},
		{
			name: "equal QoS: priority, then pods without stats, then the most inodes",
			sig:  signals.ImageFsInodesFree, layout: signals.DedicatedImageFs,
			pods: []signals.Pod{
				mk("be-nostats-high", signals.BestEffort, prio(100)),
				mk("be-big", signals.BestEffort),
				mk("be-small", signals.BestEffort),
				mk("be-nostats", signals.BestEffort),
				mk("burst-huge", signals.Burstable, prio(-100)),
			},
			stats: byUID(inodes("be-big", 9000), inodes("be-small", 10), inodes("burst-huge", 1000000)),
			want:  []string{"be-nostats", "be-big", "be-small", "be-nostats-high", "burst-huge"},
			first: "be-nostats",
			keys: map[string]string{
				"be-nostats":      "no stats",
				"be-big":          "inodes 9000",
				"be-small":        "priority 0",
				"be-nostats-high": "QoS BestEffort before Burstable (lowest QoS class first): no stats",
				"burst-huge":      "QoS Burstable after BestEffort (lowest QoS class first): inodes 1000000",
			},
		},
		{
			// DaemonSet pods go after the other pods of their tier; for
			// inodes the tiers are the QoS classes, so a BestEffort
			// DaemonSet pod still goes before every Burstable pod.
			name: "DaemonSet pods after the other pods of their QoS class; critical pods never chosen",
			sig:  signals.ContainerFsInodesFree, layout: signals.SplitImageFs,
			pods: []signals.Pod{
				guaranteed("g", Gi),
				mk("burst", signals.Burstable),
				mk("ds-be", signals.BestEffort, daemonSet),
				mk("be", signals.BestEffort),
				mk("static-be", signals.BestEffort, static),
			},
			stats: byUID(inodes("g", 5), inodes("burst", 20), inodes("ds-be", 50000), inodes("be", 10),
				inodes("static-be", 1000000)),
			want:  []string{"static-be", "be", "ds-be", "burst", "g"},
			first: "be",
			keys: map[string]string{
				"be":    "inodes 10; ahead of the DaemonSet pods of its tier",
				"ds-be": daemonSetNote + "; QoS BestEffort before Burstable (lowest QoS class first): inodes 50000",
				"burst": "QoS Burstable before Guaranteed (lowest QoS class first): inodes 20",
				"g":     guaranteedNote,
			},
		},
	})
}

func TestRankInodes(t *testing.T) {
	pods := []signals.Pod{
		guaranteed("g", Gi),
		mk("high", signals.BestEffort, prio(100)),
		mk("small", signals.BestEffort),
		mk("req", signals.Burstable, ephReq(10*Gi)),
		mk("burst-small", signals.Burstable),
		mk("nostats", signals.BestEffort, prio(100)),
	}
	stats := byUID(
		diskStats("g", fu(Mi, 1000000), fu(0, 0), nil),
		diskStats("high", fu(Mi, 90000), fu(0, 0), nil),
		diskStats("small", fu(Gi, 1000), fu(0, 0), nil),
		// The kubelet would subtract the 10Gi ephemeral-storage request
		// from these 5000 inodes and rank this pod after burst-small.
		diskStats("req", fu(Mi, 4000), fu(0, 1000), nil),
		diskStats("burst-small", fu(Mi, 4500), fu(0, 0), nil),
	)
	runRankCases(t, []rankCase{{
		name: "QoS class, then priority, then no stats, then inode count; no request subtracted",
		sig:  signals.NodeFsInodesFree, layout: signals.SingleFs,
		pods: pods, stats: stats,
		want:  []string{"small", "nostats", "high", "req", "burst-small", "g"},
		first: "small",
		keys: map[string]string{
			"small":       "priority 0",
			"nostats":     "no stats",
			"high":        "QoS BestEffort before Burstable (lowest QoS class first): inodes 90000",
			"req":         "inodes 5000",
			"burst-small": "QoS Burstable before Guaranteed (lowest QoS class first): inodes 4500",
			"g":           guaranteedNote,
		},
	}})
	got := Rank(signals.NodeFsInodesFree, signals.SingleFs, pods, stats)
	want := map[string]Tier{"small": TierA, "nostats": TierA, "high": TierA, "req": TierB, "burst-small": TierB, "g": TierC}
	for name, tier := range want {
		if c := find(t, got, name); c.Tier != tier {
			t.Errorf("%s: got tier %s, want %s", name, c.Tier, tier)
		}
	}
	c := find(t, got, "req")
	if c.Request != 0 || c.ExceedsRequest || c.Usage != 5000 {
		t.Errorf("req: got Request=%d Exceeds=%v Usage=%d, want 0, false, 5000", c.Request, c.ExceedsRequest, c.Usage)
	}
}

// A pod of no known QoS class ranks as Burstable for inodes, and the
// explanation says so.
func TestRankInodesUnknownClass(t *testing.T) {
	runRankCases(t, []rankCase{{
		name: "unknown class between BestEffort and Guaranteed",
		sig:  signals.NodeFsInodesFree, layout: signals.SingleFs,
		pods:  []signals.Pod{mk("g", signals.Guaranteed), mk("unknown", ""), mk("be", signals.BestEffort)},
		stats: byUID(inodes("g", 10), inodes("unknown", 1000), inodes("be", 1)),
		want:  []string{"be", "unknown", "g"},
		first: "be",
		keys: map[string]string{
			"be":      "QoS BestEffort before unknown class (as Burstable) (lowest QoS class first): inodes 1",
			"unknown": "QoS unknown class (as Burstable) before Guaranteed (lowest QoS class first): inodes 1000",
		},
	}})
}
