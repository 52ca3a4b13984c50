package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/testing/testnode"
)

// TestMemoryNode runs the memory, allocatable and PID scenarios on one
// real node: a kubelet with its thresholds off and evictd beside it, the
// kubepods cgroup limited to 2 GiB by systemReserved.
func TestMemoryNode(t *testing.T) {
	n := testnode.StartForTest(t, testnode.Options{Name: "e2e-memory"})
	t.Run("soft threshold: the hog goes first, after the grace period", func(t *testing.T) { softMemory(t, n, nativeScale) })
	cleanPods(t, n)
	t.Run("allocatable: evicted before the kubepods cgroup OOMs", func(t *testing.T) { allocatable(t, n) })
	cleanPods(t, n)
	t.Run("pids: the fork-heavy pod", func(t *testing.T) { pids(t, n) })
	cleanPods(t, n)
	t.Run("a Failed/Evicted status written beside the kubelet", func(t *testing.T) { evictedPhase(t, n) })
	cleanPods(t, n)
}

// memoryScale sizes a memory scenario for its node. The scenarios' sizes
// in MiB are chosen for a kubepods cgroup of testnode.DefaultPodsMemory,
// and their allocation rates for this machine's native speed; a node with
// a smaller kubepods cgroup, or in an emulated guest (testvm), where
// copying memory is far slower, scales them.
type memoryScale struct {
	// mem is the node's kubepods limit over DefaultPodsMemory.
	mem float64
	// rate multiplies the allocation rates.
	rate float64
	// slow multiplies the waits for what the kubelet does (an evicted
	// pod's going), never evictd's latencies.
	slow float64
}

// nativeScale is the scale of a node on this machine with the default
// kubepods limit: the sizes as written.
var nativeScale = memoryScale{mem: 1, rate: 1, slow: 1}

// mib scales a size in MiB.
func (s memoryScale) mib(v int) int { return int(float64(v) * s.mem) }

// mibArg is mib as a workload argument.
func (s memoryScale) mibArg(v int) string { return strconv.Itoa(s.mib(v)) }

// quantity is mib as a resource quantity, "<n>Mi".
func (s memoryScale) quantity(v int) string { return strconv.Itoa(s.mib(v)) + "Mi" }

// rateArg scales an allocation rate in MiB/s, as a workload argument.
func (s memoryScale) rateArg(v int) string { return strconv.Itoa(max(1, int(float64(v)*s.rate))) }

// wait scales a wait for the kubelet.
func (s memoryScale) wait(d time.Duration) time.Duration { return time.Duration(float64(d) * s.slow) }

// sampler watches the kubepods memory cgroup every 20 ms from the test's
// side, to time a threshold crossing independently of evictd.
type sampler struct {
	mu       sync.Mutex
	crossed  time.Time // first sample with available below the threshold
	minAvail int64
}

func sample(t *testing.T, n *testnode.Node, threshold int64) *sampler {
	s := &sampler{minAvail: 1 << 62}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	limit := podsMemoryLimit(t, n)
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				ws, err := workingSet(n)
				if err != nil {
					continue
				}
				s.mu.Lock()
				avail := limit - ws
				s.minAvail = min(s.minAvail, avail)
				if avail < threshold && s.crossed.IsZero() {
					s.crossed = now
				}
				s.mu.Unlock()
			}
		}
	}()
	return s
}

func (s *sampler) crossedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.crossed
}

// deletion is what a watch saw of a pod's eviction: its deletion, or,
// first, evictd's terminal status (phase Failed with evictd's
// DisruptionTarget condition, the pod not yet deleted), which the kubelet
// stops the pod on and after which evictd deletes it.
type deletion struct {
	at time.Time // when the watch first saw either
	// terminal is true when it saw evictd's terminal status first: the
	// pod is then deleted in phase Failed, which the API server does at
	// once, and the grace period evictd gave is in its log (evictedGrace).
	terminal bool
	grace    int64 // the deletion's deletionGracePeriodSeconds, or -1
	// issued is when the eviction was issued, in whole seconds (truncated):
	// deletionTimestamp less the grace period, or the DisruptionTarget
	// condition's transition time of the terminal status.
	issued time.Time
}

