package evict

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
)

// fakeCache is a PodCache whose pods the test sets.
type fakeCache struct {
	mu   sync.Mutex
	pods map[string]*v1.Pod // by namespace/name
}

func (c *fakeCache) CachedPod(namespace, name string) (*v1.Pod, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pod, ok := c.pods[namespace+"/"+name]
	return pod, ok
}

// set puts pod in the cache, or with pod nil, empties it.
func (c *fakeCache) set(pod *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods = map[string]*v1.Pod{}
	if pod != nil {
		c.pods[pod.Namespace+"/"+pod.Name] = pod
	}
}

// cachedPod is the pod web of namespace shop with uid, as the cache holds
// it; mutate changes it.
func cachedPod(uid string, mutate ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: types.UID(uid)},
		Spec:       v1.PodSpec{NodeName: nodeName},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func terminating(p *v1.Pod) {
	p.DeletionTimestamp = ptr.To(metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))
	p.DeletionGracePeriodSeconds = ptr.To[int64](30)
}

// TestPodWatchLook: what one look at the cache makes of the evicted pod
// (UID "mine"), given what the cache held before the eviction and what it
// holds now. Missing or replaced counts as gone only once the cache has
// held the pod; before that the cache may just be behind.
func TestPodWatchLook(t *testing.T) {
	finished := func(p *v1.Pod) { p.Status.Phase = v1.PodFailed }
	for _, tc := range []struct {
		name        string
		before, now *v1.Pod
		wantGone    bool
		wantState   string
	}{
		{"held, still running", cachedPod("mine"), cachedPod("mine"), false, "not terminating"},
		{"held, terminating", cachedPod("mine"), cachedPod("mine", terminating), false, "terminating since 2026-03-01T12:00:00Z with a grace period of 30s"},
		{"held, finished", cachedPod("mine"), cachedPod("mine", finished), true, "finished"},
		{"held, then missing", cachedPod("mine"), nil, true, "gone"},
		{"held, then replaced", cachedPod("mine"), cachedPod("theirs"), true, "replaced"},
		{"not held before, held now", nil, cachedPod("mine", terminating), false, "terminating since"},
		{"not held before, finished now", nil, cachedPod("mine", finished), true, "finished"},
		{"never held: missing", nil, nil, false, "not in evictd's pod cache, which has not held it yet"},
		{"never held: an older pod of the same name", cachedPod("older"), cachedPod("older"), false,
			"holds another pod of the same name (UID older) and has not held this one yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeCache{}
			c.set(tc.before)
			e := New(Config{Pods: c}, nil, nil, nil)
			w := e.watch(&signals.Pod{Namespace: "shop", Name: "web", UID: "mine"})
			c.set(tc.now)
			gone, state := w.look()
			if gone != tc.wantGone || !strings.Contains(state, tc.wantState) {
				t.Errorf("look = %v, %q; want %v, %q", gone, state, tc.wantGone, tc.wantState)
			}
		})
	}

	// Seen at a later look counts as much as seen before the eviction.
	c := &fakeCache{}
	e := New(Config{Pods: c}, nil, nil, nil)
	w := e.watch(&signals.Pod{Namespace: "shop", Name: "web", UID: "mine"})
	for i, step := range []struct {
		now      *v1.Pod
		wantGone bool
	}{{nil, false}, {cachedPod("mine", terminating), false}, {nil, true}} {
		c.set(step.now)
		if gone, state := w.look(); gone != step.wantGone {
			t.Errorf("look %d = %v (%s), want %v", i, gone, state, step.wantGone)
		}
	}
}

