package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/evictd/evictd/internal/testing/testnode"
)

// bench runs the scenario on one node.
type bench struct {
	cfg  config
	n    *testnode.Node
	logf func(string, ...any)
	// threshold is the hard threshold of the runs, MiB.
	threshold int
}

func (b *bench) mem() memcg { return memcg{dir: b.n.PodsMemoryCgroup(), v2: b.cfg.v2} }

// setSide configures the node for s: the kubelet's thresholds (a restart,
// unless the node was started with them) and evictd running or not.
func (b *bench) setSide(ctx context.Context, s side, started bool) error {
	if err := b.n.StopEvictd(); err != nil {
		return err
	}
	if !started {
		b.logf("restarting the kubelet for side %s", s.name)
		if err := b.n.RestartKubelet(ctx, s.kubelet); err != nil {
			return err
		}
	}
	if s.evictd != nil {
		b.logf("starting evictd %s", strings.Join(s.evictd, " "))
		if err := b.n.StartEvictd(ctx, s.evictd...); err != nil {
			return err
		}
	}
	return b.waitQuiet(ctx, s)
}

// result is what one run measured.
type result struct {
	side       string
	threshold  int // MiB: the headroom from the threshold to the kubepods limit
	rate, rep  int
	baseMiB    int64
	crossed    time.Time // available first below the threshold, by the harness's poll
	relief     time.Time // available back at or above the threshold after the crossing, by the harness's poll
	issued     time.Time // eviction issued, by the evictor's log
	seen       time.Time // eviction seen by the harness's watch
	terminated time.Time // "workload: terminated" in the container's log: the CRI log's stamp, when containerd read the line
	received   time.Time // that line's "received at": the hog's own time of its SIGTERM (zero from an older workload)
	passStart  time.Time // evictd: the deciding pass's start (its wake-up), by its decision log
	decided    time.Time // evictd: the decision logged, after the pass's reads; the CRI stop follows at once
	// signalPath and toSignal are evictd's first stop signal of the hog:
	// how it went (direct: evictd's own through pidfds; runtime: the CRI
	// stop) and its time from the decision, by evictd's clock (the
	// change of evictd_eviction_signal_latency_seconds over the run).
	signalPath string
	toSignal   time.Duration
	// predicted: evictd decided by time to exhaustion, before the
	// threshold was met (its decision log says so).
	predicted bool
	// took: the deciding pass's stages, from its decision line.
	took         stages
	evicted      bool
	oomKills     int64  // the machine's oom_kill (/proc/vmstat), after − before
	treeOOMKills int64  // oom_kill of memory.oom_control over the kubepods tree, after − before
	reason       string // the container's terminated reason
	peakWS       int64
	peakUsage    int64
	// rampMiBPerSec is the working set's growth on the way to the
	// crossing, over the second half of the ramp from the base: the rate
	// the race was run at. From the crossing on the hog is being stopped
	// or, near the limit, slowed by the kernel's reclaim, so the growth
	// to the peak says less of the rate asked for.
	rampMiBPerSec float64
	samples       int
}

func ms(from, to time.Time) string {
	if from.IsZero() || to.IsZero() {
		return "-"
	}
	return strconv.FormatInt(to.Sub(from).Milliseconds(), 10)
}

func (r result) line() string {
	signal := "-"
	if r.signalPath != "" {
		signal = strconv.FormatFloat(float64(r.toSignal.Microseconds())/1000, 'f', 2, 64) + "ms"
	}
	return fmt.Sprintf("run side=%s threshold=%dMiB rate=%d rep=%d base=%dMiB cross->relief=%sms cross->issued=%sms cross->seen=%sms cross->terminated=%sms cross->pass=%sms pass->decided=%sms decided->signal=%s signal_path=%s predicted=%t decided->terminated=%sms cross->received=%sms received->logged=%sms evicted=%t oom_kill=%d kubepods_oom_kill=%d reason=%s peak_ws=%dMiB peak_usage=%dMiB ramp=%.0fMiB/s samples=%d",
		r.side, r.threshold, r.rate, r.rep, r.baseMiB, ms(r.crossed, r.relief), ms(r.crossed, r.issued), ms(r.crossed, r.seen), ms(r.crossed, r.terminated),
		ms(r.crossed, r.passStart), ms(r.passStart, r.decided), signal, cmp.Or(r.signalPath, "-"), r.predicted, ms(r.decided, r.terminated),
		ms(r.crossed, r.received), ms(r.received, r.terminated),
		r.evicted, r.oomKills, r.treeOOMKills, r.reason, r.peakWS>>20, r.peakUsage>>20, r.rampMiBPerSec, r.samples)
}

