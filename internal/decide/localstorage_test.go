package decide

import (
	"reflect"
	"testing"

	"github.com/evictd/evictd/signals"
)

func TestLocalStorageViolations(t *testing.T) {
	fs := func(b int64) *signals.FsUsage { return &signals.FsUsage{Bytes: b, Inodes: 1} }
	pod := func(name string, f func(*signals.Pod)) signals.Pod {
		p := signals.Pod{Namespace: "ns", Name: name, UID: "u-" + name, QOS: signals.Burstable,
			Containers: []signals.Container{{Name: "app"}}, LocalVolumes: []string{"cache"}}
		f(&p)
		return p
	}
	stat := func(name string, rootfs, logs *signals.FsUsage, cache int64) signals.PodStats {
		st := signals.PodStats{UID: "u-" + name, Containers: []signals.ContainerStats{{Name: "app", Rootfs: rootfs, Logs: logs}}}
		if cache >= 0 {
			st.Volumes = map[string]signals.FsUsage{"cache": {Bytes: cache, Inodes: 1}}
		}
		return st
	}
	emptyDir := func(limit int64) func(*signals.Pod) {
		return func(p *signals.Pod) { p.EmptyDirLimits = map[string]int64{"cache": limit} }
	}
	podLimit := func(limit int64) func(*signals.Pod) {
		return func(p *signals.Pod) { p.EphemeralStorageLimit = limit }
	}
	ctrLimit := func(limit int64) func(*signals.Pod) {
		return func(p *signals.Pod) { p.Containers[0].EphemeralStorageLimit = limit }
	}
	all := func(fs ...func(*signals.Pod)) func(*signals.Pod) {
		return func(p *signals.Pod) {
			for _, f := range fs {
				f(p)
			}
		}
	}
	type want struct {
		pod     string
		signal  signals.Signal
		usage   int64
		message string
	}
	tests := []struct {
		name   string
		pod    signals.Pod
		st     *signals.PodStats
		layout signals.FsLayout
		want   []want
	}{
		{name: "emptyDir over its sizeLimit",
			pod: pod("p", emptyDir(100*mi)), st: ptr(stat("p", fs(1), fs(1), 101*mi)),
			want: []want{{"p", SignalEmptyDirLimit, 101 * mi, `Usage of EmptyDir volume "cache" exceeds the limit "100Mi". `}}},
		{name: "emptyDir at its sizeLimit",
			pod: pod("p", emptyDir(100*mi)), st: ptr(stat("p", fs(1), fs(1), 100*mi))},
		{name: "emptyDir without volume stats",
			pod: pod("p", emptyDir(100*mi)), st: ptr(stat("p", fs(1), fs(1), -1))},
		{name: "pod over its limit: rootfs, logs and volumes",
			pod: pod("p", podLimit(1024*mi)), st: ptr(stat("p", fs(600*mi), fs(24*mi), 401*mi)),
			want: []want{{"p", SignalPodEphemeralStorageLimit, 1025 * mi, `Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. `}}},
		{name: "pod over its limit counts rootfs even on a dedicated imagefs",
			pod: pod("p", podLimit(1024*mi)), st: ptr(stat("p", fs(1000*mi), fs(25*mi), 0)), layout: signals.DedicatedImageFs,
			want: []want{{"p", SignalPodEphemeralStorageLimit, 1025 * mi, `Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. `}}},
		{name: "pod under its limit",
			pod: pod("p", podLimit(1024*mi)), st: ptr(stat("p", fs(600*mi), fs(24*mi), 400*mi))},
		{name: "pod limit without rootfs stats",
			pod: pod("p", podLimit(1)), st: ptr(stat("p", nil, fs(24*mi), 400*mi))},
		{name: "container over its limit",
			pod: pod("p", ctrLimit(500*mi)), st: ptr(stat("p", fs(450*mi), fs(51*mi), 0)),
			want: []want{{"p", SignalContainerEphemeralStorageLimit, 501 * mi, `Container app exceeded its local ephemeral storage limit "500Mi". `}}},
		{name: "container rootfs does not count on a dedicated imagefs",
			pod: pod("p", ctrLimit(500*mi)), st: ptr(stat("p", fs(450*mi), fs(51*mi), 0)), layout: signals.DedicatedImageFs},
		{name: "container logs alone over the limit on a dedicated imagefs",
			pod: pod("p", ctrLimit(50*mi)), st: ptr(stat("p", nil, fs(51*mi), 0)), layout: signals.DedicatedImageFs,
			want: []want{{"p", SignalContainerEphemeralStorageLimit, 51 * mi, `Container app exceeded its local ephemeral storage limit "50Mi". `}}},
		{name: "container rootfs counts on a split imagefs",
			pod: pod("p", ctrLimit(500*mi)), st: ptr(stat("p", fs(450*mi), fs(51*mi), 0)), layout: signals.SplitImageFs,
			want: []want{{"p", SignalContainerEphemeralStorageLimit, 501 * mi, `Container app exceeded its local ephemeral storage limit "500Mi". `}}},
		{name: "container without logs stats",
			pod: pod("p", ctrLimit(1)), st: ptr(stat("p", fs(450*mi), nil, 0))},
		{name: "container without rootfs stats where it counts",
			pod: pod("p", ctrLimit(1)), st: ptr(stat("p", nil, fs(1), 0))},
		{name: "emptyDir checked first, one violation per pod",
			pod: pod("p", all(emptyDir(mi), podLimit(mi), ctrLimit(mi))), st: ptr(stat("p", fs(2*mi), fs(2*mi), 2*mi)),
			want: []want{{"p", SignalEmptyDirLimit, 2 * mi, `Usage of EmptyDir volume "cache" exceeds the limit "1Mi". `}}},
		{name: "pod limit before container limit",
			pod: pod("p", all(podLimit(mi), ctrLimit(mi))), st: ptr(stat("p", fs(2*mi), fs(2*mi), 0)),
			want: []want{{"p", SignalPodEphemeralStorageLimit, 4 * mi, `Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. `}}},
		{name: "limit printed in plain bytes when no binary suffix fits",
			pod: pod("p", podLimit(1000000000)), st: ptr(stat("p", fs(1000000001), fs(0), 0)),
			want: []want{{"p", SignalPodEphemeralStorageLimit, 1000000001, `Pod ephemeral local storage usage exceeds the total limit of containers 1000000000. `}}},
		{name: "critical pod never",
			pod: pod("p", all(podLimit(mi), func(p *signals.Pod) { p.Priority = signals.SystemCriticalPriority })), st: ptr(stat("p", fs(2*mi), fs(2*mi), 0))},
		{name: "static pod never",
			pod: pod("p", all(ctrLimit(mi), func(p *signals.Pod) { p.Static = true })), st: ptr(stat("p", fs(2*mi), fs(2*mi), 0))},
		{name: "pod without stats",
			pod: pod("p", all(emptyDir(1), podLimit(1), ctrLimit(1)))},
		{name: "no limits",
			pod: pod("p", func(*signals.Pod) {}), st: ptr(stat("p", fs(1<<40), fs(1<<40), 1<<40))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stats := map[string]signals.PodStats{}
			if tt.st != nil {
				stats[tt.pod.UID] = *tt.st
			}
			vs := localStorageViolations([]signals.Pod{tt.pod}, stats, tt.layout)
			var got []want
			for _, v := range vs {
				got = append(got, want{v.Pod.Name, v.Signal, v.Usage, v.Message})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLocalStorageViolationsSeveralPods(t *testing.T) {
	mk := func(name string, limit int64) signals.Pod {
		return signals.Pod{Namespace: "ns", Name: name, UID: "u-" + name, EphemeralStorageLimit: limit, Containers: []signals.Container{{Name: "app"}}}
	}
	st := func(name string, b int64) signals.PodStats {
		return signals.PodStats{UID: "u-" + name, Containers: []signals.ContainerStats{{Name: "app", Rootfs: &signals.FsUsage{Bytes: b}, Logs: &signals.FsUsage{}}}}
	}
	pods := []signals.Pod{mk("a", mi), mk("b", 10*mi), mk("c", mi)}
	stats := map[string]signals.PodStats{"u-a": st("a", 2*mi), "u-b": st("b", 2*mi), "u-c": st("c", 2*mi)}
	vs := localStorageViolations(pods, stats, signals.SingleFs)
	var got []string
	for _, v := range vs {
		got = append(got, v.Pod.Name)
		r := v.Request()
		if !r.Hard || r.GracePeriod != 1 || r.Annotations != nil || r.Signal != SignalPodEphemeralStorageLimit || r.Message != v.Message {
			t.Errorf("request for %s: got %+v, want hard, grace 1, no annotations", v.Pod.Name, r)
		}
	}
	if want := []string{"a", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, s := range []signals.Signal{SignalEmptyDirLimit, SignalPodEphemeralStorageLimit, SignalContainerEphemeralStorageLimit} {
		if s.Valid() {
			t.Errorf("%s is a valid threshold signal; it must not be", s)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestLocalStorageRequestsCarryTheDecisionTime(t *testing.T) {
	dec := Decision{Time: t0, Outcome: OutcomeLocalStorage, LocalStorage: []Violation{
		{Signal: SignalPodEphemeralStorageLimit, Pod: &signals.Pod{Namespace: "default", Name: "a", UID: "u-a"}},
		{Signal: SignalPodEphemeralStorageLimit, Pod: &signals.Pod{Namespace: "default", Name: "b", UID: "u-b"}},
	}}
	for _, r := range dec.LocalStorageRequests() {
		if !r.Decided.Equal(t0) {
			t.Errorf("request for %s: Decided %v, want %v", r.Pod.Name, r.Decided, t0)
		}
	}
}
