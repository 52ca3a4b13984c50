package main

import (
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/manager"
	"github.com/evictd/evictd/signals"
)

func TestStatusTable(t *testing.T) {
	at := time.Date(2026, 11, 25, 16, 41, 56, 0, time.UTC)
	q := func(v int64) *int64 { return &v }
	since := at.Add(-35 * time.Second)
	next := at.Add(20 * time.Minute)
	pressured := &manager.Status{
		Time: at, Trigger: "memcg", Pods: 12,
		Observations: []manager.ObservationStatus{
			{Signal: signals.MemoryAvailable, Available: 1288490188, Capacity: 8 << 30},
			{Signal: signals.MemoryPressureFullAvg10, Available: 3550, Capacity: 10000},
			{Signal: signals.NodeFsAvailable, Available: 30 << 30, Capacity: 100 << 30},
			{Signal: signals.NodeFsInodesFree, Available: 900000, Capacity: 6553600},
			{Signal: signals.PIDAvailable, Available: 31000, Capacity: 32768},
		},
		Thresholds: []manager.ThresholdStatus{
			{Threshold: "memory.available<1536Mi", Kind: "hard", Quantity: q(1536 << 20), Met: true, MetSince: &since, Observed: true},
			{Threshold: "memory.available<2Gi", Kind: "soft", GracePeriod: "1m30s", Quantity: q(2 << 30), Met: true, MetSince: &since, Observed: true},
			{Threshold: "allocatableMemory.available<1536Mi", Kind: "hard"},
			{Threshold: "memory.pressure.full.avg10>20%", Kind: "hard", Quantity: q(2000), Met: true, MetSince: &since, Observed: true},
			{Threshold: "nodefs.available<10%", Kind: "hard", Quantity: q(10 << 30), Observed: true},
			{Threshold: "nodefs.inodesFree<5%", Kind: "hard", Quantity: q(327680), Observed: true},
			{Threshold: "pid.available<1k", Kind: "hard", Quantity: q(1000), Observed: true},
		},
		Pressures: map[string]bool{"memory": true, "disk": false, "pid": false},
		Decision: decide.Decision{
			Time: at, Outcome: decide.OutcomeEvict, Reason: "memory.available<1536Mi met",
			Signal: signals.MemoryAvailable, Hard: true,
			Pod: &signals.Pod{Namespace: "web", Name: "hog-7d9f"},
		},
		Result: "evicted web/hog-7d9f",
		Limits: manager.LimitsStatus{MaxEvictionsPerHour: 60, EvictionsInLastHour: 3},
		InFlight: []manager.InFlightStatus{
			{Pod: "web/hog-7d9f", DeletionTimestamp: at, WaitUntil: at.Add(2 * time.Minute)},
		},
	}
	for _, tc := range []struct {
		name string
		st   *manager.Status
		want string
	}{
		{"under pressure", pressured, `last pass 2026-11-25T16:41:56Z (3s ago), trigger memcg, 12 pods

SIGNAL                       AVAILABLE      CAPACITY  THRESHOLD     KIND               STATE
memory.available             1.20Gi         8Gi       <1.50Gi       hard               met for 35s
memory.available             1.20Gi         8Gi       <2Gi          soft, grace 1m30s  met for 35s
allocatableMemory.available  -              -         <1.50Gi       hard               not observed
memory.pressure.full.avg10   35.5% stalled  -         >20%          hard               met for 35s
nodefs.available             30Gi           100Gi     <10% (10Gi)   hard               not met
nodefs.inodesFree            900000         6553600   <5% (327680)  hard               not met
pid.available                31000          32768     <1000         hard               not met

pressure:  memory
decision:  evict: memory.available<1536Mi met
           evict web/hog-7d9f for memory.available (hard, grace period 0s)
result:    evicted web/hog-7d9f
evictions: 3 in the last hour (cap 60)
in flight: web/hog-7d9f terminating since 2026-11-25T16:41:56Z, holds back the next eviction until 2026-11-25T16:43:56Z
`},
		{"cap reached, dry run", &manager.Status{
			Time: at, Trigger: "tick", DryRun: true,
			Observations: []manager.ObservationStatus{{Signal: signals.MemoryAvailable, Available: 6 << 30, Capacity: 8 << 30}},
			Thresholds:   []manager.ThresholdStatus{{Threshold: "memory.available<100Mi", Kind: "hard", Quantity: q(100 << 20), Observed: true}},
			Decision:     decide.Decision{Outcome: decide.OutcomeNone, Reason: "no threshold met"},
			Limits:       manager.LimitsStatus{MaxEvictionsPerHour: 2, EvictionsInLastHour: 2, CapReached: true, NextEvictionAllowed: &next},
		}, `last pass 2026-11-25T16:41:56Z (3s ago), trigger tick, 0 pods, dry run: nothing is acted on

SIGNAL            AVAILABLE  CAPACITY  THRESHOLD  KIND  STATE
memory.available  6Gi        8Gi       <100Mi     hard  not met

pressure:  none
decision:  none: no threshold met
evictions: 2 in the last hour, cap of 2 reached: none until 2026-11-25T17:01:56Z
`},
		{"before the first pass", &manager.Status{}, "no pass has completed yet: the agent is starting\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := writeStatus(&b, tc.st, at.Add(3*time.Second)); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestStatusUnescapeHTML(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"threshold": "memory.available\u003c100Mi"}`, `{"threshold": "memory.available<100Mi"}`},
		{`["\u003e", "\u0026", "\u003C"]`, `[">", "&", "<"]`},
		{`{"a": "\\u003c"}`, `{"a": "\\u003c"}`}, // a backslash, then u003c
		{`{"a": "\"\u003c\""}`, `{"a": "\"<\""}`},
		{`{"a": "\u00e9\n\u2028"}`, `{"a": "\u00e9\n\u2028"}`},
		{`{"a": 1}`, `{"a": 1}`},
	} {
		if got := string(unescapeHTML([]byte(tc.in))); got != tc.want {
			t.Errorf("unescapeHTML(%s): got %s, want %s", tc.in, got, tc.want)
		}
	}
}
