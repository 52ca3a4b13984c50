package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestSlopePerHour(t *testing.T) {
	get := func(r sample) float64 { return float64(r.fds) }
	var rs []sample
	// 23 fds, one more every 10 minutes: 6 per hour, with noise of ±1
	// that averages out.
	for i := range 360 {
		noise := []int{0, 1, 0, -1}[i%4]
		rs = append(rs, sample{elapsed: float64(i * 10), fds: 23 + i/60 + noise})
	}
	if got := slopePerHour(rs, get); math.Abs(got-6) > 0.3 {
		t.Errorf("slope of 23 + 1 per 10 min = %.3f per hour, want 6", got)
	}
	flat := make([]sample, 100)
	for i := range flat {
		flat[i] = sample{elapsed: float64(i * 10), fds: 23 + i%2}
	}
	if got := slopePerHour(flat, get); math.Abs(got) > 0.2 {
		t.Errorf("slope of an alternating 23/24 = %.3f per hour, want about 0", got)
	}
	if got := slopePerHour([]sample{{elapsed: 5, fds: 1}}, get); got != 0 {
		t.Errorf("slope of one sample = %v, want 0", got)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestMetrics(t *testing.T) {
	body := `# HELP go_goroutines Number of goroutines that currently exist.
go_goroutines 48
go_goroutines_extra 7
evictd_signal_available{signal="memory.available"} 2.5e+10
evictd_signal_available{signal="allocatableMemory.available"} 1.073741824e+09
evictd_threshold{kind="soft",signal="allocatableMemory.available"} 5e+08
evictd_threshold{kind="hard",signal="allocatableMemory.available"} 1.048576e+08
evictd_passes_total{trigger="tick"} 40
evictd_passes_total{trigger="wakeup"} 2
`
	if v, ok := metricValueBare(body, "go_goroutines"); !ok || v != 48 {
		t.Errorf("go_goroutines = %v, %v; want 48", v, ok)
	}
	if v, ok := metricValue(body, "evictd_signal_available", allocSignal); !ok || v != 1<<30 {
		t.Errorf("allocatableMemory.available = %v, %v; want 1 GiB", v, ok)
	}
	if v, ok := metricValue(body, "evictd_threshold", allocSignal, `kind="hard"`); !ok || v != 100<<20 {
		t.Errorf("hard threshold = %v, %v; want 100 MiB", v, ok)
	}
	if _, ok := metricValue(body, "evictd_threshold", `signal="pid.available"`); ok {
		t.Error("a threshold of a signal not in the body was found")
	}
	if got := metricSum(body, "evictd_passes_total"); got != 42 {
		t.Errorf("passes = %v, want 42", got)
	}
}

func TestProcStatusAndOOMKills(t *testing.T) {
	st, err := procStatus(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st["VmRSS"] <= 0 || st["RssAnon"] <= 0 || st["Threads"] < 1 {
		t.Errorf("own status: VmRSS %d, RssAnon %d, Threads %d; want positive", st["VmRSS"], st["RssAnon"], st["Threads"])
	}
	if st["VmRSS"]%1024 != 0 {
		t.Errorf("VmRSS %d is not kB converted to bytes", st["VmRSS"])
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "memory.oom_control"), []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := cgroupOOMKills(dir); err != nil || v != 3 {
		t.Errorf("oom_kill = %v, %v; want 3", v, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.oom_control"), []byte("oom_kill_disable 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cgroupOOMKills(dir); err == nil {
		t.Error("no oom_kill line: want an error")
	}
}