// watchDeletion records when the pod's eviction is first seen.
func watchDeletion(t *testing.T, n *testnode.Node, ns, name string) <-chan deletion {
	w, err := n.Admin().CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan deletion, 1)
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				continue
			}
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			if p.DeletionTimestamp != nil {
				d := deletion{at: time.Now()}
				if p.DeletionGracePeriodSeconds != nil {
					d.grace = *p.DeletionGracePeriodSeconds
				}
				d.issued = p.DeletionTimestamp.Add(-time.Duration(d.grace) * time.Second)
				ch <- d
				return
			}
			if c := evictdTarget(p); c != nil && p.Status.Phase == v1.PodFailed {
				ch <- deletion{at: time.Now(), terminal: true, grace: -1, issued: c.LastTransitionTime.Time}
				return
			}
		}
	}()
	return ch
}

// evictdTarget is the pod's DisruptionTarget condition if evictd set it.
func evictdTarget(p *v1.Pod) *v1.PodCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == decide.DisruptionTargetReason {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// evictedGrace is the grace period evictd gave the eviction d saw of pod
// ns/name: the deletion's, or, after evictd's terminal status, the one its
// last decision to evict the pod or line of the eviction names in its log
// (text or JSON), which the eviction carries (the stop through the
// runtime, or the kubelet's, is bounded by it).
func evictedGrace(t *testing.T, d deletion, ns, name string, log func() string) int64 {
	t.Helper()
	if !d.terminal {
		return d.grace
	}
	grace := regexp.MustCompile(`gracePeriodSeconds"?[=:](\d+)`)
	ref := ns + "/" + name
	var g int64 = -1
	// The last such line: an earlier scenario on the node may have
	// evicted a pod of the same name.
	poll(t, "evictd's decision to evict "+ref, 30*time.Second, func() (bool, string) {
		lines := strings.Split(log(), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			line := lines[i]
			if !evictLine(line) ||
				!strings.Contains(line, "pod="+ref+" ") && !strings.Contains(line, `"pod":"`+ref+`"`) {
				continue
			}
			if m := grace.FindStringSubmatch(line); m != nil {
				g, _ = strconv.ParseInt(m[1], 10, 64)
				return true, ""
			}
		}
		return false, "no line"
	})
	return g
}

// evictdLog is the log of the evictd the test started on n.
func evictdLog(n *testnode.Node) func() string {
	return func() string { return tail(n.LogPath("evictd"), 2000) }
}

// podHistory is what a watch on one pod saw of its DisruptionTarget
// condition until the pod was deleted: each reason in the order it came
// and the pod's last state, the DELETED event's.
type podHistory struct {
	reasons []string
	last    *v1.Pod
	// events is each watch event, when it came, with the pod's phase and
	// DisruptionTarget reason, for the log.
	events []string
}

// watchHistory watches the pod from before it exists and sends its
// history once the API server has deleted it.
func watchHistory(t *testing.T, n *testnode.Node, ns, name string) <-chan podHistory {
	w, err := n.Admin().CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan podHistory, 1)
	t.Cleanup(w.Stop)
	go func() {
		var h podHistory
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			h.last = p
			reason := ""
			for _, c := range p.Status.Conditions {
				if c.Type == v1.DisruptionTarget {
					reason = c.Reason
				}
			}
			h.events = append(h.events, fmt.Sprintf("%s %s phase=%s deleting=%v reason=%s",
				time.Now().Format("15:04:05.000"), ev.Type, p.Status.Phase, p.DeletionTimestamp != nil, reason))
			for _, c := range p.Status.Conditions {
				if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue &&
					(len(h.reasons) == 0 || h.reasons[len(h.reasons)-1] != c.Reason) {
					h.reasons = append(h.reasons, c.Reason)
				}
			}
			if ev.Type == watch.Deleted {
				ch <- h
				return
			}
		}
	}()
	return ch
}

