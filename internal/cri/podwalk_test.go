package cri

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/signals"
)

// tenantLinks is how many hard links to one file the tenant's volume
// holds in TestPodWalkBudget.
const tenantLinks = 200_000

// linksPerFile is how many hard links makeLinks makes to one file, below
// ext4's limit of 65,000 links per inode.
const linksPerFile = 50_000

// makeLinks makes n hard links in dir, linksPerFile to each of the files
// it makes there for them (f0, f1, ...), and returns how many files.
func makeLinks(t *testing.T, dir string, n int) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	files := 0
	for i := range n {
		if i%linksPerFile == 0 {
			writeFile(t, filepath.Join(dir, fmt.Sprint("f", files)), 4096)
			files++
		}
		if err := unix.Linkat(fd, fmt.Sprint("f", files-1), fd, fmt.Sprintf("l%07d", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// cutCounts counts the cuts a podWalker reports, by reason.
type cutCounts struct {
	mu sync.Mutex
	n  map[CutReason]int
}

func (c *cutCounts) cut(r CutReason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[CutReason]int{}
	}
	c.n[r]++
}

func (c *cutCounts) get(r CutReason) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[r]
}

// TestPodWalkBudget, on the real filesystem: a tenant's pod whose emptyDir
// holds 200,000 hard links to a few files, beside two pods of a few files,
// walked with a time budget per pod a fifth of what the tenant's walk
// takes. The two are measured; the tenant's is cut (reason time), left out
// and named in the error, and not walked again within max age; past it, it
// is walked (and cut) again.
func TestPodWalkBudget(t *testing.T) {
	kubeletRoot, logsDir := t.TempDir(), t.TempDir()
	pod := func(name string) signals.Pod {
		return signals.Pod{Namespace: "ns", Name: name, UID: "uid-" + name, Containers: []signals.Container{{Name: "app"}},
			LocalVolumes: []string{"cache"}}
	}
	tenant, a, b := pod("tenant"), pod("a"), pod("b")
	volume := func(p signals.Pod) string {
		return filepath.Join(kubeletRoot, "pods", p.UID, "volumes", "kubernetes.io~empty-dir", "cache")
	}
	for _, p := range []signals.Pod{tenant, a, b} {
		writeFile(t, filepath.Join(logsDir, p.Namespace+"_"+p.Name+"_"+p.UID, "app", "0.log"), 4096)
		writeFile(t, filepath.Join(volume(p), "data"), 8192)
	}
	links := filepath.Join(volume(tenant), "links")
	if err := os.Mkdir(links, 0o750); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	files := makeLinks(t, links, tenantLinks)
	made := time.Since(start)
	var err error

	// Walked twice, the budget from the quicker (warm caches): the walks
	// the test cuts come after.
	var walked [2]time.Duration
	var whole signals.FsUsage
	var n int
	for i := range walked {
		start = time.Now()
		whole, n, err = walk(t.Context(), volume(tenant), 10*tenantLinks)
		walked[i] = time.Since(start)
	}
	// The volume, its data, the links' directory and files, and the links.
	if want := 3 + files; err != nil || n != want+tenantLinks || whole.Inodes != int64(want) {
		t.Fatalf("the tenant's volume walked whole: %+v, %d entries, %v; want %d inodes in %d entries", whole, n, err, want, want+tenantLinks)
	}
	warm := min(walked[0], walked[1])
	budget := max(warm/5, 5*time.Millisecond)
	t.Logf("%d hard links made in %s, walked in %s then %s (%s per 100,000 warm); budget per pod %s", tenantLinks, made.Round(time.Millisecond),
		walked[0].Round(time.Millisecond), walked[1].Round(time.Millisecond), (warm * 100_000 / tenantLinks).Round(time.Millisecond), budget)

	const maxAge = 10 * time.Second
	var cuts cutCounts
	w := newPodWalker(newDirUsage(maxAge, DefaultMaxEntries), kubeletRoot, logsDir, budget, 2, cuts.cut)
	var mu sync.Mutex
	walks := map[string]int{}
	dirs := w.dirs
	w.dirs = func(ctx context.Context, now time.Time, p signals.Pod, names []string) (signals.PodStats, []error) {
		mu.Lock()
		walks[p.Name]++
		mu.Unlock()
		return dirs(ctx, now, p, names)
	}
	pods := []signals.Pod{a, tenant, b}
	t0 := time.Now()
	for _, step := range []struct {
		name         string
		at           time.Duration
		wantWalks    int // the tenant's, so far
		wantTimeCuts int
	}{
		{"first", 0, 1, 1},
		{"within max age: not walked again", time.Second, 1, 2},
		{"just before max age ends", maxAge - time.Millisecond, 1, 3},
		{"past max age: walked again", maxAge, 2, 4},
	} {
		now := t0.Add(step.at)
		got, err := measure(t.Context(), w, now, pods, nil, nil, nil)
		for _, p := range []signals.Pod{a, b} {
			st, ok := got[p.UID]
			if !ok || !st.Time.Equal(now) || len(st.Containers) != 1 || st.Containers[0].Logs == nil || st.Volumes["cache"].Inodes != 2 {
				t.Errorf("%s: pod %s: %+v (present %v), want its logs and its volume of 2 inodes at %v", step.name, p.Name, st, ok, now)
			}
		}
		if st, ok := got[tenant.UID]; ok {
			t.Errorf("%s: the tenant's pod measured %+v, want it left out", step.name, st)
		}
		if err == nil || !strings.Contains(err.Error(), "pod ns/tenant") || !strings.Contains(err.Error(), "budget of "+budget.String()) {
			t.Errorf("%s: err %v, want one naming ns/tenant and the budget %s", step.name, err, budget)
		}
		if err != nil && (strings.Contains(err.Error(), "ns/a") || strings.Contains(err.Error(), "ns/b")) {
			t.Errorf("%s: err %v names a pod measured whole", step.name, err)
		}
		mu.Lock()
		if walks["tenant"] != step.wantWalks {
			t.Errorf("%s: the tenant's pod walked %d times, want %d", step.name, walks["tenant"], step.wantWalks)
		}
		mu.Unlock()
		if got := cuts.get(CutTime); got != step.wantTimeCuts {
			t.Errorf("%s: %d cuts for time counted, want %d", step.name, got, step.wantTimeCuts)
		}
		if got := cuts.get(CutEntries); got != 0 {
			t.Errorf("%s: %d cuts for entries counted, want none", step.name, got)
		}
	}
	t.Logf("the whole test's walks: %s", time.Since(t0).Round(time.Millisecond))
}

// TestPodWalkEntriesCut: a pod past its entry budget is measured (what
// fits), and its cut counted for entries.
func TestPodWalkEntriesCut(t *testing.T) {
	kubeletRoot, logsDir := t.TempDir(), t.TempDir()
	p := signals.Pod{Namespace: "ns", Name: "many", UID: "uid-many", LocalVolumes: []string{"cache"}}
	dir := filepath.Join(kubeletRoot, "pods", p.UID, "volumes", "kubernetes.io~empty-dir", "cache")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	makeEmptyFiles(t, dir, 20)
	var cuts cutCounts
	w := newPodWalker(newDirUsage(time.Hour, 10), kubeletRoot, logsDir, time.Minute, 2, cuts.cut)
	got, err := measure(t.Context(), w, time.Now(), []signals.Pod{p}, nil, nil, nil)
	if _, ok := got[p.UID]; !ok || err == nil || !strings.Contains(err.Error(), "too many entries") {
		t.Errorf("stats %+v, err %v; want the pod without its volume, and the error", got, err)
	}
	if cuts.get(CutEntries) != 1 || cuts.get(CutTime) != 0 {
		t.Errorf("cuts %v, want one for entries", cuts.n)
	}
}

// TestWalkPodsBounded walks pods with a fake walk that holds each pod
// until the test lets it go: no more than the walkers at once, every pod
// walked; a pod cut by the caller's context (the refresh's deadline) is
// left out, without an error of its own, and is not held against the pod
// (walked again at the next call).
func TestWalkPodsBounded(t *testing.T) {
	for _, tc := range []struct {
		walkers, pods int
	}{
		{1, 3}, {3, 10}, {4, 2}, {0, 2},
	} {
		t.Run(fmt.Sprintf("%d walkers, %d pods", tc.walkers, tc.pods), func(t *testing.T) {
			w := newPodWalker(newDirUsage(time.Hour, 100), "/nonexistent", "/nonexistent", time.Minute, tc.walkers, nil)
			started, release := make(chan string), make(chan struct{})
			var mu sync.Mutex
			active, most := 0, 0
			w.dirs = func(ctx context.Context, now time.Time, p signals.Pod, _ []string) (signals.PodStats, []error) {
				mu.Lock()
				active++
				most = max(most, active)
				mu.Unlock()
				started <- p.UID
				<-release
				mu.Lock()
				active--
				mu.Unlock()
				return signals.PodStats{UID: p.UID, Time: now}, nil
			}
			var pods []signals.Pod
			for i := range tc.pods {
				pods = append(pods, signals.Pod{Namespace: "ns", Name: fmt.Sprint(i), UID: fmt.Sprint("u", i)})
			}
			bound := min(max(tc.walkers, 1), tc.pods)
			done := make(chan map[string]signals.PodStats)
			go func() {
				got, _ := measure(t.Context(), w, time.Now(), pods, nil, nil, nil)
				done <- got
			}()
			for range bound {
				<-started
			}
			select {
			case uid := <-started:
				t.Errorf("pod %s started beside %d others, want at most %d at once", uid, bound, bound)
			case <-time.After(50 * time.Millisecond):
			}
			close(release)
			for range tc.pods - bound {
				<-started
			}
			got := <-done
			if len(got) != tc.pods {
				t.Errorf("%d pods measured, want %d", len(got), tc.pods)
			}
			if most > bound {
				t.Errorf("%d walks at once, want at most %d", most, bound)
			}
		})
	}

	t.Run("the caller's deadline", func(t *testing.T) {
		var cuts cutCounts
		w := newPodWalker(newDirUsage(time.Hour, 100), "/nonexistent", "/nonexistent", time.Minute, 2, cuts.cut)
		ctx, cancel := context.WithCancel(t.Context())
		slow := map[string]bool{"u-slow": true}
		w.dirs = func(ctx context.Context, now time.Time, p signals.Pod, _ []string) (signals.PodStats, []error) {
			if slow[p.UID] {
				cancel() // the deadline comes during this pod's walk
				<-ctx.Done()
				return signals.PodStats{UID: p.UID, Time: now}, []error{fmt.Errorf("usage of x: %w", ctx.Err())}
			}
			return signals.PodStats{UID: p.UID, Time: now}, nil
		}
		pods := []signals.Pod{{Namespace: "ns", Name: "fast", UID: "u-fast"}, {Namespace: "ns", Name: "slow", UID: "u-slow"},
			{Namespace: "ns", Name: "later", UID: "u-later"}}
		w.workers = 1
		now := time.Now()
		got, err := measure(ctx, w, now, pods, nil, nil, nil)
		if _, ok := got["u-fast"]; !ok || len(got) != 1 {
			t.Errorf("measured %v, want the fast pod alone", got)
		}
		if err == nil || !strings.Contains(err.Error(), "2 of 3 pods not measured before the deadline") || strings.Contains(err.Error(), "ns/slow") {
			t.Errorf("err %v, want one saying 2 of 3 pods were not measured, naming none", err)
		}
		if cuts.get(CutTime) != 0 {
			t.Errorf("%d cuts for time counted, want none: the deadline is the caller's", cuts.get(CutTime))
		}
		delete(slow, "u-slow")
		got, err = measure(t.Context(), w, now.Add(time.Second), pods, nil, nil, nil)
		if len(got) != 3 || err != nil {
			t.Errorf("the next call: measured %v, %v; want all 3", got, err)
		}
	})
}

// TestNewDiskStatsRejects: a negative budget, deadline, age, entry cap or
// number of walkers is refused, naming the value; zero takes the default.
func TestNewDiskStatsRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  DiskStatsConfig
		want string
	}{
		{"pod walk budget", DiskStatsConfig{PodWalkBudget: -time.Second}, "pod walk budget -1s"},
		{"pending deadline", DiskStatsConfig{PendingDeadline: -time.Millisecond}, "pending deadline -1ms"},
		{"max age", DiskStatsConfig{MaxAge: -time.Minute}, "max age -1m0s"},
		{"walkers", DiskStatsConfig{Walkers: -2}, "walkers -2"},
		{"max entries", DiskStatsConfig{MaxEntries: -5}, "max entries -5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewDiskStats(&Client{}, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewDiskStats(%+v): %v, want an error saying %q", tc.cfg, err, tc.want)
			}
		})
	}
	ds, err := NewDiskStats(&Client{}, DiskStatsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.walker.budget != DefaultPodWalkBudget || ds.walker.workers != DefaultWalkers {
		t.Errorf("defaults: budget %s, %d walkers; want %s, %d", ds.walker.budget, ds.walker.workers, DefaultPodWalkBudget, DefaultWalkers)
	}
}
