package main

import (
	"testing"
	"time"
)

func TestSignalledBetween(t *testing.T) {
	const before = `# TYPE evictd_eviction_signal_latency_seconds histogram
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="+Inf"} 2
evictd_eviction_signal_latency_seconds_sum{path="direct",signal="memory.available"} 0.004
evictd_eviction_signal_latency_seconds_count{path="direct",signal="memory.available"} 2
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="+Inf"} 1
evictd_eviction_signal_latency_seconds_sum{path="runtime",signal="memory.available"} 0.03
evictd_eviction_signal_latency_seconds_count{path="runtime",signal="memory.available"} 1
`
	const oneDirect = `# TYPE evictd_eviction_signal_latency_seconds histogram
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="+Inf"} 3
evictd_eviction_signal_latency_seconds_sum{path="direct",signal="memory.available"} 0.0055
evictd_eviction_signal_latency_seconds_count{path="direct",signal="memory.available"} 3
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="+Inf"} 1
evictd_eviction_signal_latency_seconds_sum{path="runtime",signal="memory.available"} 0.03
evictd_eviction_signal_latency_seconds_count{path="runtime",signal="memory.available"} 1
`
	const twoMore = `# TYPE evictd_eviction_signal_latency_seconds histogram
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="+Inf"} 4
evictd_eviction_signal_latency_seconds_sum{path="direct",signal="memory.available"} 0.006
evictd_eviction_signal_latency_seconds_count{path="direct",signal="memory.available"} 4
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="+Inf"} 2
evictd_eviction_signal_latency_seconds_sum{path="runtime",signal="memory.available"} 0.06
evictd_eviction_signal_latency_seconds_count{path="runtime",signal="memory.available"} 2
`
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
