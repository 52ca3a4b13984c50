package manager

import (
	"reflect"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// storagePods are a pod over its ephemeral-storage limit, a pod within it,
// a pod over it without disk stats, and the memory hog of the harness.
func storagePods() (fixedPods, fixedStats) {
	disk := func(uid string, rootfs int64) signals.PodStats {
		return signals.PodStats{UID: uid, Time: t0, MemoryWorkingSet: signals.Int64(10 * mi), Containers: []signals.ContainerStats{
			{Name: "app", Rootfs: &signals.FsUsage{Bytes: rootfs, Inodes: 1}, Logs: &signals.FsUsage{Bytes: mi, Inodes: 1}}}}
	}
	limited := func(name string) signals.Pod {
		return signals.Pod{Namespace: "default", Name: name, UID: "u-" + name, QOS: signals.Burstable,
			EphemeralStorageLimit: 100 * mi, Containers: []signals.Container{{Name: "app", EphemeralStorageLimit: 100 * mi}}}
	}
	hog := signals.Pod{Namespace: "default", Name: "hog", UID: "u-hog", QOS: signals.BestEffort}
	pods := fixedPods{limited("writer"), limited("tidy"), limited("unmeasured"), hog}
	stats := fixedStats{
		"u-writer": disk("u-writer", 200*mi),
		"u-tidy":   disk("u-tidy", 10*mi),
		// unmeasured: memory only, no container disk stats.
		"u-unmeasured": {UID: "u-unmeasured", Time: t0, MemoryWorkingSet: signals.Int64(10 * mi)},
		"u-hog":        {UID: "u-hog", Time: t0, MemoryWorkingSet: signals.Int64(900 * mi)},
	}
	return pods, stats
}

func TestLoopEvictsPodOverItsEphemeralStorageLimitWithoutAnyThreshold(t *testing.T) {
	pods, stats := storagePods()
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	h := newHarnessWith(t, false, ths, pods, stats)
	st := h.next("start")
	if st.Decision.Outcome != decide.OutcomeLocalStorage {
		t.Fatalf("outcome: got %s (%s), want %s", st.Decision.Outcome, st.Decision.Reason, decide.OutcomeLocalStorage)
	}
	// The fake pod never goes, so each pass (woken at once) evicts it again.
	got := onlyNames(h.ev.evicted())
	if want := []string{"writer"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("evicted: got %v, want %v (not the pod without disk stats, not the one within its limit)", got, want)
	}
	h.ev.mu.Lock()
	req := h.ev.requests[0]
	h.ev.mu.Unlock()
	wantMsg := "Pod ephemeral local storage usage exceeds the total limit of containers 100Mi. "
	if req.Signal != decide.SignalPodEphemeralStorageLimit || !req.Hard || req.GracePeriod != 1 || req.Message != wantMsg || req.Annotations != nil {
		t.Errorf("request: got %+v, want signal %s, hard, grace 1, message %q, no annotations", req, decide.SignalPodEphemeralStorageLimit, wantMsg)
	}
	if got := testutil.ToFloat64(counter(t, h.reg, "evictd_evictions_total", "eviction_signal", "ephemeralpodfs.limit", "result", "evicted")); got < 1 {
		t.Errorf("evictd_evictions_total{eviction_signal=ephemeralpodfs.limit,result=evicted}: got %v, want at least 1", got)
	}
}

func TestLoopLocalStorageEvictionTakesThePassFromThresholds(t *testing.T) {
	pods, stats := storagePods()
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	// memory.available is met from the first pass: set before Run starts.
	h := newHarnessTuned(t, false, ths, pods, stats, func(_ *Config, d *Deps) {
		d.Sources[0].(*script).set(50 * mi)
	})
	st := h.next("start")
	if st.Decision.Outcome != decide.OutcomeLocalStorage {
		t.Fatalf("outcome: got %s, want %s", st.Decision.Outcome, decide.OutcomeLocalStorage)
	}
	if !st.Decision.Evaluation.Pressure[signals.MemoryPressure].Active {
		t.Errorf("memory pressure not evaluated in a local-storage pass")
	}
	// While the writer stays over its limit the memory hog is never chosen.
	if got, want := onlyNames(h.ev.evicted()), []string{"writer"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("evicted: got %v, want only %v", got, want)
	}
}

func TestLoopPodWithoutDiskStatsIsNotEvictedForItsLimit(t *testing.T) {
	pods, stats := storagePods()
	delete(stats, "u-writer")
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	h := newHarnessWith(t, false, ths, fixedPods{pods[0], pods[2]}, stats)
	st := h.next("start")
	if st.Decision.Outcome != decide.OutcomeNone {
		t.Fatalf("outcome: got %s (%s), want %s", st.Decision.Outcome, st.Decision.Reason, decide.OutcomeNone)
	}
	if got := h.ev.evicted(); len(got) != 0 {
		t.Fatalf("evicted %v, want nothing: missing stats never evict", got)
	}
}

func TestLoopDryRunReportsLocalStorageEvictions(t *testing.T) {
	pods, stats := storagePods()
	h := newHarnessWith(t, true, nil, pods, stats)
	st := h.next("start")
	if st.Decision.Outcome != decide.OutcomeLocalStorage || st.Result != "dry-run default/writer" {
		t.Fatalf("dry run: got outcome %s result %q, want %s / dry-run default/writer", st.Decision.Outcome, st.Result, decide.OutcomeLocalStorage)
	}
	if got := h.ev.evicted(); len(got) != 0 {
		t.Fatalf("dry run called the evicter for %v", got)
	}
	if got := testutil.ToFloat64(counter(t, h.reg, "evictd_evictions_not_issued_total", "eviction_signal", "ephemeralpodfs.limit", "reason", "dry-run")); got != 1 {
		t.Errorf("evictd_evictions_not_issued_total{reason=dry-run}: got %v, want 1", got)
	}
}

// onlyNames is names without repeats, in first-seen order.
func onlyNames(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// flipAgent is a LocalStorageAgent whose answer the test sets.
type flipAgent struct{ by atomic.Bool }

func (a *flipAgent) ByKubelet() bool { return a.by.Load() }

func TestLoopLeavesLocalStorageToTheKubeletWhileItSaysSo(t *testing.T) {
	pods, stats := storagePods()
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	agent := &flipAgent{}
	agent.by.Store(true)
	var rec *kindsRecorder
	h := newHarnessTuned(t, false, ths, pods, stats, func(_ *Config, d *Deps) {
		d.LocalStorage = agent
		rec = &kindsRecorder{PodStatsSource: d.Stats}
		d.Stats = rec
	})
	// Left to the kubelet: the writer over its limit is not evicted, and a
	// pass with no threshold met reads no pod stats at all.
	st := h.next("start")
	if st.Decision.Outcome == decide.OutcomeLocalStorage || len(h.ev.evicted()) != 0 {
		t.Fatalf("left to the kubelet: outcome %s (%s), evicted %v; want no local-storage eviction", st.Decision.Outcome, st.Decision.Reason, onlyNames(h.ev.evicted()))
	}
	if got := rec.last(); got != 0 {
		t.Errorf("left to the kubelet, nothing met: read %s, want nothing", got)
	}
	// The kubelet stops reporting the capacity: evictd evicts the writer.
	agent.by.Store(false)
	st = h.tick()
	if st.Decision.Outcome != decide.OutcomeLocalStorage {
		t.Fatalf("evictd's again: outcome %s (%s), want %s", st.Decision.Outcome, st.Decision.Reason, decide.OutcomeLocalStorage)
	}
	if got, want := onlyNames(h.ev.evicted()), []string{"writer"}; !reflect.DeepEqual(got, want) {
		t.Errorf("evicted: got %v, want %v", got, want)
	}
	if got := rec.last(); !got.Has(signals.PodDisk) {
		t.Errorf("evictd's: read %s, want disk usage", got)
	}
}