// TestPodWatchLookOwnTerminal: a pod whose terminal status evictd wrote
// itself read Failed before its containers stopped; it has finished only
// once the kubelet removed it (its delete with grace period 0, which a
// finalizer may outlive) or it is gone.
func TestPodWatchLookOwnTerminal(t *testing.T) {
	failed := func(p *v1.Pod) { p.Status.Phase = v1.PodFailed }
	removed := func(p *v1.Pod) { p.DeletionGracePeriodSeconds = ptr.To[int64](0) }
	held := func(p *v1.Pod) { p.Finalizers = []string{"batch.kubernetes.io/job-tracking"} }
	for _, tc := range []struct {
		name      string
		now       *v1.Pod
		wantGone  bool
		wantState string
	}{
		{"Failed, not yet deleted", cachedPod("mine", failed), false, "not terminating"},
		{"Failed, terminating", cachedPod("mine", failed, terminating), false, "terminating since"},
		{"Failed, removed (grace 0), held by a finalizer", cachedPod("mine", failed, terminating, removed, held), true, "finished and removed, held by finalizers"},
		{"Failed, removed (grace 0), about to go", cachedPod("mine", failed, terminating, removed), false, "terminating since"},
		{"running again, removed", cachedPod("mine", terminating, removed), false, "terminating since"},
		{"gone", nil, true, "gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeCache{}
			c.set(cachedPod("mine"))
			e := New(Config{Pods: c}, nil, nil, nil)
			w := e.watch(&signals.Pod{Namespace: "shop", Name: "web", UID: "mine"})
			w.ownTerminal = true
			c.set(tc.now)
			gone, state := w.look()
			if gone != tc.wantGone || !strings.Contains(state, tc.wantState) {
				t.Errorf("look = %v, %q; want %v, %q", gone, state, tc.wantGone, tc.wantState)
			}
		})
	}
}

// TestWaitGoneByTheClock: the wait looks at the cache every PollInterval
// of the injected clock, returns at the first look that finds the pod
// gone, and times out after CleanupTimeout with what the last look saw.
func TestWaitGoneByTheClock(t *testing.T) {
	for _, tc := range []struct {
		name      string
		goneAfter int // looks; 0: never
		wantLooks int
		wantErr   error
	}{
		{"gone at the third look", 3, 3, nil},
		{"gone at once", 1, 1, nil},
		{"never gone", 0, 7, decide.ErrNotGoneInTime}, // at 0, 10m, ... 60m
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeCache{}
			c.set(cachedPod("mine", terminating))
			fc := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			e := New(Config{Pods: c, Clock: fc, CleanupTimeout: time.Hour, PollInterval: 10 * time.Minute}, nil, nil, nil)
			w := e.watch(&signals.Pod{Namespace: "shop", Name: "web", UID: "mine"})
			if tc.goneAfter == 1 {
				c.set(nil)
			}
			done := make(chan error, 1)
			go func() { done <- e.waitGone(context.Background(), e.log, w, decide.Request{}) }()
			looks := 1
			for {
				select {
				case err := <-done:
					if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) || looks != tc.wantLooks {
						t.Fatalf("waitGone = %v after %d looks, want %v after %d", err, looks, tc.wantErr, tc.wantLooks)
					}
					if err != nil && !strings.Contains(err.Error(), "the pod is terminating since 2026-03-01T12:00:00Z") {
						t.Errorf("waitGone = %v, want the last look's state", err)
					}
					return
				case <-time.After(time.Millisecond):
				}
				if !fc.HasWaiters() {
					continue
				}
				if looks+1 == tc.goneAfter {
					c.set(nil)
				}
				fc.Step(10 * time.Minute)
				looks++
			}
		})
	}
}

// notifyingCache is a fakeCache that says when it changes.
type notifyingCache struct {
	fakeCache
	cmu     sync.Mutex
	changed chan struct{}
}

func (c *notifyingCache) Changed() <-chan struct{} {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.changed
}

