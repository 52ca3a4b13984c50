package main

import (
	"testing"
	"time"
)

// TestRampBetween: the ramp is the growth over the time between two
// samples, and 0 when a sample is missing or both are at one instant.
func TestRampBetween(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		ws0, ws1 int64
		t0, t1   time.Time
		want     float64
	}{
		{name: "150 MiB in 100 ms", ws0: 1000 << 20, ws1: 1150 << 20, t0: t0, t1: t0.Add(100 * time.Millisecond), want: 1500},
		{name: "50 MiB in a second", ws0: 1000 << 20, ws1: 1050 << 20, t0: t0, t1: t0.Add(time.Second), want: 50},
		{name: "no halfway sample", ws1: 1050 << 20, t1: t0, want: 0},
		{name: "never crossed", ws0: 1000 << 20, t0: t0, want: 0},
		{name: "halfway and crossing in one sample", ws0: 1000 << 20, ws1: 1000 << 20, t0: t0, t1: t0, want: 0},
	} {
		if got := rampBetween(tc.ws0, tc.t0, tc.ws1, tc.t1); got != tc.want {
			t.Errorf("%s: rampBetween = %v, want %v", tc.name, got, tc.want)
		}
	}
}
