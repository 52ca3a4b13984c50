package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/testing/testnode"
)

// Names evictd uses on the node (SPEC.md, Node status).
const (
	memoryCondition v1.NodeConditionType = "EvictdMemoryPressure"
	diskCondition   v1.NodeConditionType = "EvictdDiskPressure"
	pidCondition    v1.NodeConditionType = "EvictdPIDPressure"
	memoryTaint                          = "evictd.io/memory-pressure"
)

// startEvictd starts evictd on n with args and stops it when t ends.
func startEvictd(t *testing.T, n *testnode.Node, args ...string) {
	t.Helper()
	if err := n.StartEvictd(t.Context(), args...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of evictd's log:\n%s", tail(n.LogPath("evictd"), 40))
		}
		if err := n.StopEvictd(); err != nil {
			t.Errorf("stop evictd: %v", err)
		}
	})
}

// run creates pod and waits until it runs; its pods are deleted when t ends.
func run(t *testing.T, n *testnode.Node, pod *v1.Pod) *v1.Pod {
	t.Helper()
	p, err := n.RunPod(t.Context(), pod, 90*time.Second)
	if err != nil {
		t.Fatalf("%v (last seen: %s)", err, podSummary(p))
	}
	return p
}

// cleanPods deletes every pod, ReplicaSet, DaemonSet and PDB of the
// default namespace and the test pods of kube-system at once, and waits
// until the pods are gone, so the next scenario starts on an empty node.
func cleanPods(t *testing.T, n *testnode.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := n.Admin()
	zero := int64(0)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	all := metav1.ListOptions{}
	_ = c.AppsV1().ReplicaSets("default").DeleteCollection(ctx, opts, all)
	_ = c.AppsV1().DaemonSets("default").DeleteCollection(ctx, opts, all)
	_ = c.PolicyV1().PodDisruptionBudgets("default").DeleteCollection(ctx, opts, all)
	sel := metav1.ListOptions{LabelSelector: "e2e=yes"}
	for _, ns := range []string{"default", "kube-system"} {
		if err := c.CoreV1().Pods(ns).DeleteCollection(ctx, opts, sel); err != nil {
			t.Errorf("delete pods of %s: %v", ns, err)
		}
	}
	// The next scenario's pods may have the same names: events name their
	// objects, so the last scenario's Evicted events would count for them.
	defer func() {
		if err := c.CoreV1().Events("default").DeleteCollection(ctx, opts, all); err != nil {
			t.Errorf("delete events of default: %v", err)
		}
	}()
	for {
		var left []string
		for _, ns := range []string{"default", "kube-system"} {
			pods, err := c.CoreV1().Pods(ns).List(ctx, sel)
			if err != nil {
				t.Errorf("list pods: %v", err)
				return
			}
			for _, p := range pods.Items {
				left = append(left, p.Name)
			}
		}
		if len(left) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("pods still there after cleanup: %v", left)
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// labelled marks pod as a test pod (cleanPods deletes them) and returns it.
func labelled(pod *v1.Pod) *v1.Pod {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels["e2e"] = "yes"
	return pod
}

// poll calls cond every 100 ms until it returns true, failing t with what
// cond last described after timeout.
func poll(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, desc := cond()
		if ok {
			return
		}
		last = desc
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gone reports whether the pod is deleted or has terminated.
func gone(t *testing.T, n *testnode.Node, ns, name string) (bool, string) {
	p, err := n.Admin().CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, "deleted"
	}
	if err != nil {
		return false, err.Error()
	}
	// A pod evictd wrote Failed whose container still runs is still
	// terminating.
	return (p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded) && !kubeclient.ContainersRunning(p), podSummary(p)
}

// alive fails t unless the pod is still Running with no deletion requested.
func alive(t *testing.T, n *testnode.Node, ns, name string) {
	t.Helper()
	p, err := n.Admin().CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("pod %s/%s: %v", ns, name, err)
		return
	}
	if p.Status.Phase != v1.PodRunning || p.DeletionTimestamp != nil {
		t.Errorf("pod %s/%s should have survived: %s", ns, name, podSummary(p))
	}
}

func podSummary(p *v1.Pod) string {
	if p == nil {
		return "no pod"
	}
	s := fmt.Sprintf("%s phase=%s", p.Name, p.Status.Phase)
	if p.DeletionTimestamp != nil {
		s += " deleting"
	}
	for _, c := range p.Status.ContainerStatuses {
		switch {
		case c.State.Terminated != nil:
			s += fmt.Sprintf(" %s terminated(%s)", c.Name, c.State.Terminated.Reason)
		case c.State.Waiting != nil:
			s += fmt.Sprintf(" %s waiting(%s: %s)", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
		}
		if c.LastTerminationState.Terminated != nil {
			s += fmt.Sprintf(" last=%s", c.LastTerminationState.Terminated.Reason)
		}
	}
	return s
}

// events returns the events about the object of kind and name in ns with
// the given reason.
func events(t *testing.T, n *testnode.Node, ns, kind, name, reason string) []v1.Event {
	t.Helper()
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}
	if reason != "" {
		sel["reason"] = reason
	}
	list, err := n.Admin().CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	return list.Items
}

// evictedEvents returns the Evicted events of a pod that has been evicted:
// the recorder posts them asynchronously, and the pod, deleted once it
// reads Failed, can be gone before its event is there; so they are read
// until there is one, at most 10 s.
func evictedEvents(t *testing.T, n *testnode.Node, ns, name string) []v1.Event {
	t.Helper()
	var evs []v1.Event
	deadline := time.Now().Add(10 * time.Second)
	for {
		if evs = events(t, n, ns, "Pod", name, "Evicted"); len(evs) > 0 || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// evictionsOf counts the Evicted events of a pod that has been evicted,
// read until there is one (evictedEvents).
func evictionsOf(t *testing.T, n *testnode.Node, ns, name string) int {
	t.Helper()
	total := 0
	for _, e := range evictedEvents(t, n, ns, name) {
		total += max(int(e.Count), 1)
	}
	return total
}

// evictions counts the Evicted events on a pod (their Count added up).
func evictions(t *testing.T, n *testnode.Node, ns, name string) int {
	total := 0
	for _, e := range events(t, n, ns, "Pod", name, "Evicted") {
		total += max(int(e.Count), 1)
	}
	return total
}

// condition returns the node's condition of type ct, or nil.
func condition(t *testing.T, n *testnode.Node, ct v1.NodeConditionType) *v1.NodeCondition {
	t.Helper()
	node, err := n.Admin().CoreV1().Nodes().Get(t.Context(), n.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node: %v", err)
	}
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == ct {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

func conditionIs(t *testing.T, n *testnode.Node, ct v1.NodeConditionType, want v1.ConditionStatus) (bool, string) {
	c := condition(t, n, ct)
	if c == nil {
		return false, "no condition " + string(ct)
	}
	return c.Status == want, fmt.Sprintf("%s=%s (%s) since %s", ct, c.Status, c.Message, c.LastTransitionTime.Format(time.RFC3339))
}

// hasTaint reports whether the node carries the taint with key.
func hasTaint(t *testing.T, n *testnode.Node, key string) bool {
	t.Helper()
	node, err := n.Admin().CoreV1().Nodes().Get(t.Context(), n.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node: %v", err)
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == key {
			return true
		}
	}
	return false
}

// metric returns the value of the series of evictd's /metrics whose line
// starts with series (name and labels exactly as exposed), or -1.
func metric(t *testing.T, n *testnode.Node, series string) float64 {
	t.Helper()
	body, err := n.EvictdGet(t.Context(), "/metrics")
	if err != nil {
		t.Fatalf("evictd /metrics: %v", err)
	}
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return v
		}
	}
	return -1
}

// oomKills returns how many processes the kernel's OOM killer has killed
// in the kubepods memory cgroup and below it: the oom_kill line of
// memory.events on v2, which counts the whole subtree, and on v1 the sum
// of the oom_kill lines of memory.oom_control of kubepods and every cgroup
// below it, since v1 counts a kill only in the victim's own cgroup (a
// pod's container), not in its parents. A pod cgroup removed since is not
// counted any more: compare counts taken while the pods run.
func oomKills(t *testing.T, n *testnode.Node) int64 {
	t.Helper()
	var total int64
	for _, k := range oomKillsByCgroup(t, n) {
		total += k
	}
	return total
}

// oomKillsByCgroup returns the oom_kill counters oomKills adds up, by
// cgroup directory.
func oomKillsByCgroup(t *testing.T, n *testnode.Node) map[string]int64 {
	t.Helper()
	counts, err := oomKillCounts(n)
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

// oomKillCounts is oomKillsByCgroup without a test to fail.
func oomKillCounts(n *testnode.Node) (map[string]int64, error) {
	root := n.PodsMemoryCgroup()
	if b, err := os.ReadFile(filepath.Join(root, "memory.events")); err == nil {
		k, err := oomKillOf(b)
		if err != nil {
			return nil, fmt.Errorf("%s/memory.events: %w", root, err)
		}
		return map[string]int64{root: k}, nil
	}
	counts := map[string]int64{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil // a pod's cgroup removed during the walk
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(path, "memory.oom_control"))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		k, err := oomKillOf(b)
		if err != nil {
			return fmt.Errorf("%s/memory.oom_control: %w", path, err)
		}
		counts[path] = k
		return nil
	})
	return counts, err
}

// watchOOMKills samples oomKillsByCgroup every 200 ms until t ends and
// returns a function that tells how many OOM kills it has seen since it
// was called: on v1 a pod's cgroup, and its count, go with the pod, so a
// count read once at the end would miss the kills of pods deleted since.
func watchOOMKills(t *testing.T, n *testnode.Node) func() int64 {
	t.Helper()
	var mu sync.Mutex
	first := oomKillsByCgroup(t, n)
	last := map[string]int64{}
	maps.Copy(last, first)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			now, err := oomKillCounts(n)
			if err != nil {
				continue // a cgroup removed mid-walk: the next sample
			}
			mu.Lock()
			for path, k := range now {
				last[path] = max(last[path], k)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		var k int64
		for path, v := range last {
			k += v - first[path]
		}
		return k
	}
}

// oomKillLine reads the oom_kill line of a cgroup file.
func oomKillLine(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := oomKillOf(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return k
}

// oomKillOf parses the oom_kill line of memory.oom_control or
// memory.events.
func oomKillOf(b []byte) (int64, error) {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("no oom_kill line")
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// readCgroupInt reads a number from a file of the kubepods memory cgroup.
func readCgroupInt(t *testing.T, n *testnode.Node, file string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.PodsMemoryCgroup(), file))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return v
}

// workingSet returns the kubepods cgroup's working set as the kubelet
// computes it: usage − inactive file, from memory.usage_in_bytes and
// memory.stat's total_inactive_file on cgroup v1, memory.current and
// memory.stat's inactive_file (which counts the subtree) on v2.
func workingSet(n *testnode.Node) (int64, error) {
	dir := n.PodsMemoryCgroup()
	usageFile, inactiveKey := "memory.usage_in_bytes", "total_inactive_file "
	if cgroupV2(n) {
		usageFile, inactiveKey = "memory.current", "inactive_file "
	}
	b, err := os.ReadFile(filepath.Join(dir, usageFile))
	if err != nil {
		return 0, err
	}
	usage, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, err
	}
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(line, inactiveKey); ok {
			inactive, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, err
			}
			return max(usage-inactive, 0), nil
		}
	}
	return 0, fmt.Errorf("%s/memory.stat: no %s", dir, strings.TrimSpace(inactiveKey))
}