// checkEvictedByEvictd fails t unless the pod, in its last state before the
// API server removed it, carries evictd's DisruptionTarget condition.
func checkEvictedByEvictd(t *testing.T, h podHistory) {
	t.Helper()
	if h.last == nil {
		t.Fatal("the watch saw nothing of the pod")
	}
	var last *v1.PodCondition
	for i, c := range h.last.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			last = &h.last.Status.Conditions[i]
		}
	}
	t.Logf("%s: DisruptionTarget reasons in order %q; last state %s; the watch saw:\n%s", h.last.Name, h.reasons, podSummary(h.last), strings.Join(h.events, "\n"))
	if last == nil || last.Status != v1.ConditionTrue || last.Reason != decide.DisruptionTargetReason || !strings.HasPrefix(last.Message, "The node was low on resource: ") {
		t.Errorf("%s's last state has DisruptionTarget %+v, want True, reason %s and evictd's message", h.last.Name, last, decide.DisruptionTargetReason)
	}
}

// softMemory: a soft threshold on allocatableMemory.available with a 6 s
// grace period, crossed by a BestEffort hog beside a Guaranteed, a
// Burstable and a critical pod, sized by sc for the node.
func softMemory(t *testing.T, n *testnode.Node, sc memoryScale) {
	const grace = 6 * time.Second
	soft := sc.quantity(900)
	startEvictd(t, n,
		"--eviction-hard=memory.available<"+sc.quantity(100),
		"--eviction-soft=allocatableMemory.available<"+soft,
		"--eviction-soft-grace-period=allocatableMemory.available="+grace.String(),
		"--eviction-max-pod-grace-period=7",
		"--eviction-pressure-transition-period=5s")
	g := run(t, n, labelled(testnode.Resources(n.Pod("guaranteed", "alloc", "--mib", sc.mibArg(200)), sc.quantity(300), sc.quantity(300), "100m")))
	if g.Status.QOSClass != v1.PodQOSGuaranteed {
		t.Fatalf("guaranteed: QoS %s", g.Status.QOSClass)
	}
	crit := labelled(n.Pod("critical", "alloc", "--mib", sc.mibArg(150)))
	crit.Namespace = "kube-system"
	crit.Spec.PriorityClassName = "system-node-critical"
	run(t, n, crit)
	b := run(t, n, labelled(testnode.Resources(n.Pod("burstable", "alloc", "--mib", sc.mibArg(250)), sc.quantity(64), "", "")))
	if b.Status.QOSClass != v1.PodQOSBurstable {
		t.Fatalf("burstable: QoS %s", b.Status.QOSClass)
	}
	if ok, desc := conditionIs(t, n, memoryCondition, v1.ConditionFalse); !ok {
		t.Fatalf("before the hog: %s", desc)
	}

	s := sample(t, n, int64(sc.mib(900))<<20)
	deleted := watchDeletion(t, n, "default", "hog")
	history := watchHistory(t, n, "default", "hog")
	hog := labelled(n.Pod("hog", "alloc", "--mib", sc.mibArg(900), "--rate", sc.rateArg(100)))
	hog, err := n.Admin().CoreV1().Pods("default").Create(t.Context(), hog, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, "the crossing", 60*time.Second, func() (bool, string) { return !s.crossedAt().IsZero(), "not crossed" })
	crossed := s.crossedAt()
	// The condition and the taint come at once, the eviction only after
	// the grace period.
	poll(t, "EvictdMemoryPressure=True", 3*time.Second, func() (bool, string) {
		return conditionIs(t, n, memoryCondition, v1.ConditionTrue)
	})
	poll(t, "the taint", 3*time.Second, func() (bool, string) { return hasTaint(t, n, memoryTaint), "no taint" })
	var d deletion
	select {
	case d = <-deleted:
	case <-time.After(40 * time.Second):
		t.Fatalf("hog not evicted within 40 s of the crossing")
	}
	after := d.at.Sub(crossed)
	t.Logf("crossing → eviction %s (soft grace period %s); deletion grace %d s", after.Round(time.Millisecond), grace, d.grace)
	if after < grace-200*time.Millisecond {
		t.Errorf("evicted %s after the crossing, before the %s grace period", after, grace)
	}
	if after > grace+5*time.Second {
		t.Errorf("evicted %s after the crossing, long after the %s grace period", after, grace)
	}
	if g := evictedGrace(t, d, "default", "hog", evictdLog(n)); g != 7 {
		t.Errorf("hog deleted with grace %d s, want min(max-pod-grace 7, its own 30) = 7", g)
	}
	poll(t, "the hog to go", sc.wait(30*time.Second), func() (bool, string) { return gone(t, n, "default", "hog") })
	select {
	case h := <-history:
		checkEvictedByEvictd(t, h)
	case <-time.After(10 * time.Second):
		t.Error("the watch never saw the hog deleted")
	}
	evs := evictedEvents(t, n, "default", "hog")
	if len(evs) != 1 {
		t.Fatalf("hog: %d Evicted events, want 1", len(evs))
	}
	msg := evs[0].Message
	for _, want := range []string{"The node was low on resource: memory.", "Threshold quantity: " + soft, "Container app was using"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Evicted event %q lacks %q", msg, want)
		}
	}
	if evs[0].Type != v1.EventTypeWarning {
		t.Errorf("Evicted event type %s, want Warning", evs[0].Type)
	}
	checkFlightRecord(t, n, "default/hog", string(hog.UID), msg, 7)
	alive(t, n, "default", "guaranteed")
	alive(t, n, "default", "burstable")
	alive(t, n, "kube-system", "critical")
	for _, p := range []string{"guaranteed", "burstable"} {
		if k := evictions(t, n, "default", p); k != 0 {
			t.Errorf("%s: %d Evicted events", p, k)
		}
	}
	// Cleared only after the 5 s transition period, with one transition
	// each way. The period runs from the last time a threshold was met,
	// which is at least when the eviction was issued (the hog still held
	// its memory); not from when the test saw the hog gone, which comes
	// after its memory was released, a moment evictd does not observe
	// while its eviction waits for the pod (as the kubelet's eviction
	// manager does not while it waits for the pod's cleanup).
	poll(t, "EvictdMemoryPressure=False", 30*time.Second, func() (bool, string) {
		return conditionIs(t, n, memoryCondition, v1.ConditionFalse)
	})
	// lastTransitionTime is the pass that cleared it, in whole seconds
	// (truncated). The last time evictd knew a threshold met is at least
	// the pass that decided the eviction (its decision log's observedAt),
	// which comes before the eviction is issued by the pod's re-read and
	// the API calls.
	c := condition(t, n, memoryCondition)
	decided := lastDecision(t, n, "default/hog")
	if earliest := decided.Truncate(time.Second).Add(5 * time.Second); c == nil || c.LastTransitionTime.Time.Before(earliest) {
		t.Errorf("condition %+v cleared before the 5 s transition period after the pass that decided the eviction (%s)", c, decided.Format(time.RFC3339Nano))
	}
	if c != nil {
		t.Logf("eviction decided on the pass of %s, issued at %s; condition False since %s (transition period 5 s)",
			decided.Format(time.RFC3339Nano), d.issued.Format(time.RFC3339), c.LastTransitionTime.Format(time.RFC3339))
	}
	poll(t, "the taint to go", 5*time.Second, func() (bool, string) { return !hasTaint(t, n, memoryTaint), "taint still there" })
	if v := metric(t, n, `evictd_evictions_total{eviction_signal="allocatableMemory.available",result="evicted",signal="allocatableMemory.available"}`); v != 1 {
		t.Errorf("evictd_evictions_total for allocatableMemory.available = %v, want 1", v)
	}
}

