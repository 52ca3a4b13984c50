package manager

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/testing/hosttree"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
	"github.com/evictd/evictd/thresholds"
)

// The benchmarks below measure one pass of the loop on a generated node: a
// proc tree and a cgroup v1 tree (cgroupfs driver) in a temporary directory,
// read by the real signals/host sources, pod discovery and pod stats reader,
// as the agent reads them in standalone mode. The node is under memory
// pressure (memory.available is 50Mi, below the default hard threshold of
// 100Mi and the soft one of 1Gi), so every pass ranks every pod; or, for
// the idle passes, it is not (memory.available is 4Gi), so no pass reads
// a pod's cgroup.

const gi = 1024 * mi

// benchPodCounts are the node sizes measured: the kubelet's default
// maxPods, a dense node (the largest maxPods in common use), a crowded one,
// and a stress size.
var benchPodCounts = []int{110, 250, 1000, 10000}

// The root cgroup's usage on a pressured node (working set 16Gi − 50Mi:
// memory.available is 50Mi) and on an idle one (working set 12Gi:
// memory.available is 4Gi, above the soft threshold of 1Gi).
var (
	pressuredRoot = hosttree.Memory{Usage: 17*gi - 50*mi, InactiveFile: gi}
	idleRoot      = hosttree.Memory{Usage: 13 * gi, InactiveFile: gi}
)

// benchTiers spreads the pods evenly over the three QoS tiers.
var benchTiers = []signals.QOSClass{signals.Guaranteed, signals.Burstable, signals.BestEffort}

// benchNode is a generated node and the configuration that points at it.
type benchNode struct {
	cfg  host.Config
	tree hosttree.Tree
	pods int
}

// newBenchNode writes a node with n pod cgroups under dir, under memory
// pressure (pressuredRoot).
func newBenchNode(tb testing.TB, dir string, n int) benchNode {
	tb.Helper()
	node := hosttree.Node{
		MemTotal: 16 * gi,
		Root:     pressuredRoot,
		// kubepods: limit 15Gi, working set 14Gi − 512Mi.
		KubepodsLimit: 15 * gi,
		Kubepods:      hosttree.Memory{Usage: 14 * gi, InactiveFile: 512 * mi},
	}
	for i := range n {
		ws := int64(16+i*7919%1024) * mi
		node.Pods = append(node.Pods, hosttree.Pod{
			UID:    fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i),
			QOS:    benchTiers[i%len(benchTiers)],
			Memory: hosttree.Memory{Usage: ws + 8*mi, InactiveFile: 8 * mi},
			Tasks:  1 + i%40,
		})
	}
	tree, err := hosttree.Write(dir, node)
	if err != nil {
		tb.Fatal(err)
	}
	kubelet := filepath.Join(dir, "kubelet")
	if err := os.MkdirAll(kubelet, 0o755); err != nil {
		tb.Fatal(err)
	}
	return benchNode{
		cfg: host.Config{
			ProcRoot:       tree.Proc,
			CgroupMount:    tree.Cgroup,
			CgroupRoot:     "/",
			CgroupDriver:   host.DriverCgroupfs,
			KubeletRootDir: kubelet,
		},
		tree: tree,
		pods: n,
	}
}

// setRoot rewrites the node's root cgroup usage: pressuredRoot or idleRoot.
func (n benchNode) setRoot(tb testing.TB, m hosttree.Memory) {
	tb.Helper()
	if err := n.tree.SetRoot(m); err != nil {
		tb.Fatal(err)
	}
}

// discoveredPods is standalone mode's pod source: the pod cgroups.
type discoveredPods struct{ cfg host.Config }

func (p discoveredPods) Pods(context.Context) ([]signals.Pod, error) { return host.DiscoverPods(p.cfg) }

func (discoveredPods) InFlight() []decide.InFlight { return nil }

// listedPods is a pod list read once, as the agent's pods come from the
// API server's cache (internal/podsource) without a file read.
type listedPods []signals.Pod

func (p listedPods) Pods(context.Context) ([]signals.Pod, error) { return p, nil }

func (listedPods) InFlight() []decide.InFlight { return nil }

// cgroupPodStats reads pod usage from the pod cgroups.
type cgroupPodStats struct{ r *host.PodStatsReader }

func (s cgroupPodStats) PodStats(ctx context.Context, now time.Time, pods []signals.Pod, kinds signals.PodStatsKinds) (map[string]signals.PodStats, error) {
	return s.r.Read(ctx, pods, now, kinds)
}

