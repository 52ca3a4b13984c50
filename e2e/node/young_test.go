package node

import (
	"context"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/testing/testnode"
	"github.com/evictd/evictd/internal/testing/testruntime"
)

// TestYoungPodNode evicts pods younger than one housekeeping interval on a
// real node and checks their Evicted events as the kubelet's node e2e
// eviction tests check the kubelet's (verifyEvictionEvents, v1.36.3): one
// event, the starved resource, the offending container named with its
// usage over its request, and the message's container line; and that the
// usage quoted is the one the decision ranked the pod on (evictd's
// decision log). The node's filesystem is one small ext4 (nodefs and
// imagefs), its kubepods cgroup 1 GiB. The disk scenario runs first: the
// containers the memory scenario leaves dead would be reclaimed at its
// first pass under disk pressure, which then waits for their space.
func TestYoungPodNode(t *testing.T) {
	fs := testruntime.MountExt4(t, 1024)
	n := testnode.StartForTest(t, testnode.Options{Name: "e2e-young", NodeFs: fs, ImageFs: fs, PodsMemory: 1 << 30})
	t.Run("ephemeral storage: a writer, first seen by the pass that evicts it", func(t *testing.T) { youngDisk(t, n) })
	cleanPods(t, n)
	t.Run("memory: the allocatable hog, seconds old", func(t *testing.T) { youngMemory(t, n) })
	cleanPods(t, n)
}

// youngMemory ports the kubelet's MemoryAllocatableEviction: a BestEffort
// hog (pod memory-hog-pod, container memory-hog) beside an innocent pod
// within its requests; the hog takes 760 MiB at once and 50 MiB/s after,
// so it crosses allocatableMemory.available<250Mi (the kubelet's default
// memory.available threshold, with the pods' allocatable enforced) a
// second or two after it starts, and would reach the 1 GiB of kubepods
// 5 s later.
func youngMemory(t *testing.T, n *testnode.Node) {
	const interval = 10 * time.Second
	startEvictd(t, n, "--eviction-hard=memory.available<250Mi", "--housekeeping-interval="+interval.String(),
		"--eviction-pressure-transition-period=5s")
	run(t, n, innocentPod(n))
	oomKilled := watchOOMKills(t, n)
	deleted := watchDeletion(t, n, "default", "memory-hog-pod")
	history := watchHistory(t, n, "default", "memory-hog-pod")
	hog := labelled(n.Pod("memory-hog-pod", "alloc", "--base", "760", "--mib", "1200", "--rate", "50"))
	hog.Spec.Containers[0].Name = "memory-hog"
	hog.Spec.RestartPolicy = v1.RestartPolicyNever
	grace := int64(1)
	hog.Spec.TerminationGracePeriodSeconds = &grace
	created, err := n.Admin().CoreV1().Pods("default").Create(t.Context(), hog, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-deleted:
	case <-time.After(60 * time.Second):
		t.Fatalf("memory-hog-pod not evicted within 60 s; %d OOM kills in kubepods", oomKilled())
	}
	poll(t, "memory-hog-pod to go", 30*time.Second, func() (bool, string) { return gone(t, n, "default", "memory-hog-pod") })
	young(t, n, created, history, interval)
	usage := verifyEvictionEvent(t, n, hog, v1.ResourceMemory)
	checkRankedOn(t, n, created, usage, 64<<20)
	alive(t, n, "default", "innocent-pod")
	if k := evictions(t, n, "default", "innocent-pod"); k != 0 {
		t.Errorf("innocent-pod: %d Evicted events", k)
	}
	if k := oomKilled(); k != 0 {
		t.Errorf("the kernel OOM-killed %d processes in kubepods before evictd's eviction took effect", k)
	}
}

