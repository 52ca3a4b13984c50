package main

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestGridSVG draws a grid from made-up runs: the SVG parses, each cell
// says what its runs measured and is coloured by its OOM kills, a cell
// without runs says so.
func TestGridSVG(t *testing.T) {
	cfg := config{rates: []int{50, 800}, thresholdsMiB: []int{200, 500}, reps: 2, podsMiB: 2048, poll: 5 * time.Millisecond, restart: v1.RestartPolicyAlways}
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	run := func(threshold, rate int, term time.Duration, oom bool) result {
		r := result{side: "evictd", threshold: threshold, rate: rate, crossed: t0, terminated: t0.Add(term), relief: t0.Add(2 * term)}
		if oom {
			r.reason = "OOMKilled"
		}
		return r
	}
	results := []result{
		run(500, 50, 14*time.Millisecond, false), run(500, 50, 16*time.Millisecond, false),
		run(200, 800, 30*time.Millisecond, true), run(200, 800, 40*time.Millisecond, false),
		run(500, 800, 20*time.Millisecond, true), run(500, 800, 20*time.Millisecond, true),
	}
	svg := string(gridSVG(cfg, "evictd", results))
	if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
		t.Fatalf("not XML: %v\n%s", err, svg)
	}
	for _, want := range []string{
		"SIGTERM 15 ms (p99 16)", "relief 30 ms (p99 32)", "OOM kills 0/2", // 500 MiB at 50 MiB/s
		"OOM kills 1/2", "OOM kills 2/2", "not run", // 200 MiB at 50 MiB/s has no runs
		`fill="#c8e6c9"`, `fill="#ffe0b2"`, `fill="#ef9a9a"`,
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}