// cgroupV2 tells whether n's kubepods cgroup is in the unified (v2)
// hierarchy: it has memory.current, which v1 has not.
func cgroupV2(n *testnode.Node) bool {
	_, err := os.Stat(filepath.Join(n.PodsMemoryCgroup(), "memory.current"))
	return err == nil
}

// podsMemoryLimit returns the kubepods cgroup's memory limit: its
// memory.limit_in_bytes on cgroup v1, memory.max on v2.
func podsMemoryLimit(t *testing.T, n *testnode.Node) int64 {
	t.Helper()
	if cgroupV2(n) {
		return readCgroupInt(t, n, "memory.max")
	}
	return readCgroupInt(t, n, "memory.limit_in_bytes")
}

// observedAtRE finds the pass time in a decision line of evictd's text log.
var observedAtRE = regexp.MustCompile(`\bobservedAt=(\S+)`)

// lastDecision is the pass time (observedAt) of the last decision in
// evictd's log to evict pod (namespace/name); the test fails without one.
func lastDecision(t *testing.T, n *testnode.Node, pod string) time.Time {
	t.Helper()
	data, err := os.ReadFile(n.LogPath("evictd"))
	if err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.Contains(l, "msg=decision") || !strings.Contains(l, "outcome=evict ") || !strings.Contains(l, "pod="+pod+" ") {
			continue
		}
		m := observedAtRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("decision without observedAt in evictd's log: %s", l)
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatalf("decision line %q: observedAt: %v", l, err)
		}
		last = at
	}
	if last.IsZero() {
		t.Fatalf("no decision to evict %s in evictd's log", pod)
	}
	return last
}