// benchDeciderConfig is the agent's decider configuration with default
// flags (Linux default hard thresholds, enforce-node-allocatable=pods) plus
// a soft memory threshold.
func benchDeciderConfig(tb testing.TB) decide.DeciderConfig {
	tb.Helper()
	p, err := thresholds.Parse(thresholds.Settings{
		Soft:                   map[string]string{"memory.available": "1Gi"},
		SoftGracePeriod:        map[string]string{"memory.available": "1m"},
		EnforceNodeAllocatable: []string{"pods"},
	})
	if err != nil {
		tb.Fatalf("parse thresholds: %v", err)
	}
	return decide.DeciderConfig{
		Thresholds:        p.Thresholds,
		TransitionPeriod:  5 * time.Minute,
		MaxObservationAge: 20 * time.Second,
		Layout:            signals.SingleFs,
	}
}

// newBenchManager wires a Manager to node as cmd/evictd does in standalone
// mode (no Evicter, so dry run), with a fake clock and logs discarded after
// formatting, and makes one pass: the first one reads the mount table and
// logs the pressure change, which later passes do not. The node must be
// under pressure.
func newBenchManager(tb testing.TB, node benchNode) (*Manager, *clocktesting.FakeClock) {
	tb.Helper()
	m, clk := newBenchManagerLogging(tb, node, io.Discard)
	m.pass(context.Background(), "start")
	checkBenchPass(tb, m.Status(), node.pods)
	return m, clk
}

// newBenchManagerLogging is newBenchManager without the first pass, its
// log written as text to w.
func newBenchManagerLogging(tb testing.TB, node benchNode, w io.Writer) (*Manager, *clocktesting.FakeClock) {
	tb.Helper()
	sources, err := host.Sources(node.cfg, nil)
	if err != nil {
		tb.Fatalf("sources: %v", err)
	}
	reader, err := host.NewPodStatsReader(node.cfg)
	if err != nil {
		tb.Fatalf("pod stats reader: %v", err)
	}
	tb.Cleanup(func() { _ = reader.Close() })
	clk := clocktesting.NewFakeClock(t0)
	m, err := New(Config{HousekeepingInterval: 10 * time.Second, StuckAfter: 30 * time.Second, Decider: benchDeciderConfig(tb)}, Deps{
		Clock:   clk,
		Sources: sources,
		Pods:    discoveredPods{node.cfg},
		Stats:   cgroupPodStats{reader},
		Metrics: metrics.New(prometheus.NewRegistry()),
		Log:     slog.New(slog.NewTextHandler(w, nil)),
	})
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return m, clk
}

// checkIdlePass fails unless the pass observed every host signal, listed
// every pod and decided nothing: no threshold met.
func checkIdlePass(tb testing.TB, st *Status, pods int) {
	tb.Helper()
	checkObserved(tb, st)
	if dec := st.Decision; dec.Outcome != decide.OutcomeNone || len(dec.Evaluation.Met) != 0 || len(dec.Candidates) != 0 {
		tb.Fatalf("got outcome %s (%s), %d thresholds met, %d candidates; want none of them", dec.Outcome, dec.Reason, len(dec.Evaluation.Met), len(dec.Candidates))
	}
	if st.Pods != pods {
		tb.Fatalf("got %d pods, want %d", st.Pods, pods)
	}
}

// checkObserved fails unless the pass observed every host signal.
func checkObserved(tb testing.TB, st *Status) {
	tb.Helper()
	observed := map[signals.Signal]bool{}
	for _, o := range st.Observations {
		observed[o.Signal] = true
	}
	for _, s := range []signals.Signal{signals.MemoryAvailable, signals.AllocatableMemoryAvailable, signals.NodeFsAvailable, signals.NodeFsInodesFree, signals.PIDAvailable} {
		if !observed[s] {
			tb.Fatalf("%s not observed; observations %+v", s, st.Observations)
		}
	}
}

// checkBenchPass fails unless the pass observed every host signal, listed
// and measured every pod, and chose one to evict for memory.available.
func checkBenchPass(tb testing.TB, st *Status, pods int) {
	tb.Helper()
	checkObserved(tb, st)
	checkBenchDecision(tb, st.Decision, pods)
	if st.Pods != pods {
		tb.Fatalf("got %d pods, want %d", st.Pods, pods)
	}
}

