package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseRun reads run lines back: a line written from what was read
// is the line read, for an evictd run, a run whose crossing the harness
// never saw, and a kubelet run; a line without its cell, or with a field
// that does not parse, is an error naming the field.
func TestParseRun(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	for name, r := range map[string]result{
		"evictd": {side: "evictd", threshold: 500, rate: 800, rep: 3, baseMiB: 1247, crossed: t0, relief: ms(9), issued: ms(27), seen: ms(27),
			terminated: ms(6), received: ms(4), passStart: ms(-1), decided: ms(2), signalPath: "direct", toSignal: 2940 * time.Microsecond,
			evicted: true, reason: "Error", peakWS: 1550 << 20, peakUsage: 1600 << 20, rampMiBPerSec: 801, samples: 2100},
		"never crossed": {side: "evictd-tte", threshold: 200, rate: 1600, rep: 1, baseMiB: 1547, passStart: t0, decided: ms(5),
			terminated: ms(9), received: ms(8), signalPath: "direct", toSignal: 5770 * time.Microsecond, predicted: true, evicted: true,
			reason: "Error", peakWS: 1745 << 20, samples: 900},
		"kubelet": {side: "kubelet", threshold: 1000, rate: 50, rep: 2, baseMiB: 700, crossed: t0, relief: ms(6510), issued: ms(6441),
			seen: ms(6441), terminated: ms(6465), received: ms(6460), evicted: true, oomKills: 0, treeOOMKills: 1, reason: "Error",
			peakWS: 1372 << 20, rampMiBPerSec: 50, samples: 4000},
	} {
		t.Run(name, func(t *testing.T) {
			line := r.line()
			got, err := parseRun(strings.TrimPrefix(line, "run "))
			if err != nil {
				t.Fatalf("parseRun(%q): %v", line, err)
			}
			if again := got.line(); again != line {
				t.Errorf("read back:\n got %s\nwant %s", again, line)
			}
		})
	}
	for _, tc := range []struct{ line, want string }{
		{"side=evictd rate=800 rep=1", "no threshold"},
		{"side=evictd threshold=200MiB rate=fast rep=1", `rate="fast"`},
		{"side=evictd threshold=200MiB rate=800 cross->pass=soonms", `cross->pass="soonms"`},
		{"side=evictd threshold=200MiB rate=800 evicted=maybe", `evicted="maybe"`},
		{"side=evictd threshold=200MiB rate=800 stray", `"stray" is not key=value`},
		{"threshold=200MiB rate=800", "no side"},
	} {
		if _, err := parseRun(tc.line); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseRun(%q) = %v, want an error with %q", tc.line, err, tc.want)
		}
	}
}

// TestReadRuns reads an output's run lines, skipping the rest, with a
// guest's slowdown; an unreadable run line names the file and line.
func TestReadRuns(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "bench-node-v2.out")
	r := result{side: "evictd", threshold: 200, rate: 50, rep: 1}
	content := "18:00:01 the guest touches 256 MiB of new memory in 2.62s, the host in 191ms: slowdown s = 13.7; every amount\n" +
		"18:00:02 starting evictd --eviction-hard=memory.available<15Mi\n" +
		"18:00:10 " + r.line() + "\n\n| headroom MiB | rate MiB/s | side |\n"
	if err := os.WriteFile(good, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	results, scale, err := readRuns(good)
	if err != nil || len(results) != 1 || scale != 13.7 || results[0].side != "evictd" || results[0].rate != 50 {
		t.Fatalf("readRuns = %d runs, scale %v, %v; want 1 evictd run at 50 MiB/s, scale 13.7", len(results), scale, err)
	}
	cfg := config{rates: []int{50}, thresholdsMiB: []int{200}, thresholdMiB: 200, sides: []string{"evictd"}, out: good}
	if err := fromRuns(cfg, []string{good}); err == nil || !strings.Contains(err.Error(), "overwritten") {
		t.Errorf("fromRuns with --out one of --from's files = %v, want a refusal", err)
	}
	cfg.out = filepath.Join(dir, "again.out")
	if err := fromRuns(cfg, []string{good}); err != nil {
		t.Fatal(err)
	}
	if again, err := os.ReadFile(cfg.out); err != nil || !strings.Contains(string(again), "| 200 | 50 | evictd |") {
		t.Errorf("fromRuns wrote %q (%v), want the table with the run's cell", again, err)
	}
	if _, err := os.Stat(cfg.out + ".evictd.svg"); err != nil {
		t.Errorf("fromRuns drew no chart: %v", err)
	}
	bad := filepath.Join(dir, "bad.out")
	if err := os.WriteFile(bad, []byte("18:00:00 header\n18:00:10 run side=evictd threshold=x rate=50\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readRuns(bad); err == nil || !strings.Contains(err.Error(), bad+":2:") {
		t.Errorf("readRuns(bad) = %v, want an error naming %s:2", err, bad)
	}
}
