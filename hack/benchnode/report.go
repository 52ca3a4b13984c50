package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// medianValue is the median of vs; false when vs is empty.
func medianValue(vs []float64) (float64, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
	}
	return s[len(s)/2], true
}

// p99Value is the 99th percentile of vs by nearest rank (with fewer than
// 100 values, the highest); false when vs is empty.
func p99Value(vs []float64) (float64, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[(len(s)*99+99)/100-1], true
}

// median is medianValue formatted with f, "-" when vs is empty.
func median(vs []float64, f func(float64) string) string {
	if m, ok := medianValue(vs); ok {
		return f(m)
	}
	return "-"
}

// p99 is p99Value formatted with f, "-" when vs is empty.
func p99(vs []float64, f func(float64) string) string {
	if p, ok := p99Value(vs); ok {
		return f(p)
	}
	return "-"
}

func whole(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

func msBetween(from, to time.Time) (float64, bool) {
	if from.IsZero() || to.IsZero() {
		return 0, false
	}
	return float64(to.Sub(from).Microseconds()) / 1000, true
}

// writeTable writes the markdown table of medians per side and rate, and
// its legend.
func writeTable(w io.Writer, cfg config, known map[string]side, results []result) {
	fmt.Fprintf(w, "kubepods limit %d MiB, threshold allocatableMemory.available<T (derived from memory.available<T), T = %s MiB, the headroom to the limit; hog: Burstable (request 64Mi%s, no limit, restartPolicy %s), base %d MiB short of the threshold, then the rate to %d MiB past the limit; harness poll %s; %s\n\n",
		cfg.podsMiB, joinInts(cfg.thresholdsMiB), hogCPUText(cfg.hogCPU), cfg.restart, cfg.baseBelow, cfg.overshoot, cfg.poll, runsText(cfg, cfg.sides, results))
	fmt.Fprintln(w, "| headroom MiB | rate MiB/s | side | crossing → eviction issued, ms | crossing → hog's SIGTERM, ms (median) | (p99) | crossing → SIGTERM received by the hog, ms (median) | (p99) | crossing → relief, ms (median) | (p99) | OOM kills first | evicted | peak working set MiB | measured ramp to the crossing MiB/s |")
	fmt.Fprintln(w, "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, threshold := range cfg.thresholdsMiB {
		for _, rate := range cfg.rates {
			for _, name := range cfg.sides {
				c := cellOf(results, name, threshold, rate)
				if c.runs == 0 {
					continue
				}
				fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %d/%d | %d/%d | %s | %s |\n", threshold, rate, name,
					median(c.issued, whole), median(c.term, whole), p99(c.term, whole), median(c.received, whole), p99(c.received, whole),
					median(c.relief, whole), p99(c.relief, whole),
					c.oom, c.runs, c.evicted, c.runs, median(c.peak, whole), rampCell(c, cfg.scaled(rate)))
			}
		}
	}
	fmt.Fprintln(w)
	for _, name := range cfg.sides {
		fmt.Fprintf(w, "- %s: %s\n", name, known[name].what)
	}
	writeBreakdown(w, cfg, results)
	writeTargets(w, cfg, results)
}

func hogCPUText(cpu string) string {
	if cpu == "" {
		return ", no CPU request"
	}
	return ", CPU " + cpu
}

// signalTarget is the p99 of crossing → SIGTERM received, by the hog's
// clock, that evictd is to keep at every rate.
const signalTarget = 10.0 // ms

