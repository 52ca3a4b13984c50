package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/cri"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/manager"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// fakeDisk answers every pod with a stats entry stamped now, with a
// volume "cache" of as many bytes as it has been called times, or err. A
// slow one first waits that long, or for its context: a volume that
// takes that long to walk; cut by its context, it answers only the pods
// of quick (those it walked before), as *cri.DiskStats leaves out the
// pods it did not measure. When calls is set, every call sends its pods
// there as it starts.
type fakeDisk struct {
	calls chan []signals.Pod

	mu    sync.Mutex
	reads int
	err   error
	slow  time.Duration
	quick map[string]bool
	// inSlow is true while a slow call waits.
	inSlow bool
}

func (d *fakeDisk) PodStats(ctx context.Context, now time.Time, pods []signals.Pod) (map[string]signals.PodStats, error) {
	d.mu.Lock()
	d.reads++
	reads, err, slow, quick := d.reads, d.err, d.slow, d.quick
	d.inSlow = slow > 0
	d.mu.Unlock()
	cut := false
	if d.calls != nil {
		d.calls <- pods
	}
	if slow > 0 {
		select {
		case <-time.After(slow):
		case <-ctx.Done():
			err, cut = ctx.Err(), true
		}
		d.mu.Lock()
		d.inSlow = false
		d.mu.Unlock()
	}
	out := map[string]signals.PodStats{}
	for _, p := range pods {
		if !cut || quick[p.UID] {
			out[p.UID] = signals.PodStats{UID: p.UID, Time: now, Volumes: map[string]signals.FsUsage{"cache": {Bytes: int64(reads)}}}
		}
	}
	return out, err
}

func (d *fakeDisk) set(err error, slow time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err, d.slow = err, slow
}

func (d *fakeDisk) state() (reads int, inSlow bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reads, d.inSlow
}

// TestDiskCache follows the disk stats a pass gets through refreshes that
// end between passes (refresh: one ends, for the pods of the step before,
// at the step's time, before its get).
func TestDiskCache(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	a, b := signals.Pod{UID: "a"}, signals.Pod{UID: "b"}
	down := errors.New("runtime down")
	steps := []struct {
		name      string
		at        time.Duration
		refresh   bool
		err       error
		slow      bool
		pods      []signals.Pod
		wantReads int
		wantKick  bool
		wantErr   []string // parts of get's error
		wantTimes map[string]time.Duration
	}{
		{"before the first refresh: no stats, said", 0, false, nil, false, []signals.Pod{a}, 0, true, []string{"not gathered yet"}, nil},
		{"the first refresh", 0, true, nil, false, []signals.Pod{a}, 1, false, nil, map[string]time.Duration{"a": 0}},
		{"a pass 2 s later reuses it", 2 * time.Second, false, nil, false, []signals.Pod{a}, 1, false, nil, map[string]time.Duration{"a": 0}},
		{"a new pod: the stats there are, a refresh asked for", 3 * time.Second, false, nil, false, []signals.Pod{a, b}, 1, true, nil, map[string]time.Duration{"a": 0}},
		{"which reads both", 3 * time.Second, true, nil, false, []signals.Pod{a, b}, 2, false, nil, map[string]time.Duration{"a": 3 * time.Second, "b": 3 * time.Second}},
		{"a gone pod asks for none", 4 * time.Second, false, nil, false, []signals.Pod{b}, 2, false, nil, map[string]time.Duration{"b": 3 * time.Second}},
		{"a failed refresh: its stats and its error", 12 * time.Second, true, down, false, []signals.Pod{b}, 3, false, []string{"runtime down"}, map[string]time.Duration{"b": 12 * time.Second}},
		{"the next refresh clears it", 21 * time.Second, true, nil, false, []signals.Pod{b}, 4, false, nil, map[string]time.Duration{"b": 21 * time.Second}},
		{"a refresh past its deadline keeps the stats before it", 30 * time.Second, true, nil, true, []signals.Pod{b}, 5, false, []string{"past its deadline"}, map[string]time.Duration{"b": 21 * time.Second}},
		{"stats older than max age and deadline: the refresh's error (the gauge and a warning say it: TestDiskCacheKeepsWhatItFinished)", 40 * time.Second, false, nil, false, []signals.Pod{b}, 5, false, []string{"past its deadline"}, map[string]time.Duration{"b": 21 * time.Second}},
		{"a clock gone back: not old", time.Second, false, nil, false, []signals.Pod{b}, 5, false, []string{"past its deadline"}, map[string]time.Duration{"b": 21 * time.Second}},
		{"a refresh that ends: fresh stats", 41 * time.Second, true, nil, false, []signals.Pod{b}, 6, false, nil, map[string]time.Duration{"b": 41 * time.Second}},
	}
	fc := clocktesting.NewFakeClock(t0)
	failed := 0
	c := newDiskCache(9*time.Second, fc, func() { failed++ })
	// A refresh that has not ended a second on is cut: the slow step
	// waits a second, not 10.
	c.deadline = time.Second
	src := &fakeDisk{}
	wantFailed := 0
	for _, s := range steps {
		fc.SetTime(t0.Add(s.at))
		if s.refresh {
			slow := time.Duration(0)
			if s.slow {
				slow = 10 * time.Second
			}
			src.set(s.err, slow)
			c.refresh(t.Context())
			if s.err != nil || s.slow {
				wantFailed++
			}
		}
		got, err := c.get(fc.Now(), s.pods, src)
		if reads, _ := src.state(); reads != s.wantReads {
			t.Errorf("%s: %d reads, want %d", s.name, reads, s.wantReads)
		}
		kicked := len(c.kick) == 1
		if kicked != s.wantKick {
			t.Errorf("%s: refresh asked for %v, want %v", s.name, kicked, s.wantKick)
		}
		if kicked {
			<-c.kick
		}
		if (err == nil) != (len(s.wantErr) == 0) {
			t.Errorf("%s: err %v, want one saying %q", s.name, err, s.wantErr)
		}
		for _, part := range s.wantErr {
			if err != nil && !strings.Contains(err.Error(), part) {
				t.Errorf("%s: err %v, want one saying %q", s.name, err, part)
			}
		}
		if len(got) != len(s.wantTimes) {
			t.Errorf("%s: stats of %d pods, want %d", s.name, len(got), len(s.wantTimes))
		}
		for uid, at := range s.wantTimes {
			if st, ok := got[uid]; !ok || !st.Time.Equal(t0.Add(at)) {
				t.Errorf("%s: pod %s's stats from %v (present %v), want %v", s.name, uid, st.Time.Sub(t0), ok, at)
			}
		}
	}
	if failed != wantFailed {
		t.Errorf("%d refreshes counted as failed, want %d", failed, wantFailed)
	}
}

