package main

import (
	"strings"
	"testing"
	"time"
)

// TestParseDecision reads evictd's decision lines as the runs find them:
// the decision's time, its pass's start, and whether time to exhaustion
// made it; other pods', other outcomes' and earlier lines are not it.
func TestParseDecision(t *testing.T) {
	since := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	const (
		threshold = `time=2026-11-29T05:00:01.660Z level=INFO msg=decision outcome=evict reason="hard threshold allocatableMemory.available<200Mi met; default/hog-1 ranks first" signal=allocatableMemory.available pod=default/hog-1 gracePeriodSeconds=1 observedAt=2026-11-29T05:00:01.657Z`
		predicted = `time=2026-11-29T05:00:02.104Z level=INFO msg=decision outcome=evict reason="hard threshold allocatableMemory.available<200Mi predicted" signal=allocatableMemory.available pod=default/hog-1 gracePeriodSeconds=1 observedAt=2026-11-29T05:00:02.101Z predicted="allocatableMemory.available predicted to run out in 312ms at 1.6Gi/s; threshold allocatableMemory.available<200Mi not met yet" releaseEstimate=1s margin=500ms`
	)
	for _, tc := range []struct {
		name, line, pod string
		want            decision
		ok              bool
	}{
		{name: "the threshold's", line: threshold, pod: "default/hog-1", ok: true, want: decision{
			at: time.Date(2026, 11, 29, 5, 0, 1, 660e6, time.UTC), passStart: time.Date(2026, 11, 29, 5, 0, 1, 657e6, time.UTC)}},
		{name: "time to exhaustion's", line: predicted, pod: "default/hog-1", ok: true, want: decision{
			at: time.Date(2026, 11, 29, 5, 0, 2, 104e6, time.UTC), passStart: time.Date(2026, 11, 29, 5, 0, 2, 101e6, time.UTC), predicted: true}},
		{name: "another pod's", line: threshold, pod: "default/hog"},
		{name: "before since", line: `time=2026-11-29T04:59:59.000Z` + threshold[len(`time=2026-11-29T05:00:01.660Z`):], pod: "default/hog-1"},
		{name: "no eviction", line: `time=2026-11-29T05:00:01.660Z level=INFO msg=decision outcome=none reason="no threshold met" pod=default/hog-1 observedAt=2026-11-29T05:00:01.657Z`, pod: "default/hog-1"},
		{name: "no observedAt", line: threshold[:len(threshold)-len(` observedAt=2026-11-29T05:00:01.657Z`)], pod: "default/hog-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseDecision(tc.line, since, tc.pod)
			if ok != tc.ok || got != tc.want {
				t.Errorf("parseDecision = %+v, %t; want %+v, %t", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestParseTook reads the stages of the deciding pass from its decision
// line; a line without them, or with one missing or garbled, has none.
func TestParseTook(t *testing.T) {
	const line = `time=2026-11-29T05:00:01.660Z level=INFO msg=decision outcome=evict pod=default/hog-1 observedAt=2026-11-29T05:00:01.657Z took="signals=0.41ms pods=0.45ms stats=0.98ms decided=1.02ms"`
	for _, tc := range []struct {
		name, line string
		want       stages
		ok         bool
	}{
		{name: "all four", line: line, ok: true, want: stages{signals: 0.41, pods: 0.45, stats: 0.98, decided: 1.02}},
		{name: "an older evictd's", line: line[:strings.Index(line, " took=")]},
		{name: "one missing", line: strings.Replace(line, " stats=0.98ms", "", 1)},
		{name: "not ms", line: strings.Replace(line, "pods=0.45ms", "pods=0.45s", 1)},
		{name: "garbled", line: strings.Replace(line, "0.41", "0.4x", 1)},
		{name: "unknown stage", line: strings.Replace(line, "pods=", "nodes=", 1)},
		{name: "unterminated", line: strings.TrimSuffix(line, `"`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseTook(tc.line)
			if ok != tc.ok || got != tc.want {
				t.Errorf("parseTook = %+v, %t; want %+v, %t", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestReceivedStamp reads the hog's own time of its SIGTERM from its line
// in the CRI log; a line without it (an older workload's) or with a time
// that does not parse has none.
func TestReceivedStamp(t *testing.T) {
	const stamp = "2026-11-29T07:40:01.187654321Z stdout F "
	for _, tc := range []struct {
		name, line string
		want       time.Time
		ok         bool
	}{
		{name: "exiting", line: stamp + "workload: terminated, exiting with status 0 (received at 2026-11-29T07:40:01.123456789Z)",
			want: time.Date(2026, 11, 29, 7, 40, 1, 123456789, time.UTC), ok: true},
		{name: "ignored", line: stamp + "workload: terminated, ignored (received at 2026-11-29T07:40:01.12Z)",
			want: time.Date(2026, 11, 29, 7, 40, 1, 120e6, time.UTC), ok: true},
		{name: "an older workload's", line: stamp + "workload: terminated, exiting with status 0"},
		{name: "garbled time", line: stamp + "workload: terminated, exiting with status 0 (received at 2026-11-29T07:40:0x.1Z)"},
		{name: "cut short", line: stamp + "workload: terminated, exiting with status 0 (received at 2026-11-29T07:40:01.1"},
		{name: "empty time", line: stamp + "workload: terminated, exiting with status 0 (received at )"},
		{name: "empty line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := receivedStamp(tc.line)
			if ok != tc.ok || !got.Equal(tc.want) {
				t.Errorf("receivedStamp = %s, %t; want %s, %t", got, ok, tc.want, tc.ok)
			}
		})
	}
}