func checkBenchDecision(tb testing.TB, dec decide.Decision, pods int) {
	tb.Helper()
	if dec.Outcome != decide.OutcomeEvict || dec.Signal != signals.MemoryAvailable {
		tb.Fatalf("got outcome %s for %q (%s), want evict for memory.available", dec.Outcome, dec.Signal, dec.Reason)
	}
	measured := 0
	for _, c := range dec.Candidates {
		if c.HasStats {
			measured++
		}
	}
	if len(dec.Candidates) != pods || measured != pods {
		tb.Fatalf("got %d candidates, %d with stats, want %d of each", len(dec.Candidates), measured, pods)
	}
}

// BenchmarkPass is one pass of the loop. "full" is Manager.pass under
// memory pressure: observe (memory, allocatable memory, nodefs bytes and
// inodes, PIDs, all from the generated files and statfs), discover the
// pods from their cgroups, evaluate the thresholds, read each pod's
// working set (through the files the reader keeps open from the first
// pass), rank, decide, export metrics, log and publish the status. "idle"
// is the same pass on the same node with no threshold met: it reads no
// pod's cgroup file, but still lists the pod cgroups' directories to
// discover the pods. "idle-listed" is an idle pass given the pods as a
// list, as the API server's cache gives them to the agent: it reads no
// file per pod at all. "decide" is
// Decider.Decide alone on the same observations, pods and stats, read once
// before the timer starts: the difference between the two is the cost of
// the file reads and of the loop's bookkeeping. "decide-soft" is the same
// with memory.available at 500Mi, so that only the soft threshold is met
// (its grace period has run out before the timer starts): a soft decision
// also lists every other evictable pod as a fallback.
func BenchmarkPass(b *testing.B) {
	for _, n := range benchPodCounts {
		// The node is written by the first sub-benchmark of its size that
		// runs, so that -bench can pick one size without writing the others.
		dir := b.TempDir()
		var written *benchNode
		node := func(tb testing.TB) benchNode {
			if written == nil {
				w := newBenchNode(tb, dir, n)
				written = &w
			}
			return *written
		}
		b.Run(fmt.Sprintf("full/pods=%d", n), func(b *testing.B) {
			m, clk := newBenchManager(b, node(b))
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				// Each pass is 10s after the last, so its observations are
				// fresh and the hard threshold stays actionable.
				clk.Step(10 * time.Second)
				m.pass(ctx, "tick")
			}
			b.StopTimer()
			checkBenchPass(b, m.Status(), n)
		})
		idle := func(b *testing.B, listed bool) {
			nd := node(b)
			nd.setRoot(b, idleRoot)
			defer nd.setRoot(b, pressuredRoot)
			m, clk := newBenchManagerLogging(b, nd, io.Discard)
			if listed {
				pods, err := host.DiscoverPods(nd.cfg)
				if err != nil {
					b.Fatal(err)
				}
				m.deps.Pods = listedPods(pods)
			}
			ctx := context.Background()
			m.pass(ctx, "start")
			checkIdlePass(b, m.Status(), n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				clk.Step(10 * time.Second)
				m.pass(ctx, "tick")
			}
			b.StopTimer()
			checkIdlePass(b, m.Status(), n)
		}
		b.Run(fmt.Sprintf("idle/pods=%d", n), func(b *testing.B) { idle(b, false) })
		b.Run(fmt.Sprintf("idle-listed/pods=%d", n), func(b *testing.B) { idle(b, true) })
		b.Run(fmt.Sprintf("decide/pods=%d", n), func(b *testing.B) {
			benchDecide(b, node(b), 0)
		})
		b.Run(fmt.Sprintf("decide-soft/pods=%d", n), func(b *testing.B) {
			benchDecide(b, node(b), 500*mi)
		})

	}
}

// benchDecide measures Decider.Decide on what one pass read from node. A
// non-zero memAvailable replaces the observed memory.available; then the
// soft threshold alone is met, and passes are made until its grace period
// has run out before the timer starts.
func benchDecide(b *testing.B, node benchNode, memAvailable int64) {
	obs, pods, stats := readBenchNode(b, node)
	soft := memAvailable != 0
	if soft {
		o := obs[signals.MemoryAvailable]
		o.Available = memAvailable
		obs[signals.MemoryAvailable] = o
	}
	d := decide.NewDecider(benchDeciderConfig(b))
	now := t0
	next := func() decide.Decision {
		// Each pass is 10s after the last, with fresh observations.
		now = now.Add(10 * time.Second)
		for s, o := range obs {
			o.Time = now
			obs[s] = o
		}
		return d.Decide(now, obs, pods, stats)
	}
	for range 7 { // past the soft threshold's 1m grace period
		next()
	}
	var dec decide.Decision
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		dec = next()
	}
	b.StopTimer()
	checkBenchDecision(b, dec, node.pods)
	switch {
	case !soft && !dec.Hard:
		b.Fatalf("got a soft decision (%s), want the hard threshold's", dec.Reason)
	case soft && (dec.Hard || len(dec.Fallbacks) != node.pods-1):
		b.Fatalf("got hard %t with %d fallbacks, want soft with %d", dec.Hard, len(dec.Fallbacks), node.pods-1)
	}
}

