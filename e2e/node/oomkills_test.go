package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/evictd/evictd/internal/testing/testnode"
)

// reasonOOMKill is the reason of evictd's event on the node for kernel OOM
// kills (manager.EventOOMKillNotPrevented).
const reasonOOMKill = "OOMKillNotPrevented"

// oomKillsNode is evictd_oom_kills_total of the node scope, every kill on
// the node, the one scope on this machine's cgroup v1.
const oomKillsNode = `evictd_oom_kills_total{scope="node"}`

// oomKillsKubepods is evictd_oom_kills_total of the kubepods scope, kills
// below the kubepods cgroup, counted on cgroup v2 alone.
const oomKillsKubepods = `evictd_oom_kills_total{scope="kubepods"}`

// TestOOMKillNotPreventedNode makes the kernel OOM-kill pods' processes
// faster than any agent can act, on a real node, and checks that evictd
// counts every kill the kernel counted while it ran, in
// evictd_oom_kills_total and in OOMKillNotPrevented Warning events on the
// node (one per pass, however many kills), and, where Prometheus is
// installed, that EvictdOOMKillNotPrevented fires. Two kinds of kill:
// three containers that each allocate 256 MiB at once under a limit of
// 32 MiB (their own limit: no eviction prevents it), then a BestEffort hog
// that allocates 1.5 GiB at once in a kubepods cgroup of 1 GiB (what
// evictd is there to prevent, gone past in a fraction of a second).
func TestOOMKillNotPreventedNode(t *testing.T) {
	n := testnode.StartForTest(t, testnode.Options{Name: "e2e-oom", PodsMemory: 1 << 30})
	oomKillsNotPrevented(t, n, true)
}

