package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestSignalledBetween(t *testing.T) {
	// exposition is the family as evictd serves it, with n signals
	// taking sum seconds in all on each path.
	exposition := func(directN int, directSum float64, runtimeN int, runtimeSum float64) string {
		var b strings.Builder
		b.WriteString("# TYPE evictd_eviction_signal_latency_seconds histogram\n")
		for _, p := range []struct {
			path string
			n    int
			sum  float64
		}{{"direct", directN, directSum}, {"runtime", runtimeN, runtimeSum}} {
			labels := fmt.Sprintf(`path=%q,signal="memory.available"`, p.path)
			fmt.Fprintf(&b, "evictd_eviction_signal_latency_seconds_bucket{%s,le=\"+Inf\"} %d\n", labels, p.n)
			fmt.Fprintf(&b, "evictd_eviction_signal_latency_seconds_sum{%s} %g\n", labels, p.sum)
			fmt.Fprintf(&b, "evictd_eviction_signal_latency_seconds_count{%s} %d\n", labels, p.n)
		}
		return b.String()
	}
	before := exposition(2, 0.004, 1, 0.03)
	oneDirect := exposition(3, 0.0055, 1, 0.03)
	twoMore := exposition(4, 0.006, 2, 0.06)
	parse := func(s string) signalTotals {
		t.Helper()
		v, err := parseSignalTotals(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	b := parse(before)
	path, d, ok := signalledBetween(b, parse(oneDirect))
	if !ok || path != "direct" || d < 1499*time.Microsecond || d > 1501*time.Microsecond {
		t.Errorf("one direct signal: got %s %s %v, want direct 1.5ms true", path, d, ok)
	}
	if _, _, ok := signalledBetween(b, b); ok {
		t.Error("no signal counted: got ok")
	}
	if _, _, ok := signalledBetween(b, parse(twoMore)); ok {
		t.Error("two signals counted: got ok")
	}
	if _, err := parseSignalTotals("evictd_eviction_signal_latency_seconds_sum{path= 1\n"); err == nil {
		t.Error("broken text: no error")
	}
	if v := parse(""); len(v) != 0 {
		t.Errorf("no family: got %v", v)
	}
}
