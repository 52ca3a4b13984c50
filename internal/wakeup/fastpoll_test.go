package wakeup

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestFastPoll steps a fake clock: no timer while inactive, the first
// check MinFastPollInterval after it is made active, then one per
// interval, a wake-up when the check says so.
func TestFastPoll(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	var checks atomic.Int32
	var answer atomic.Bool
	fp, err := NewFastPoll(250*time.Millisecond, clk, func() (bool, time.Duration) { checks.Add(1); return answer.Load(), 0 })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	wakes := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() { done <- fp.Run(ctx, func() { wakes <- struct{}{} }) }()

	if fp.active.Load() || clk.HasWaiters() {
		t.Fatal("a new fast poll is active or has a timer")
	}
	fp.SetActive(true)
	waitFor(t, "the fast poll's timer", clk.HasWaiters)
	clk.Step(MinFastPollInterval - time.Millisecond)
	if checks.Load() != 0 {
		t.Fatal("a check before MinFastPollInterval")
	}
	clk.Step(time.Millisecond)
	waitFor(t, "the first check, MinFastPollInterval after it was made active", func() bool { return checks.Load() == 1 })
	waitFor(t, "the next timer", clk.HasWaiters)
	clk.Step(250*time.Millisecond - time.Millisecond)
	if checks.Load() != 1 {
		t.Fatal("a second check before the interval, though the first asked for none sooner")
	}
	clk.Step(time.Millisecond)
	waitFor(t, "a check an interval later", func() bool { return checks.Load() == 2 })
	answer.Store(true)
	waitFor(t, "the next timer", clk.HasWaiters)
	clk.Step(250 * time.Millisecond)
	select {
	case <-wakes:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up after a check that asked for one")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: got %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestFastPollInactiveIdles(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	fp, err := NewFastPoll(time.Second, clk, func() (bool, time.Duration) { t.Error("check called while inactive"); return false, 0 })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- fp.Run(ctx, func() {}) }()
	fp.SetActive(true)
	waitFor(t, "the timer", clk.HasWaiters)
	fp.SetActive(false)
	clk.Step(time.Second) // the check sees it inactive and skips
	waitFor(t, "no timer while inactive", func() bool { return !clk.HasWaiters() })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: got %v, want nil", err)
	}
	if _, err := NewFastPoll(0, clk, func() (bool, time.Duration) { return false, 0 }); err == nil {
		t.Error("NewFastPoll(0): got no error, want one")
	}
}

// waitFor polls cond until it holds, failing t after 5s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPollWithin: a tenth of the headroom left at the rate it shrank.
func TestPollWithin(t *testing.T) {
	const mi = 1 << 20
	for _, tt := range []struct {
		name          string
		before, now   int64
		elapsed, want time.Duration
	}{
		{"no growth", 300 * mi, 300 * mi, 100 * time.Millisecond, 0},
		{"shrinking use", 300 * mi, 310 * mi, 100 * time.Millisecond, 0},
		{"threshold met", 10 * mi, -5 * mi, 100 * time.Millisecond, 0},
		{"headroom just gone", 10 * mi, 0, 100 * time.Millisecond, time.Nanosecond},
		{"headroom gone without growth", 0, 0, 100 * time.Millisecond, 0},
		{"no time", 300 * mi, 200 * mi, 0, 0},
		// 100Mi in 250ms, 400 MiB/s: 200Mi lasts 500ms; a tenth.
		{"400 MiB/s, 200Mi left", 300 * mi, 200 * mi, 250 * time.Millisecond, 50 * time.Millisecond},
		// 50 MiB/s, 400Mi left: 8s; a tenth is 800ms (the poll's
		// interval bounds it).
		{"50 MiB/s, 400Mi left", 450 * mi, 400 * mi, time.Second, 800 * time.Millisecond},
	} {
		if got := PollWithin(tt.before, tt.now, tt.elapsed); got != tt.want {
			t.Errorf("%s: PollWithin(%d, %d, %s) = %s, want %s", tt.name, tt.before, tt.now, tt.elapsed, got, tt.want)
		}
	}
}

// TestFastPollNext: the poll looks again when its check asks, between
// MinFastPollInterval and its interval.
func TestFastPollNext(t *testing.T) {
	fp, err := NewFastPoll(250*time.Millisecond, clocktesting.NewFakeClock(time.Unix(0, 0)), func() (bool, time.Duration) { return false, 0 })
	if err != nil {
		t.Fatal(err)
	}
	for asked, want := range map[time.Duration]time.Duration{
		0:                      250 * time.Millisecond,
		-time.Second:           250 * time.Millisecond,
		time.Hour:              250 * time.Millisecond,
		100 * time.Millisecond: 100 * time.Millisecond,
		time.Millisecond:       MinFastPollInterval,
	} {
		if got := fp.next(asked); got != want {
			t.Errorf("next(%s) = %s, want %s", asked, got, want)
		}
	}

	// Run: a check that asks for 20ms is called again 20ms later.
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	var checks atomic.Int32
	fp, err = NewFastPoll(250*time.Millisecond, clk, func() (bool, time.Duration) { checks.Add(1); return false, 20 * time.Millisecond })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = fp.Run(ctx, func() {}) }()
	fp.SetActive(true)
	waitFor(t, "the first timer", clk.HasWaiters)
	clk.Step(250 * time.Millisecond)
	waitFor(t, "the first check", func() bool { return checks.Load() == 1 })
	waitFor(t, "the next timer", clk.HasWaiters)
	clk.Step(20 * time.Millisecond)
	waitFor(t, "a check 20ms later", func() bool { return checks.Load() == 2 })
}

// TestPaceSteps: memory that grows in steps (1Mi every 20ms, 50 MiB/s, as
// an allocator's chunks or huge pages come) is seen past the threshold
// within 3ms of the step that crosses it, whatever the phase of the poll's
// first reading and the headroom left: between two steps a reading shows
// no growth since the last, and the growth over RateSpan keeps the pace.
// Paced by the last two readings alone, the poll slowed down to its
// interval (250ms) at such a reading, and the kernel's event (late by up
// to 20ms at this rate on cgroup v1) came first.
func TestPaceSteps(t *testing.T) {
	const (
		mi       = 1 << 20
		step     = 20 * time.Millisecond
		interval = 250 * time.Millisecond
	)
	fp, err := NewFastPoll(interval, clocktesting.NewFakeClock(time.Unix(0, 0)), func() (bool, time.Duration) { return false, 0 })
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(0, 0)
	for _, headroomMi := range []int64{3, 40, 200} {
		for phase := time.Duration(0); phase < step; phase += 3 * time.Millisecond {
			// The headroom at t: headroomMi, less a Mi at each step
			// (the first at phase + step).
			headroom := func(t time.Duration) int64 { return headroomMi*mi - int64((t+phase)/step)*mi }
			// The first step that leaves it below 0.
			crossing := time.Duration(headroomMi+1)*step - phase
			var p pace
			var at time.Duration
			reads := 0
			for ; headroom(at) >= 0; reads++ {
				if at > time.Minute {
					t.Fatalf("%dMi, phase %s: no crossing read", headroomMi, phase)
				}
				at += fp.next(p.add(headroom(at), start.Add(at)))
			}
			if lag := at - crossing; lag < 0 || lag > 3*time.Millisecond {
				t.Errorf("%dMi of headroom, phase %s: the crossing at %s read at %s, %s later; want within 3ms", headroomMi, phase, crossing, at, lag)
			}
			if reads > 200 {
				t.Errorf("%dMi of headroom, phase %s: %d reads to the crossing, want at most 200", headroomMi, phase, reads)
			}
		}
	}
}
