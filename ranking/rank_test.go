package ranking

import (
	"slices"
	"testing"

	"github.com/evictd/evictd/signals"
)

func TestRankMemory(t *testing.T) {
	mem := signals.MemoryAvailable
	runRankCases(t, []rankCase{
		{
			// Seed 001: "BestEffort: pods that consume the most of the
			// starved resource are failed first."
			name:  "BestEffort: the biggest consumer goes first",
			sig:   mem,
			pods:  []signals.Pod{mk("be-small", signals.BestEffort), mk("be-big", signals.BestEffort), mk("be-mid", signals.BestEffort)},
			stats: byUID(ws("be-small", 100*Mi), ws("be-big", 900*Mi), ws("be-mid", 400*Mi)),
			want:  []string{"be-big", "be-mid", "be-small"},
			first: "be-big",
			keys: map[string]string{
				"be-big":   "usage−request 900Mi (usage 900Mi, request 0)",
				"be-small": "usage−request 100Mi (usage 100Mi, request 0)",
			},
		},
		{
			// Seed 001: "Burstable: pods that consume the most of the
			// starved resource relative to their request ... are failed first."
			name: "Burstable: ranked relative to the request",
			sig:  mem,
			pods: []signals.Pod{
				mk("burst-under", signals.Burstable, memReq(2*Gi)),
				mk("be-small", signals.BestEffort),
				mk("burst-over", signals.Burstable, memReq(64*Mi)),
				mk("be-big", signals.BestEffort),
			},
			stats: byUID(ws("burst-under", 1536*Mi), ws("be-small", 300*Mi), ws("burst-over", 600*Mi), ws("be-big", 800*Mi)),
			want:  []string{"be-big", "burst-over", "be-small", "burst-under"},
			first: "be-big",
			keys: map[string]string{
				"burst-over":  "usage−request 536Mi (usage 600Mi, request 64Mi)",
				"be-small":    "exceeds request: usage 300Mi > request 0",
				"burst-under": "within request: usage 1.5Gi ≤ request 2Gi",
			},
		},
		{
			// Seed 001: "if the node has only Guaranteed pods remaining",
			// and the reference: the lowest priority goes first.
			name: "only Guaranteed pods left: the lowest priority goes",
			sig:  mem,
			pods: []signals.Pod{
				guaranteed("g-high", Gi, prio(1000)),
				guaranteed("g-low", Gi, prio(10)),
				guaranteed("g-mid", Gi, prio(500)),
			},
			stats: byUID(ws("g-high", Gi), ws("g-low", 100*Mi), ws("g-mid", 900*Mi)),
			want:  []string{"g-low", "g-mid", "g-high"},
			first: "g-low",
			keys:  map[string]string{"g-low": "priority 10", "g-high": "priority 1000"},
		},
		{
			name: "Guaranteed after every other pod, even bigger and of lower priority",
			sig:  mem,
			pods: []signals.Pod{
				guaranteed("g-huge", 4*Gi, prio(-10)),
				mk("burst-under", signals.Burstable, memReq(Gi), prio(1000)),
			},
			stats: byUID(ws("g-huge", 4*Gi), ws("burst-under", 10*Mi)),
			want:  []string{"burst-under", "g-huge"},
			first: "burst-under",
			keys: map[string]string{
				"burst-under": "not Guaranteed (Burstable): within request: usage 10Mi ≤ request 1Gi",
				"g-huge":      guaranteedNote,
			},
		},
		{
			name: "within Guaranteed the same keys apply",
			sig:  mem,
			pods: []signals.Pod{
				guaranteed("g-under", Gi),
				guaranteed("g-over", Gi, prio(1000)),
				guaranteed("g-nostats", Gi, prio(2000)),
			},
			stats: byUID(ws("g-under", 10*Mi), ws("g-over", 2*Gi)),
			want:  []string{"g-nostats", "g-over", "g-under"},
			first: "g-nostats",
			keys: map[string]string{
				"g-nostats": "no stats",
				"g-over":    "exceeds request: usage 2Gi > request 1Gi",
			},
		},
		{
			name: "pods without stats first",
			sig:  mem,
			pods: []signals.Pod{
				mk("huge", signals.BestEffort),
				mk("missing", signals.BestEffort),
				mk("unmeasured", signals.BestEffort),
				mk("negative", signals.BestEffort),
			},
			stats: byUID(ws("huge", 5*Gi), signals.PodStats{UID: "uid-unmeasured"}, ws("negative", -5)),
			want:  []string{"missing", "negative", "unmeasured", "huge"},
			first: "missing",
			keys: map[string]string{
				"missing":    "tie on every other key: ordered by namespace/name, then UID",
				"unmeasured": "no stats",
			},
		},
		{
			name: "priority beats usage among pods over their request",
			sig:  signals.AllocatableMemoryAvailable,
			pods: []signals.Pod{
				mk("high", signals.BestEffort, prio(1000)),
				mk("low", signals.BestEffort),
				mk("burst-over-high", signals.Burstable, prio(1000), memReq(100*Mi)),
			},
			stats: byUID(ws("high", 2*Gi), ws("low", 200*Mi), ws("burst-over-high", 3*Gi)),
			want:  []string{"low", "burst-over-high", "high"},
			first: "low",
			keys:  map[string]string{"low": "priority 0"},
		},
		{
			name: "over its request before within, whatever the priority",
			sig:  mem,
			pods: []signals.Pod{
				mk("under-low", signals.Burstable, prio(-100), memReq(4*Gi)),
				mk("over-high", signals.Burstable, prio(1000), memReq(64*Mi)),
			},
			stats: byUID(ws("under-low", 3*Gi), ws("over-high", 100*Mi)),
			want:  []string{"over-high", "under-low"},
			first: "over-high",
			keys:  map[string]string{"over-high": "exceeds request: usage 100Mi > request 64Mi"},
		},
		{
			name: "DaemonSet pods after the other pods of their tier",
			sig:  mem,
			pods: []signals.Pod{
				mk("ds-be", signals.BestEffort, daemonSet),
				mk("be-small", signals.BestEffort),
				mk("burst-under", signals.Burstable, memReq(Gi), prio(100)),
				mk("ds-burst-under", signals.Burstable, memReq(Gi), daemonSet),
				guaranteed("g", Gi, prio(100)),
				guaranteed("ds-g", Gi, daemonSet),
			},
			stats: byUID(ws("ds-be", 2*Gi), ws("be-small", 100*Mi), ws("burst-under", 500*Mi),
				ws("ds-burst-under", 10*Mi), ws("g", Gi), ws("ds-g", 100*Mi)),
			want:  []string{"be-small", "ds-be", "burst-under", "ds-burst-under", "g", "ds-g"},
			first: "be-small",
			keys: map[string]string{
				"be-small":       "exceeds request: usage 100Mi > request 0; ahead of the DaemonSet pods of its tier",
				"ds-be":          daemonSetNote + "; exceeds request: usage 2Gi > request 0",
				"ds-burst-under": daemonSetNote + "; not Guaranteed (Burstable): within request: usage 10Mi ≤ request 1Gi",
				"g":              guaranteedNote + "; within request: usage 1Gi ≤ request 1Gi; ahead of the DaemonSet pods of its tier",
				"ds-g":           guaranteedNote + "; " + daemonSetNote,
			},
		},
		{
			// The notes appear only when the rule moved the pod back: this
			// DaemonSet pod and these Guaranteed pods would rank there anyway.
			name: "no note when the rule did not move the pod",
			sig:  mem,
			pods: []signals.Pod{
				mk("be-big", signals.BestEffort),
				mk("ds-tiny", signals.BestEffort, daemonSet),
				mk("burst-under", signals.Burstable, memReq(Gi)),
				guaranteed("g-high", Gi, prio(1000)),
				guaranteed("g-higher", Gi, prio(2000)),
			},
			stats: byUID(ws("be-big", Gi), ws("ds-tiny", Mi), ws("burst-under", 10*Mi),
				ws("g-high", 10*Mi), ws("g-higher", 10*Mi)),
			want:  []string{"be-big", "ds-tiny", "burst-under", "g-high", "g-higher"},
			first: "be-big",
			keys: map[string]string{
				"ds-tiny":  "exceeds request: usage 1Mi > request 0",
				"g-high":   "priority 1000",
				"g-higher": "priority 2000",
			},
		},
		{
			name: "critical pods are ranked but never chosen, even the biggest",
			sig:  mem,
			pods: []signals.Pod{
				mk("normal", signals.BestEffort),
				mk("static-big", signals.BestEffort, static),
				mk("mirror-big", signals.BestEffort, mirror),
				mk("node-critical", signals.BestEffort, prio(2000001000)),
				mk("cluster-critical", signals.BestEffort, prio(signals.SystemCriticalPriority)),
			},
			stats: byUID(ws("normal", 10*Mi), ws("static-big", 10*Gi), ws("mirror-big", 9*Gi),
				ws("node-critical", 8*Gi), ws("cluster-critical", 7*Gi)),
			want:  []string{"static-big", "mirror-big", "normal", "cluster-critical", "node-critical"},
			first: "normal",
		},
		{
			name:  "only critical pods: nothing to evict",
			sig:   mem,
			pods:  []signals.Pod{mk("static", signals.BestEffort, static), mk("node-critical", signals.BestEffort, prio(2000001000))},
			stats: byUID(ws("static", Gi), ws("node-critical", 2*Gi)),
			want:  []string{"static", "node-critical"},
		},
	})
}

