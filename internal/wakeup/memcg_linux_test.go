package wakeup

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/testing/testalloc"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
	"github.com/evictd/evictd/thresholds"
)

const memcgMount = "/sys/fs/cgroup/memory"

// requireMemcg skips t (fails it under CI=true) unless this is root on a
// machine with cgroup v1 memcg threshold notifications.
func requireMemcg(t *testing.T) {
	t.Helper()
	requireRoot(t)
	if err := memcgAvailable(memcgMount); err != nil {
		skipOrFail(t, "no cgroup v1 memory controller with cgroup.event_control: %v", err)
	}
}

func readUsage(t *testing.T, dir string) int64 {
	t.Helper()
	p := filepath.Join(dir, "memory.usage_in_bytes")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return v
}

// TestMemcgThresholdReal arms a threshold on a real memory cgroup, re-arms
// it, has a child in the cgroup allocate past it and waits for the wake-up;
// afterwards every eventfd is closed and every goroutine gone.
func TestMemcgThresholdReal(t *testing.T) {
	requireMemcg(t)
	fds, goroutines := openFDs(t), runtime.NumGoroutine()
	// Registered first, run last: after the child is gone.
	t.Cleanup(func() { checkNoLeak(t, fds, goroutines) })
	dir := testCgroup(t, memcgMount)
	child := testalloc.Start(t, t, allocEnv, 128)
	child.MoveTo(t, dir)
	u0 := readUsage(t, dir)

	n := NewMemcgThreshold(dir)
	if err := n.Set(u0 + 256<<20); err != nil {
		t.Fatalf("Set: %v", err)
	}
	wakes := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, func() { wakes <- struct{}{} }) }()
	// Re-armed below what the child takes: the old eventfd is replaced.
	want := u0 + 64<<20
	if err := n.Set(want); err != nil {
		t.Fatalf("re-arm: %v", err)
	}
	if got := n.armedLevel(); got != want {
		t.Errorf("Level: got %d, want %d", got, want)
	}
	if err := n.Set(want); err != nil { // same level: nothing to do
		t.Fatalf("Set again: %v", err)
	}
	child.Allocate(t)
	waitWake(t, wakes, "usage crossed the armed level")
	t.Logf("usage %d -> %d, level %d", u0, readUsage(t, dir), want)

	cancel()
	waitDone(t, done)
	if err := n.Set(want); err == nil {
		t.Error("Set after Run ended: got no error, want one")
	}
}

