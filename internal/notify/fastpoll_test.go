package notify

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestFastPoll steps a fake clock: no timer while inactive, a check per
// interval while active, a wake-up when the check says so.
func TestFastPoll(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	var checks atomic.Int32
	var answer atomic.Bool
	fp, err := NewFastPoll(250*time.Millisecond, clk, func() bool { checks.Add(1); return answer.Load() })
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
	clk.Step(250 * time.Millisecond)
	waitFor(t, "a check", func() bool { return checks.Load() == 1 })
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
	fp, err := NewFastPoll(time.Second, clk, func() bool { t.Error("check called while inactive"); return false })
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
	if _, err := NewFastPoll(0, clk, func() bool { return false }); err == nil {
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
