package evict

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/decide"
)

const sec = time.Second

// span is the range a jittered wait falls in.
type span struct{ lo, hi time.Duration }

func (r span) String() string { return fmt.Sprintf("[%s, %s]", r.lo, r.hi) }

// TestBackoff: each wait of the two schedules falls in its range, and the
// jitter spreads the waits over the whole of it.
func TestBackoff(t *testing.T) {
	const draws = 2000
	for _, tc := range []struct {
		name           string
		first, longest time.Duration
		want           []span
	}{
		{"owed evictions (Run)", owedFirstRetry, owedMaxRetry,
			[]span{{1 * sec, 2 * sec}, {2 * sec, 4 * sec}, {4 * sec, 8 * sec}, {8 * sec, 16 * sec}, {15 * sec, 30 * sec}, {15 * sec, 30 * sec}, {15 * sec, 30 * sec}}},
		{"inside Evict (reach)", awayFirstRetry, awayMaxRetry,
			[]span{{200 * time.Millisecond, 400 * time.Millisecond}, {400 * time.Millisecond, 800 * time.Millisecond},
				{500 * time.Millisecond, sec}, {500 * time.Millisecond, sec}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make([]span, len(tc.want))
			for i := range draws {
				b := backoff(tc.first, tc.longest)
				for j, w := range tc.want {
					d := b.Step()
					if d < w.lo || d > w.hi {
						t.Fatalf("draw %d, wait %d = %s, want within %s", i, j+1, d, w)
					}
					if i == 0 || d < got[j].lo {
						got[j].lo = d
					}
					if i == 0 || d > got[j].hi {
						got[j].hi = d
					}
				}
			}
			for j, w := range tc.want {
				if slack := (w.hi - w.lo) / 20; got[j].lo > w.lo+slack || got[j].hi < w.hi-slack {
					t.Errorf("wait %d: %d draws spanned %s, want nearly all of %s", j+1, draws, got[j], w)
				}
			}
		})
	}
}

// TestBackoffSpreadsAgents: 5,000 agents lose the API server at the same
// moment and retry their owed evictions on Run's schedule; it answers again
// two minutes later. Jittered, their first requests after its return
// spread over tens of seconds, a few percent of them in any one second;
// without the jitter (as before), all of them would come in the same one.
func TestBackoffSpreadsAgents(t *testing.T) {
	const agents = 5000
	const back = 2 * time.Minute
	for _, tc := range []struct {
		name          string
		jitter        float64
		wantSpread    time.Duration // at least, from the first request to the last
		wantPerSecond int           // at most
	}{
		{"jittered", 1, 20 * sec, agents / 10},
		{"not jittered", 0, 0, agents},
	} {
		t.Run(tc.name, func(t *testing.T) {
			perSecond := map[time.Duration]int{}
			var first, last time.Duration
			for i := range agents {
				b := backoff(owedFirstRetry, owedMaxRetry)
				b.Jitter = tc.jitter
				at := time.Duration(0)
				for at < back {
					at += b.Step()
				}
				perSecond[at.Truncate(sec)]++
				if i == 0 || at < first {
					first = at
				}
				last = max(last, at)
			}
			busiest := 0
			for _, n := range perSecond {
				busiest = max(busiest, n)
			}
			t.Logf("the %d agents' first requests after the return came from %s to %s, at most %d in one second", agents, first, last, busiest)
			if last-first < tc.wantSpread || busiest > tc.wantPerSecond {
				t.Errorf("spread over %s with %d in the busiest second, want at least %s and at most %d", last-first, busiest, tc.wantSpread, tc.wantPerSecond)
			}
			if tc.jitter == 0 && busiest != agents {
				t.Errorf("without jitter, %d of %d agents in the busiest second, want all: the test shows nothing", busiest, agents)
			}
		})
	}
}

// TestRetryDelay: the next wait is the schedule's, or the API server's
// Retry-After when that is longer, jittered alike.
func TestRetryDelay(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	throttled := func(retryAfter int) error {
		return apierrors.NewGenericServerResponse(http.StatusTooManyRequests, "POST", pods, "web", "Too many requests, please try again later.", retryAfter, true)
	}
	for _, tc := range []struct {
		name  string
		steps int // taken before
		err   error
		want  span
	}{
		{"no error", 0, nil, span{1 * sec, 2 * sec}},
		{"503 without Retry-After", 2, apierrors.NewServiceUnavailable("etcd is down"), span{4 * sec, 8 * sec}},
		{"throttled, Retry-After 40", 0, throttled(40), span{40 * sec, 80 * sec}},
		{"throttled, Retry-After 40, wrapped", 2, fmt.Errorf("eviction API: %w", throttled(40)), span{40 * sec, 80 * sec}},
		{"throttled, Retry-After 1, past the cap", 6, throttled(1), span{15 * sec, 30 * sec}},
		{"server timeout suggesting 0s", 1, apierrors.NewServerTimeout(pods, "get", 0), span{2 * sec, 4 * sec}},
		{"504 suggesting 20s", 1, apierrors.NewTimeoutError("slow", 20), span{20 * sec, 40 * sec}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 200 {
				b := backoff(owedFirstRetry, owedMaxRetry)
				for range tc.steps {
					b.Step()
				}
				if d := retryDelay(&b, tc.err); d < tc.want.lo || d > tc.want.hi {
					t.Fatalf("retryDelay after %d steps, %v = %s, want within %s", tc.steps, tc.err, d, tc.want)
				}
			}
		})
	}
}