// youngDisk fills the node's filesystem with a pod's writable layer: an
// older pod has written 20 MiB, then a new one writes 200 MiB, crossing
// nodefs.available 100 MiB below what was free. The new pod is created
// 8 s after a housekeeping tick, so the next tick, 12 s later, is the
// first pass that lists it: that pass must rank it on its usage (not as a
// pod without stats) and name its container. Nothing is left to reclaim:
// the node holds only the images its pods run, and no dead container.
func youngDisk(t *testing.T, n *testnode.Node) {
	// Long enough for the pod to start and write before the next tick on
	// a loaded machine, and to be younger than one interval at that tick.
	const interval = 20 * time.Second
	older := labelled(n.Pod("older", "write", "--dir", "/data", "--mib", "20"))
	run(t, n, testnode.Resources(older, "64Mi", "", ""))
	poll(t, "older's 20 MiB", 30*time.Second, func() (bool, string) {
		log, _ := os.ReadFile(containerLog(n, "default", older.Name, "app"))
		return strings.Contains(string(log), "workload: ready"), "not written yet"
	})
	run(t, n, innocentPod(n))
	threshold := statfsFree(t, n.RootDir()) - 100<<20
	startEvictd(t, n, fmt.Sprintf("--eviction-hard=nodefs.available<%d", threshold), "--housekeeping-interval="+interval.String(),
		"--minimum-image-ttl-duration=0s", "--eviction-pressure-transition-period=5s")
	t.Logf("nodefs free %d MiB; threshold nodefs.available<%d MiB", (threshold+100<<20)>>20, threshold>>20)

	tick := waitTick(t, n, 2*interval)
	deleted := watchDeletion(t, n, "default", "writer")
	history := watchHistory(t, n, "default", "writer")
	writer := labelled(n.Pod("writer", "write", "--dir", "/data", "--mib", "200"))
	for time.Since(tick) < 8*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	created, err := n.Admin().CoreV1().Pods("default").Create(t.Context(), writer, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-deleted:
	case <-time.After(3 * interval):
		t.Fatalf("writer not evicted within %s (nodefs free %d MiB)", 3*interval, statfsFree(t, n.RootDir())>>20)
	}
	poll(t, "writer to go", 30*time.Second, func() (bool, string) { return gone(t, n, "default", "writer") })
	young(t, n, created, history, interval)
	usage := verifyEvictionEvent(t, n, writer, v1.ResourceEphemeralStorage)
	if usage.Value() < 190<<20 {
		t.Errorf("writer's quoted usage %s, want the 200 MiB it wrote", usage.String())
	}
	// One container, no volume: the pod's ranked usage is the
	// container's writable layer and logs, to the byte.
	checkRankedOn(t, n, created, usage, 0)
	alive(t, n, "default", "older")
	alive(t, n, "default", "innocent-pod")
	for _, p := range []string{"older", "innocent-pod"} {
		if k := evictions(t, n, "default", p); k != 0 {
			t.Errorf("%s: %d Evicted events", p, k)
		}
	}
}

// innocentPod is the kubelet's innocentPod: within its requests of 50Mi
// of memory and ephemeral storage, which it also has as limits.
func innocentPod(n *testnode.Node) *v1.Pod {
	p := labelled(n.Pod("innocent-pod", "sleep"))
	p.Spec.Containers[0].Name = "innocent-container"
	q := resource.MustParse("50Mi")
	rl := v1.ResourceList{v1.ResourceMemory: q, v1.ResourceEphemeralStorage: q}
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rl, Limits: rl}
	grace := int64(1)
	p.Spec.TerminationGracePeriodSeconds = &grace
	return p
}

// containerLog is the log file of the first attempt of a pod's container.
func containerLog(n *testnode.Node, ns, name, container string) string {
	p, err := n.Admin().CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s/%s_%s_%s/%s/0.log", n.PodLogsDir(), ns, name, p.UID, container)
}