// readBenchNode reads node once, as a pass would.
func readBenchNode(tb testing.TB, node benchNode) (signals.Observations, []signals.Pod, map[string]signals.PodStats) {
	tb.Helper()
	ctx := context.Background()
	sources, err := host.Sources(node.cfg, nil)
	if err != nil {
		tb.Fatalf("sources: %v", err)
	}
	obs, err := signals.Collect(ctx, t0, sources)
	if err != nil {
		tb.Fatalf("observe: %v", err)
	}
	pods, err := host.DiscoverPods(node.cfg)
	if err != nil || len(pods) != node.pods {
		tb.Fatalf("discover pods: got %d, want %d (err %v)", len(pods), node.pods, err)
	}
	reader, err := host.NewPodStatsReader(node.cfg)
	if err != nil {
		tb.Fatalf("pod stats reader: %v", err)
	}
	stats, err := reader.Read(ctx, pods, t0, signals.PodMemory|signals.PodProcesses)
	if err != nil {
		tb.Fatalf("pod stats: %v", err)
	}
	return obs, pods, stats
}

// passCost is what a run of passes allocated, per pass, and the live heap
// after it.
type passCost struct {
	allocs, bytes float64
	liveHeap      uint64
}

// measurePasses makes n passes and returns their allocations per pass and
// the live heap after a collection.
func measurePasses(m *Manager, clk *clocktesting.FakeClock, n int) passCost {
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		clk.Step(10 * time.Second)
		m.pass(ctx, "tick")
	}
	runtime.ReadMemStats(&after)
	runtime.GC()
	var live runtime.MemStats
	runtime.ReadMemStats(&live)
	return passCost{
		allocs:   float64(after.Mallocs-before.Mallocs) / float64(n),
		bytes:    float64(after.TotalAlloc-before.TotalAlloc) / float64(n),
		liveHeap: live.HeapAlloc,
	}
}

// growthPods is the node size of BenchmarkPassAllocGrowth: what a pass
// keeps from one pass to the next does not depend on the number of pods, and
// 10 pods keep its 10,101 passes to seconds.
const growthPods = 10

// BenchmarkPassAllocGrowth checks that a pass allocates no more after
// 10,000 passes than at the start, and that the live heap does not grow:
// nothing a pass allocates outlives the passes after it. On one Manager
// with growthPods pods it makes a first pass (in newBenchManager), then
// 10,100 more, and reports the allocations per pass of passes 2–101 ("early") and
// 10,002–10,101 ("late"), and the live heap after a collection at the end
// of each window. B/op and allocs/op are the late window's, per pass; ns/op
// is suppressed. It fails when the late passes allocate more than 1% (plus
// one allocation) above the early ones.
func BenchmarkPassAllocGrowth(b *testing.B) {
	const window, gap = 100, 9900
	node := newBenchNode(b, b.TempDir(), growthPods)
	var early, late passCost
	for b.Loop() {
		m, clk := newBenchManager(b, node)
		early = measurePasses(m, clk, window)
		measurePasses(m, clk, gap)
		late = measurePasses(m, clk, window)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(late.bytes, "B/op")
	b.ReportMetric(late.allocs, "allocs/op")
	b.ReportMetric(early.allocs, "early-allocs/pass")
	b.ReportMetric(late.allocs, "late-allocs/pass")
	b.ReportMetric(early.bytes, "early-B/pass")
	b.ReportMetric(late.bytes, "late-B/pass")
	b.ReportMetric(float64(early.liveHeap), "early-live-B")
	b.ReportMetric(float64(late.liveHeap), "late-live-B")
	if late.allocs > early.allocs*1.01+1 {
		b.Errorf("allocations per pass grew from %.1f (passes 2-101) to %.1f (passes 10002-10101)", early.allocs, late.allocs)
	}
}
