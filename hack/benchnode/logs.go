package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"time"
)

// firstLine returns the time of the first line of path at or after since
// that contains every one of subs, with stamp parsing a line's time.
func firstLine(path string, since time.Time, stamp func(string) (time.Time, bool), subs ...string) (time.Time, bool) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
next:
	for sc.Scan() {
		line := sc.Text()
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		if t, ok := stamp(line); ok && !t.Before(since) {
			return t, true
		}
	}
	return time.Time{}, false
}

// klogStamp parses the header of a klog line, "I1122 01:52:00.123456 ...",
// in the local time zone of the current year.
func klogStamp(line string) (time.Time, bool) {
	if len(line) < 21 {
		return time.Time{}, false
	}
	t, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	now := time.Now()
	return t.AddDate(now.Year(), 0, 0), true
}

// slogStamp parses the time= field of a log/slog text line.
func slogStamp(line string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(line, "time=")
	if !ok {
		return time.Time{}, false
	}
	v, _, _ := strings.Cut(rest, " ")
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}

// criStamp parses the RFC 3339 time that starts a CRI container log line.
func criStamp(line string) (time.Time, bool) {
	v, _, _ := strings.Cut(line, " ")
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}

// receivedStamp parses the time the workload says it received its signal,
// the end of its line "workload: terminated, ... (received at <RFC 3339>)";
// a line from a workload built before it printed that time has none.
func receivedStamp(line string) (time.Time, bool) {
	_, rest, found := strings.Cut(line, " (received at ")
	if !found {
		return time.Time{}, false
	}
	v, _, found := strings.Cut(rest, ")")
	if !found {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}

// decision is evictd's decision to evict a pod, from its log.
type decision struct {
	// at is the line's time: the decision made, after the pass's reads.
	at time.Time
	// passStart is its observedAt: the pass's start, the wake-up.
	passStart time.Time
	// predicted: time to exhaustion acted before the threshold was met
	// (the line's predicted=).
	predicted bool
	// took is how long the pass had run at the end of each stage, by
	// evictd's clock (the line's took=): its signals read, its pods
	// listed, their usage read, the decision made. Zero for an evictd
	// that did not log it.
	took stages
}

// stages is a pass's took=, in ms from its start.
type stages struct {
	signals, pods, stats, decided float64
}

// parseTook reads took="signals=0.41ms pods=0.45ms stats=0.98ms
// decided=1.02ms" from a decision line; false without it or when any of
// the four does not parse.
func parseTook(line string) (stages, bool) {
	_, rest, found := strings.Cut(line, ` took="`)
	if !found {
		return stages{}, false
	}
	v, _, found := strings.Cut(rest, `"`)
	if !found {
		return stages{}, false
	}
	var st stages
	fields := map[string]*float64{"signals": &st.signals, "pods": &st.pods, "stats": &st.stats, "decided": &st.decided}
	seen := 0
	for kv := range strings.FieldsSeq(v) {
		k, val, ok := strings.Cut(kv, "=")
		dst, known := fields[k]
		num, isMS := strings.CutSuffix(val, "ms")
		f, err := strconv.ParseFloat(num, 64)
		if !ok || !known || !isMS || err != nil {
			return stages{}, false
		}
		*dst = f
		seen++
	}
	if seen != len(fields) {
		return stages{}, false
	}
	return st, true
}

// decisionLine finds evictd's decision to evict pod (namespace/name) at or
// after since in its slog text log.
func decisionLine(path string, since time.Time, pod string) (decision, bool) {
	f, err := os.Open(path)
	if err != nil {
		return decision{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if d, ok := parseDecision(sc.Text(), since, pod); ok {
			return d, true
		}
	}
	return decision{}, false
}

// parseDecision reads one log line as decisionLine looks for it.
func parseDecision(line string, since time.Time, pod string) (decision, bool) {
	if !strings.Contains(line, "msg=decision outcome=evict") || !strings.Contains(line, " pod="+pod+" ") {
		return decision{}, false
	}
	t, ok := slogStamp(line)
	if !ok || t.Before(since) {
		return decision{}, false
	}
	_, rest, found := strings.Cut(line, " observedAt=")
	if !found {
		return decision{}, false
	}
	v, _, _ := strings.Cut(rest, " ")
	at, err := time.Parse(time.RFC3339Nano, strings.Trim(v, `"`))
	if err != nil {
		return decision{}, false
	}
	took, _ := parseTook(line)
	return decision{at: t, passStart: at, predicted: strings.Contains(line, " predicted="), took: took}, true
}