// watchState is what the pod watch has seen, with the time it saw it.
type watchState struct {
	mu         sync.Mutex
	pod        *v1.Pod
	evictedAt  time.Time // deletionTimestamp, DisruptionTarget or Failed/Evicted
	endedAt    time.Time // container terminated, pod terminal or deleted
	deletedPod bool
}

func (w *watchState) observe(ev watch.Event) {
	pod, ok := ev.Object.(*v1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pod = pod
	evicted := pod.DeletionTimestamp != nil || pod.Status.Reason == "Evicted" || ev.Type == watch.Deleted
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue {
			evicted = true
		}
	}
	if evicted && w.evictedAt.IsZero() {
		w.evictedAt = now
	}
	ended := ev.Type == watch.Deleted || pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			ended = true
		}
	}
	if ended && w.endedAt.IsZero() {
		w.endedAt = now
	}
	if ev.Type == watch.Deleted {
		w.deletedPod = true
	}
}

// watchPod watches the pod named name from now on; stop ends the watch.
func watchPod(ctx context.Context, pods typedcorev1.PodInterface, name string) (ws *watchState, stop func(), err error) {
	wctx, cancel := context.WithCancel(ctx)
	w, err := pods.Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("watch pod: %w", err)
	}
	ws = &watchState{}
	go func() {
		for ev := range w.ResultChan() {
			ws.observe(ev)
		}
	}()
	return ws, func() { w.Stop(); cancel() }, nil
}

func (w *watchState) get() (pod *v1.Pod, evictedAt, endedAt time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod, w.evictedAt, w.endedAt
}

// startTimeout bounds a hog pod's wait to start running.
const startTimeout = 3 * time.Minute

// runOnce runs the hog once at rate on side s and measures it.
func (b *bench) runOnce(ctx context.Context, s side, rate, rep int) (result, error) {
	r := result{side: s.name, threshold: b.threshold, rate: rate, rep: rep}
	mem := b.mem()
	if err := b.waitQuiet(ctx, s); err != nil {
		return r, err
	}
	limit, err := mem.limit()
	if err != nil {
		return r, err
	}
	before, err := mem.sample()
	if err != nil {
		return r, err
	}
	oomBefore, err := vmstatOOMKills()
	if err != nil {
		return r, err
	}
	treeBefore := mem.treeOOMKills()
	var signalledBefore signalTotals
	if s.evictd != nil {
		if signalledBefore, err = readSignalTotals(ctx, b.n); err != nil {
			return r, err
		}
	}
	// In a guest every amount of memory is scaled (guest.go); the run is
	// labelled with the native ones.
	threshold := int64(b.cfg.scaled(b.threshold)) << 20
	baseBelow := int64(b.cfg.scaled(b.cfg.baseBelow)) << 20
	r.baseMiB = (limit - threshold - baseBelow - before.workingSet) >> 20
	total := limit>>20 + int64(b.cfg.scaled(b.cfg.overshoot))
	hogRate := b.cfg.scaled(rate)

	name := fmt.Sprintf("hog-%s-%d-%d-%d", s.name, b.threshold, rate, rep)
	pod := testnode.Resources(b.n.Pod(name, "alloc",
		"--base", strconv.FormatInt(r.baseMiB, 10), "--mib", strconv.FormatInt(total, 10), "--rate", strconv.Itoa(hogRate)),
		"64Mi", "", b.cfg.hogCPU)
	pod.Spec.RestartPolicy = b.cfg.restart
	pods := b.n.Admin().CoreV1().Pods(pod.Namespace)

	ws, stopWatch, err := watchPod(ctx, pods, name)
	if err != nil {
		return r, err
	}
	defer stopWatch()

	// Both evictors' loops have a phase set by their last pass, and the
	// node quieted down at one; without a random delay the hog would
	// always cross at the same point of the housekeeping interval.
	if b.cfg.jitter > 0 {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(rand.N(b.cfg.jitter)):
		}
	}
	start := time.Now()
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return r, fmt.Errorf("create pod: %w", err)
	}
	defer b.deletePod(context.WithoutCancel(ctx), pod.Namespace, name)

	var logFile *os.File
	defer func() {
		if logFile != nil {
			logFile.Close()
		}
	}()
	tick := time.NewTicker(b.cfg.poll)
	defer tick.Stop()
	// The run's time counts from the hog's start: until then, the pod
	// has startTimeout to start (a guest under emulation takes seconds).
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	running := false
	var crossWS int64
	// The ramp is timed from the first sample past halfway from the base
	// to the crossing (midWS at midAt) to the crossing.
	mid := limit - threshold - baseBelow/2
	var midWS int64
	var midAt time.Time