func TestMemcgThresholdCloseStopsRun(t *testing.T) {
	requireMemcg(t)
	fds, goroutines := openFDs(t), runtime.NumGoroutine()
	n := NewMemcgThreshold(memcgMount)
	if err := n.Set(1 << 62); err != nil {
		t.Fatalf("Set: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(context.Background(), func() {}) }()
	if err := n.Set(0); err != nil || n.armedLevel() != 0 {
		t.Errorf("Set(0): got %v, level %d; want disarmed", err, n.armedLevel())
	}
	if err := n.Set(1 << 61); err != nil {
		t.Fatalf("Set: %v", err)
	}
	_ = n.Close()
	waitDone(t, done)
	checkNoLeak(t, fds, goroutines)
}

func TestMemcgThresholdBadDir(t *testing.T) {
	n := NewMemcgThreshold(filepath.Join(t.TempDir(), "nope"))
	err := n.Set(100)
	if err == nil {
		t.Fatal("got no error, want one")
	}
	if want := "memory.usage_in_bytes"; !strings.Contains(err.Error(), want) {
		t.Errorf("got %q, want it to name %s", err, want)
	}
}

// realMemory is a Memory on a real memory cgroup standing for the root,
// with a child in it that takes 160Mi when told to.
type realMemory struct {
	m     *Memory
	dir   string
	child *testalloc.Child
	// The cgroup's working set and inactive_file once m was made.
	workingSet, inactive int64
}

// newRealMemory makes a memory cgroup, moves a testalloc child into it
// and makes a Memory of cfg on it, with a 100Mi memory.available
// threshold, the real clock and t's log.
func newRealMemory(t *testing.T, cfg MemoryConfig) *realMemory {
	t.Helper()
	requireMemcg(t)
	r := &realMemory{dir: testCgroup(t, memcgMount)}
	r.child = testalloc.Start(t, t, allocEnv, 160)
	r.child.MoveTo(t, r.dir)

	q := resource.MustParse("100Mi")
	cfg.Thresholds = []thresholds.Threshold{{Signal: signals.MemoryAvailable, Value: thresholds.Value{Quantity: &q}}}
	cfg.RootDir = r.dir
	cfg.Clock = clock.RealClock{}
	cfg.Log = testLogger(t)
	var err error
	if r.m, err = NewMemory(cfg); err != nil {
		t.Fatal(err)
	}
	cg := host.MemoryCgroup{Dir: r.dir, Root: true}
	if r.workingSet, err = cg.WorkingSet(); err != nil {
		t.Fatal(err)
	}
	if r.inactive, err = cg.InactiveFile(); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMemoryUpdateArmsAtUsageLevel runs Memory on a real cgroup standing
// for the root: Update arms the memory.available threshold at capacity −
// threshold + inactive_file, and the child's allocation past it wakes.
func TestMemoryUpdateArmsAtUsageLevel(t *testing.T) {
	r := newRealMemory(t, MemoryConfig{KernelMemcg: true})
	m := r.m
	if got := m.group.names(); len(got) != 1 {
		t.Fatalf("got sources %q, want one memcg notifier", got)
	}
	// 200Mi available of a capacity that the cgroup's working set fills
	// but for 200Mi.
	capacity := r.workingSet + 200<<20
	m.Update(signals.Observations{signals.MemoryAvailable: {Signal: signals.MemoryAvailable, Available: 200 << 20, Capacity: capacity, Time: time.Now()}})
	want := UsageLevel(capacity, 100<<20, r.inactive)
	if got := m.watches[0].memcg.armedLevel(); got != want {
		t.Errorf("armed at %d, want %d", got, want)
	}

	wakes := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, func() { wakes <- struct{}{} }) }()
	r.child.Allocate(t)
	waitWake(t, wakes, "the child took 160Mi of 200Mi available with a 100Mi threshold")
	cancel()
	waitDone(t, done)
}

// TestMemoryFastPollReal polls a real cgroup's working set: active within
// the margin, it wakes when the child's allocation meets the threshold.
func TestMemoryFastPollReal(t *testing.T) {
	r := newRealMemory(t, MemoryConfig{
		FastPollInterval: 10 * time.Millisecond,
		FastPollMargin:   thresholds.Value{Percentage: 0.5},
	})
	m := r.m
	capacity := r.workingSet + 200<<20
	obs := signals.Observations{signals.MemoryAvailable: {Signal: signals.MemoryAvailable, Available: 200 << 20, Capacity: capacity, Time: time.Now()}}
	m.Update(obs)
	if !m.fast.active.Load() {
		t.Fatalf("100Mi above the threshold, within a margin of half the capacity: fast poll inactive")
	}
	wakes := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, func() { wakes <- struct{}{} }) }()
	r.child.Allocate(t)
	waitWake(t, wakes, "the fast poll saw the threshold met")
	name := m.group.names()[0]
	if got := m.group.count(name); got == 0 {
		t.Errorf("%s: got %d wake-ups counted, want some", name, got)
	}
	// Far from the threshold the poll goes on: no kernel notification
	// would say that memory nears the threshold again.
	obs[signals.MemoryAvailable] = signals.Observation{Signal: signals.MemoryAvailable, Available: capacity, Capacity: capacity, Time: time.Now()}
	m.cfg.FastPollMargin = thresholds.Value{Percentage: 0.1}
	m.Update(obs)
	if !m.fast.active.Load() {
		t.Error("far from the threshold, without memcg notifications: fast poll stopped")
	}
	cancel()
	waitDone(t, done)
}

// TestMemoryMarginWakesBeforeTheThreshold: with memcg notifications and
// the fast poll, a second notifier armed at the margin above the
// threshold wakes a pass as memory comes near it, before the threshold,
// and that pass's Update turns the fast poll on.
func TestMemoryMarginWakesBeforeTheThreshold(t *testing.T) {
	margin := resource.MustParse("150Mi")
	r := newRealMemory(t, MemoryConfig{
		KernelMemcg:      true,
		FastPollInterval: 250 * time.Millisecond,
		FastPollMargin:   thresholds.Value{Quantity: &margin},
	})
	m := r.m
	// 400Mi available: 300Mi above the threshold, beyond the 150Mi margin.
	capacity := r.workingSet + 400<<20
	m.Update(signals.Observations{signals.MemoryAvailable: {Signal: signals.MemoryAvailable, Available: 400 << 20, Capacity: capacity, Time: time.Now()}})
	w := m.watches[0]
	if got, want := w.margin.armedLevel(), UsageLevel(capacity, 250<<20, r.inactive); got != want {
		t.Errorf("margin armed at %d, want %d (threshold 100Mi + margin 150Mi)", got, want)
	}
	if m.fast.active.Load() {
		t.Fatal("300Mi above the threshold, margin 150Mi: the fast poll runs already")
	}
	wakes := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, func() { wakes <- struct{}{} }) }()
	// 160Mi taken of 400Mi: 240Mi left, within the margin, above the
	// threshold. Only the margin's notifier can say so.
	r.child.Allocate(t)
	waitWake(t, wakes, "the child took 160Mi: within the margin, the threshold not met")
	if got := m.group.count("memcg " + w.name + " fast-poll margin on " + r.dir); got == 0 {
		t.Errorf("the margin's notifier counted no wake-up; counts: %v", m.group.names())
	}
	// The pass it wakes sees memory near: the poll starts.
	m.Update(signals.Observations{signals.MemoryAvailable: {Signal: signals.MemoryAvailable, Available: 240 << 20, Capacity: capacity, Time: time.Now()}})
	if !m.fast.active.Load() {
		t.Error("240Mi available, 140Mi above the threshold: the fast poll is not on")
	}
	cancel()
	waitDone(t, done)
}