func allocatable(t *testing.T, n *testnode.Node) {
	began := time.Now()
	startEvictd(t, n,
		"--eviction-hard=memory.available<500Mi",
		"--eviction-pressure-transition-period=5s")
	oomKilled := watchOOMKills(t, n)
	s := sample(t, n, 500<<20)
	deleted := watchDeletion(t, n, "default", "hog")
	history := watchHistory(t, n, "default", "hog")
	shims, err := n.Runtime().Shims()
	if err != nil {
		t.Fatal(err)
	}
	// 2300 MiB at 200 MiB/s: 2.5 s from the threshold to the cgroup's
	// limit. Its restartPolicy is the default, Always: evictd sends its
	// SIGTERM itself.
	hog := labelled(n.Pod("hog", "alloc", "--mib", "2300", "--rate", "200"))
	// The kernel's peak of the kubepods cgroup's usage, from now: the
	// proof of the crossing when the sampler misses it.
	peakFile := filepath.Join(n.PodsMemoryCgroup(), "memory.max_usage_in_bytes")
	if err := os.WriteFile(peakFile, []byte("0"), 0o644); err != nil {
		t.Fatalf("reset %s: %v", peakFile, err)
	}
	created, err := n.Admin().CoreV1().Pods("default").Create(t.Context(), hog, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var d deletion
	select {
	case d = <-deleted:
	case <-time.After(60 * time.Second):
		t.Fatalf("hog not evicted within 60 s; %d OOM kills in kubepods", oomKilled())
	}
	// evictd's own SIGTERM can release the hog's memory between two of
	// the sampler's reads (seen under a CPU burner, the reads late): the
	// kernel's peak usage then shows whether the threshold was crossed.
	if crossed := s.crossedAt(); !crossed.IsZero() {
		t.Logf("crossing → eviction %s; deletion grace %d s; lowest available %d MiB",
			d.at.Sub(crossed).Round(time.Millisecond), d.grace, s.minAvail>>20)
	} else if headroom := readCgroupInt(t, n, "memory.limit_in_bytes") - readCgroupInt(t, n, "memory.max_usage_in_bytes"); headroom >= 500<<20 {
		t.Fatalf("hog evicted, and the kubepods cgroup's peak usage stayed %d MiB below its limit: the 500 MiB threshold was never crossed", headroom>>20)
	} else {
		t.Logf("the sampler missed the crossing (the memory was released between two reads); the kubepods cgroup's peak usage came within %d MiB of its limit; deletion grace %d s",
			headroom>>20, d.grace)
	}
	if g := evictedGrace(t, d, "default", "hog", evictdLog(n)); g != 1 {
		t.Errorf("hard threshold: deletion grace %d s, want 1", g)
	}
	poll(t, "the hog to go", 30*time.Second, func() (bool, string) { return gone(t, n, "default", "hog") })
	select {
	case h := <-history:
		checkEvictedByEvictd(t, h)
	case <-time.After(10 * time.Second):
		t.Error("the watch never saw the hog deleted")
	}
	// A hard eviction's containers are stopped through the runtime once
	// the kubelet has taken the pod over, at the latest 1 s after, not
	// when the kubelet gets to them.
	if line := localStop("default/hog", evictdLog(n)); line == "" {
		t.Errorf("evictd did not stop the hog's containers itself:\n%s", tail(n.LogPath("evictd"), 200))
	} else {
		t.Logf("evictd's local stop: %s", line)
	}
	// Before any of that, evictd's own stop signal to the hog's main
	// process, and nothing of the pod left behind that a stop through the
	// runtime would not leave.
	if line := evictdLine("default/hog", "stop signal sent to the pod's containers' main processes", evictdLog(n)); line == "" {
		t.Errorf("evictd did not send the hog's stop signal itself:\n%s", tail(n.LogPath("evictd"), 200))
	} else {
		t.Logf("evictd's direct stop signal: %s", line)
	}
	direct := 0.0
	for _, sig := range []string{"memory.available", "allocatableMemory.available"} {
		direct += max(0, metric(t, n, `evictd_eviction_signal_latency_seconds_count{path="direct",signal="`+sig+`"}`))
	}
	if direct != 1 {
		t.Errorf("evictd_eviction_signal_latency_seconds counts %v direct signals, want 1", direct)
	}
	nothingLeft(t, n, string(created.UID), len(shims))
	if k := oomKilled(); k != 0 {
		t.Errorf("the kernel OOM-killed %d processes in kubepods before evictd's eviction took effect", k)
	}
	// The same race from its flight record, as the kubelet would have
	// run it: 2.5 s of headroom at 200 MiB/s is less than its 10 s poll.
	replayRaceAsKubelet(t, n, "default/hog", began)
}

// nothingLeft waits up to 30 s for the pod with uid to leave nothing on
// the node: no ready sandbox or running container of it in the runtime,
// no pod cgroup, and no more shims than before it (shims).
func nothingLeft(t *testing.T, n *testnode.Node, uid string, shims int) {
	t.Helper()
	rs := n.Runtime().RuntimeService()
	poll(t, "nothing of pod "+uid+" left", 30*time.Second, func() (bool, string) {
		sandboxes, err := rs.ListPodSandbox(t.Context(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}})
		if err != nil {
			return false, fmt.Sprintf("list sandboxes: %v", err)
		}
		for _, sb := range sandboxes {
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				return false, "sandbox " + sb.Id + " still ready"
			}
		}
		ctrs, err := rs.ListContainers(t.Context(), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}})
		if err != nil {
			return false, fmt.Sprintf("list containers: %v", err)
		}
		for _, c := range ctrs {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return false, "container " + c.Id + " still running"
			}
		}
		if dirs, _ := filepath.Glob(filepath.Join(n.PodsMemoryCgroup(), "*pod"+uid)); len(dirs) > 0 {
			return false, "pod cgroup " + dirs[0] + " still there"
		}
		if dirs, _ := filepath.Glob(filepath.Join(n.PodsMemoryCgroup(), "*", "pod"+uid)); len(dirs) > 0 {
			return false, "pod cgroup " + dirs[0] + " still there"
		}
		now, err := n.Runtime().Shims()
		if err != nil {
			return false, err.Error()
		}
		// At most as many: the scenario before may still have been
		// tearing its pods down when the count was taken.
		return len(now) <= shims, fmt.Sprintf("%d shims, %d before the pod", len(now), shims)
	})
}