// waitTick waits for evictd's next pass started by the housekeeping
// interval and returns when the test saw it (within 50 ms).
func waitTick(t *testing.T, n *testnode.Node, timeout time.Duration) time.Time {
	t.Helper()
	const series = `evictd_passes_total{trigger="tick"}`
	before := metric(t, n, series)
	deadline := time.Now().Add(timeout)
	for {
		if metric(t, n, series) > before {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no housekeeping pass within %s", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// young fails t unless evictd decided to evict pod (the decision log's
// observedAt) less than interval after its container started, as the
// pod's last state before its deletion gives the start (in whole seconds,
// truncated: the container is younger still).
func young(t *testing.T, n *testnode.Node, pod *v1.Pod, history <-chan podHistory, interval time.Duration) {
	t.Helper()
	decided := lastDecision(t, n, pod.Namespace+"/"+pod.Name)
	var h podHistory
	select {
	case h = <-history:
	case <-time.After(10 * time.Second):
		t.Fatalf("the watch never saw %s deleted", pod.Name)
	}
	var started time.Time
	for _, c := range h.last.Status.ContainerStatuses {
		switch {
		case c.State.Running != nil:
			started = c.State.Running.StartedAt.Time
		case c.State.Terminated != nil:
			started = c.State.Terminated.StartedAt.Time
		}
	}
	if started.IsZero() {
		t.Fatalf("%s: no container start in its last state %s; the watch saw:\n%s", pod.Name, podSummary(h.last), strings.Join(h.events, "\n"))
	}
	age := decided.Sub(started)
	t.Logf("%s: created %s, container started %s, evicted by the pass of %s: %s after the start (housekeeping interval %s)",
		pod.Name, pod.CreationTimestamp.Format(time.RFC3339), started.Format(time.RFC3339), decided.Format(time.RFC3339Nano),
		age.Round(time.Millisecond), interval)
	if age >= interval {
		t.Errorf("%s evicted %s after its container started, not younger than one housekeeping interval (%s)", pod.Name, age, interval)
	}
}

// verifyEvictionEvent is the kubelet's verifyEvictionEvents for one pod
// evicted for starved, with the offending containers' annotations checked
// for ephemeral storage too (the pods here use no volume), and the
// message's line for the container: one Evicted event; starved_resource
// is starved; offending_containers names the pod's first container among
// at most as many as the pod has; offending_containers_usage parses as a
// quantity above its request; the message says "Container <name> was
// using <usage>, request is <request>, has larger consumption of
// <starved>." with that usage. It returns the usage.
func verifyEvictionEvent(t *testing.T, n *testnode.Node, pod *v1.Pod, starved v1.ResourceName) resource.Quantity {
	t.Helper()
	evs := evictedEvents(t, n, pod.Namespace, pod.Name)
	if len(evs) != 1 {
		t.Fatalf("%s: %d Evicted events, want 1: %+v", pod.Name, len(evs), evs)
	}
	ev := evs[0]
	t.Logf("%s's Evicted event: %q, annotations %v", pod.Name, ev.Message, ev.Annotations)
	if got, ok := ev.Annotations["starved_resource"]; !ok || v1.ResourceName(got) != starved {
		t.Errorf("starved_resource = %q (present %v), want %s", got, ok, starved)
	}
	ctr := pod.Spec.Containers[0]
	offenders, ok := ev.Annotations["offending_containers"]
	names := strings.Split(offenders, ",")
	if !ok || offenders == "" || len(names) > len(pod.Spec.Containers) {
		t.Fatalf("offending_containers = %q (present %v), want 1 to %d names", offenders, ok, len(pod.Spec.Containers))
	}
	at := -1
	for i, name := range names {
		if name == ctr.Name {
			at = i
		}
	}
	if at < 0 {
		t.Fatalf("offending_containers = %q, want %s among them", offenders, ctr.Name)
	}
	usages := strings.Split(ev.Annotations["offending_containers_usage"], ",")
	if len(usages) != len(names) {
		t.Fatalf("offending_containers_usage = %q, want one usage for each of %q", ev.Annotations["offending_containers_usage"], offenders)
	}
	usage, err := resource.ParseQuantity(usages[at])
	if err != nil {
		t.Fatalf("offending_containers_usage %q: %v", usages[at], err)
	}
	request := ctr.Resources.Requests[starved]
	if usage.Cmp(request) <= 0 {
		t.Errorf("%s's usage %s does not exceed its request %s", ctr.Name, usage.String(), request.String())
	}
	line := fmt.Sprintf("Container %s was using %s, request is %s, has larger consumption of %s. ", ctr.Name, usages[at], request.String(), starved)
	if !strings.Contains(ev.Message, line) {
		t.Errorf("Evicted event %q lacks %q", ev.Message, line)
	}
	if want := fmt.Sprintf("The node was low on resource: %s. ", starved); !strings.HasPrefix(ev.Message, want) {
		t.Errorf("Evicted event %q does not start with %q", ev.Message, want)
	}
	return usage
}

// rankedUsageRE finds the pod's usage in the reason of a decision line
// ("... ranks first (exceeds request: usage 1.7Gi > request 0)" or
// "(usage−request 200.0Mi (usage 200.0Mi, request 0))").
var rankedUsageRE = regexp.MustCompile(`ranks first \(.*?\busage ([0-9]+(?:\.[0-9])?)([KMGTPE]i)?\b`)

// checkRankedOn fails t unless the usage quoted for pod's container is
// the usage the decision ranked the pod on, as evictd's decision log
// gives it (one decimal of its unit: within half a tenth of it), less at
// most slack (what the pod's cgroup holds beside the container: its
// sandbox's pause process).
func checkRankedOn(t *testing.T, n *testnode.Node, pod *v1.Pod, quoted resource.Quantity, slack int64) {
	t.Helper()
	data, err := os.ReadFile(n.LogPath("evictd"))
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "msg=decision") && strings.Contains(l, "outcome=evict ") && strings.Contains(l, "pod="+pod.Namespace+"/"+pod.Name+" ") {
			line = l
		}
	}
	m := rankedUsageRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no ranked usage in the decision to evict %s: %q", pod.Name, line)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	unit, tolerance := 1.0, 0.0
	if m[2] != "" {
		unit = math.Pow(1024, float64(strings.Index("KMGTPE", m[2][:1])+1))
		if strings.Contains(m[1], ".") {
			tolerance = 0.05 * unit
		}
	}
	ranked := v * unit
	q := float64(quoted.Value())
	t.Logf("%s: ranked on usage %s%s, quoted %s", pod.Name, m[1], m[2], quoted.String())
	if q > ranked+tolerance || q < ranked-tolerance-float64(slack) {
		t.Errorf("%s: the message quotes %s (%.0f bytes), the decision ranked the pod on %s%s (%.0f ± %.0f bytes, less at most %d): not the same reading",
			pod.Name, quoted.String(), q, m[1], m[2], ranked, tolerance, slack)
	}
}
