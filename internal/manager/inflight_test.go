package manager

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/thresholds"
)

// podsInFlight is fixedPods with evictions in flight the test sets.
type podsInFlight struct {
	fixedPods
	mu       sync.Mutex
	inFlight []decide.InFlight
}

func (p *podsInFlight) InFlight() []decide.InFlight {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.inFlight)
}

func (p *podsInFlight) set(f ...decide.InFlight) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inFlight = f
}

// logBuffer collects the loop's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the lines that contain every one of subs.
func (b *logBuffer) lines(subs ...string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if l != "" && !slices.ContainsFunc(subs, func(s string) bool { return !strings.Contains(l, s) }) {
			out = append(out, l)
		}
	}
	return out
}

// inFlightHarness is a loop with a hard memory.available<100Mi threshold
// whose pod source reports the evictions in flight the test sets.
func inFlightHarness(t *testing.T, dryRun bool, cleanup time.Duration) (*harness, *podsInFlight, *logBuffer) {
	t.Helper()
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	pods := &podsInFlight{fixedPods: defaultPods()}
	logs := &logBuffer{}
	h := newHarnessTuned(t, dryRun, ths, nil, defaultStats(), func(c *Config, d *Deps) {
		c.CleanupTimeout = cleanup
		d.Pods = pods
		d.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	return h, pods, logs
}

// slow is the pod of an eviction in flight whose deletionTimestamp is at.
func slow(at time.Time) decide.InFlight {
	return decide.InFlight{Namespace: "default", Name: "slow", UID: "u-slow", DeletionTimestamp: at}
}

// slowGrace is slow whose eviction gave it grace.
func slowGrace(at time.Time, grace time.Duration) decide.InFlight {
	f := slow(at)
	f.DeletionGracePeriod = grace
	return f
}

// TestLoopEvictionInFlight: a pod evictd evicted that is still terminating
// (as a restarted evictd finds it) withholds the next eviction until its
// deletionTimestamp plus the cleanup timeout; after that, or with none in
// flight, the loop evicts. Dry-run reports what the loop would do: it
// withholds too, and evicts nothing either way.
func TestLoopEvictionInFlight(t *testing.T) {
	// The pass that decides runs at t0+10s (the first tick).
	at := t0.Add(10 * time.Second)
	rfc := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	tests := []struct {
		name     string
		dryRun   bool
		cleanup  time.Duration // 0: the default, 30s
		inFlight []decide.InFlight
		// wantResult is the pass's result; wantEvicted the pods the
		// Evicter was asked to evict.
		wantResult   string
		wantEvicted  []string
		wantWithheld float64
		wantDryRun   float64 // evictd_evictions_not_issued_total{reason="dry-run"}
		wantLog      []string
		wantOverdue  []bool // Status.InFlight's Overdue, by pod
	}{{
		name:        "nothing in flight: evicts",
		wantResult:  "evicted default/hog",
		wantEvicted: []string{"hog"},
	}, {
		name:         "in flight, inside its grace period: withheld",
		inFlight:     []decide.InFlight{slow(at.Add(20 * time.Second))},
		wantResult:   "withheld default/hog (eviction of default/slow in flight; waiting until it has gone, at most until " + rfc(at.Add(50*time.Second)) + ")",
		wantWithheld: 1,
		wantLog:      []string{"level=INFO", "eviction withheld", "terminating=default/slow", "waitUntil=" + rfc(at.Add(50*time.Second)), "pod=default/hog"},
		wantOverdue:  []bool{false},
	}, {
		name:         "in flight, grace period over, inside the cleanup timeout: withheld",
		inFlight:     []decide.InFlight{slow(at.Add(-29 * time.Second))},
		wantResult:   "withheld default/hog (eviction of default/slow in flight; waiting until it has gone, at most until " + rfc(at.Add(time.Second)) + ")",
		wantWithheld: 1,
		wantOverdue:  []bool{false},
	}, {
		name:        "overdue (deletionTimestamp + 30s has passed): evicts",
		inFlight:    []decide.InFlight{slow(at.Add(-30 * time.Second))},
		wantResult:  "evicted default/hog",
		wantEvicted: []string{"hog"},
		wantLog:     []string{"level=WARN", "still terminating past its grace period", "terminating=default/slow"},
		wantOverdue: []bool{true},
	}, {
		name:        "overdue with the Evicter's own cleanup timeout: evicts",
		cleanup:     5 * time.Second,
		inFlight:    []decide.InFlight{slow(at.Add(-6 * time.Second))},
		wantResult:  "evicted default/hog",
		wantEvicted: []string{"hog"},
		wantOverdue: []bool{true},
	}, {
		name:    "one overdue, one not: withheld for the one not",
		cleanup: 5 * time.Second,
		inFlight: []decide.InFlight{
			{Namespace: "default", Name: "stuck", UID: "u-stuck", DeletionTimestamp: at.Add(-time.Hour)},
			slow(at.Add(time.Minute)),
		},
		wantResult:   "withheld default/hog (eviction of default/slow in flight; waiting until it has gone, at most until " + rfc(at.Add(time.Minute+5*time.Second)) + ")",
		wantWithheld: 1,
		wantOverdue:  []bool{true, false},
	}, {
		// A soft eviction with a 300 s grace period, issued 30 s ago.
		name:        "a soft eviction's long grace period does not hold off a hard threshold past the cleanup timeout",
		inFlight:    []decide.InFlight{slowGrace(at.Add(270*time.Second), 300*time.Second)},
		wantResult:  "evicted default/hog",
		wantEvicted: []string{"hog"},
		wantOverdue: []bool{false},
	}, {
		name:         "a soft eviction's long grace period, issued 10 s ago: a hard threshold waits the cleanup timeout from it",
		inFlight:     []decide.InFlight{slowGrace(at.Add(290*time.Second), 300*time.Second)},
		wantResult:   "withheld default/hog (eviction of default/slow in flight; waiting until it has gone, at most until " + rfc(at.Add(20*time.Second)) + ")",
		wantWithheld: 1,
		wantOverdue:  []bool{false},
	}, {
		name:       "dry-run, nothing in flight: would evict",
		dryRun:     true,
		wantResult: "dry-run",
		wantDryRun: 1,
	}, {
		name:         "dry-run, in flight: withheld, as the live loop would",
		dryRun:       true,
		inFlight:     []decide.InFlight{slow(at.Add(20 * time.Second))},
		wantResult:   "withheld default/hog (eviction of default/slow in flight; waiting until it has gone, at most until " + rfc(at.Add(50*time.Second)) + ")",
		wantWithheld: 1,
		wantOverdue:  []bool{false},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, pods, logs := inFlightHarness(t, tt.dryRun, tt.cleanup)
			pods.set(tt.inFlight...)
			h.next("start")
			h.src.set(50 * mi)
			st := h.tick()
			if st.Decision.Outcome != decide.OutcomeEvict {
				t.Fatalf("outcome %s (%s), want evict", st.Decision.Outcome, st.Decision.Reason)
			}
			if st.Result != tt.wantResult {
				t.Errorf("result: got %q, want %q", st.Result, tt.wantResult)
			}
			if got := h.ev.evicted(); !slices.Equal(got, tt.wantEvicted) {
				t.Errorf("evicted %v, want %v", got, tt.wantEvicted)
			}
			if got := testutil.ToFloat64(counter(t, h.reg, "evictd_evictions_withheld_total", "reason", "eviction-in-flight")); got != tt.wantWithheld {
				t.Errorf("evictd_evictions_withheld_total{reason=eviction-in-flight}: got %v, want %v", got, tt.wantWithheld)
			}
			if got := testutil.ToFloat64(counter(t, h.reg, "evictd_evictions_not_issued_total", "eviction_signal", "memory.available", "reason", "dry-run")); got != tt.wantDryRun {
				t.Errorf("evictd_evictions_not_issued_total{reason=dry-run}: got %v, want %v", got, tt.wantDryRun)
			}
			if tt.wantLog != nil {
				if got := logs.lines(tt.wantLog...); len(got) != 1 {
					t.Errorf("%d log lines with %q, want 1:\n%s", len(got), tt.wantLog, strings.Join(logs.lines(), "\n"))
				}
			}
			var overdue []bool
			for i, f := range st.InFlight {
				overdue = append(overdue, f.Overdue)
				if want := tt.inFlight[i].DeletionTimestamp.Add(h.m.cfg.CleanupTimeout); !f.WaitUntil.Equal(want) || f.Pod != tt.inFlight[i].Ref() {
					t.Errorf("status in flight %d: %+v, want pod %s waited for until %s", i, f, tt.inFlight[i].Ref(), want)
				}
			}
			if !slices.Equal(overdue, tt.wantOverdue) {
				t.Errorf("status in flight overdue: got %v, want %v", overdue, tt.wantOverdue)
			}
		})
	}
}

// TestLoopWaitForEvictionInFlightEnds: the wait ends when the pod has gone
// (the next tick evicts), or at its end if the pod is still there (a pass
// of its own, not up to an interval later); the wait is said once at Info
// however many passes it withholds.
func TestLoopWaitForEvictionInFlightEnds(t *testing.T) {
	t.Run("the pod goes", func(t *testing.T) {
		h, pods, logs := inFlightHarness(t, false, 0)
		pods.set(slow(t0.Add(time.Minute)))
		h.next("start")
		h.src.set(50 * mi)
		for i := range 3 {
			if st := h.tick(); !strings.HasPrefix(st.Result, "withheld") {
				t.Fatalf("tick %d: result %q, want withheld", i, st.Result)
			}
		}
		if got := logs.lines("level=INFO", "eviction withheld"); len(got) != 1 {
			t.Errorf("%d Info lines about the wait over three passes, want 1", len(got))
		}
		if got := testutil.ToFloat64(counter(t, h.reg, "evictd_evictions_withheld_total", "reason", "eviction-in-flight")); got != 3 {
			t.Errorf("evictd_evictions_withheld_total{reason=eviction-in-flight}: got %v, want 3", got)
		}
		pods.set()
		if st := h.tick(); st.Result != "evicted default/hog" || st.InFlight != nil {
			t.Fatalf("after the pod went: result %q, in flight %+v; want hog evicted, nothing in flight", st.Result, st.InFlight)
		}
	})
	t.Run("the pod stays", func(t *testing.T) {
		h, pods, _ := inFlightHarness(t, false, 0)
		// Waited for until t0+10s-25s+30s = t0+15s.
		pods.set(slow(t0.Add(-15 * time.Second)))
		h.next("start")
		h.src.set(50 * mi)
		if st := h.tick(); !strings.HasPrefix(st.Result, "withheld") {
			t.Fatalf("t0+10s: result %q, want withheld", st.Result)
		}
		h.clock.Step(5 * time.Second)
		if st := h.next("deadline"); st.Result != "evicted default/hog" {
			t.Fatalf("t0+15s, the wait over: result %q, want hog evicted", st.Result)
		}
	})
}

// evictThen is an Evicter that records, then lets the test change the
// world as the eviction would (the evicted pod in flight).
type evictThen struct {
	*recorder
	then func(decide.Request)
}

func (e evictThen) Evict(ctx context.Context, r decide.Request) error {
	err := e.recorder.Evict(ctx, r)
	e.then(r)
	return err
}

// TestLoopWaitsForItsOwnEviction: within one process, an eviction whose
// pod has not gone when the Evicter stops waiting (ErrNotGoneInTime) is in
// flight for the passes after it, which withhold the next eviction; one
// whose pod the Evicter saw go is not, though the pod source's cache
// still lists it.
func TestLoopWaitsForItsOwnEviction(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		wantResult string
	}{
		{"not gone in time", fmt.Errorf("evict default/hog: %w", decide.ErrNotGoneInTime), "withheld default/hog (eviction of default/hog in flight"},
		{"gone, the cache behind", nil, "evicted default/hog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
			pods := &podsInFlight{fixedPods: defaultPods()}
			h := newHarnessTuned(t, false, ths, nil, defaultStats(), func(_ *Config, d *Deps) {
				d.Pods = pods
				d.Evicter = evictThen{d.Evicter.(*recorder), func(r decide.Request) {
					pods.set(decide.InFlight{Namespace: r.Pod.Namespace, Name: r.Pod.Name, UID: r.Pod.UID, DeletionTimestamp: t0.Add(11 * time.Second)})
				}}
			})
			h.ev.err = tc.err
			h.next("start")
			h.src.set(50 * mi)
			h.tick()
			// The pass the eviction wakes has no fresh observation (the
			// fake clock stands still); the next tick has.
			h.next("wake")
			st := h.tick()
			if !strings.HasPrefix(st.Result, tc.wantResult) {
				t.Errorf("the pass after the eviction: result %q, want it to start with %q", st.Result, tc.wantResult)
			}
		})
	}
}
