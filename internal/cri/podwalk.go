package cri

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/evictd/evictd/signals"
)

// DefaultPodWalkBudget is how long the walk of one pod's log and volume
// directories may take: a pod at DefaultMaxEntries hard links takes about
// 1.2 s on an idle disk.
const DefaultPodWalkBudget = 2 * time.Second

// DefaultWalkers is how many pods' directories are walked at once.
const DefaultWalkers = 4

// CutReason says why a pod's directories were not measured whole.
type CutReason string

// Why a walk was cut.
const (
	// CutTime: the walk of the pod's directories ran past the pod's time
	// budget (DiskStatsConfig.PodWalkBudget). The pod is left out of the
	// result and not walked again for MaxAge.
	CutTime CutReason = "time"
	// CutEntries: the pod's directories hold more entries than its
	// budget (DiskStatsConfig.MaxEntries); those walked past it are not
	// measured.
	CutEntries CutReason = "entries"
)

// errPodBudget is the cause of a pod's walk cut by its time budget.
var errPodBudget = errors.New("pod walk budget spent")

// podWalker measures the pods' log and volume directories: a bounded
// number of pods at once (workers), each pod's within its own time budget
// besides its entry budget, so that no pod's directories, however slow to
// walk, keep the others' from being measured.
type podWalker struct {
	du                   *dirUsage
	kubeletRoot, logsDir string
	budget               time.Duration
	workers              int
	// cut, when set, is called for each pod whose measurement was cut,
	// with the reason; it must not block.
	cut func(CutReason)
	// dirs measures one pod's directories: podDirs; a test's fake.
	dirs func(ctx context.Context, now time.Time, p signals.Pod, names []string) (signals.PodStats, []error)

	mu sync.Mutex
	// timeCuts holds when each pod's walk was last cut by its time
	// budget, by UID: such a pod is not walked again for du.maxAge.
	timeCuts map[string]time.Time
}

func newPodWalker(du *dirUsage, kubeletRoot, logsDir string, budget time.Duration, workers int, cut func(CutReason)) *podWalker {
	w := &podWalker{du: du, kubeletRoot: kubeletRoot, logsDir: logsDir, budget: budget, workers: workers, cut: cut,
		timeCuts: map[string]time.Time{}}
	w.dirs = func(ctx context.Context, now time.Time, p signals.Pod, names []string) (signals.PodStats, []error) {
		return podDirs(ctx, w.du, now, p, names, w.kubeletRoot, w.logsDir)
	}
	return w
}

// podResult is what walking one pod gave: its stats when measured (ok),
// and what failed.
type podResult struct {
	st   signals.PodStats
	ok   bool
	errs []error
}

// walkPods measures the directories of pods, each pod with its container
// names (names[i] are pods[i]'s), at most w.workers pods at a time.
// results[i] is pods[i]'s. A pod is left out (ok false) when its walk was
// cut by its time budget, now or less than du.maxAge before now (an
// error names it and the budget), or by ctx (no error of its own: the
// caller says that ctx ended).
func (w *podWalker) walkPods(ctx context.Context, now time.Time, pods []signals.Pod, names [][]string) []podResult {
	results := make([]podResult, len(pods))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(max(w.workers, 1), len(pods)) {
		wg.Go(func() {
			for i := range next {
				results[i] = w.walkPod(ctx, now, pods[i], names[i])
			}
		})
	}
feed:
	for i := range pods {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return results
}

// walkPod measures one pod's directories within w.budget.
func (w *podWalker) walkPod(ctx context.Context, now time.Time, p signals.Pod, names []string) podResult {
	if ctx.Err() != nil {
		return podResult{}
	}
	if w.cutBefore(p.UID, now) {
		w.count(CutTime)
		return podResult{errs: []error{w.cutError(p)}}
	}
	pctx, cancel := context.WithTimeoutCause(ctx, w.budget, errPodBudget)
	st, errs := w.dirs(pctx, now, p, names)
	budgetSpent := context.Cause(pctx) == errPodBudget
	cancel()
	switch {
	case ctx.Err() != nil:
		// The caller's deadline, not the pod's: left out, not held
		// against it.
		return podResult{}
	case budgetSpent && anyIs(errs, context.DeadlineExceeded):
		w.markCut(p.UID, now)
		w.count(CutTime)
		return podResult{errs: []error{w.cutError(p)}}
	}
	if anyIs(errs, errTooMany) {
		w.count(CutEntries)
	}
	return podResult{st: st, ok: true, errs: errs}
}

// cutError says that p's walk was cut by its budget. Its text is the same
// at every refresh the pod stays cut, so that the loop, which logs an
// error when it changes, does not log it again.
func (w *podWalker) cutError(p signals.Pod) error {
	return fmt.Errorf("pod %s (UID %s): disk usage of its logs and volumes not measured: the walk ran past the pod's budget of %s; not walked again for %s",
		p.Ref(), p.UID, w.budget, w.du.maxAge)
}

func (w *podWalker) count(r CutReason) {
	if w.cut != nil {
		w.cut(r)
	}
}

// cutBefore reports whether uid's walk was cut by its time budget less
// than du.maxAge before now.
func (w *podWalker) cutBefore(uid string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.timeCuts[uid]
	return ok && now.Sub(at) < w.du.maxAge && !now.Before(at)
}

// markCut remembers that uid's walk was cut at now, forgetting the cuts
// that have expired (and all of them past maxCached pods).
func (w *podWalker) markCut(uid string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for u, at := range w.timeCuts {
		if now.Sub(at) >= w.du.maxAge || now.Before(at) {
			delete(w.timeCuts, u)
		}
	}
	if len(w.timeCuts) >= maxCached {
		clear(w.timeCuts)
	}
	w.timeCuts[uid] = now
}

// anyIs reports whether one of errs is target.
func anyIs(errs []error, target error) bool {
	for _, err := range errs {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
