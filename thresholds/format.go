package thresholds

import (
	"strconv"
	"strings"

	"github.com/evictd/evictd/signals"
)

// String returns the value as an operator writes it: "100Mi" or "10%".
func (v Value) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return percentString(v.Percentage)
}

// String returns the threshold as an operator writes it in --eviction-hard
// or --eviction-soft: "memory.available<100Mi", "nodefs.available<10%",
// "memory.pressure.full.avg10>20%".
func (t Threshold) String() string { return Format(t) }

// Format is Threshold.String as a function, for logs and check-config.
func Format(t Threshold) string {
	return string(t.Signal) + t.Operator.String() + FormatValue(t)
}

// FormatValue is t's value as written after the operator: "100Mi", "10%",
// or, for a stall threshold, the percentage of time ("20.5%"). It reads
// back as the same threshold: since the exact texts "0%" and "100%" disable
// a signal, a threshold in force at 0 or 100% (written "0.0%" or "-0%",
// "100.0%") is "0.0%" or "100.0%".
func FormatValue(t Threshold) string {
	if t.Operator == GreaterThan && t.Value.Quantity != nil {
		return signals.FormatStall(quantityInt64(t.Value.Quantity))
	}
	s := t.Value.String()
	if t.Value.Quantity == nil && (s == "0%" || s == "100%") {
		s = strings.TrimSuffix(s, "%") + ".0%"
	}
	return s
}

// Describe returns one line for check-config: the threshold, whether it is
// hard or soft, its grace period and minimum reclaim, and where it came from,
// for example
//
//	nodefs.available<15% soft grace=1m30s minReclaim=1Gi (--eviction-soft)
func (t Threshold) Describe() string {
	var b strings.Builder
	b.WriteString(Format(t))
	switch {
	case !t.Soft:
		b.WriteString(" hard")
	case t.GracePeriod == 0:
		b.WriteString(" soft grace=0s (treated as hard)")
	default:
		b.WriteString(" soft grace=")
		b.WriteString(t.GracePeriod.String())
	}
	if t.MinReclaim != nil {
		b.WriteString(" minReclaim=")
		b.WriteString(t.MinReclaim.String())
	}
	if t.Source != "" {
		b.WriteString(" (")
		b.WriteString(t.Source)
		b.WriteString(")")
	}
	return b.String()
}

// percentString formats a fraction as the percentage an operator would
// have written: the shortest decimal that Parse reads back as the same
// float32 (0.15 prints as "15%", not "15.000001%", and 0.001% as "0.001%",
// although the division by 100 in float32 is not exact).
func percentString(p float32) string {
	f := float64(p) * 100
	if !finite(f) {
		return strconv.FormatFloat(f, 'g', -1, 64) + "%"
	}
	for prec := 1; prec <= 17; prec++ {
		v, err := strconv.ParseFloat(strconv.FormatFloat(f, 'g', prec, 64), 64)
		if err == nil && float32(v)/100 == p {
			f = v
			break
		}
	}
	return strconv.FormatFloat(f, 'f', -1, 64) + "%"
}

// finite reports whether f is neither NaN nor infinite (both give NaN when
// subtracted from themselves).
func finite(f float64) bool { return f-f == 0 }
