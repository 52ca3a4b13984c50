package decide

import (
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/ranking"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

func i64(v int64) *int64 { return &v }

func TestGracePeriod(t *testing.T) {
	hard := thresholds.Threshold{Signal: signals.MemoryAvailable}
	soft := thresholds.Threshold{Signal: signals.MemoryAvailable, Soft: true, GracePeriod: time.Minute}
	for _, tc := range []struct {
		name     string
		th       thresholds.Threshold
		maxGrace int64
		own      *int64
		want     int64
	}{
		{"hard ignores everything", hard, 600, i64(120), 1},
		{"soft: max-pod-grace below the pod's", soft, 10, i64(120), 10},
		{"soft: the pod's below max-pod-grace", soft, 600, i64(45), 45},
		{"soft: pod sets none, API default 30", soft, 600, nil, 30},
		{"soft: max-pod-grace 0 never gives 0", soft, 0, i64(120), 1},
		{"soft: pod's own 0 never gives 0", soft, 600, i64(0), 1},
		{"soft: negative max defers to the pod", soft, -1, i64(300), 300},
		{"soft: negative max, pod sets none", soft, -1, nil, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &signals.Pod{TerminationGracePeriodSeconds: tc.own}
			if got := gracePeriod(tc.th, pod, tc.maxGrace); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestEvictionMessage(t *testing.T) {
	th := thresholds.Threshold{Signal: signals.MemoryAvailable}
	q, err := thresholds.Parse(thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	th = q.Thresholds[0]
	obs := signals.Observation{Signal: signals.MemoryAvailable, Available: 80 * mi, Capacity: 10240 * mi, Time: t0}
	pod := &signals.Pod{Namespace: "default", Name: "web", Containers: []signals.Container{
		{Name: "app", MemoryRequest: 128 * mi},
		{Name: "sidecar", MemoryRequest: 64 * mi},
	}}
	st := &signals.PodStats{Containers: []signals.ContainerStats{
		{Name: "app", MemoryWorkingSet: i64(600 * mi)},
		{Name: "sidecar", MemoryWorkingSet: i64(10 * mi)},
	}}
	msg, ann := evictionMessage(th, obs, ranking.Candidate{Pod: pod, Stats: st})
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. " +
		"Container app was using 600Mi, request is 128Mi, has larger consumption of memory. "
	if msg != want {
		t.Errorf("message:\ngot  %q\nwant %q", msg, want)
	}
	for k, v := range map[string]string{"offending_containers": "app", "offending_containers_usage": "600Mi", "starved_resource": "memory"} {
		if ann[k] != v {
			t.Errorf("annotation %s: got %q, want %q", k, ann[k], v)
		}
	}

	// A percentage threshold prints the quantity it stands for; inodes
	// have no container lines.
	q, err = thresholds.Parse(thresholds.Settings{Hard: map[string]string{"nodefs.inodesFree": "5%"}})
	if err != nil {
		t.Fatal(err)
	}
	obs = signals.Observation{Signal: signals.NodeFsInodesFree, Available: 3000, Capacity: 100000, Time: t0}
	msg, ann = evictionMessage(q.Thresholds[0], obs, ranking.Candidate{Pod: pod, Stats: st})
	if want := "The node was low on resource: inodes. Threshold quantity: 5k, available: 3k. "; msg != want {
		t.Errorf("inode message:\ngot  %q\nwant %q", msg, want)
	}
	if ann["offending_containers"] != "" {
		t.Errorf("inode eviction names containers %q, want none", ann["offending_containers"])
	}
}

// TestEvictionMessageAbsurdUsage: usage at the int64 limit, whose sum
// would overflow, and negative measurements write a sane message.
func TestEvictionMessageAbsurdUsage(t *testing.T) {
	const maxI = int64(1<<63 - 1)
	q, err := thresholds.Parse(thresholds.Settings{Hard: map[string]string{"nodefs.available": "1Gi"}})
	if err != nil {
		t.Fatal(err)
	}
	obs := signals.Observation{Signal: signals.NodeFsAvailable, Available: 512 * mi, Capacity: 100 << 30, Time: t0}
	pod := &signals.Pod{Namespace: "default", Name: "w", Containers: []signals.Container{
		{Name: "huge", EphemeralStorageRequest: maxI - 1},
		{Name: "over", EphemeralStorageRequest: 0},
		{Name: "negative"},
	}}
	st := &signals.PodStats{Containers: []signals.ContainerStats{
		{Name: "huge", Rootfs: &signals.FsUsage{Bytes: maxI}, Logs: &signals.FsUsage{Bytes: maxI}},
		{Name: "over", Rootfs: &signals.FsUsage{Bytes: maxI}, Logs: &signals.FsUsage{Bytes: 5}},
		{Name: "negative", Rootfs: &signals.FsUsage{Bytes: -10}, Logs: &signals.FsUsage{Bytes: -1}},
	}}
	msg, ann := evictionMessage(q.Thresholds[0], obs, ranking.Candidate{Pod: pod, Stats: st})
	want := "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 512Mi. " +
		"Container huge was using 9223372036854775807, request is 9223372036854775806, has larger consumption of ephemeral-storage. " +
		"Container over was using 9223372036854775807, request is 0, has larger consumption of ephemeral-storage. "
	if msg != want {
		t.Errorf("message:\ngot  %q\nwant %q", msg, want)
	}
	if got := ann["offending_containers"]; got != "huge,over" {
		t.Errorf("offending containers: got %q, want huge,over", got)
	}
}

func TestDecide(t *testing.T) {
	hard := func(t *testing.T, sig, v string) []thresholds.Threshold {
		p, err := thresholds.Parse(thresholds.Settings{Hard: map[string]string{sig: v}})
		if err != nil {
			t.Fatal(err)
		}
		return p.Thresholds
	}
	memObs := func(avail int64) signals.Observations {
		return signals.Observations{signals.MemoryAvailable: {Signal: signals.MemoryAvailable, Available: avail, Capacity: 10240 * mi, Time: t0}}
	}
	besteffort := signals.Pod{Namespace: "default", Name: "be", UID: "be", QOS: signals.BestEffort}
	static := signals.Pod{Namespace: "kube-system", Name: "etcd", UID: "etcd", QOS: signals.BestEffort, Static: true}
	usage := map[string]signals.PodStats{
		"be":   {UID: "be", MemoryWorkingSet: i64(100 * mi)},
		"etcd": {UID: "etcd", MemoryWorkingSet: i64(2000 * mi)},
	}
	for _, tc := range []struct {
		name        string
		ths         []thresholds.Threshold
		obs         signals.Observations
		pods        []signals.Pod
		wantOutcome Outcome
		wantPod     string
		wantReason  string
	}{
		{"nothing met", hard(t, "memory.available", "100Mi"), memObs(200 * mi), []signals.Pod{besteffort}, OutcomeNone, "", "no threshold met"},
		{"equal is not below", hard(t, "memory.available", "100Mi"), memObs(100 * mi), []signals.Pod{besteffort}, OutcomeNone, "", "no threshold met"},
		{"met: the critical pod is passed over", hard(t, "memory.available", "100Mi"), memObs(50 * mi), []signals.Pod{static, besteffort}, OutcomeEvict, "be", "default/be ranks first"},
		{"met: only critical pods", hard(t, "memory.available", "100Mi"), memObs(50 * mi), []signals.Pod{static}, OutcomeNoEvictablePod, "", "no pod may be evicted"},
		{"met: no pods", hard(t, "memory.available", "100Mi"), memObs(50 * mi), nil, OutcomeNoEvictablePod, "", "no pod may be evicted"},
		{"signal not observed", hard(t, "pid.available", "100"), memObs(50 * mi), []signals.Pod{besteffort}, OutcomeNone, "", "no threshold met"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecider(DeciderConfig{Thresholds: tc.ths, TransitionPeriod: time.Minute})
			dec := d.Decide(t0, tc.obs, tc.pods, usage)
			if dec.Outcome != tc.wantOutcome {
				t.Fatalf("outcome: got %s, want %s (reason %q)", dec.Outcome, tc.wantOutcome, dec.Reason)
			}
			var got string
			if dec.Pod != nil {
				got = dec.Pod.Name
			}
			if got != tc.wantPod {
				t.Errorf("pod: got %q, want %q", got, tc.wantPod)
			}
			if !strings.Contains(dec.Reason, tc.wantReason) {
				t.Errorf("reason: got %q, want it to contain %q", dec.Reason, tc.wantReason)
			}
		})
	}
}

// TestDecideAbsurdPods: requests above the node's capacity, zero,
// negative and at the int64 limit, usage at the int64 limit: the decision
// is made without overflow or panic, for the pod furthest over its request.
func TestDecideAbsurdPods(t *testing.T) {
	const maxI = int64(1<<63 - 1)
	ths, err := thresholds.Parse(thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	pods := []signals.Pod{
		{Namespace: "default", Name: "above-capacity", UID: "a", QOS: signals.Burstable, MemoryRequest: 1 << 50,
			Containers: []signals.Container{{Name: "app", MemoryRequest: 1 << 50}}},
		{Namespace: "default", Name: "max-request", UID: "b", QOS: signals.Burstable, MemoryRequest: maxI,
			Containers: []signals.Container{{Name: "app", MemoryRequest: maxI}}},
		{Namespace: "default", Name: "negative-request", UID: "c", QOS: signals.Burstable, MemoryRequest: -1,
			Containers: []signals.Container{{Name: "app", MemoryRequest: -1}}},
		{Namespace: "default", Name: "max-usage", UID: "d", QOS: signals.BestEffort,
			Containers: []signals.Container{{Name: "app"}}},
	}
	stats := map[string]signals.PodStats{
		"a": {UID: "a", MemoryWorkingSet: i64(8 << 30), Containers: []signals.ContainerStats{{Name: "app", MemoryWorkingSet: i64(8 << 30)}}},
		"b": {UID: "b", MemoryWorkingSet: i64(maxI), Containers: []signals.ContainerStats{{Name: "app", MemoryWorkingSet: i64(maxI)}}},
		"c": {UID: "c", MemoryWorkingSet: i64(10 * mi), Containers: []signals.ContainerStats{{Name: "app", MemoryWorkingSet: i64(10 * mi)}}},
		"d": {UID: "d", MemoryWorkingSet: i64(maxI), Containers: []signals.ContainerStats{{Name: "app", MemoryWorkingSet: i64(maxI)}}},
	}
	d := NewDecider(DeciderConfig{Thresholds: ths.Thresholds})
	obs := signals.Observations{signals.MemoryAvailable: {Signal: signals.MemoryAvailable, Available: 50 * mi, Capacity: 24 << 30, Time: t0}}
	dec := d.Decide(t0, obs, pods, stats)
	if dec.Outcome != OutcomeEvict || dec.Pod.Name != "max-usage" {
		t.Fatalf("got %s of %v (%s), want to evict max-usage", dec.Outcome, dec.Pod, dec.Reason)
	}
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. " +
		"Container app was using 9223372036854775807, request is 0, has larger consumption of memory. "
	if dec.Message != want {
		t.Errorf("message:\ngot  %q\nwant %q", dec.Message, want)
	}
	var order []string
	for _, c := range dec.Candidates {
		order = append(order, c.Pod.Name)
	}
	if got := strings.Join(order, ","); got != "max-usage,negative-request,max-request,above-capacity" {
		t.Errorf("ranking: got %s", got)
	}
}

// TestDecideWithoutStats: pods without stats rank first, but when no
// evictable pod has stats for the signal (the runtime down for disk, the
// cgroups unreadable for memory), none is evicted; signals ranked by
// priority alone need no stats.
func TestDecideWithoutStats(t *testing.T) {
	hard := func(sig, v string) []thresholds.Threshold {
		p, err := thresholds.Parse(thresholds.Settings{Hard: map[string]string{sig: v}})
		if err != nil {
			t.Fatal(err)
		}
		return p.Thresholds
	}
	obs := signals.Observations{}
	for _, s := range []signals.Signal{signals.MemoryAvailable, signals.NodeFsAvailable, signals.ImageFsAvailable} {
		obs[s] = signals.Observation{Signal: s, Available: 50 * mi, Capacity: 10240 * mi, Time: t0}
	}
	app := []signals.Container{{Name: "app"}}
	a := signals.Pod{Namespace: "default", Name: "a", UID: "a", QOS: signals.BestEffort, Containers: app}
	b := signals.Pod{Namespace: "default", Name: "b", UID: "b", QOS: signals.BestEffort, Containers: app}
	crit := signals.Pod{Namespace: "kube-system", Name: "c", UID: "c", QOS: signals.BestEffort, Static: true, Containers: app}
	disk := func(uid string, bytes int64) signals.PodStats {
		return signals.PodStats{UID: uid, Containers: []signals.ContainerStats{{Name: "app",
			Rootfs: &signals.FsUsage{Bytes: bytes, Inodes: 1}, Logs: &signals.FsUsage{}}}}
	}
	// With the runtime down the pods have their cgroup figures and their
	// logs, but no writable layers.
	runtimeDown := map[string]signals.PodStats{
		"a": {UID: "a", MemoryWorkingSet: i64(10 * mi), Containers: []signals.ContainerStats{{Name: "app", Logs: &signals.FsUsage{}}}},
		"b": {UID: "b", MemoryWorkingSet: i64(900 * mi), Containers: []signals.ContainerStats{{Name: "app", Logs: &signals.FsUsage{}}}},
	}
	for _, tc := range []struct {
		name        string
		ths         []thresholds.Threshold
		layout      signals.FsLayout
		pods        []signals.Pod
		stats       map[string]signals.PodStats
		wantOutcome Outcome
		wantPod     string
		wantReason  string
	}{
		{"disk, runtime down: no pod has disk stats", hard("nodefs.available", "100Mi"), signals.SingleFs,
			[]signals.Pod{a, b}, runtimeDown, OutcomeNoEvictablePod, "", "no pod has stats for it"},
		{"disk, only the critical pod measured", hard("nodefs.available", "100Mi"), signals.SingleFs,
			[]signals.Pod{a, b, crit}, map[string]signals.PodStats{"c": disk("c", 500*mi)}, OutcomeNoEvictablePod, "", "no pod has stats for it"},
		{"disk, one pod unmeasured: it ranks first", hard("nodefs.available", "100Mi"), signals.SingleFs,
			[]signals.Pod{a, b}, map[string]signals.PodStats{"a": disk("a", 500*mi)}, OutcomeEvict, "b", "ranks first"},
		{"disk, all measured", hard("nodefs.available", "100Mi"), signals.SingleFs,
			[]signals.Pod{a, b}, map[string]signals.PodStats{"a": disk("a", 500*mi), "b": disk("b", 5*mi)}, OutcomeEvict, "a", "ranks first"},
		{"memory, runtime down: cgroups still tell", hard("memory.available", "100Mi"), signals.SingleFs,
			[]signals.Pod{a, b}, runtimeDown, OutcomeEvict, "b", "ranks first"},
		{"memory, no cgroup readable", hard("memory.available", "100Mi"), signals.SingleFs,
			[]signals.Pod{a, b}, nil, OutcomeNoEvictablePod, "", "no pod has stats for it"},
		{"split imagefs ranks by priority: no stats needed", hard("imagefs.available", "100Mi"), signals.SplitImageFs,
			[]signals.Pod{a, b}, nil, OutcomeEvict, "a", "ranks first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecider(DeciderConfig{Thresholds: tc.ths, TransitionPeriod: time.Minute, Layout: tc.layout})
			dec := d.Decide(t0, obs, tc.pods, tc.stats)
			if dec.Outcome != tc.wantOutcome {
				t.Fatalf("outcome: got %s, want %s (reason %q)", dec.Outcome, tc.wantOutcome, dec.Reason)
			}
			var got string
			if dec.Pod != nil {
				got = dec.Pod.Name
			}
			if got != tc.wantPod {
				t.Errorf("pod: got %q, want %q", got, tc.wantPod)
			}
			if !strings.Contains(dec.Reason, tc.wantReason) {
				t.Errorf("reason: got %q, want it to contain %q", dec.Reason, tc.wantReason)
			}
		})
	}
}