func TestSkip(t *testing.T) {
	cases := []struct {
		pod  signals.Pod
		want string
	}{
		{mk("plain", signals.BestEffort, prio(signals.SystemCriticalPriority-1)), ""},
		{mk("static", signals.BestEffort, static), "critical pod (static)"},
		{mk("mirror", signals.Burstable, mirror), "critical pod (mirror)"},
		{mk("cluster", signals.Burstable, prio(signals.SystemCriticalPriority)), "critical pod (priority 2000000000)"},
		{mk("node", signals.Guaranteed, prio(2000001000)), "critical pod (priority 2000001000)"},
		{mk("both", signals.Guaranteed, static, mirror, prio(2000001000)), "critical pod (static, mirror, priority 2000001000)"},
	}
	for _, tc := range cases {
		t.Run(tc.pod.Name, func(t *testing.T) {
			got := Rank(signals.MemoryAvailable, signals.SingleFs, []signals.Pod{tc.pod}, nil)
			if len(got) != 1 {
				t.Fatalf("got %d candidates, want 1", len(got))
			}
			if got[0].Skip != tc.want {
				t.Errorf("got Skip %q, want %q", got[0].Skip, tc.want)
			}
			if _, ok := FirstEvictable(got); ok != (tc.want == "") {
				t.Errorf("FirstEvictable: got ok=%v, want %v", ok, tc.want == "")
			}
		})
	}
}

