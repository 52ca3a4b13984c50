package thresholds

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/signals"
)

// Value is a threshold amount: an absolute quantity, or a fraction of the
// signal's capacity when Quantity is nil.
type Value struct {
	Quantity *resource.Quantity
	// Percentage is a fraction of capacity: 0.1 means 10%. Parse yields
	// thresholds in [0, 1] (0 only for spellings such as "-0%" or "0.0%",
	// which the kubelet accepts and which are never met; the exact texts
	// "0%" and "100%" yield no threshold) and minimum reclaims in (0, +Inf).
	Percentage float32
}

// Threshold says: the node is under pressure while Signal's available
// amount is below Value. Operator is always LessThan, as in the kubelet.
type Threshold struct {
	Signal signals.Signal
	Value  Value
	// GracePeriod is how long a soft threshold must hold before evicting;
	// zero for hard thresholds.
	GracePeriod time.Duration
	// Soft is true for thresholds from eviction-soft (even with a 0s grace
	// period, which evictd then treats as hard and says so).
	Soft bool
	// MinReclaim, when set, is how far past the threshold eviction must go
	// before the pressure counts as relieved.
	MinReclaim *Value
	// Source says where the threshold came from, for check-config and logs:
	// "default", "--eviction-hard", "config evictionHard", "derived from
	// memory.available (enforce-node-allocatable=pods)", …
	Source string
}

// Key identifies a threshold across passes: one hard and one soft threshold
// at most per signal.
type Key struct {
	Signal signals.Signal
	Soft   bool
}

// Key returns the threshold's identity.
func (t Threshold) Key() Key { return Key{Signal: t.Signal, Soft: t.Soft} }

// Hard reports whether the threshold evicts without waiting: every hard
// threshold, and soft ones whose grace period is zero.
func (t Threshold) Hard() bool { return t.GracePeriod == 0 }