poll:
	for {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-deadline.C:
			b.logf("run %s: timed out; the pod was %s", name, podSummary(ws.get()))
			break poll
		case now := <-tick.C:
			smp, err := mem.sample()
			if err != nil {
				return r, err
			}
			r.samples++
			if smp.workingSet > r.peakWS {
				r.peakWS = smp.workingSet
			}
			r.peakUsage = max(r.peakUsage, smp.usage)
			if midAt.IsZero() && smp.workingSet >= mid {
				midWS, midAt = smp.workingSet, now
			}
			below := limit-smp.workingSet < threshold
			if below && r.crossed.IsZero() {
				r.crossed, crossWS = now, smp.workingSet
			}
			if !below && !r.crossed.IsZero() && r.relief.IsZero() {
				r.relief = now
			}
			p, _, endedAt := ws.get()
			if !running && p != nil && p.Status.Phase != v1.PodPending {
				running = true
				deadline.Reset(b.cfg.runTimeout + time.Duration(total/int64(hogRate))*time.Second)
			}
			if logFile == nil && p != nil && p.UID != "" {
				// Kept open: the kubelet may remove the file with the pod.
				logFile, _ = os.Open(filepath.Join(b.n.PodLogsDir(),
					fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), "app", "0.log"))
			}
			if !endedAt.IsZero() && (!below || now.Sub(endedAt) > 3*time.Second) {
				break poll
			}
		}
	}
	r.treeOOMKills = mem.treeOOMKills() - treeBefore
	r.rampMiBPerSec = rampBetween(midWS, midAt, crossWS, r.crossed)
	// The kubelet reports an OOM kill and an eviction's status a moment
	// after the container ends.
	time.Sleep(2 * time.Second)
	oomAfter, err := vmstatOOMKills()
	if err != nil {
		return r, err
	}
	r.oomKills = oomAfter - oomBefore

	p, seen, _ := ws.get()
	if !r.crossed.IsZero() && seen.After(r.crossed) {
		r.seen = seen
	}
	if p != nil {
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				r.reason = t.Reason
			} else if t := cs.LastTerminationState.Terminated; t != nil {
				r.reason = t.Reason
			}
		}
	}
	if logFile != nil {
		if _, err := logFile.Seek(0, io.SeekStart); err == nil {
			b, _ := io.ReadAll(logFile)
			for line := range strings.SplitSeq(string(b), "\n") {
				if strings.Contains(line, "workload: terminated") {
					r.terminated, _ = criStamp(line)
					r.received, _ = receivedStamp(line)
				}
			}
		}
	}
	if s.evictd != nil {
		// evictd logs "evicted" once the pod is gone, or that it has not
		// gone yet when its wait ends; the eviction was issued when the
		// API server accepted it, which the watch sees as the pod's
		// deletionTimestamp and DisruptionTarget condition. In a guest
		// under emulation the pod goes seconds after the watch saw that:
		// the line is waited for; also when evictd logged its decision
		// but the harness saw no crossing (time to exhaustion decides
		// before it, and then the watch's sighting is not kept).
		d, decided := decisionLine(b.n.LogPath("evictd"), start, pod.Namespace+"/"+name)
		if decided {
			r.decided, r.passStart, r.predicted, r.took = d.at, d.passStart, d.predicted, d.took
		}
		r.evicted = b.evictdEvicted(ctx, start, pod.Namespace+"/"+name, !r.seen.IsZero() || decided)
		if r.evicted {
			r.issued = r.seen
		}
		after, err := readSignalTotals(ctx, b.n)
		if err != nil {
			return r, err
		}
		if path, d, ok := signalledBetween(signalledBefore, after); ok {
			r.signalPath, r.toSignal = path, d
		}
	} else {
		// The kubelet's eviction shows in the pod's status (reason
		// Evicted, a DisruptionTarget condition), and it was issued when
		// the eviction manager decided to evict, which it logs.
		r.evicted = !r.seen.IsZero() || (p != nil && p.Status.Reason == "Evicted")
		if r.evicted {
			r.issued, _ = firstLine(b.n.LogPath("kubelet"), start, klogStamp, "Eviction manager: must evict pod(s) to reclaim")
		}
	}
	if r.crossed.IsZero() {
		b.logf("run %s: the harness never saw available < %d MiB (peak working set %d MiB)", name, threshold>>20, r.peakWS>>20)
	}
	return r, nil
}

