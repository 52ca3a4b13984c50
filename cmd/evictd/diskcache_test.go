package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/evictd/evictd/signals"
)

// countingDisk answers every pod with a stats entry stamped now, or err.
type countingDisk struct {
	reads int
	err   error
}

func (d *countingDisk) PodStats(_ context.Context, now time.Time, pods []signals.Pod) (map[string]signals.PodStats, error) {
	d.reads++
	out := map[string]signals.PodStats{}
	for _, p := range pods {
		out[p.UID] = signals.PodStats{UID: p.UID, Time: now}
	}
	return out, d.err
}

func TestDiskCache(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	a, b := signals.Pod{UID: "a"}, signals.Pod{UID: "b"}
	steps := []struct {
		name      string
		at        time.Duration
		pods      []signals.Pod
		err       error
		wantReads int
		wantTime  time.Duration // of pod a's stats
	}{
		{"first pass reads", 0, []signals.Pod{a}, nil, 1, 0},
		{"a wake-up 2 s later reuses", 2 * time.Second, []signals.Pod{a}, nil, 1, 0},
		{"a new pod reads again", 3 * time.Second, []signals.Pod{a, b}, nil, 2, 3 * time.Second},
		{"a gone pod does not", 4 * time.Second, []signals.Pod{b}, nil, 2, -1},
		{"the next tick reads", 13 * time.Second, []signals.Pod{a, b}, nil, 3, 13 * time.Second},
		{"a failed read", 14*time.Second + 1, []signals.Pod{a, b, {UID: "c"}}, errors.New("runtime down"), 4, 14*time.Second + 1},
		{"is read again", 15 * time.Second, []signals.Pod{a, b}, nil, 5, 15 * time.Second},
		{"a clock that went back reads", 1 * time.Second, []signals.Pod{a}, nil, 6, 1 * time.Second},
	}
	c := &diskCache{maxAge: 9 * time.Second}
	src := &countingDisk{}
	for _, s := range steps {
		src.err = s.err
		got, err := c.get(context.Background(), t0.Add(s.at), s.pods, src)
		if (err != nil) != (s.err != nil) {
			t.Fatalf("%s: err %v, want %v", s.name, err, s.err)
		}
		if src.reads != s.wantReads {
			t.Errorf("%s: %d reads of the runtime, want %d", s.name, src.reads, s.wantReads)
		}
		if len(got) != len(s.pods) {
			t.Errorf("%s: stats for %d pods, want %d", s.name, len(got), len(s.pods))
		}
		if s.wantTime >= 0 {
			if st, ok := got["a"]; !ok || !st.Time.Equal(t0.Add(s.wantTime)) {
				t.Errorf("%s: pod a's stats from %v, want %v", s.name, st.Time.Sub(t0), s.wantTime)
			}
		}
	}
}