// oomKillsNotPrevented is TestOOMKillNotPreventedNode on n, whose kubepods
// limit must be 1 GiB, with Prometheus's alert checked when
// checkAlert is set. On cgroup v2 it also checks the kubepods scope: kubepods'
// memory.events oom_kill counts the kills below it, every one of the
// test's, and evictd's series must rise by as many as the kernel's file.
func oomKillsNotPrevented(t *testing.T, n *testnode.Node, checkAlert bool) {
	v2 := !onCgroupV1(n)
	kubepodsEvents := n.PodsMemoryCgroup() + "/memory.events"
	kubepodsKills := func() int64 {
		if !v2 {
			return 0
		}
		return oomKillLine(t, kubepodsEvents)
	}
	kernelBefore, podsBefore := kernelOOMKills(t), kubepodsKills()
	startEvictd(t, n, "--housekeeping-interval=10s")
	poll(t, "evictd's baseline of the node's OOM kills", 60*time.Second, func() (bool, string) {
		v := metric(t, n, oomKillsNode)
		return v == 0, fmt.Sprintf("%s = %v", oomKillsNode, v)
	})
	// evictd's baseline was read between these two: equal, it is known.
	kernelAtBaseline, podsAtBaseline := kernelOOMKills(t), kubepodsKills()
	if v := metric(t, n, oomKillsKubepods); v != -1 && !v2 {
		t.Errorf("%s = %v on cgroup v1, want no series", oomKillsKubepods, v)
	} else if v2 && v != 0 {
		t.Errorf("%s = %v on cgroup v2 before any kill, want 0", oomKillsKubepods, v)
	}
	var prom *prometheus
	if bin, err := exec.LookPath("prometheus"); !checkAlert {
		t.Log("EvictdOOMKillNotPrevented is not checked on this node: its twin on this machine checks it")
	} else if err == nil {
		prom = startPrometheus(t, bin, n)
		// The series must be scraped at 0 before the kills, as on a
		// fleet, for increase() to see them.
		poll(t, "Prometheus to scrape the baseline", 60*time.Second, func() (bool, string) {
			v, err := prom.query(t, `evictd_oom_kills_total{scope="node", node="`+n.Name()+`"}`)
			return err == nil && len(v) == 1 && v[0] == 0, fmt.Sprintf("%v (err %v)", v, err)
		})
	} else if os.Getenv("CI") == "true" {
		t.Fatal("prometheus not found and CI=true: run hack/install-prometheus.sh (as root)")
	} else {
		t.Log("prometheus not found: EvictdOOMKillNotPrevented is not checked")
	}

	// Their own limit: three containers, killed together.
	limited := labelled(n.Pod("limited", "alloc", "--mib", "256"))
	limited.Spec.RestartPolicy = v1.RestartPolicyNever
	base := limited.Spec.Containers[0]
	limited.Spec.Containers = nil
	for i := range 3 {
		c := *base.DeepCopy()
		c.Name = fmt.Sprintf("app%d", i)
		c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}
		limited.Spec.Containers = append(limited.Spec.Containers, c)
	}
	beforeLimited := kernelOOMKills(t)
	reported := runToOOM(t, n, limited, !v2)
	// On cgroup v2 the runtime reports OOMKilled only for the container
	// whose cgroup had the OOM event: in the guest (kernel 6.1, containerd
	// 2.4.2) one of the three, the others Error (exit 137), with the
	// kernel counting every kill. The kernel's count is the truth here.
	var killedOwn int64
	poll(t, "the kernel to count limited's kills", 30*time.Second, func() (bool, string) {
		killedOwn = kernelOOMKills(t) - beforeLimited
		return killedOwn >= 3, fmt.Sprintf("the kernel's oom_kill rose by %d since limited was created", killedOwn)
	})
	if !v2 && reported != 3 {
		t.Fatalf("%d of limited's 3 containers OOMKilled", reported)
	}
	t.Logf("limited: %d of 3 containers reported OOMKilled; the kernel killed %d processes", reported, killedOwn)

	// kubepods' limit: a hog that ignores SIGTERM goes past allocatable
	// in one system call. evictd's hard eviction sends SIGTERM at once
	// and SIGKILL a second later (the CRI stop's grace period): the hog
	// must go the 100 MiB from allocatableMemory.available<100Mi to the
	// limit in less than that second, at 100 MiB/s or more. A CPU request
	// keeps it from being starved on a busy machine (a BestEffort
	// container's cpu.shares are 2), which would slow its page faults.
	hog := labelled(testnode.Resources(n.Pod("hog", "--on-term=ignore", "alloc", "--mib", "1536", "--one-call"), "", "", "1"))
	hog.Spec.RestartPolicy = v1.RestartPolicyNever
	beforeHog := kernelOOMKills(t)
	runToOOM(t, n, hog, !v2)
	// evictd, woken as the hog crosses its threshold, evicts it too and
	// may delete it before the kubelet reports how its container ended:
	// the kernel's count says it was killed.
	var killedHog int64
	poll(t, "the kernel to count the hog's kill", 30*time.Second, func() (bool, string) {
		killedHog = kernelOOMKills(t) - beforeHog
		return killedHog >= 1, "the kernel's oom_kill has not risen since the hog was created"
	})
	ours := killedOwn + 1

	// evictd reads the counts at its next tick: within one interval. The
	// kernel's count since evictd's baseline is exact unless some other
	// process on this machine was OOM-killed while evictd started.
	var lo, hi, counted int64
	poll(t, "evictd to count the kernel's kills", 30*time.Second, func() (bool, string) {
		counted = int64(metric(t, n, oomKillsNode))
		now := kernelOOMKills(t)
		lo, hi = now-kernelAtBaseline, now-kernelBefore
		return lo <= counted && counted <= hi && counted >= ours,
			fmt.Sprintf("%s = %d, the kernel's count since evictd's baseline %d..%d, at least %d of them the test's", oomKillsNode, counted, lo, hi, ours)
	})
	t.Logf("%s = %d: the kernel's /proc/vmstat oom_kill rose by %d..%d while evictd ran; %d at their own limit, %d while the hog ran",
		oomKillsNode, counted, lo, hi, killedOwn, killedHog)
	if v2 {
		// kubepods' count: every kill below it since evictd's baseline,
		// which the kernel's file gives exactly up to the same window.
		var inPods int64
		poll(t, "evictd to count the kills in kubepods", 30*time.Second, func() (bool, string) {
			inPods = int64(metric(t, n, oomKillsKubepods))
			now := kubepodsKills()
			lo, hi := now-podsAtBaseline, now-podsBefore
			return lo <= inPods && inPods <= hi && inPods >= ours,
				fmt.Sprintf("%s = %d, %s's oom_kill since evictd's baseline %d..%d, at least %d of them the test's", oomKillsKubepods, inPods, kubepodsEvents, lo, hi, ours)
		})
		t.Logf("%s = %d: %s's oom_kill rose as much", oomKillsKubepods, inPods, kubepodsEvents)
	}

	// The events: one per pass that saw kills, adding up to the count.
	var evs []v1.Event
	poll(t, "the OOMKillNotPrevented events to add up", 15*time.Second, func() (bool, string) {
		evs = events(t, n, "default", "Node", n.Name(), reasonOOMKill)
		sum := 0
		for _, e := range evs {
			sum += oomKillsIn(t, e)
		}
		return int64(sum) == counted, fmt.Sprintf("%d events, %d kills in their messages, want %d", len(evs), sum, counted)
	})
	for _, e := range evs {
		t.Logf("event %s %s x%d: %s", e.Type, e.LastTimestamp.Format(time.RFC3339), e.Count, e.Message)
		if e.Type != v1.EventTypeWarning || e.Count != 1 {
			t.Errorf("event %s: type %s, count %d; want one Warning", e.Name, e.Type, e.Count)
		}
	}
	// The three containers die within a second or two: one pass, or two
	// if a tick falls between; the hog's kill one more at most.
	if len(evs) > 3 || int64(len(evs)) >= counted {
		t.Errorf("%d events for %d kills, want at most one per pass", len(evs), counted)
	}

	if prom != nil {
		var fired alert
		poll(t, "EvictdOOMKillNotPrevented to fire", 30*time.Second, func() (bool, string) {
			for _, a := range prom.alerts(t, "EvictdOOMKillNotPrevented") {
				if a.State == "firing" && a.Labels["node"] == n.Name() {
					fired = a
					return true, ""
				}
			}
			return false, fmt.Sprintf("alerts: %v", prom.alerts(t, ""))
		})
		t.Logf("EvictdOOMKillNotPrevented firing: %v; %s", fired.Labels, fired.Annotations["description"])
	}
	cleanPods(t, n)
}

