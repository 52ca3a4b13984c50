package thresholds

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/signals"
)

// Value is a threshold amount: an absolute quantity, or a fraction of the
// signal's capacity when Quantity is nil. A stall threshold
// (signals.Signal.Stall) is always a Quantity in 1/signals.StallScale of the
// time (2050 for 20.5%), so that it compares exactly with the kernel's
// two-decimal figures.
type Value struct {
	Quantity *resource.Quantity
	// Percentage is a fraction of capacity: 0.1 means 10%. Parse yields
	// thresholds in [0, 1] (0 only for spellings such as "-0%" or "0.0%",
	// which the kubelet accepts and which are never met; the exact texts
	// "0%" and "100%" yield no threshold) and minimum reclaims in (0, +Inf).
	Percentage float32
}

// Operator is how a threshold compares its signal's observation with its
// value.
type Operator int

const (
	// LessThan is the kubelet's only operator: pressure while available is
	// below the value ("memory.available<100Mi").
	LessThan Operator = iota
	// GreaterThan is for the memory pressure stall signals alone: pressure
	// while the stall is above the value ("memory.pressure.full.avg10>20").
	GreaterThan
)

// String is the operator as written: "<" or ">".
func (op Operator) String() string {
	if op == GreaterThan {
		return ">"
	}
	return "<"
}

// Threshold says: the node is under pressure while Signal's available
// amount is below Value (Operator LessThan, as in the kubelet), or, for a
// stall signal, while the stall is above Value (Operator GreaterThan).
type Threshold struct {
	Signal   signals.Signal
	Operator Operator
	Value    Value
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

// Kind is "soft" for a threshold set as soft (--eviction-soft), "hard"
// otherwise: the kind as the operator wrote it, which Hard does not say for
// a soft threshold with a zero grace period.
func (t Threshold) Kind() string {
	if t.Soft {
		return "soft"
	}
	return "hard"
}

// Hard reports whether the threshold evicts without waiting: every hard
// threshold, and soft ones whose grace period is zero.
func (t Threshold) Hard() bool { return t.GracePeriod == 0 }