func TestRankDeterministic(t *testing.T) {
	// Equal on every key but namespace, name and UID; the UIDs sort
	// against the names so that each tie-break shows.
	pods := []signals.Pod{
		mk("x", signals.BestEffort, inNS("b"), uid("u-1")),
		mk("y", signals.BestEffort, inNS("a"), uid("u-2")),
		mk("x", signals.BestEffort, inNS("a"), uid("u-4")),
		mk("x", signals.BestEffort, inNS("a"), uid("u-3")),
	}
	stats := map[string]signals.PodStats{}
	for _, p := range pods {
		stats[p.UID] = signals.PodStats{UID: p.UID, MemoryWorkingSet: signals.Int64(100 * Mi)}
	}
	want := []string{"u-3", "u-4", "u-2", "u-1"}
	for _, perm := range permutations(len(pods)) {
		in := make([]signals.Pod, len(pods))
		for i, j := range perm {
			in[i] = pods[j]
		}
		got := Rank(signals.MemoryAvailable, signals.SingleFs, in, stats)
		uids := make([]string, len(got))
		for i, c := range got {
			uids[i] = c.Pod.UID
		}
		if !slices.Equal(uids, want) {
			t.Errorf("input order %v: got %v, want %v", perm, uids, want)
		}
	}
}

// permutations lists every order of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := slices.Insert(slices.Clone(p), i, n-1)
			out = append(out, q)
		}
	}
	return out
}