func (c *notifyingCache) setAndNotify(pod *v1.Pod) {
	c.set(pod)
	c.cmu.Lock()
	defer c.cmu.Unlock()
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// TestWaitGoneLooksOnChange: with a cache that notifies its changes, the
// wait looks as soon as the pod changes, not at its next poll (the fake
// clock never moves here).
func TestWaitGoneLooksOnChange(t *testing.T) {
	terminating := func(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Unix(0, 0)} }
	c := &notifyingCache{}
	c.set(cachedPod("mine", terminating))
	fc := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e := New(Config{Pods: c, Clock: fc, CleanupTimeout: time.Hour, PollInterval: 10 * time.Minute}, nil, nil, nil)
	w := e.watch(&signals.Pod{Namespace: "shop", Name: "web", UID: "mine"})
	done := make(chan error, 1)
	go func() { done <- e.waitGone(context.Background(), e.log, w, decide.Request{}) }()
	waitFor := func(cond func() bool) {
		deadline := time.Now().Add(5 * time.Second)
		for !cond() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	waitFor(fc.HasWaiters) // the wait's poll timer: it has looked once
	c.setAndNotify(nil)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("waitGone = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waitGone did not look again when the cache changed")
	}
}

// TestWrittenOver: a foreign DisruptionTarget condition counts as written
// over evictd's only in a version of the pod newer than evictd's own write;
// an older one is a cache that has not caught up.
func TestWrittenOver(t *testing.T) {
	e := New(Config{}, nil, nil, nil)
	e.marked.Store(types.UID("mine"), mark{rv: "1042"})
	for _, tc := range []struct {
		name, uid, rv string
		want          bool
	}{
		{name: "the cache before evictd's write", uid: "mine", rv: "1041", want: false},
		{name: "evictd's own write", uid: "mine", rv: "1042", want: false},
		{name: "a write after evictd's", uid: "mine", rv: "1043", want: true},
		{name: "a longer version is newer", uid: "mine", rv: "10420", want: true},
		{name: "no write recorded for the pod", uid: "other", rv: "1", want: true},
		{name: "a version that does not compare", uid: "mine", rv: "abc", want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(tc.uid), ResourceVersion: tc.rv}}
			if got := e.writtenOver(p); got != tc.want {
				t.Errorf("writtenOver(rv %s) = %t, want %t", tc.rv, got, tc.want)
			}
		})
	}
}

// TestTornDown: after deleting the pod itself, the eviction waits until
// the runtime has no ready sandbox of it, asking every PollInterval; an
// error of the runtime ends the wait at once, and so does CleanupTimeout
// by the injected clock.
func TestTornDown(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := decide.Request{Eviction: decide.Eviction{Pod: &signals.Pod{Namespace: "default", Name: "big", UID: "uid-big"}}}
	for _, tc := range []struct {
		name    string
		answers []bool // ready, in order; the last one repeats
		err     error
		asks    int
		waited  time.Duration
	}{
		{"stopped at the first look", []bool{false}, nil, 1, 0},
		{"stopped at the third", []bool{true, true, false}, nil, 3, 2 * time.Second},
		{"the runtime does not answer", []bool{true}, errors.New("CRI ListPodSandbox: unavailable"), 1, 0},
		{"never stopped: the bound", []bool{true}, nil, 11, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := clocktesting.NewFakeClock(start)
			asks := 0
			ev := New(Config{NodeName: nodeName, Pods: &fakeCache{}, Clock: fc, PollInterval: time.Second, CleanupTimeout: 10 * time.Second,
				SandboxReady: func(_ context.Context, uid string) (bool, error) {
					if uid != r.Pod.UID {
						t.Errorf("asked about %q, want %q", uid, r.Pod.UID)
					}
					asks++
					return tc.answers[min(asks, len(tc.answers))-1], tc.err
				}}, nil, nil, testLog(t))
			done := make(chan struct{})
			go func() { ev.tornDown(t.Context(), testLog(t), r); close(done) }()
			for {
				select {
				case <-done:
					if asks != tc.asks || fc.Since(start) != tc.waited {
						t.Errorf("asked %d times over %s, want %d over %s", asks, fc.Since(start), tc.asks, tc.waited)
					}
					return
				case <-time.After(time.Millisecond):
				}
				if fc.HasWaiters() {
					fc.Step(time.Second)
				}
			}
		})
	}
}
