package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestTables writes both tables from made-up evictd runs: every row has
// as many cells as its header, and the SIGTERM's times are split at the
// hog's own receipt of it; a run of an older workload, whose line does
// not say when it received the signal, counts only for the CRI log's.
func TestTables(t *testing.T) {
	cfg := config{rates: []int{800}, thresholdsMiB: []int{200}, reps: 3, podsMiB: 2048, poll: 5 * time.Millisecond,
		restart: v1.RestartPolicyAlways, sides: []string{"evictd"}}
	t0 := time.Date(2026, 11, 29, 7, 40, 0, 0, time.UTC)
	run := func(decided, received, logged time.Duration) result {
		r := result{side: "evictd", threshold: 200, rate: 800, crossed: t0, passStart: t0.Add(2 * time.Millisecond),
			decided: t0.Add(decided), terminated: t0.Add(logged), relief: t0.Add(100 * time.Millisecond), rampMiBPerSec: 800}
		if received > 0 {
			r.received = t0.Add(received)
		}
		return r
	}
	results := []result{
		run(4*time.Millisecond, 6*time.Millisecond, 8*time.Millisecond),
		run(4*time.Millisecond, 8*time.Millisecond, 40*time.Millisecond),
		run(4*time.Millisecond, 0, 10*time.Millisecond), // an older workload's line
	}
	results[0].took = stages{signals: 0.5, pods: 0.7, stats: 1.1, decided: 1.3}
	results[1].took = stages{signals: 0.3, pods: 0.5, stats: 0.9, decided: 1.0}
	// results[2]: an older evictd's line, without took=
	var b strings.Builder
	writeTable(&b, cfg, map[string]side{}, results)
	out := b.String()

	var tables [][]string
	var rows []string
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "|") {
			rows = append(rows, line)
			continue
		}
		if rows != nil {
			tables, rows = append(tables, rows), nil
		}
	}
	if len(tables) != 3 {
		t.Fatalf("%d tables, want the main one, the breakdown and the targets:\n%s", len(tables), out)
	}
	for i, want := range []int{14, 12, 12} {
		for _, row := range tables[i] {
			if n := strings.Count(row, "|") - 1; n != want {
				t.Errorf("table %d: %d cells, want %d: %s", i+1, n, want, row)
			}
		}
	}
	for _, want := range []string{
		"| crossing → hog's SIGTERM, ms (median) | (p99) | crossing → SIGTERM received by the hog, ms (median) | (p99) | crossing → relief",
		"| 200 | 800 | evictd | - | 10 | 40 | 7 | 8 | 100 | 100 |",
		"| decision → SIGTERM received (the hog's clock) | received → in the CRI log (containerd's stamp) |",
		"| 3.0 (4.0) | 17.0 (32.0) | 0 |",
		"| 2.0 (2.0) | 0.40 / 0.60 / 1.00 / 1.15 | - (-) |", // the medians of two
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tables lack %q:\n%s", want, out)
		}
	}
}

// TestRampCellScaled: in a guest the ramp is the guest's, and is compared
// with the scaled rate the hog was asked for, not the native label.
func TestRampCellScaled(t *testing.T) {
	cfg := config{scale: 13.7}
	c := cell{ramp: []float64{55}}
	if got := rampCell(c, cfg.scaled(800)); got != "55" { // 800 / 13.7 = 58; 55 is within 90%
		t.Errorf("rampCell at 800 MiB/s scaled = %q, want 55", got)
	}
	if got := rampCell(c, cfg.scaled(1600)); got != "55 (under 90% of 117)" {
		t.Errorf("rampCell at 1600 MiB/s scaled = %q", got)
	}
}