// timerClock is a fake clock that sends the duration of each timer made
// on it, once the timer is set.
type timerClock struct {
	*clocktesting.FakeClock
	set chan time.Duration
}

func (c timerClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.set <- d
	return t
}

// TestRunSchedule drives Run with the injected clock against an API
// server that throttles the eviction (429, Retry-After: 40), then is
// away (503), then has lost the pod: Run waits at least the 40s asked,
// then follows the jittered backoff, one eviction request per try, never
// the delete that bypasses budgets; and drops the eviction once the pod
// is gone.
func TestRunSchedule(t *testing.T) {
	api := &fakeAPI{}
	api.set(http.StatusOK, http.StatusTooManyRequests, "40")
	fc := timerClock{clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), make(chan time.Duration, 16)}
	ev := New(Config{NodeName: nodeName, Pods: &fakeCache{}, Clock: fc}, api.client(t), nil, testLog(t))
	ev.owed.add(awayRequest(true), fc.Now(), testLog(t))
	<-ev.owed.kick // Run is to find it owed, not be told

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ev.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	next := func(what string) time.Duration {
		t.Helper()
		select {
		case d := <-fc.set:
			return d
		case <-time.After(30 * time.Second):
			t.Fatalf("no timer set for %s", what)
			return 0
		}
	}
	// try waits out the retry timer, checks it, sets the API server's
	// answers to the try (then, the last try has had its answer), and
	// sees the try's attempt timer set.
	try := func(i int, want span, answers ...int) {
		t.Helper()
		d := next(fmt.Sprintf("retry %d", i))
		if d < want.lo || d > want.hi {
			t.Errorf("retry %d after %s, want within %s", i, d, want)
		}
		if len(answers) == 2 {
			api.set(answers[0], answers[1], "")
		}
		fc.Step(d)
		if d := next(fmt.Sprintf("attempt %d", i)); d != owedAttempt {
			t.Fatalf("attempt %d bounded by %s, want %s", i, d, owedAttempt)
		}
	}

	try(1, span{1 * sec, 2 * sec})                                                                 // throttled
	try(2, span{40 * sec, 80 * sec}, http.StatusServiceUnavailable, http.StatusServiceUnavailable) // Retry-After: 40
	try(3, span{4 * sec, 8 * sec})                                                                 // the schedule's third wait
	try(4, span{8 * sec, 16 * sec})
	try(5, span{15 * sec, 30 * sec}, http.StatusNotFound, http.StatusNotFound)
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return ev.Owed() == 0, nil
	})
	if err != nil {
		t.Fatalf("owed evictions %d after the pod went, want 0", ev.Owed())
	}
	// An owed eviction is a hard one: the pod's terminal status is
	// written first (then, once it is, the delete).
	want := map[string]int{http.MethodGet: 5, http.MethodPost: 0, http.MethodDelete: 0, http.MethodPatch: 1}
	for method, n := range want {
		if got := api.count(method); got != n {
			t.Errorf("%d %s requests, want %d (one GET per try, one status patch the API server throttled, no eviction); requests: %q",
				got, method, n, api.requests())
		}
	}
	select {
	case d := <-fc.set:
		t.Errorf("a timer of %s set with nothing owed", d)
	default:
	}
}

// TestEvictWaitsRetryAfter: inside Evict too, a throttled hard eviction (its
// terminal status's patch)
// is retried no sooner than the API server asked, within LocalKillAfter:
// here, asked for 40s with 5s left, the retry comes at the local stop.
func TestEvictWaitsRetryAfter(t *testing.T) {
	api := &fakeAPI{}
	api.set(http.StatusOK, http.StatusTooManyRequests, "40")
	fc := timerClock{clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), make(chan time.Duration, 16)}
	st := &stops{}
	ev := New(Config{NodeName: nodeName, Pods: &fakeCache{}, Clock: fc, StopLocally: st.stop, LocalKillAfter: 5 * sec}, api.client(t), nil, testLog(t))
	done := make(chan error, 1)
	go func() { done <- ev.Evict(t.Context(), awayRequest(true)) }()
	var timers []time.Duration
	for {
		select {
		case d := <-fc.set:
			timers = append(timers, d)
			if len(timers) == 2 { // the retry's
				fc.Step(d)
			}
			continue
		case err := <-done:
			if !errors.Is(err, decide.ErrStoppedLocally) {
				t.Errorf("Evict = %v, want ErrStoppedLocally", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("Evict did not return; timers set: %v", timers)
		}
		break
	}
	// The first attempt's bound, the retry's wait, the last attempt's bound.
	if want := []time.Duration{5 * sec, 5 * sec, minAttempt}; !slices.Equal(timers, want) {
		t.Errorf("timers %v, want %v", timers, want)
	}
	if n := api.count(http.MethodPatch); n != 2 {
		t.Errorf("%d status patches, want 2; requests: %q", n, api.requests())
	}
}