// TestDiskCacheKeepsWhatItFinished follows refreshes cut by their
// deadline, each having measured some pods only (a neighbour's walk
// slow): the pods measured get their new stats, the others keep theirs
// with their own Time, a pod no longer listed is dropped, and a pod never
// measured has none (and asks for no refresh at every pass). Pods whose
// stats are older than max age and deadline, or that have been listed
// that long without any, are counted, and each warned of once when it
// goes stale, again only after it had fresh stats since.
func TestDiskCacheKeepsWhatItFinished(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	fc := clocktesting.NewFakeClock(t0)
	c := newDiskCache(9*time.Second, fc, nil)
	c.deadline = 50 * time.Millisecond // real time: a cut refresh waits for it
	var logs strings.Builder
	c.log = slog.New(slog.NewTextHandler(&logs, nil))
	stale := -1
	c.stale = func(n int) { stale = n }
	src := &fakeDisk{}
	pod := func(uid string) signals.Pod { return signals.Pod{Namespace: "ns", Name: uid, UID: uid} }
	a, b, gone, never := pod("a"), pod("b"), pod("gone"), pod("never")
	steps := []struct {
		name      string
		at        time.Duration
		refresh   bool
		cut       bool
		quick     []string // the pods a cut refresh measured
		pods      []signals.Pod
		wantTimes map[string]time.Duration
		wantKick  bool
		wantStale int
		wantWarns []string // the pods warned of, so far
	}{
		{"the first refresh", 0, true, false, nil, []signals.Pod{a, b, gone}, map[string]time.Duration{"a": 0, "b": 0, "gone": 0}, false, 0, nil},
		{"cut, a measured: a's new stats, b's old ones, gone dropped, never absent", 9 * time.Second, true, true, []string{"a"},
			[]signals.Pod{a, b, never}, map[string]time.Duration{"a": 9 * time.Second, "b": 0}, false, 0, nil},
		{"cut again: b's stats 18 s old, stale", 18 * time.Second, true, true, []string{"a"},
			[]signals.Pod{a, b, never}, map[string]time.Duration{"a": 18 * time.Second, "b": 0}, false, 1, []string{"b"}},
		{"never listed 10 s without stats: stale too", 19 * time.Second, false, false, nil,
			[]signals.Pod{a, b, never}, map[string]time.Duration{"a": 18 * time.Second, "b": 0}, false, 2, []string{"b", "never"}},
		{"the next pass: no warning again", 20 * time.Second, false, false, nil,
			[]signals.Pod{a, b, never}, map[string]time.Duration{"a": 18 * time.Second, "b": 0}, false, 2, []string{"b", "never"}},
		{"a refresh that ends: all fresh", 27 * time.Second, true, false, nil,
			[]signals.Pod{a, b, never}, map[string]time.Duration{"a": 27 * time.Second, "b": 27 * time.Second, "never": 27 * time.Second}, false, 0, []string{"b", "never"}},
		{"cut, b not measured: not stale yet", 36 * time.Second, true, true, []string{"a", "never"},
			[]signals.Pod{a, b, never}, map[string]time.Duration{"a": 36 * time.Second, "b": 27 * time.Second, "never": 36 * time.Second}, false, 0, []string{"b", "never"}},
		{"stale again: warned again", 37 * time.Second, false, false, nil,
			[]signals.Pod{a, b, never}, map[string]time.Duration{"a": 36 * time.Second, "b": 27 * time.Second, "never": 36 * time.Second}, false, 1, []string{"b", "never", "b"}},
	}
	for _, s := range steps {
		fc.SetTime(t0.Add(s.at))
		if s.refresh {
			slow := time.Duration(0)
			if s.cut {
				slow = time.Minute
			}
			quick := map[string]bool{}
			for _, uid := range s.quick {
				quick[uid] = true
			}
			src.mu.Lock()
			src.slow, src.quick = slow, quick
			src.mu.Unlock()
			// The refresh is for the pods of the pass before: the
			// step's pods are listed first.
			_, _ = c.get(fc.Now(), s.pods, src)
			select {
			case <-c.kick:
			default:
			}
			c.refresh(t.Context())
		}
		got, err := c.get(fc.Now(), s.pods, src)
		if s.refresh && s.cut && (err == nil || !strings.Contains(err.Error(), "past its deadline")) {
			t.Errorf("%s: err %v, want one saying the refresh ran past its deadline", s.name, err)
		}
		kicked := len(c.kick) == 1
		if kicked {
			<-c.kick
		}
		if kicked != s.wantKick {
			t.Errorf("%s: refresh asked for %v, want %v", s.name, kicked, s.wantKick)
		}
		if len(got) != len(s.wantTimes) {
			t.Errorf("%s: stats of %d pods (%v), want %d", s.name, len(got), got, len(s.wantTimes))
		}
		for uid, at := range s.wantTimes {
			if st, ok := got[uid]; !ok || !st.Time.Equal(t0.Add(at)) {
				t.Errorf("%s: pod %s's stats from %v (present %v), want %v", s.name, uid, st.Time.Sub(t0), ok, at)
			}
		}
		if stale != s.wantStale {
			t.Errorf("%s: %d stale pods counted, want %d", s.name, stale, s.wantStale)
		}
		var warned []string
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "level=WARN") {
				i := strings.Index(line, "pod=ns/")
				warned = append(warned, strings.Fields(line[i+len("pod=ns/"):])[0])
			}
		}
		if !slices.Equal(warned, s.wantWarns) {
			t.Errorf("%s: warned of %q, want %q", s.name, warned, s.wantWarns)
		}
	}
	if t.Failed() {
		t.Logf("logs:\n%s", logs.String())
	}
}

