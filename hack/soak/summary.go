package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// series is one measured quantity of the summary.
type series struct {
	name  string
	unit  string
	scale float64 // divides the raw value for display
	get   func(sample) float64
	// bound returns the largest slope per hour allowed, given the median
	// of the first window; 0 for a quantity that is only reported.
	bound func(first float64) float64
	why   string
}

// finish writes summary.md and prints it; it adds a failure for each
// bound exceeded, and for OOM kills in the node's pods.
func (s *soak) finish() error {
	s.mu.Lock()
	samples := append([]sample(nil), s.samples...)
	s.mu.Unlock()
	if len(samples) < 3 {
		s.fail("only %d samples: nothing to summarise", len(samples))
		return nil
	}
	o := s.o
	all := []series{
		{"RssAnon", "MiB", 1 << 20, func(r sample) float64 { return float64(r.anon) },
			func(first float64) float64 { return first * o.maxRSSPct / 100 },
			fmt.Sprintf("%.0f%% of the first window's median per hour", o.maxRSSPct)},
		{"VmRSS", "MiB", 1 << 20, func(r sample) float64 { return float64(r.rss) }, nil, ""},
		{"RssFile", "MiB", 1 << 20, func(r sample) float64 { return float64(r.file) }, nil, ""},
		{"Go heap in use", "MiB", 1 << 20, func(r sample) float64 { return r.heapInuse }, nil, ""},
		{"goroutines", "", 1, func(r sample) float64 { return r.goroutines },
			func(float64) float64 { return o.maxGorout }, fmt.Sprintf("%.0f per hour", o.maxGorout)},
		{"open fds", "", 1, func(r sample) float64 { return float64(r.fds) },
			func(float64) float64 { return o.maxFds }, fmt.Sprintf("%.0f per hour", o.maxFds)},
		{"threads", "", 1, func(r sample) float64 { return float64(r.threads) }, nil, ""},
	}
	first0, last := samples[0], samples[len(samples)-1]
	span := last.at.Sub(first0.at)
	var firstW, lastW, trend []sample
	for _, r := range samples {
		if r.at.Sub(first0.at) < o.window {
			firstW = append(firstW, r)
		}
		if last.at.Sub(r.at) < o.window {
			lastW = append(lastW, r)
		}
		if r.at.Sub(first0.at) >= o.warmup {
			trend = append(trend, r)
		}
	}
	if len(trend) < 3 {
		trend = samples
	}

	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# evictd soak, %s\n\n", first0.at.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "- evictd: %s (pid %d, the same from the first sample to the last)\n", strings.TrimSpace(s.buildInfo), s.pid)
	fmt.Fprintf(&b, "- machine: %s, %d CPUs, %s; load average at the start %s, at the end %s; kubelets on the machine (this node's included): %s\n",
		host, runtime.NumCPU(), memTotal(), s.loadStart, loadAvg(), kubeletRange(samples))
	fmt.Fprintf(&b, "- %d samples every %s over %s; windows of %s; slopes by least squares over the %d samples after the first %s\n",
		len(samples), o.interval, span.Round(time.Second), o.window, len(trend), o.warmup)
	s.mu.Lock()
	fmt.Fprintf(&b, "- churn: ReplicaSet scaled between %d and %d replicas every %s, a single pod every %s (%d created, %d kept); pods seen by evictd from %d to %d\n",
		o.replicasMin, o.replicasMax, o.scaleEvery, o.podEvery, s.singles, o.singles, minPods(samples), maxPods(samples))
	fmt.Fprintf(&b, "- pressure: %d hogs (%d MiB past the threshold at %d MiB/s, %s quiet between), %d evicted by evictd (median %.1fs after the kubepods cgroup crossed the threshold), %d missed, %d stalled before the threshold (machine too busy); evictions in evictd's /metrics: %.0f; passes: %.0f\n",
		s.hogs, o.overshoot, o.hogRate, o.quiet, s.evicted, median(s.evictSecs), s.missed, s.stalled, last.evictions-first0.evictions, last.passes-first0.passes)
	fmt.Fprintf(&b, "- API errors of the churn and the cycles: %d\n", s.apiErrors)
	s.mu.Unlock()
	fmt.Fprintf(&b, "- OOM kills: %d in the node's kubepods cgroup, %d on the whole machine (/proc/vmstat; other programs included)\n\n",
		last.podsOOM, last.hostOOM)
	fmt.Fprintf(&b, "| quantity | first %s median | last %s median | slope per hour | bound | |\n|---|---:|---:|---:|---:|---|\n", o.window, o.window)
	for _, q := range all {
		f := median(values(firstW, q.get))
		l := median(values(lastW, q.get))
		slope := slopePerHour(trend, q.get)
		verdict, bound := "", "—"
		if q.bound != nil {
			max := q.bound(f)
			bound = fmt.Sprintf("%s (%s)", num(max/q.scale, q.unit), q.why)
			verdict = "flat"
			if slope > max {
				verdict = "GROWS"
				s.fail("%s grows by %s per hour, bound %s", q.name, num(slope/q.scale, q.unit), num(max/q.scale, q.unit))
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %+.2f%s | %s | %s |\n", q.name, num(f/q.scale, q.unit), num(l/q.scale, q.unit),
			slope/q.scale, unitSuffix(q.unit), bound, verdict)
	}
	if last.podsOOM > 0 {
		s.fail("%d OOM kills in the node's kubepods cgroup", last.podsOOM)
	}
	s.mu.Lock()
	if len(s.failures) > 0 {
		fmt.Fprintf(&b, "\nFAILED:\n- %s\n", strings.Join(s.failures, "\n- "))
	} else {
		b.WriteString("\nOK: every bound held, evictd ran as one process throughout, every hog was evicted, no OOM kill in the node's pods.\n")
	}
	s.mu.Unlock()
	fmt.Println()
	fmt.Print(b.String())
	return os.WriteFile(filepath.Join(o.out, "summary.md"), []byte(b.String()), 0o644)
}

func values(rs []sample, get func(sample) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = get(r)
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// slopePerHour fits value = a + b·t by least squares, t in hours.
func slopePerHour(rs []sample, get func(sample) float64) float64 {
	var n, st, sv, stt, stv float64
	for _, r := range rs {
		t, v := r.elapsed/3600, get(r)
		n++
		st += t
		sv += v
		stt += t * t
		stv += t * v
	}
	den := n*stt - st*st
	if den == 0 {
		return 0
	}
	return (n*stv - st*sv) / den
}

func num(v float64, unit string) string {
	if unit == "" {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f %s", v, unit)
}

func unitSuffix(unit string) string {
	if unit == "" {
		return ""
	}
	return " " + unit
}

func minPods(rs []sample) int {
	m := rs[0].seenPods
	for _, r := range rs {
		m = min(m, r.seenPods)
	}
	return m
}

func maxPods(rs []sample) int {
	m := 0
	for _, r := range rs {
		m = max(m, r.seenPods)
	}
	return m
}

func kubeletRange(rs []sample) string {
	lo, hi := rs[0].kubelets, 0
	for _, r := range rs {
		lo, hi = min(lo, r.kubelets), max(hi, r.kubelets)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

func memTotal() string {
	v, err := keyedValue("/proc/meminfo", "MemTotal:")
	if err != nil {
		return "MemTotal unknown"
	}
	return fmt.Sprintf("%.1f GiB", float64(v)/(1<<20))
}
