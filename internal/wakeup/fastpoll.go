package wakeup

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// MinFastPollInterval is the shortest time between two checks of the fast
// poll, whatever the growth: its CPU bound. A check reads two memory.stat
// files (the root's and kubepods'), tens of microseconds each, so at this
// interval the poll costs about 1% of a core, and only while it is active.
const MinFastPollInterval = 10 * time.Millisecond

// HeadroomShare is the share of the headroom left above a threshold that
// memory growing at the rate last seen can consume between two checks of
// the fast poll (PollWithin), while the poll is faster than its interval
// and slower than MinFastPollInterval.
const HeadroomShare = 0.25

// FastPoll calls a cheap check while it is active, and wakes the loop when
// the check says so. It is the fallback for what the kernel does not
// notify: it is made active while a memory signal is within a margin of a
// threshold, and idles (no timer) otherwise. Its first check after it is
// made active comes MinFastPollInterval later; the check says when to look
// next (PollWithin): sooner than the interval when memory grows fast
// enough to use up the headroom, never sooner than MinFastPollInterval.
type FastPoll struct {
	interval time.Duration
	clock    clock.Clock
	check    func() (wake bool, next time.Duration)
	active   atomic.Bool
	kick     chan struct{}
}

// NewFastPoll returns an inactive fast poll of check at most every
// interval. check's next, when positive, asks for the next check sooner.
func NewFastPoll(interval time.Duration, clk clock.Clock, check func() (wake bool, next time.Duration)) (*FastPoll, error) {
	if interval <= 0 || clk == nil || check == nil {
		return nil, errors.New("fast poll: want a positive interval, a clock and a check")
	}
	return &FastPoll{interval: interval, clock: clk, check: check, kick: make(chan struct{}, 1)}, nil
}

// PollWithin is when to look again so that memory that went from headroom
// before to headroom now in elapsed, growing at that rate, uses up at most
// HeadroomShare of what is left: 0 (no opinion) when there is no headroom
// left (the threshold is met: the loop takes over) or no growth.
func PollWithin(before, now int64, elapsed time.Duration) time.Duration {
	used := before - now
	if now <= 0 || used <= 0 || elapsed <= 0 {
		return 0
	}
	rate := float64(used) / elapsed.Seconds() // bytes a second
	return time.Duration(HeadroomShare * float64(now) / rate * float64(time.Second))
}

// next bounds a check's answer: the interval when it has no opinion or
// asks for later, MinFastPollInterval at the soonest.
func (p *FastPoll) next(asked time.Duration) time.Duration {
	switch {
	case asked <= 0 || asked >= p.interval:
		return p.interval
	case asked < MinFastPollInterval:
		return p.soonest()
	}
	return asked
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

// soonest is the least wait between two checks, and before the first one
// once the poll is made active: MinFastPollInterval, or the interval when
// that is shorter.
func (p *FastPoll) soonest() time.Duration { return min(MinFastPollInterval, p.interval) }

// Run polls while active until ctx is done.
func (p *FastPoll) Run(ctx context.Context, wake func()) error {
	wait := p.soonest()
	for {
		if !p.active.Load() {
			select {
			case <-ctx.Done():
				return nil
			case <-p.kick:
			}
			// Made active: memory has just come near a threshold. The
			// first check comes at the soonest, not an interval later,
			// so that the pace of the next ones (the check's growth)
			// is known before memory growing fast has crossed the
			// margin unread.
			wait = p.soonest()
			continue
		}
		t := p.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		if !p.active.Load() {
			continue
		}
		w, asked := p.check()
		wait = p.next(asked)
		if w {
			wake()
		}
	}
}