// TestDiskCacheRun follows run's schedule: a refresh when a pass asks
// for one (a pod the stats lack), then maxAge after the last one ended.
func TestDiskCacheRun(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	fc := clocktesting.NewFakeClock(t0)
	c := newDiskCache(9*time.Second, fc, nil)
	src := &fakeDisk{calls: make(chan []signals.Pod)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	a, b := signals.Pod{UID: "a"}, signals.Pod{UID: "b"}

	wantRefresh := func(what string, want int) {
		t.Helper()
		select {
		case pods := <-src.calls:
			if len(pods) != want {
				t.Fatalf("%s: a refresh of %d pods, want %d", what, len(pods), want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no refresh", what)
		}
		// The timer is set again once the refresh's stats are kept.
		for !fc.HasWaiters() {
			runtime.Gosched()
		}
	}
	if _, err := c.get(t0, []signals.Pod{a}, src); !errors.Is(err, errDiskPending) {
		t.Errorf("before the first refresh: err %v, want %v", err, errDiskPending)
	}
	wantRefresh("the first pass", 1)
	if got, err := c.get(t0, []signals.Pod{a}, src); err != nil || len(got) != 1 {
		t.Errorf("after the first refresh: %v, %v; want pod a's stats", got, err)
	}
	fc.Step(8 * time.Second)
	select {
	case <-src.calls:
		t.Fatal("a refresh 8 s after the last, want none before 9 s")
	default:
	}
	fc.Step(time.Second)
	wantRefresh("9 s on", 1)
	if _, err := c.get(fc.Now(), []signals.Pod{a, b}, src); err != nil {
		t.Errorf("a new pod: %v", err)
	}
	wantRefresh("a new pod", 2)
}

// cgroupMemory answers every pod with its working set.
type cgroupMemory map[string]int64

func (m cgroupMemory) Read(_ context.Context, pods []signals.Pod, now time.Time, _ signals.PodStatsKinds) (map[string]signals.PodStats, error) {
	out := map[string]signals.PodStats{}
	for _, p := range pods {
		out[p.UID] = signals.PodStats{UID: p.UID, Time: now, MemoryWorkingSet: signals.Int64(m[p.UID])}
	}
	return out, nil
}

// lowMemory observes memory.available at 50 MiB of 10 GiB.
type lowMemory struct{}

func (lowMemory) Observe(_ context.Context, now time.Time) ([]signals.Observation, error) {
	return []signals.Observation{{Signal: signals.MemoryAvailable, Available: 50 << 20, Capacity: 10 << 30, Time: now}}, nil
}

type twoPods []signals.Pod

func (p twoPods) Pods(context.Context) ([]signals.Pod, error) { return p, nil }
func (twoPods) InFlight() []decide.InFlight                   { return nil }

type recordedEvictions struct {
	mu   sync.Mutex
	pods []string
}

func (e *recordedEvictions) Evict(_ context.Context, req decide.Request) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pods = append(e.pods, req.Pod.Name)
	return nil
}

// TestMemoryPassNotDelayedBySlowDiskWalk: while a refresh of the disk
// stats walks a volume that takes 10 s, the pods' stats come at once
// with the last disk stats, and the loop's pass for memory pressure
// evicts without waiting for the walk.
func TestMemoryPassNotDelayedBySlowDiskWalk(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	fc := clocktesting.NewFakeClock(t0)
	pods := twoPods{
		{Namespace: "default", Name: "hog", UID: "u-hog", QOS: signals.BestEffort},
		{Namespace: "default", Name: "calm", UID: "u-calm", QOS: signals.Burstable, MemoryRequest: 512 << 20},
	}
	disk := &fakeDisk{calls: make(chan []signals.Pod)}
	met := metrics.New(prometheus.NewRegistry())
	rc := &runtimeConn{cfg: &config.Config{}, met: met}
	rc.parts.Store(&runtimeParts{disk: disk})
	ps := podStats{cgroups: cgroupMemory{"u-hog": 900 << 20, "u-calm": 100 << 20}, r: rc, disk: newDiskCache(9*time.Second, fc, nil)}
	ps.disk.deadline = time.Minute

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	wg.Go(func() { _ = ps.disk.run(ctx) })

	// The first refresh, asked for by the first pass, is quick.
	if _, err := ps.PodStats(ctx, t0, pods, signals.PodMemory|signals.PodDisk); !errors.Is(err, errDiskPending) {
		t.Fatalf("first pass: %v, want %v", err, errDiskPending)
	}
	<-disk.calls
	for !fc.HasWaiters() {
		runtime.Gosched()
	}
	// The next walks a volume for 10 s.
	disk.set(nil, 10*time.Second)
	fc.Step(9 * time.Second)
	<-disk.calls

	start := time.Now()
	got, err := ps.PodStats(ctx, fc.Now(), pods, signals.PodMemory|signals.PodDisk)
	if err != nil {
		t.Errorf("pod stats during the walk: %v", err)
	}
	for _, p := range pods {
		st := got[p.UID]
		if st.MemoryWorkingSet == nil || !st.Time.Equal(fc.Now()) {
			t.Errorf("pod %s: memory %v at %v, want this pass's", p.Name, st.MemoryWorkingSet, st.Time)
		}
		if v, ok := st.Volumes["cache"]; !ok || v.Bytes != 1 {
			t.Errorf("pod %s: volumes %v, want those of the first refresh", p.Name, st.Volumes)
		}
	}
	if _, inSlow := disk.state(); !inSlow {
		t.Fatalf("the walk ended before the pod stats came (after %s), want them during it", time.Since(start))
	}

	ths, err := thresholds.Parse(thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	ev := &recordedEvictions{}
	passes := make(chan *manager.Status, 16)
	m, err := manager.New(manager.Config{
		HousekeepingInterval: 10 * time.Second, StuckAfter: 30 * time.Second,
		Decider: decide.DeciderConfig{Thresholds: ths.Thresholds, TransitionPeriod: 5 * time.Minute, MaxPodGracePeriodSeconds: 20},
	}, manager.Deps{
		Clock: fc, Sources: []signals.Source{lowMemory{}}, Pods: pods, Stats: ps, Evicter: ev,
		Metrics: met, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		AfterPass: func(st *manager.Status) {
			select {
			case passes <- st:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = m.Run(ctx) })
	select {
	case <-passes:
	case <-time.After(30 * time.Second):
		t.Fatal("no pass in 30 s")
	}
	took := time.Since(start)
	_, inSlow := disk.state()
	ev.mu.Lock()
	evicted := slices.Clone(ev.pods)
	ev.mu.Unlock()
	t.Logf("pod stats and a pass %s after the 10 s walk began; the walk still on: %v", took, inSlow)
	if len(evicted) == 0 || evicted[0] != "hog" {
		t.Errorf("evicted %q, want hog first", evicted)
	}
	if !inSlow {
		t.Errorf("the pass ended %s after the walk began, after the walk; want it during the walk", took)
	}
}

// TestFreshReadsDue: a pass reads afresh only the pods whose disk stats
// are pending, each at most once per interval and at most cri.MaxPending
// at a time; a pod gone from the listing is forgotten.
func TestFreshReadsDue(t *testing.T) {
	whole := signals.PodStats{Containers: []signals.ContainerStats{{Name: "app", Rootfs: &signals.FsUsage{}, Logs: &signals.FsUsage{}}}}
	noLogs := signals.PodStats{Containers: []signals.ContainerStats{{Name: "app", Rootfs: &signals.FsUsage{}}}}
	pod := func(uid string) signals.Pod {
		return signals.Pod{UID: uid, Containers: []signals.Container{{Name: "app"}}}
	}
	uids := func(pods []signals.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.UID)
		}
		return out
	}
	t0 := time.Unix(1_700_000_000, 0)
	f := newFreshReads(9 * time.Second)
	pods := []signals.Pod{pod("new"), pod("whole"), pod("no-logs")}
	disk := map[string]signals.PodStats{"whole": whole, "no-logs": noLogs}
	for _, step := range []struct {
		name string
		at   time.Duration
		pods []signals.Pod
		want []string
	}{
		{"pods without stats or with a part missing", 0, pods, []string{"new", "no-logs"}},
		{"not again within the interval (a fast poll's next pass)", 250 * time.Millisecond, pods, nil},
		{"nor just before it ends", 8999 * time.Millisecond, pods, nil},
		{"again once it has passed", 9 * time.Second, pods, []string{"new", "no-logs"}},
		{"a pod gone is forgotten", 9*time.Second + time.Millisecond, pods[1:], nil},
		{"and read at once if listed again", 9*time.Second + 2*time.Millisecond, pods, []string{"new"}},
	} {
		if got := uids(f.due(t0.Add(step.at), step.pods, disk)); !slices.Equal(got, step.want) {
			t.Errorf("%s: due %q, want %q", step.name, got, step.want)
		}
	}
	var many []signals.Pod
	for i := range cri.MaxPending + 3 {
		many = append(many, pod(fmt.Sprintf("p%d", i)))
	}
	f = newFreshReads(9 * time.Second)
	if got := f.due(t0, many, nil); len(got) != cri.MaxPending {
		t.Errorf("%d pending pods: %d due, want %d", len(many), len(got), cri.MaxPending)
	}
	if got := uids(f.due(t0.Add(time.Second), many, nil)); !slices.Equal(got, []string{"p8", "p9", "p10"}) {
		t.Errorf("the next pass: due %q, want the 3 left over", got)
	}
}