func pids(t *testing.T, n *testnode.Node) {
	// The threshold sits 700 tasks below what is free now: the fork-heavy
	// pod (300 Go processes, several threads each) crosses it, the rest of
	// the machine does not.
	startEvictd(t, n, "--eviction-pressure-transition-period=5s")
	avail := metric(t, n, `evictd_signal_available{signal="pid.available"}`)
	if avail <= 0 {
		t.Fatalf("no pid.available observation (%v)", avail)
	}
	if err := n.StopEvictd(); err != nil {
		t.Fatal(err)
	}
	threshold := int64(avail) - 700
	startEvictd(t, n, fmt.Sprintf("--eviction-hard=pid.available<%d", threshold), "--eviction-pressure-transition-period=5s")
	run(t, n, labelled(n.Pod("quiet", "sleep")))
	deleted := watchDeletion(t, n, "default", "forker")
	forker := labelled(n.Pod("forker", "procs", "--count", "300"))
	if _, err := n.Admin().CoreV1().Pods("default").Create(t.Context(), forker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-deleted:
	case <-time.After(60 * time.Second):
		t.Fatalf("forker not evicted within 60 s (threshold pid.available<%d)", threshold)
	}
	poll(t, "EvictdPIDPressure=True", 5*time.Second, func() (bool, string) { return conditionIs(t, n, pidCondition, v1.ConditionTrue) })
	poll(t, "the forker to go", 30*time.Second, func() (bool, string) { return gone(t, n, "default", "forker") })
	evs := evictedEvents(t, n, "default", "forker")
	if len(evs) != 1 || !strings.Contains(evs[0].Message, "The node was low on resource: pids.") {
		t.Errorf("forker's Evicted events: %+v", evs)
	}
	alive(t, n, "default", "quiet")
}

// evictLine reports whether line, of evictd's log (text or JSON), is its
// decision to evict a pod or its line of an eviction done: either names
// the eviction's grace period (a pod tried after the first, a PodDisruption
// Budget having refused that one, has only the second).
func evictLine(line string) bool {
	for _, s := range []string{"msg=decision outcome=evict ", `"msg":"decision","outcome":"evict"`, "msg=evicted ", `"msg":"evicted"`} {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}
