package manager

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// EventCapReached is the reason of the Warning event posted on the node
// when --max-evictions-per-hour withholds an eviction.
const EventCapReached = "EvictionCapReached"

// hourWindow counts the evictions issued in the sliding hour before now,
// for --max-evictions-per-hour. It is owned by the loop.
type hourWindow struct {
	limit int // 0: no cap
	times []time.Time
	// last is the latest time the window was told of; a now before it
	// means the clock stepped back.
	last time.Time
}

// advance forgets the evictions older than an hour at now. When the clock
// has stepped back since the last call, every remembered time is moved back
// by the step as measured (last − now), which is never more than the real
// step: the evictions then leave the window no earlier than an hour after
// they were issued.
func (w *hourWindow) advance(now time.Time) {
	if !w.last.IsZero() && now.Before(w.last) {
		back := w.last.Sub(now)
		for i := range w.times {
			w.times[i] = w.times[i].Add(-back)
		}
	}
	w.last = now
	cut := now.Add(-time.Hour)
	i := 0
	for i < len(w.times) && !w.times[i].After(cut) {
		i++
	}
	w.times = w.times[i:]
}

// full reports whether the cap forbids another eviction at now.
func (w *hourWindow) full(now time.Time) bool {
	w.advance(now)
	return w.limit > 0 && len(w.times) >= w.limit
}

// count is the number of evictions issued in the hour before now.
func (w *hourWindow) count(now time.Time) int {
	w.advance(now)
	return len(w.times)
}

// nextAllowed is when the oldest eviction in the window leaves it.
func (w *hourWindow) nextAllowed(now time.Time) time.Time {
	w.advance(now)
	if len(w.times) == 0 {
		return now
	}
	return w.times[0].Add(time.Hour)
}

// record notes an eviction issued at now.
func (w *hourWindow) record(now time.Time) {
	w.advance(now)
	w.times = append(w.times, now)
}

// tokenBucket limits the evictions of one local-storage pass, which may
// evict several pods: burst at once, then qps per second, by a
// rate.Limiter asked at the loop's clock. A zero qps means no limit. It is
// owned by the loop.
type tokenBucket struct {
	lim *rate.Limiter // nil: no limit
	// last is the latest time the bucket was asked at; a now before it
	// means the clock stepped back.
	last time.Time
}

func newTokenBucket(qps float64, burst int) *tokenBucket {
	if qps <= 0 {
		return &tokenBucket{}
	}
	return &tokenBucket{lim: rate.NewLimiter(rate.Limit(qps), burst)}
}

// at brings the limiter to now. After the clock steps back, a
// rate.Limiter earns nothing until the clock passes its last event again;
// the bucket restarts the limiter's clock at now instead, keeping its
// tokens, so that the step earns nothing and the time after it does.
func (b *tokenBucket) at(now time.Time) {
	if now.Before(b.last) {
		b.lim.SetLimitAt(now, b.lim.Limit())
	}
	b.last = now
}

// take spends a token at now, reporting false when none is left.
func (b *tokenBucket) take(now time.Time) bool {
	if b.lim == nil {
		return true
	}
	b.at(now)
	return b.lim.AllowN(now, 1)
}

// next is when the next token is earned.
func (b *tokenBucket) next(now time.Time) time.Time {
	if b.lim == nil {
		return now
	}
	b.at(now)
	tokens := b.lim.TokensAt(now)
	if tokens >= 1 {
		return now
	}
	return now.Add(time.Duration(math.Ceil((1 - tokens) / float64(b.lim.Limit()) * float64(time.Second))))
}
