package ranking

import (
	"math"
	"strings"
	"testing"

	"github.com/evictd/evictd/signals"
)

// TestRankAbsurdValues ranks pods whose requests and usage are absurd:
// requests far above any node's capacity, zero, negative, at the largest
// int64, usage at the largest int64. Nothing overflows: usage − request
// stays ordered, and nothing panics.
func TestRankAbsurdValues(t *testing.T) {
	const maxI = math.MaxInt64
	runRankCases(t, []rankCase{
		{
			name: "memory: requests above capacity, zero, negative and at the int64 limit",
			sig:  signals.MemoryAvailable,
			pods: []signals.Pod{
				mk("max-req", signals.Burstable, memReq(maxI)),
				mk("huge-req", signals.Burstable, memReq(1<<40)), // 1Ti on any node
				mk("almost", signals.Burstable, memReq(maxI-1)),
				mk("neg-req", signals.Burstable, memReq(-5*Gi)),
				mk("zero-req", signals.BestEffort),
				mk("max-usage", signals.BestEffort),
			},
			stats: byUID(ws("max-req", 0), ws("huge-req", 20*Gi), ws("almost", maxI), ws("neg-req", 50*Mi),
				ws("zero-req", 100*Mi), ws("max-usage", maxI)),
			// Over their request first, by usage − request; then within.
			want:  []string{"max-usage", "zero-req", "neg-req", "almost", "huge-req", "max-req"},
			first: "max-usage",
			keys: map[string]string{
				"almost":  "exceeds request: usage 8.0Ei > request 8.0Ei",
				"neg-req": "usage−request 50Mi (usage 50Mi, request 0)",
				"max-req": "usage−request -8.0Ei (usage 0, request 8.0Ei)",
			},
		},
		{
			name: "disk: an ephemeral-storage request at the int64 limit and usage that saturates",
			sig:  signals.NodeFsAvailable, layout: signals.SingleFs,
			pods: []signals.Pod{mk("max-req", signals.Burstable, ephReq(maxI)), mk("sat", signals.BestEffort), mk("small", signals.BestEffort)},
			stats: byUID(
				diskStats("max-req", fu(maxI, 1), fu(maxI, 1), nil),
				diskStats("sat", fu(maxI, maxI), fu(maxI, maxI), nil),
				diskStats("small", fu(Mi, 1), fu(Mi, 1), nil),
			),
			want:  []string{"sat", "small", "max-req"},
			first: "sat",
		},
		{
			name:  "PIDs: a process count at the int64 limit",
			sig:   signals.PIDAvailable,
			pods:  []signals.Pod{mk("few", signals.BestEffort), mk("max", signals.BestEffort)},
			stats: byUID(procs("few", 10), procs("max", maxI)),
			want:  []string{"max", "few"},
			first: "max",
		},
	})
}

// TestFormatBytesExtremes writes the extreme values without panicking.
func TestFormatBytesExtremes(t *testing.T) {
	for _, tc := range []struct {
		v    int64
		want string
	}{
		{0, "0"},
		{math.MaxInt64, "8.0Ei"},
		{math.MinInt64, "-9223372036854775808"},
		{-math.MaxInt64, "-8.0Ei"},
		{1 << 60, "1Ei"},
	} {
		if got := formatBytes(tc.v); got != tc.want || strings.Contains(got, "NaN") {
			t.Errorf("formatBytes(%d): got %q, want %q", tc.v, got, tc.want)
		}
	}
}