// writeTargets checks evictd's sides against the two targets of the
// race, per cell: crossing → SIGTERM received (the hog's clock) within
// signalTarget at the p99 (beside it, crossing → the signal sent, by
// evictd's own clock from its pass's start: the part that is evictd's; from
// there the signal is pending on the hog, which takes it when it next
// runs); and where the kubelet with memcg notification
// had an OOM kill in the same run, none for evictd, unless the headroom
// lasts (at the rate asked) less than evictd's own decision → relief
// there, which no decision at the threshold can beat.
func writeTargets(w io.Writer, cfg config, results []result) {
	var evictors []string
	for _, name := range cfg.sides {
		if strings.HasPrefix(name, "evictd") {
			evictors = append(evictors, name)
		}
	}
	if len(evictors) == 0 {
		return
	}
	memcg := slices.Contains(cfg.sides, "kubelet-memcg")
	fmt.Fprintf(w, "\nTargets: crossing → SIGTERM received by the hog p99 ≤ %.0f ms; where kubelet-memcg had an OOM kill, none for evictd unless the headroom lasts less than its decision → relief:\n\n", signalTarget)
	fmt.Fprintln(w, "| headroom MiB | rate MiB/s | side | runs with a crossing and a receipt | crossing → SIGTERM sent p99, ms (evictd's clock from its pass's start) | crossing → SIGTERM received p99, ms | p99 target | kubelet-memcg OOM kills | OOM kills | the headroom lasts, ms | decision → relief, ms (median) | OOM target |")
	fmt.Fprintln(w, "|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---|")
	var met, missed []string
	for _, k := range gridKeys(cfg) {
		if !slices.Contains(evictors, k.side) {
			continue
		}
		c := cellOf(results, k.side, k.threshold, k.rate)
		if c.runs == 0 {
			continue
		}
		// The target is judged on the whole milliseconds the table shows.
		signal := "-"
		if p, ok := p99Value(c.received); ok {
			signal = "missed"
			if math.RoundToEven(p) <= signalTarget {
				signal = "met"
			}
		}
		var release, sent []float64
		for _, r := range results {
			if r.side == k.side && r.threshold == k.threshold && r.rate == k.rate {
				if v, ok := msBetween(r.decided, r.relief); ok {
					release = append(release, v)
				}
				// evictd times its signal from the decision's time,
				// which is its observations': the pass's start.
				if v, ok := msBetween(r.crossed, r.passStart); ok && r.signalPath != "" {
					sent = append(sent, v+float64(r.toSignal.Microseconds())/1000)
				}
			}
		}
		lasts := float64(k.threshold) / float64(k.rate) * 1000
		releaseMedian, releaseOK := medianValue(release)
		memcgOOM, oom := "-", "-"
		if memcg {
			mc := cellOf(results, "kubelet-memcg", k.threshold, k.rate)
			memcgOOM = fmt.Sprintf("%d/%d", mc.oom, mc.runs)
			switch {
			case mc.runs == 0:
				memcgOOM = "-"
			case mc.oom == 0:
				oom = "none to beat"
			case c.oom == 0:
				oom = "met"
			case releaseOK && lasts < releaseMedian:
				oom = "exempt: the headroom lasts less than its release"
			default:
				oom = "missed"
			}
		}
		fmt.Fprintf(w, "| %d | %d | %s | %d/%d | %s | %s | %s | %s | %d/%d | %s | %s | %s |\n", k.threshold, k.rate, k.side,
			len(c.received), c.runs, p99(sent, whole), p99(c.received, whole), signal, memcgOOM, c.oom, c.runs, whole(lasts), median(release, whole), oom)
		cellName := fmt.Sprintf("%s %d×%d", k.side, k.threshold, k.rate)
		for _, v := range []string{signal, oom} {
			switch {
			case v == "met":
				met = append(met, cellName)
			case v == "missed":
				missed = append(missed, cellName)
			}
		}
	}
	fmt.Fprintf(w, "\nTargets met %d times, missed %d times", len(met), len(missed))
	if len(missed) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(missed, ", "))
	}
	fmt.Fprintln(w, "; the p99 of fewer than 100 runs is their slowest.")
}

// reachedShare is the share of the rate asked below which a cell's
// measured ramp says the race was run slower than its column says.
const reachedShare = 0.9

// slow reports whether c's median measured ramp is below reachedShare of
// rate; a cell without a measured ramp is not.
func (c cell) slow(rate int) bool {
	m, ok := medianValue(c.ramp)
	return ok && m < reachedShare*float64(rate)
}

// rampCell is the table's measured ramp of c, marked when below
// reachedShare of the rate asked (in a guest, the scaled rate the hog was
// asked for: the ramp is the guest's).
func rampCell(c cell, rate int) string {
	v := median(c.ramp, whole)
	if c.slow(rate) {
		v += fmt.Sprintf(" (under %.0f%% of %d)", reachedShare*100, rate)
	}
	return v
}

// cell is what the runs of one side, headroom and rate measured. term is
// from the crossing to the CRI log's stamp of the hog's SIGTERM line,
// received from the crossing to the time the hog itself says it received
// the signal.
type cell struct {
	runs, oom, evicted                         int
	issued, term, received, relief, peak, ramp []float64
}

func cellOf(results []result, side string, threshold, rate int) cell {
	var c cell
	for _, r := range results {
		if r.side != side || r.threshold != threshold || r.rate != rate {
			continue
		}
		c.runs++
		if v, ok := msBetween(r.crossed, r.issued); ok {
			c.issued = append(c.issued, v)
		}
		if v, ok := msBetween(r.crossed, r.terminated); ok {
			c.term = append(c.term, v)
		}
		if v, ok := msBetween(r.crossed, r.received); ok {
			c.received = append(c.received, v)
		}
		if v, ok := msBetween(r.crossed, r.relief); ok {
			c.relief = append(c.relief, v)
		}
		if r.oomKills > 0 || r.treeOOMKills > 0 || r.reason == "OOMKilled" {
			c.oom++
		}
		if r.evicted {
			c.evicted++
		}
		c.peak = append(c.peak, float64(r.peakWS>>20))
		if r.rampMiBPerSec > 0 {
			c.ramp = append(c.ramp, r.rampMiBPerSec)
		}
	}
	return c
}

func joinInts(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ", ")
}