// runToOOM creates pod and waits until every container of it has
// terminated, and returns how many the kubelet reported OOMKilled; with
// strict, a container terminated otherwise is an error. It watches the
// pod from before it exists, and stops at its deletion: evictd may evict
// and delete it before the kubelet says how its containers ended.
func runToOOM(t *testing.T, n *testnode.Node, pod *v1.Pod, strict bool) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	w, err := n.Admin().CoreV1().Pods(pod.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := n.Admin().CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *v1.Pod
	done := func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
			return false
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Terminated == nil {
				return false
			}
		}
		return true
	}
	for last == nil || !done(last) {
		ev, ok := <-w.ResultChan()
		if !ok {
			t.Fatalf("%s: its containers did not all terminate within 90 s (last seen: %s)", pod.Name, podSummary(last))
		}
		if p, isPod := ev.Object.(*v1.Pod); isPod {
			last = p
		}
		if ev.Type == watch.Deleted && !done(last) {
			t.Logf("%s: deleted before the kubelet said how all its containers ended (last seen: %s)", pod.Name, podSummary(last))
			break
		}
	}
	var killed int64
	for _, c := range last.Status.ContainerStatuses {
		term := c.State.Terminated
		if term == nil {
			continue
		}
		t.Logf("%s/%s: %s (exit %d) %s after it started", pod.Name, c.Name, term.Reason, term.ExitCode,
			term.FinishedAt.Sub(term.StartedAt.Time))
		if term.Reason != "OOMKilled" {
			if !strict {
				continue
			}
			t.Errorf("%s/%s: terminated %s, want OOMKilled", pod.Name, c.Name, term.Reason)
			continue
		}
		killed++
	}
	return killed
}

// kernelOOMKills is the machine's count of OOM kills, /proc/vmstat
// oom_kill.
func kernelOOMKills(t *testing.T) int64 {
	t.Helper()
	return oomKillLine(t, "/proc/vmstat")
}

// oomKillsRE is the count of an OOMKillNotPrevented event's message.
var oomKillsRE = regexp.MustCompile(`killed (\d+) process(?:es)? (?:on this node|in pods)`)

// oomKillsIn is the count of kills an OOMKillNotPrevented event reports.
func oomKillsIn(t *testing.T, e v1.Event) int {
	t.Helper()
	m := oomKillsRE.FindStringSubmatch(e.Message)
	if m == nil {
		t.Fatalf("event %s: no count of kills in %q", e.Name, e.Message)
	}
	k, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// onCgroupV1 reports whether n's pods are in the cgroup v1 memory
// hierarchy.
func onCgroupV1(n *testnode.Node) bool {
	_, err := os.Stat(n.PodsMemoryCgroup() + "/memory.oom_control")
	return err == nil
}
