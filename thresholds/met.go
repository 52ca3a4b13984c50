package thresholds

import (
	"sort"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/signals"
)

const (
	maxInt64 = 1<<63 - 1
	minInt64 = -1 << 63
	// twoTo63 is float64(maxInt64): the smallest float64 that no longer
	// converts to an int64.
	twoTo63 = 9223372036854775808.0
)

// Quantity is the amount v stands for on a signal of the given capacity:
// the absolute quantity, or int64(float64(capacity)*percentage) as in the
// kubelet's GetThresholdQuantity. Unlike a bare conversion it never wraps:
// values beyond int64 saturate and a NaN percentage counts as 0.
func Quantity(v Value, capacity int64) int64 {
	if v.Quantity != nil {
		return quantityInt64(v.Quantity)
	}
	f := float64(capacity) * float64(v.Percentage)
	switch {
	case f != f: // NaN
		return 0
	case f >= twoTo63:
		return maxInt64
	case f <= -twoTo63:
		return minInt64
	}
	return int64(f)
}

// quantityInt64 is q.Value() (which rounds fractions up), saturated at the
// int64 bounds: resource.ParseQuantity keeps decimal values such as "1e400"
// exactly, and Value would return their low 64 bits.
func quantityInt64(q *resource.Quantity) int64 {
	if v, ok := q.AsInt64(); ok {
		return v
	}
	switch {
	case q.CmpInt64(maxInt64) >= 0:
		return maxInt64
	case q.CmpInt64(minInt64) <= 0:
		return minInt64
	}
	return q.Value()
}

// subSat subtracts without wrapping around.
func subSat(a, b int64) int64 {
	s := a - b
	switch {
	case a >= 0 && b < 0 && s < 0:
		return maxInt64
	case a < 0 && b > 0 && s >= 0:
		return minInt64
	}
	return s
}

// Headroom is how far o is from meeting t, in the unit of t's signal: the
// available amount minus the threshold for a LessThan threshold, the
// threshold minus the stall for a GreaterThan one, saturated at the int64
// bounds (which keeps its sign right). t is met exactly when the headroom is
// negative, as Met decides without minimum reclaim; 0 is an observation at
// the threshold, which is not pressure. The wake-up sources use it between
// passes to tell whether a threshold is met and how close a signal is to one.
func Headroom(t Threshold, o signals.Observation) int64 {
	q := Quantity(t.Value, o.Capacity)
	if t.Operator == GreaterThan {
		return subSat(q, o.Available)
	}
	return subSat(o.Available, q)
}

// isMet is the kubelet's predicate: threshold (+ minimum reclaim when
// enforceMinReclaim) > available, strictly. An observation exactly at the
// threshold is not pressure. A GreaterThan (stall) threshold is met while
// the stall is strictly above it and corroborated as the node's (not
// Local: stall is not shortage); it has no minimum reclaim.
func isMet(t Threshold, o signals.Observation, enforceMinReclaim bool) bool {
	if t.Operator == GreaterThan && o.Local {
		return false
	}
	if !enforceMinReclaim || t.MinReclaim == nil || t.Operator == GreaterThan {
		return Headroom(t, o) < 0
	}
	want := signals.AddSat(Quantity(t.Value, o.Capacity), Quantity(*t.MinReclaim, o.Capacity))
	return want > o.Available
}

// Met returns, in their order, the thresholds of ths that obs shows are met
// (kubelet thresholdsMet). With enforceMinReclaim a threshold stays met until
// available reaches threshold + minimum reclaim; the loop uses that to judge
// whether node-level reclaim relieved every threshold. A threshold whose
// signal has no observation is not met; Tracker.Evaluate reports it as
// missing. A stall threshold whose observation is Local is not met however
// high the stall: the stall is its cgroups' own, not the node's
// (Tracker.Evaluate reports it as Local).
func Met(ths []Threshold, obs signals.Observations, enforceMinReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range ths {
		o, ok := obs[t.Signal]
		if ok && isMet(t, o, enforceMinReclaim) {
			out = append(out, t)
		}
	}
	return out
}

// setAside reports whether t is a stall threshold that o's stall is above
// but that is not met because the stall is local.
func setAside(t Threshold, o signals.Observation) bool {
	return t.Operator == GreaterThan && o.Local && Headroom(t, o) < 0
}

// signalRank orders signals as signals.All does: memory, then disk, then
// PIDs. Unknown signals come last.
var signalRank = func() map[signals.Signal]int {
	m := make(map[signals.Signal]int)
	for i, s := range signals.All() {
		m[s] = i
	}
	return m
}()

// before is the order of thresholds everywhere in this package, and the
// eviction priority: by signal in signals.All order (memory first, then
// disk, then PIDs), hard before soft, then by signal name so that even
// unknown signals sort the same way every time. It is a strict weak
// ordering, unlike the kubelet's byEvictionPriority.
func before(a, b Threshold) bool {
	ra, oka := signalRank[a.Signal]
	rb, okb := signalRank[b.Signal]
	switch {
	case oka != okb:
		return oka
	case ra != rb:
		return ra < rb
	case a.Signal != b.Signal:
		return a.Signal < b.Signal
	}
	return !a.Soft && b.Soft
}

// SortByPriority sorts ths into eviction priority: memory signals first,
// then disk, then PIDs; hard before soft for the same signal.
func SortByPriority(ths []Threshold) {
	sort.SliceStable(ths, func(i, j int) bool { return before(ths[i], ths[j]) })
}