// writeBreakdown writes, for the evictd runs that logged their decision,
// where the time from the crossing to the hog's SIGTERM went: the wake-up
// (crossing → the deciding pass's start), the pass's reads and decision
// (→ the decision logged), the first stop signal sent (by evictd's own
// clock, with the path it took: evictd's pidfd signal, or the CRI stop),
// the rest to the signal's receipt (→ the time the hog says it received
// its SIGTERM, by its own clock: for the CRI stop, containerd's shim and
// runc's kill; then the signal's delivery), and from there to the line
// in the CRI log (containerd's stamp, when it read the hog's stdout), and
// how many of the decisions time to exhaustion made before the threshold
// was met (for those the crossing, if the harness saw one at all, came
// after the pass). Runs of a workload that does not say when it received
// the signal have neither of the last two times.
// The crossing is the harness's, read every cfg.poll, so the wake-up is
// known to within that.
func writeBreakdown(w io.Writer, cfg config, results []result) {
	var found bool
	for _, r := range results {
		found = found || !r.decided.IsZero()
	}
	if !found {
		return
	}
	fmt.Fprintf(w, "\nWhere evictd's time went, ms, median (p99) over the runs that logged their decision (crossing read every %s):\n\n", cfg.poll)
	fmt.Fprintln(w, "| headroom MiB | rate MiB/s | side | runs | crossing → pass start (wake-up, threshold decisions only) | pass start → decision (reads, decide) | the pass's stages by evictd's clock: signals read / pods listed / their usage read / decided, ms from its start (median) | pass start → first stop signal sent, by evictd's clock | signal paths | decision → SIGTERM received (the hog's clock) | received → in the CRI log (containerd's stamp) | decided before the threshold (time to exhaustion) |")
	fmt.Fprintln(w, "|---:|---:|---|---:|---:|---:|---|---:|---|---:|---:|---:|")
	for _, cellKey := range gridKeys(cfg) {
		threshold, rate, name := cellKey.threshold, cellKey.rate, cellKey.side
		{
			var wake, pass, signal, received, logged []float64
			var took [4][]float64
			paths := map[string]int{}
			predicted := 0
			for _, r := range results {
				if r.side != name || r.threshold != threshold || r.rate != rate || r.decided.IsZero() {
					continue
				}
				if r.predicted {
					predicted++
				} else if v, ok := msBetween(r.crossed, r.passStart); ok {
					wake = append(wake, v)
				}
				if v, ok := msBetween(r.passStart, r.decided); ok {
					pass = append(pass, v)
				}
				if r.took != (stages{}) {
					for i, v := range []float64{r.took.signals, r.took.pods, r.took.stats, r.took.decided} {
						took[i] = append(took[i], v)
					}
				}
				if v, ok := msBetween(r.decided, r.received); ok {
					received = append(received, v)
				}
				if v, ok := msBetween(r.received, r.terminated); ok {
					logged = append(logged, v)
				}
				if r.signalPath != "" {
					signal = append(signal, float64(r.toSignal.Microseconds())/1000)
					paths[r.signalPath]++
				}
			}
			if len(pass) == 0 {
				continue
			}
			cell := func(vs []float64) string { return median(vs, tenths) + " (" + p99(vs, tenths) + ")" }
			var counted []string
			for _, p := range slices.Sorted(maps.Keys(paths)) {
				counted = append(counted, fmt.Sprintf("%s %d", p, paths[p]))
			}
			stagesCell := "-"
			if len(took[0]) > 0 {
				stagesCell = median(took[0], hundredths) + " / " + median(took[1], hundredths) + " / " + median(took[2], hundredths) + " / " + median(took[3], hundredths)
			}
			fmt.Fprintf(w, "| %d | %d | %s | %d | %s | %s | %s | %s | %s | %s | %s | %d |\n", threshold, rate, name, len(pass), cell(wake), cell(pass), stagesCell,
				median(signal, hundredths)+" ("+p99(signal, hundredths)+")", cmp.Or(strings.Join(counted, ", "), "-"), cell(received), cell(logged), predicted)
		}
	}
}

func tenths(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func hundredths(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// gridKey is one cell of the grid and a side.
type gridKey struct {
	threshold, rate int
	side            string
}

// runsText says how many runs the cells of sides have: "10 runs per
// cell", or "6 to 10 runs per cell" when they differ (a grid merged with
// --from, runs that failed); cells without runs are left out.
func runsText(cfg config, sides []string, results []result) string {
	lo, hi := 0, 0
	for _, k := range gridKeys(cfg) {
		n := cellOf(results, k.side, k.threshold, k.rate).runs
		if n == 0 || !slices.Contains(sides, k.side) {
			continue
		}
		if lo == 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	if lo == hi {
		return fmt.Sprintf("%d runs per cell", hi)
	}
	return fmt.Sprintf("%d to %d runs per cell", lo, hi)
}

func gridKeys(cfg config) []gridKey {
	var keys []gridKey
	for _, threshold := range cfg.thresholdsMiB {
		for _, rate := range cfg.rates {
			for _, side := range cfg.sides {
				keys = append(keys, gridKey{threshold, rate, side})
			}
		}
	}
	return keys
}
