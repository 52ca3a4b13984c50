package wakeup

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// MinFastPollInterval is the shortest time between two checks of the fast
// poll, whatever the growth. A check reads two memory.stat files (the
// root's and kubepods'), tens of microseconds each; the poll comes down to
// this only in the last few milliseconds before memory growing at the
// rate it measures meets a threshold (HeadroomShare), so that the poll,
// not the kernel's event, sees the crossing within about a millisecond:
// on cgroup v1 the kernel checks a memory cgroup's thresholds only every
// 128 page events per CPU (512 KiB, 10 ms of growth at 50 MiB/s).
const MinFastPollInterval = time.Millisecond

// ReadsEvery is how often at most the fast poll hands on a threshold's
// readings (MemoryConfig.Reads: the flight recorder, time to exhaustion),
// whatever its own pace; a reading that meets or relieves the threshold is
// handed on at once.
const ReadsEvery = 10 * time.Millisecond

// HeadroomShare is the share of the headroom left above a threshold that
// memory growing at the rate last seen can consume between two checks of
// the fast poll (PollWithin), while the poll is faster than its interval
// and slower than MinFastPollInterval: memory that grows in steps (a
// huge page, an allocator's chunk) is then seen past the threshold within
// a tenth of the time the last step before it left.
const HeadroomShare = 0.1

// RateSpan is the least time the growth rate that paces the fast poll is
// measured over once the poll has read that long, beside the rate since
// its last reading: memory that grows in steps shows no growth between
// two readings a few milliseconds apart, which alone would slow the poll
// down to its interval just before the threshold.
const RateSpan = 100 * time.Millisecond

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
// HeadroomShare of what is left: at once (1ns) when it has grown to the
// threshold exactly; 0 (no opinion) when it is past it (the threshold is
// met: the loop takes over) or did not grow.
func PollWithin(before, now int64, elapsed time.Duration) time.Duration {
	used := before - now
	if now < 0 || used <= 0 || elapsed <= 0 {
		return 0
	}
	if now == 0 {
		return time.Nanosecond
	}
	rate := float64(used) / elapsed.Seconds() // bytes a second
	return time.Duration(HeadroomShare * float64(now) / rate * float64(time.Second))
}

// reading is a headroom above a threshold and when it was read.
type reading struct {
	headroom int64
	at       time.Time
}

// pace is a threshold's recent readings, the fast poll's and the passes',
// from which the poll paces itself: the growth since the last reading, and
// over at least RateSpan once it has read that long (from, which moves up
// to the newest reading at least RateSpan old, in steps of RateSpan). It
// starts afresh (the zero pace) when the poll is made active.
type pace struct {
	first, last, from, mark reading
}

// add records a reading and says when to look again (PollWithin): the
// sooner of what the growth since the last reading and since from say;
// while the pace has read for less than RateSpan without seeing growth, a
// tenth of RateSpan, to learn the rate before memory growing in steps has
// crossed unread; otherwise 0 when neither says anything. A reading no
// newer than the last is ignored.
func (p *pace) add(headroom int64, at time.Time) time.Duration {
	r := reading{headroom: headroom, at: at}
	if p.last.at.IsZero() {
		p.first, p.last, p.from, p.mark = r, r, r, r
		return RateSpan / 10
	}
	if !at.After(p.last.at) {
		return 0
	}
	next := PollWithin(p.last.headroom, headroom, at.Sub(p.last.at))
	if d := PollWithin(p.from.headroom, headroom, at.Sub(p.from.at)); d > 0 && (next <= 0 || d < next) {
		next = d
	}
	if next <= 0 && headroom >= 0 && at.Sub(p.first.at) < RateSpan {
		next = RateSpan / 10
	}
	if at.Sub(p.mark.at) >= RateSpan {
		p.from, p.mark = p.mark, r
	}
	p.last = r
	return next
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
