package main

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestGridSVG draws a grid from made-up runs: the SVG parses, each cell
// says what its runs measured (the SIGTERM by the hog's clock when its
// line has it, by the CRI log's stamp otherwise) and is coloured by its
// OOM kills, a cell without runs says so.
func TestGridSVG(t *testing.T) {
	cfg := config{rates: []int{50, 800}, thresholdsMiB: []int{200, 500}, reps: 2, podsMiB: 2048, poll: 5 * time.Millisecond, restart: v1.RestartPolicyAlways}
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	// The 800 MiB/s cells ran at 700 (under 90%), the 50 MiB/s one at
	// the rate asked.
	run := func(threshold, rate int, term time.Duration, oom bool) result {
		ramp := float64(rate)
		if rate == 800 {
			ramp = 700
		}
		r := result{side: "evictd", threshold: threshold, rate: rate, crossed: t0, terminated: t0.Add(term), relief: t0.Add(2 * term), rampMiBPerSec: ramp}
		if oom {
			r.reason = "OOMKilled"
		}
		if threshold == 200 {
			r.received = t0.Add(term - 20*time.Millisecond) // the hog's own time of receipt
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
		"SIGTERM logged 15 ms (p99 16)", "relief 30 ms (p99 32)", "OOM kills 0/2, ramp 50 MiB/s", // 500 MiB at 50 MiB/s
		"SIGTERM received 15 ms (p99 20)", "OOM kills 1/2, ramp 700 MiB/s", "OOM kills 2/2", "not run", // 200 MiB at 50 MiB/s has no runs
		`fill="#c8e6c9"`, `fill="#ffe0b2"`, `fill="#ef9a9a"`,
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if n := strings.Count(svg, "stroke-dasharray"); n != 2 {
		t.Errorf("%d cells dashed, want the two at 800 MiB/s", n)
	}
	var table strings.Builder
	cfg.sides = []string{"evictd"}
	writeTable(&table, cfg, map[string]side{}, results)
	if n := strings.Count(table.String(), "| 700 (under 90% of 800) |"); n != 2 {
		t.Errorf("table marks %d cells under the rate asked, want 2:\n%s", n, table.String())
	}
	if !strings.Contains(table.String(), "| 50 |\n") {
		t.Errorf("table's 50 MiB/s cell should be unmarked:\n%s", table.String())
	}
}