// localStop waits, at most 15 s, for evictd's line of a hard eviction's
// stop through the runtime of pod ref in its log (log reads it, text or
// JSON) and
// returns it, "" when it never came. The stop starts once the kubelet has
// taken the evicted pod over, at the latest --hard-eviction-stop-wait
// after the eviction began; the kubelet, syncing the pod at once, may have
// stopped the containers first (the line then says containers=0), and
// the pod can be gone before the line is written.
func localStop(ref string, log func() string) string {
	return evictdLine(ref, "stopped the evicted pod's containers through the runtime", log)
}

// evictdLine returns evictd's first log line about the pod ref that
// contains what, waiting up to 15 s for it; "" if none came.
func evictdLine(ref, what string, log func() string) string {
	deadline := time.Now().Add(15 * time.Second)
	for {
		for line := range strings.SplitSeq(log(), "\n") {
			if strings.Contains(line, what) &&
				(strings.Contains(line, "pod="+ref+" ") || strings.Contains(line, `"pod":"`+ref+`"`)) {
				return line
			}
		}
		if time.Now().After(deadline) {
			return ""
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// holdPressure runs a critical pod (system-node-critical, kube-system)
// holding 1000 MiB, which puts a node under allocatableMemory pressure of
// 1200Mi that no eviction can relieve (sizes scaled by sc), waits for
// EvictdMemoryPressure=True and returns when it became so.
func holdPressure(t *testing.T, n *testnode.Node, sc memoryScale) metav1.Time {
	t.Helper()
	crit := labelled(n.Pod("critical", "alloc", "--mib", sc.mibArg(1000)))
	crit.Namespace = "kube-system"
	crit.Spec.PriorityClassName = "system-node-critical"
	run(t, n, crit)
	poll(t, "EvictdMemoryPressure=True", 30*time.Second, func() (bool, string) {
		return conditionIs(t, n, memoryCondition, v1.ConditionTrue)
	})
	return condition(t, n, memoryCondition).LastTransitionTime
}
