package decide

import (
	"fmt"
	"maps"
	"testing"

	"github.com/evictd/evictd/ranking"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// TestEvictionMessageKubelet ports the cases of the kubelet's
// TestEvictionMessage (pkg/kubelet/eviction/helpers_test.go, v1.36.3):
// which containers are named and in what order, against which request,
// and the pod-level line of a pod with pod-level resources. The pod's
// containers are listed as podsource.Convert lists them: the app
// containers, then the init containers (sidecars or not); ephemeral
// containers are not among them. The stats list the containers running
// when the eviction happens, in the kubelet test's order.
func TestEvictionMessageKubelet(t *testing.T) {
	const podName = "pod-eviction-message"
	type ctr struct {
		name    string
		request int64
	}
	type line struct {
		name, usage, request string
	}
	for _, tc := range []struct {
		name string
		// podRequest is the pod-level memory request, nil when the pod
		// has no pod-level resources.
		podRequest *signals.Request
		podUsage   *int64
		containers []ctr
		stats      []signals.ContainerStats
		// podLine is the pod's own line, "" when none is expected.
		podLine string
		want    []line
	}{
		{
			name:       "no container exceeds memory usage",
			containers: []ctr{{"regular1", 200 * mi}, {"init1", 100 * mi}, {"restartable-init1", 200 * mi}},
			// Terminated init containers have no stats.
			stats: []signals.ContainerStats{
				{Name: "restartable-init1", MemoryWorkingSet: i64(150 * mi)},
				{Name: "regular1", MemoryWorkingSet: i64(100 * mi)},
			},
		},
		{
			name:       "init container exceeds memory usage",
			containers: []ctr{{"regular1", 200 * mi}, {"init1", 100 * mi}, {"restartable-init1", 200 * mi}, {"init2", 150 * mi}},
			// The eviction happened while init1 ran.
			stats: []signals.ContainerStats{{Name: "init1", MemoryWorkingSet: i64(150 * mi)}},
			want:  []line{{"init1", "150Mi", "100Mi"}},
		},
		{
			name:       "restartable init container exceeds memory usage",
			containers: []ctr{{"regular1", 200 * mi}, {"init1", 100 * mi}, {"restartable-init1", 200 * mi}, {"restartable-init2", 200 * mi}},
			stats: []signals.ContainerStats{
				{Name: "restartable-init1", MemoryWorkingSet: i64(250 * mi)},
				{Name: "restartable-init2", MemoryWorkingSet: i64(150 * mi)},
				{Name: "regular1", MemoryWorkingSet: i64(200 * mi)},
			},
			want: []line{{"restartable-init1", "250Mi", "200Mi"}},
		},
		{
			name:       "regular container exceeds memory usage",
			containers: []ctr{{"regular1", 200 * mi}, {"regular2", 300 * mi}, {"init1", 100 * mi}, {"restartable-init1", 200 * mi}},
			stats: []signals.ContainerStats{
				{Name: "restartable-init1", MemoryWorkingSet: i64(200 * mi)},
				{Name: "regular1", MemoryWorkingSet: i64(250 * mi)},
				{Name: "regular2", MemoryWorkingSet: i64(250 * mi)},
			},
			want: []line{{"regular1", "250Mi", "200Mi"}},
		},
		{
			name:       "ephemeral container exceeds memory usage",
			containers: []ctr{{"regular1", 200 * mi}, {"init1", 100 * mi}, {"restartable-init1", 200 * mi}},
			stats: []signals.ContainerStats{
				{Name: "restartable-init1", MemoryWorkingSet: i64(200 * mi)},
				{Name: "regular1", MemoryWorkingSet: i64(150 * mi)},
				{Name: "ephemeral1", MemoryWorkingSet: i64(250 * mi)},
			},
		},
		{
			name:       "regular and restartable init containers without memory requests",
			containers: []ctr{{"regular1", 0}, {"init1", 100 * mi}, {"restartable-init1", 0}, {"restartable-init2", 300 * mi}},
			stats: []signals.ContainerStats{
				{Name: "restartable-init1", MemoryWorkingSet: i64(250 * mi)},
				{Name: "restartable-init2", MemoryWorkingSet: i64(250 * mi)},
				{Name: "regular1", MemoryWorkingSet: i64(200 * mi)},
			},
			want: []line{{"restartable-init1", "250Mi", "0"}, {"regular1", "200Mi", "0"}},
		},
		{
			name: "multiple regular and restartable init containers exceed memory usage",
			containers: []ctr{
				{"regular1", 300 * mi}, {"regular2", 200 * mi}, {"regular3", 100 * mi},
				{"init1", 100 * mi}, {"init2", 100 * mi}, {"init3", 100 * mi},
				{"restartable-init1", 100 * mi}, {"restartable-init2", 200 * mi}, {"restartable-init3", 300 * mi},
			},
			stats: []signals.ContainerStats{
				{Name: "restartable-init1", MemoryWorkingSet: i64(150 * mi)},
				{Name: "restartable-init2", MemoryWorkingSet: i64(250 * mi)},
				{Name: "restartable-init3", MemoryWorkingSet: i64(250 * mi)},
				{Name: "regular1", MemoryWorkingSet: i64(50 * mi)},
				{Name: "regular2", MemoryWorkingSet: i64(250 * mi)},
				{Name: "regular3", MemoryWorkingSet: i64(400 * mi)},
			},
			want: []line{
				{"restartable-init1", "150Mi", "100Mi"}, {"restartable-init2", "250Mi", "200Mi"},
				{"regular2", "250Mi", "200Mi"}, {"regular3", "400Mi", "100Mi"},
			},
		},
		{
			name:       "pod with pod-level resources exceeds memory usage",
			podRequest: &signals.Request{Bytes: 250 * mi, Text: "250Mi"},
			podUsage:   i64(600 * mi),
			containers: []ctr{{"regular1", 0}, {"regular2", 0}},
			stats: []signals.ContainerStats{
				{Name: "regular1", MemoryWorkingSet: i64(250 * mi)},
				{Name: "regular2", MemoryWorkingSet: i64(350 * mi)},
			},
			podLine: "Pod pod-eviction-message was using 600Mi, request is 250Mi, has larger consumption of memory. ",
			want:    []line{{"regular1", "250Mi", "0"}, {"regular2", "350Mi", "0"}},
		},
		// Beyond the kubelet's table, by its rule:
		{
			name:       "pod-level line whether or not the pod exceeds its request",
			podRequest: &signals.Request{Bytes: 1024 * mi, Text: "1Gi"},
			podUsage:   i64(300 * mi),
			containers: []ctr{{"app", 200 * mi}, {"sidecar", 0}},
			stats: []signals.ContainerStats{
				{Name: "app", MemoryWorkingSet: i64(250 * mi)},
				{Name: "sidecar", MemoryWorkingSet: i64(50 * mi)},
			},
			podLine: "Pod pod-eviction-message was using 300Mi, request is 1Gi, has larger consumption of memory. ",
			want:    []line{{"app", "250Mi", "200Mi"}, {"sidecar", "50Mi", "0"}},
		},
		{
			name:       "pod-level request printed as the spec's quantity",
			podRequest: &signals.Request{Bytes: 1000000000, Text: "1G"},
			podUsage:   i64(1500 * mi),
			containers: []ctr{{"app", 0}},
			stats:      []signals.ContainerStats{{Name: "app", MemoryWorkingSet: i64(1500 * mi)}},
			podLine:    "Pod pod-eviction-message was using 1500Mi, request is 1G, has larger consumption of memory. ",
			want:       []line{{"app", "1500Mi", "0"}},
		},
		{
			name:       "no pod line without the pod's working set",
			podRequest: &signals.Request{Bytes: 250 * mi, Text: "250Mi"},
			containers: []ctr{{"app", 0}},
			stats:      []signals.ContainerStats{{Name: "app", MemoryWorkingSet: i64(300 * mi)}},
			want:       []line{{"app", "300Mi", "0"}},
		},
		{
			name:       "no pod line without a pod-level request",
			podUsage:   i64(600 * mi),
			containers: []ctr{{"app", 100 * mi}},
			stats:      []signals.ContainerStats{{Name: "app", MemoryWorkingSet: i64(600 * mi)}},
			want:       []line{{"app", "600Mi", "100Mi"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &signals.Pod{Namespace: "default", Name: podName, PodLevelMemoryRequest: tc.podRequest}
			for _, c := range tc.containers {
				pod.Containers = append(pod.Containers, signals.Container{Name: c.name, MemoryRequest: c.request})
			}
			st := &signals.PodStats{MemoryWorkingSet: tc.podUsage, Containers: tc.stats}
			obs := signals.Observation{Signal: signals.MemoryAvailable, Available: 80 * mi, Capacity: 10240 * mi, Time: t0}
			th := hardThreshold(t, "memory.available", "100Mi")

			msg, ann := evictionMessage(th, obs, ranking.Candidate{Pod: pod, Stats: st})

			want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. " + tc.podLine
			wantAnn := map[string]string{"starved_resource": "memory"}
			if tc.podLine != "" {
				wantAnn["offending_pod"] = podName
				wantAnn["offending_pod_usage"] = quantity(*tc.podUsage, signals.ResourceMemory)
			}
			var names, usages string
			for i, l := range tc.want {
				want += fmt.Sprintf("Container %s was using %s, request is %s, has larger consumption of memory. ", l.name, l.usage, l.request)
				if i > 0 {
					names, usages = names+",", usages+","
				}
				names, usages = names+l.name, usages+l.usage
			}
			wantAnn["offending_containers"], wantAnn["offending_containers_usage"] = names, usages
			if msg != want {
				t.Errorf("message:\ngot  %q\nwant %q", msg, want)
			}
			if !maps.Equal(ann, wantAnn) {
				t.Errorf("annotations: got %v, want %v", ann, wantAnn)
			}
		})
	}
}

// TestEvictionMessagePodLevelOtherResources: the pod-level line is for
// memory alone, as the kubelet's; a disk eviction of the same pod names
// only its containers.
func TestEvictionMessagePodLevelOtherResources(t *testing.T) {
	pod := &signals.Pod{Namespace: "default", Name: "web", PodLevelMemoryRequest: &signals.Request{Bytes: 250 * mi, Text: "250Mi"},
		Containers: []signals.Container{{Name: "app"}}}
	st := &signals.PodStats{MemoryWorkingSet: i64(600 * mi), Containers: []signals.ContainerStats{
		{Name: "app", MemoryWorkingSet: i64(600 * mi), Rootfs: &signals.FsUsage{Bytes: 2 * mi}, Logs: &signals.FsUsage{}},
	}}
	obs := signals.Observation{Signal: signals.NodeFsAvailable, Available: 512 * mi, Capacity: 100 << 30, Time: t0}
	th := hardThreshold(t, "nodefs.available", "1Gi")
	msg, ann := evictionMessage(th, obs, ranking.Candidate{Pod: pod, Stats: st})
	want := "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 512Mi. " +
		"Container app was using 2Mi, request is 0, has larger consumption of ephemeral-storage. "
	if msg != want {
		t.Errorf("message:\ngot  %q\nwant %q", msg, want)
	}
	for _, k := range []string{"offending_pod", "offending_pod_usage"} {
		if v, ok := ann[k]; ok {
			t.Errorf("annotation %s = %q on a disk eviction, want none", k, v)
		}
	}
}

// hardThreshold is the one hard threshold sig<v.
func hardThreshold(t *testing.T, sig, v string) thresholds.Threshold {
	t.Helper()
	q, err := thresholds.Parse(thresholds.Settings{Hard: map[string]string{sig: v}})
	if err != nil {
		t.Fatal(err)
	}
	return q.Thresholds[0]
}

// TestEvictionMessageEphemeralStorageUsage: a container's ephemeral-storage
// usage is its writable layer plus its logs, as the kubelet's message
// counts it; with either not measured (or negative, which is no
// measurement) the container is not named, as the kubelet names none
// without both: half the figure is one no pass ranked on.
func TestEvictionMessageEphemeralStorageUsage(t *testing.T) {
	fs := func(b int64) *signals.FsUsage { return &signals.FsUsage{Bytes: b, Inodes: 1} }
	for _, tc := range []struct {
		name         string
		rootfs, logs *signals.FsUsage
		request      int64
		want         string // the usage quoted, "" for no line
	}{
		{name: "both", rootfs: fs(30 * mi), logs: fs(2 * mi), want: "32Mi"},
		{name: "logs empty", rootfs: fs(30 * mi), logs: fs(0), want: "30Mi"},
		{name: "over its request", rootfs: fs(30 * mi), logs: fs(2 * mi), request: 16 * mi, want: "32Mi"},
		{name: "within its request", rootfs: fs(30 * mi), logs: fs(2 * mi), request: 32 * mi},
		{name: "no writable layer (the runtime gave none)", logs: fs(2 * mi)},
		{name: "no logs (their directory not made yet)", rootfs: fs(30 * mi)},
		{name: "neither", rootfs: nil, logs: nil},
		{name: "a negative writable layer", rootfs: fs(-1), logs: fs(2 * mi)},
		{name: "negative logs", rootfs: fs(30 * mi), logs: fs(-1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &signals.Pod{Namespace: "default", Name: "w", Containers: []signals.Container{{Name: "app", EphemeralStorageRequest: tc.request}}}
			st := &signals.PodStats{Containers: []signals.ContainerStats{{Name: "app", Rootfs: tc.rootfs, Logs: tc.logs}}}
			obs := signals.Observation{Signal: signals.NodeFsAvailable, Available: 512 * mi, Capacity: 100 << 30, Time: t0}
			msg, ann := evictionMessage(hardThreshold(t, "nodefs.available", "1Gi"), obs, ranking.Candidate{Pod: pod, Stats: st})
			want := "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 512Mi. "
			wantAnn := map[string]string{"starved_resource": "ephemeral-storage", "offending_containers": "", "offending_containers_usage": ""}
			if tc.want != "" {
				want += fmt.Sprintf("Container app was using %s, request is %s, has larger consumption of ephemeral-storage. ",
					tc.want, quantity(tc.request, signals.ResourceEphemeralStorage))
				wantAnn["offending_containers"], wantAnn["offending_containers_usage"] = "app", tc.want
			}
			if msg != want {
				t.Errorf("message:\ngot  %q\nwant %q", msg, want)
			}
			if !maps.Equal(ann, wantAnn) {
				t.Errorf("annotations: got %v, want %v", ann, wantAnn)
			}
		})
	}
}