// evictdEvicted reports whether evictd's log says it evicted pod
// (namespace/name) since start: "evicted", or "eviction issued; the pod has
// not gone yet". When wait is set (the watch saw the eviction, or evictd
// logged its decision) the line is waited for, up to evictedLogWait.
func (b *bench) evictdEvicted(ctx context.Context, start time.Time, pod string, wait bool) bool {
	deadline := time.Now().Add(evictedLogWait)
	for {
		for _, msg := range []string{"msg=evicted", `msg="eviction issued; the pod has not gone yet"`} {
			if _, ok := firstLine(b.n.LogPath("evictd"), start, slogStamp, msg, "pod="+pod); ok {
				return true
			}
		}
		if !wait || time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// evictedLogWait bounds evictdEvicted's wait for evictd's line.
const evictedLogWait = 15 * time.Second

func podSummary(p *v1.Pod, evictedAt, endedAt time.Time) string {
	if p == nil {
		return "never seen"
	}
	return fmt.Sprintf("phase %s reason %q deleting %t evicted-seen %t ended-seen %t", p.Status.Phase, p.Status.Reason,
		p.DeletionTimestamp != nil, !evictedAt.IsZero(), !endedAt.IsZero())
}

// deletePod deletes the pod at once and waits until it is gone.
func (b *bench) deletePod(ctx context.Context, namespace, name string) {
	pods := b.n.Admin().CoreV1().Pods(namespace)
	zero := int64(0)
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
		b.logf("delete pod %s: %v", name, err)
	}
	for range 300 {
		if _, err := pods.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.logf("pod %s still exists 30 s after its deletion", name)
}

// waitQuiet waits until the kubepods working set is back down, no pod of
// an earlier run is left and the node has no memory pressure condition.
func (b *bench) waitQuiet(ctx context.Context, s side) error {
	mem := b.mem()
	const low = 256 << 20
	var last string
	for range 1200 { // 4 minutes
		if err := ctx.Err(); err != nil {
			return err
		}
		smp, err := mem.sample()
		if err != nil {
			return err
		}
		node, err := b.n.Admin().CoreV1().Nodes().Get(ctx, b.n.Name(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		var pressure []string
		for _, c := range node.Status.Conditions {
			if c.Status != v1.ConditionTrue {
				continue
			}
			if c.Type == v1.NodeMemoryPressure || (s.evictd != nil && c.Type == "EvictdMemoryPressure") {
				pressure = append(pressure, string(c.Type))
			}
		}
		if smp.workingSet < low && len(pressure) == 0 {
			return nil
		}
		last = fmt.Sprintf("working set %d MiB, pressure %v", smp.workingSet>>20, pressure)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return errors.New("the node did not quiet down in 4 minutes: " + last)
}

// rampBetween is the growth in MiB/s from ws0 at t0 to ws1 at t1; 0 when
// either is missing or t1 is not after t0 (the base and the crossing in
// one sample).
func rampBetween(ws0 int64, t0 time.Time, ws1 int64, t1 time.Time) float64 {
	if t0.IsZero() || t1.IsZero() || !t1.After(t0) {
		return 0
	}
	return float64(ws1-ws0) / float64(1<<20) / t1.Sub(t0).Seconds()
}
