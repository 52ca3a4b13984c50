package manager

import (
	"math"
	"time"
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
// evict several pods: burst at once, then qps per second. A zero qps means
// no limit. It is owned by the loop.
type tokenBucket struct {
	qps    float64
	burst  int
	tokens float64
	last   time.Time
}

func newTokenBucket(qps float64, burst int) *tokenBucket {
	return &tokenBucket{qps: qps, burst: burst, tokens: float64(burst)}
}

// refill adds the tokens earned since the last call. A clock that stepped
// back earns nothing for the step.
func (b *tokenBucket) refill(now time.Time) {
	if b.last.IsZero() || now.Before(b.last) {
		b.last = now
		return
	}
	b.tokens = min(float64(b.burst), b.tokens+now.Sub(b.last).Seconds()*b.qps)
	b.last = now
}

// take spends a token at now, reporting false when none is left.
func (b *tokenBucket) take(now time.Time) bool {
	if b.qps <= 0 {
		return true
	}
	b.refill(now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// next is when the next token is earned.
func (b *tokenBucket) next(now time.Time) time.Time {
	if b.qps <= 0 {
		return now
	}
	b.refill(now)
	if b.tokens >= 1 {
		return now
	}
	return now.Add(time.Duration(math.Ceil((1 - b.tokens) / b.qps * float64(time.Second))))
}
