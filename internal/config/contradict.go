package config

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// softBelowHard returns a warning for each signal whose soft threshold
// could never act before its hard one: its quantity is at or below the
// hard threshold's (at or above, for a stall signal, whose thresholds are
// "stall > value"). Only pairs in the same unit (two quantities or two
// percentages) can be compared without the signal's capacity; the others
// are compared by CheckCapacity.
func softBelowHard(ths []thresholds.Threshold) []string {
	var out []string
	for _, soft := range ths {
		if !soft.Soft {
			continue
		}
		hard, ok := hardOf(ths, soft.Signal)
		if !ok {
			continue
		}
		c, comparable := compareValues(soft.Value, hard.Value)
		if comparable && useless(soft, c) {
			out = append(out, softWarning(soft, hard))
		}
	}
	return out
}

// hardOf finds the hard threshold of sig.
func hardOf(ths []thresholds.Threshold, sig signals.Signal) (thresholds.Threshold, bool) {
	for _, th := range ths {
		if !th.Soft && th.Signal == sig {
			return th, true
		}
	}
	return thresholds.Threshold{}, false
}

// compareValues compares two values in the same unit: -1, 0 or 1 as a is
// below, equal to or above b. comparable is false when one is a quantity
// and the other a percentage.
func compareValues(a, b thresholds.Value) (c int, comparable bool) {
	switch {
	case a.Quantity != nil && b.Quantity != nil:
		return a.Quantity.Cmp(*b.Quantity), true
	case a.Quantity == nil && b.Quantity == nil:
		switch {
		case a.Percentage < b.Percentage:
			return -1, true
		case a.Percentage > b.Percentage:
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// useless reports whether a soft threshold that compares c with its hard
// threshold can never be met before it.
func useless(soft thresholds.Threshold, c int) bool {
	if soft.Operator == thresholds.GreaterThan {
		return c >= 0
	}
	return c <= 0
}

func softWarning(soft, hard thresholds.Threshold) string {
	return fmt.Sprintf("%s: soft threshold %s is not beyond the hard threshold %s (%s): it can never act before the hard one",
		sourceName(soft), thresholds.Format(soft), thresholds.Format(hard), sourceName(hard))
}

func sourceName(th thresholds.Threshold) string {
	if th.Source != "" {
		return th.Source
	}
	if th.Soft {
		return "--eviction-soft"
	}
	return "--eviction-hard"
}

// SetAside is a threshold that cannot hold on this node, and why.
type SetAside struct {
	Threshold thresholds.Threshold
	// Err names where the threshold was set, its value and the capacity.
	Err error
}

// CheckCapacity compares the thresholds ths (a Config's Thresholds) and the
// containerfs thresholds derived from them for layout with the capacities
// of a first observation of the node's signals. A threshold at or above
// its signal's capacity would be met for as long as anything uses the
// resource, and evict pod after pod: it cannot hold on this node, and is
// returned in setAside with an error naming where it was set, its value
// and the capacity; so is a threshold whose derived containerfs threshold
// is at or above containerfs's capacity. setAside is in the order of ths.
// A soft threshold at or below its hard one in a different unit (a
// quantity and a percentage) is a warning, as softBelowHard's are. Signals
// without an observation are not checked; stall thresholds, a share of
// time, cannot exceed theirs.
func CheckCapacity(ths []thresholds.Threshold, obs signals.Observations, layout signals.FsLayout) (warnings []string, setAside []SetAside) {
	all := thresholds.DeriveContainerFs(ths, layout)
	beyond := map[thresholds.Key]error{}
	for _, th := range all {
		o, ok := obs[th.Signal]
		if !ok || th.Operator == thresholds.GreaterThan || o.Capacity <= 0 {
			continue
		}
		q := thresholds.Quantity(th.Value, o.Capacity)
		if q >= o.Capacity {
			beyond[th.Key()] = fmt.Errorf("%s: threshold %s is %s, at or above the capacity of %s on this node (%s): it would always be met and evict pod after pod",
				sourceName(th), thresholds.Format(th), amount(q, th.Signal), th.Signal, amount(o.Capacity, th.Signal))
		}
		if !th.Soft {
			continue
		}
		hard, ok := hardOf(all, th.Signal)
		if !ok {
			continue
		}
		if _, comparable := compareValues(th.Value, hard.Value); comparable {
			continue // softBelowHard has said it
		}
		hq := thresholds.Quantity(hard.Value, o.Capacity)
		c := 0
		switch {
		case q < hq:
			c = -1
		case q > hq:
			c = 1
		}
		if useless(th, c) {
			warnings = append(warnings, softWarning(th, hard)+
				fmt.Sprintf(" (%s against %s of %s)", amount(q, th.Signal), amount(hq, th.Signal), amount(o.Capacity, th.Signal)))
		}
	}
	// Back to ths: a threshold, or the containerfs one derived from it
	// (DeriveContainerFs of it alone), beyond its capacity.
	for _, th := range ths {
		for _, d := range thresholds.DeriveContainerFs([]thresholds.Threshold{th}, layout) {
			if err, ok := beyond[d.Key()]; ok {
				setAside = append(setAside, SetAside{Threshold: th, Err: err})
				break
			}
		}
	}
	return warnings, setAside
}

// WithoutSetAside returns ths less the thresholds in setAside.
func WithoutSetAside(ths []thresholds.Threshold, setAside []SetAside) []thresholds.Threshold {
	aside := map[thresholds.Key]bool{}
	for _, s := range setAside {
		aside[s.Threshold.Key()] = true
	}
	var kept []thresholds.Threshold
	for _, th := range ths {
		if !aside[th.Key()] {
			kept = append(kept, th)
		}
	}
	return kept
}

// amount writes a signal's amount as a quantity: bytes in binary units,
// counts in decimal ones.
func amount(v int64, sig signals.Signal) string {
	format := resource.BinarySI
	if r := sig.Resource(); r == signals.ResourceInodes || r == signals.ResourcePIDs {
		format = resource.DecimalSI
	}
	return resource.NewQuantity(v, format).String()
}