func TestRankBadInput(t *testing.T) {
	t.Run("no pods", func(t *testing.T) {
		got := Rank(signals.MemoryAvailable, signals.SingleFs, nil, nil)
		if len(got) != 0 {
			t.Errorf("got %d candidates, want 0", len(got))
		}
		if _, ok := FirstEvictable(got); ok {
			t.Errorf("FirstEvictable: got ok, want none")
		}
	})
	t.Run("nil stats map: every pod without stats, by priority", func(t *testing.T) {
		got := Rank(signals.MemoryAvailable, signals.SingleFs,
			[]signals.Pod{mk("b", signals.BestEffort, prio(5)), mk("a", signals.Burstable, memReq(Gi), prio(5)), mk("c", signals.BestEffort)}, nil)
		if g, want := names(got), []string{"c", "a", "b"}; !slices.Equal(g, want) {
			t.Errorf("got %v, want %v", g, want)
		}
		for _, c := range got {
			if c.HasStats || c.Stats != nil || c.Tier != TierA {
				t.Errorf("%s: got HasStats=%v Stats=%v Tier=%s, want false, nil, a", c.Pod.Name, c.HasStats, c.Stats, c.Tier)
			}
		}
	})
	t.Run("stats not matching the pod count as none", func(t *testing.T) {
		pods := []signals.Pod{mk("no-uid", signals.BestEffort, uid("")), mk("other", signals.BestEffort), mk("ok", signals.BestEffort)}
		stats := map[string]signals.PodStats{
			"":          {MemoryWorkingSet: signals.Int64(Gi)},
			"uid-other": {UID: "uid-ok", MemoryWorkingSet: signals.Int64(Gi)},
			"uid-ok":    {MemoryWorkingSet: signals.Int64(Mi)},
		}
		got := Rank(signals.MemoryAvailable, signals.SingleFs, pods, stats)
		if g, want := names(got), []string{"no-uid", "other", "ok"}; !slices.Equal(g, want) {
			t.Errorf("got %v, want %v", g, want)
		}
		if c := find(t, got, "other"); c.Stats != nil {
			t.Errorf("other: got Stats for UID %q, want nil", c.Stats.UID)
		}
		if c := find(t, got, "ok"); c.Stats == nil || !c.HasStats || c.Usage != Mi {
			t.Errorf("ok: got Stats=%v HasStats=%v Usage=%d, want stats, true, %d", c.Stats, c.HasStats, c.Usage, Mi)
		}
	})
	t.Run("negative request counts as zero", func(t *testing.T) {
		got := Rank(signals.MemoryAvailable, signals.SingleFs,
			[]signals.Pod{mk("neg", signals.Burstable, memReq(-5*Gi))}, byUID(ws("neg", 100*Mi)))
		c := got[0]
		if c.Request != 0 || !c.ExceedsRequest || c.Usage != 100*Mi || c.Tier != TierA {
			t.Errorf("got Request=%d Exceeds=%v Usage=%d Tier=%s, want 0, true, %d, a", c.Request, c.ExceedsRequest, c.Usage, c.Tier, 100*Mi)
		}
	})
	t.Run("unknown signal ranks by priority", func(t *testing.T) {
		got := Rank("bogus", signals.SingleFs,
			[]signals.Pod{mk("big", signals.BestEffort, prio(9)), mk("small", signals.BestEffort), guaranteed("g", Gi, prio(-1))},
			byUID(ws("big", 9*Gi), ws("small", Mi), ws("g", Gi)))
		if g, want := names(got), []string{"small", "big", "g"}; !slices.Equal(g, want) {
			t.Errorf("got %v, want %v", g, want)
		}
		want := `priority 0 (no per-pod usage known for signal "bogus" in the single layout)`
		if k := got[0].Key; k != want {
			t.Errorf("key: got %q, want %q", k, want)
		}
	})
}

func TestCandidateFields(t *testing.T) {
	got := Rank(signals.MemoryAvailable, signals.SingleFs,
		[]signals.Pod{mk("over", signals.Burstable, memReq(128*Mi)), mk("under", signals.Burstable, memReq(Gi)), guaranteed("g", Gi)},
		byUID(ws("over", 600*Mi), ws("under", 500*Mi), ws("g", Gi)))
	want := map[string]Candidate{
		"over":  {Usage: 600 * Mi, Request: 128 * Mi, HasStats: true, ExceedsRequest: true, Tier: TierA},
		"under": {Usage: 500 * Mi, Request: Gi, HasStats: true, Tier: TierB},
		"g":     {Usage: Gi, Request: Gi, HasStats: true, Tier: TierC},
	}
	for name, w := range want {
		c := find(t, got, name)
		if c.Usage != w.Usage || c.Request != w.Request || c.HasStats != w.HasStats ||
			c.ExceedsRequest != w.ExceedsRequest || c.Tier != w.Tier {
			t.Errorf("%s: got usage=%d request=%d stats=%v exceeds=%v tier=%s, want %d %d %v %v %s", name,
				c.Usage, c.Request, c.HasStats, c.ExceedsRequest, c.Tier,
				w.Usage, w.Request, w.HasStats, w.ExceedsRequest, w.Tier)
		}
		if c.Stats == nil || c.Stats.UID != "uid-"+name {
			t.Errorf("%s: got Stats %+v, want the pod's own", name, c.Stats)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	cases := []struct {
		in   int64
		want string
	}{
		{0, "0"},
		{512, "512"},
		{Ki, "1Ki"},
		{600 * Mi, "600Mi"},
		{1536 * Mi, "1.5Gi"},
		{Gi - 1, "1.0Gi"},
		{-472 * Mi, "-472Mi"},
		{3 << 60, "3Ei"},
	}
	for _, tc := range cases {
		if got := formatBytes(tc.in); got != tc.want {
			t.Errorf("formatBytes(%d): got %q, want %q", tc.in, got, tc.want)
		}
	}
}
