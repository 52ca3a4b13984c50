package notify

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// FastPoll calls a cheap check every interval while it is active, and
// wakes the loop when the check says so. It is the fallback for what the
// kernel does not notify: it is made active while a memory signal is within
// a margin of a threshold, and idles (no timer) otherwise.
type FastPoll struct {
	interval time.Duration
	clock    clock.Clock
	check    func() bool
	active   atomic.Bool
	kick     chan struct{}
}

// NewFastPoll returns an inactive fast poll of check every interval.
func NewFastPoll(interval time.Duration, clk clock.Clock, check func() bool) (*FastPoll, error) {
	if interval <= 0 || clk == nil || check == nil {
		return nil, errors.New("fast poll: want a positive interval, a clock and a check")
	}
	return &FastPoll{interval: interval, clock: clk, check: check, kick: make(chan struct{}, 1)}, nil
}

// SetActive starts or stops the polling.
func (p *FastPoll) SetActive(on bool) {
	if p.active.Swap(on) == on || !on {
		return
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run polls while active until ctx is done.
func (p *FastPoll) Run(ctx context.Context, wake func()) error {
	for {
		if !p.active.Load() {
			select {
			case <-ctx.Done():
				return nil
			case <-p.kick:
			}
			continue
		}
		t := p.clock.NewTimer(p.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		if p.active.Load() && p.check() {
			wake()
		}
	}
}