// TestTargets checks evictd's cells against the race's targets: the p99
// of crossing → received within 10 ms, and no OOM kill where the kubelet
// with memcg notification had one, unless the headroom lasts less than
// evictd's decision → relief.
func TestTargets(t *testing.T) {
	cfg := config{rates: []int{200, 1600}, thresholdsMiB: []int{200}, reps: 2, podsMiB: 2048, poll: 5 * time.Millisecond,
		restart: v1.RestartPolicyAlways, sides: []string{"kubelet-memcg", "evictd"}}
	t0 := time.Date(2026, 11, 29, 7, 40, 0, 0, time.UTC)
	run := func(side string, rate int, received, relief time.Duration, oom bool) result {
		r := result{side: side, threshold: 200, rate: rate, crossed: t0, decided: t0.Add(2 * time.Millisecond),
			received: t0.Add(received), relief: t0.Add(relief)}
		if side == "evictd" {
			r.passStart = t0.Add(-time.Millisecond)
			r.signalPath, r.toSignal = "direct", 4500*time.Microsecond // from the pass's start
		}
		if oom {
			r.reason = "OOMKilled"
		}
		return r
	}
	cases := []struct {
		name    string
		results []result
		want    []string
	}{{
		name: "met both",
		results: []result{
			run("kubelet-memcg", 200, 40*time.Millisecond, 50*time.Millisecond, true), run("kubelet-memcg", 200, 40*time.Millisecond, 50*time.Millisecond, false),
			run("evictd", 200, 3*time.Millisecond, 10*time.Millisecond, false), run("evictd", 200, 10*time.Millisecond, 12*time.Millisecond, false),
		},
		want: []string{"| 200 | 200 | evictd | 2/2 | 4 | 10 | met | 1/2 | 0/2 | 1000 | 9 | met |", "Targets met 2 times, missed 0 times;"},
	}, {
		name: "slow signal, an OOM kill the headroom allowed",
		results: []result{
			run("kubelet-memcg", 200, 40*time.Millisecond, 50*time.Millisecond, false), run("kubelet-memcg", 1600, 60*time.Millisecond, 300*time.Millisecond, true),
			run("evictd", 200, 3*time.Millisecond, 10*time.Millisecond, false), run("evictd", 200, 11*time.Millisecond, 12*time.Millisecond, false),
			run("evictd", 1600, 5*time.Millisecond, 202*time.Millisecond, true), // the headroom lasts 125 ms, the release 200
		},
		want: []string{
			"| 200 | 200 | evictd | 2/2 | 4 | 11 | missed | 0/1 | 0/2 | 1000 | 9 | none to beat |",
			"| 200 | 1600 | evictd | 1/1 | 4 | 5 | met | 1/1 | 1/1 | 125 | 200 | exempt: the headroom lasts less than its release |",
			"Targets met 1 times, missed 1 times (evictd 200×200);",
		},
	}, {
		name: "an OOM kill the headroom did not excuse",
		results: []result{
			run("kubelet-memcg", 1600, 60*time.Millisecond, 300*time.Millisecond, true),
			run("evictd", 1600, 5*time.Millisecond, 52*time.Millisecond, true),
		},
		want: []string{"| 200 | 1600 | evictd | 1/1 | 4 | 5 | met | 1/1 | 1/1 | 125 | 50 | missed |", "missed 1 times (evictd 200×1600)"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			writeTargets(&b, cfg, tc.results)
			for _, want := range tc.want {
				if !strings.Contains(b.String(), want) {
					t.Errorf("targets lack %q:\n%s", want, b.String())
				}
			}
		})
	}
}

// TestMedianP99 checks the helpers every table's medians and p99s come
// from, and the formatting of an empty set.
func TestMedianP99(t *testing.T) {
	for _, tc := range []struct {
		vs          []float64
		median, p99 string
	}{
		{nil, "-", "-"},
		{[]float64{7}, "7", "7"},
		{[]float64{9, 1, 5}, "5", "9"},
		{[]float64{4, 1, 3, 2}, "2.5", "4"},
		{[]float64{10.5, 9.5}, "10", "10.5"},
	} {
		if got := median(tc.vs, ms1); got != tc.median {
			t.Errorf("median(%v) = %s, want %s", tc.vs, got, tc.median)
		}
		if got := p99(tc.vs, ms1); got != tc.p99 {
			t.Errorf("p99(%v) = %s, want %s", tc.vs, got, tc.p99)
		}
	}
	// Nearest rank: of 200 values 1..200, the 198th.
	var vs []float64
	for i := 200; i >= 1; i-- {
		vs = append(vs, float64(i))
	}
	if p, _ := p99Value(vs); p != 198 {
		t.Errorf("p99 of 1..200 = %v, want 198", p)
	}
}

func ms1(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// TestRunsText says how many runs the cells have: one count when they
// agree, the range when a merged grid's cells differ, empty cells and
// other sides left out.
func TestRunsText(t *testing.T) {
	cfg := config{rates: []int{50, 800}, thresholdsMiB: []int{200}, sides: []string{"kubelet", "evictd"}}
	runs := func(side string, rate, n int) []result {
		var rs []result
		for range n {
			rs = append(rs, result{side: side, threshold: 200, rate: rate})
		}
		return rs
	}
	results := slices.Concat(runs("kubelet", 50, 10), runs("kubelet", 800, 6), runs("evictd", 50, 10), runs("evictd", 800, 10))
	for _, tc := range []struct {
		sides []string
		want  string
	}{
		{[]string{"kubelet", "evictd"}, "6 to 10 runs per cell"},
		{[]string{"evictd"}, "10 runs per cell"},
		{[]string{"kubelet"}, "6 to 10 runs per cell"},
		{[]string{"kubelet-memcg"}, "0 runs per cell"},
	} {
		if got := runsText(cfg, tc.sides, results); got != tc.want {
			t.Errorf("runsText(%v) = %q, want %q", tc.sides, got, tc.want)
		}
	}
}
