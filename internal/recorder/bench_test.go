package recorder

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/manager"
	"github.com/evictd/evictd/signals"
)

// BenchmarkRecord is what the flight recorder costs the loop, after the
// act: a quiet pass (its observations kept), and a decision to evict on a
// node of 1,000 pods with a minute of passes and fast-poll readings
// (its snapshot built; the writing is the writer's, on its own
// goroutine, left out here).
func BenchmarkRecord(b *testing.B) {
	newRec := func(b *testing.B) *Recorder {
		rec, err := New(Config{Dir: b.TempDir(), MaxRecords: 10, MaxBytes: 1 << 30, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		return rec
	}
	var pods []signals.Pod
	stats := map[string]signals.PodStats{}
	for i := range 1000 {
		uid := "uid-" + strconv.Itoa(i)
		pods = append(pods, signals.Pod{Namespace: "tenant", Name: "pod-" + strconv.Itoa(i), UID: uid, QOS: signals.Burstable, MemoryRequest: 64 << 20,
			Containers: []signals.Container{{Name: "app", MemoryRequest: 64 << 20}}})
		stats[uid] = signals.PodStats{UID: uid, MemoryWorkingSet: signals.Int64(100 << 20),
			Containers: []signals.ContainerStats{{Name: "app", MemoryWorkingSet: signals.Int64(100 << 20)}}}
	}
	b.Run("quiet pass", func(b *testing.B) {
		rec := newRec(b)
		for i := 0; b.Loop(); i++ {
			rec.Record(quietPass(t0.Add(time.Duration(i)*time.Second), 3<<30))
		}
	})
	b.Run("decision, 1000 pods", func(b *testing.B) {
		rec := newRec(b)
		for i := range 60 {
			rec.Record(quietPass(t0.Add(time.Duration(i)*time.Second), 3<<30))
		}
		for i := range 6000 {
			rec.Read(signals.Observation{Signal: signals.MemoryAvailable, Available: 3 << 30, Capacity: 4 << 30, Time: t0.Add(time.Duration(i) * 10 * time.Millisecond)})
		}
		p := evictPass(t0.Add(time.Minute), &pods[0], manager.ResultEvicted, false)
		p.Pods, p.Stats = pods, stats
		for b.Loop() {
			// The same pass each time: its record is built anew, and
			// the writer's queue, which nothing drains, drops it.
			rec.open = rec.open[:0]
			rec.Record(p)
		}
	})
}
