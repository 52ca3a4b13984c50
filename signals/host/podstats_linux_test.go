package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/evictd/evictd/signals"
)

type podWant struct {
	uid       string
	qos       signals.QOSClass
	ws, procs int64
}

// The pods of each fixture tree, in the order discovery lists them.
var fixturePods = map[string]struct {
	driver string
	pods   []podWant
}{
	"cgroupv1": {DriverCgroupfs, []podWant{
		{"11111111-1111-1111-1111-111111111111", signals.Guaranteed, 1048576000 - 48576000, 12},
		{"22222222-2222-2222-2222-222222222222", signals.Burstable, 600000000 - 100000000, 7},
		{"33333333-3333-3333-3333-333333333333", signals.BestEffort, 0, 1}, // inactive 200 > usage 100
	}},
	"cgroupv1-systemd": {DriverSystemd, []podWant{
		{"44444444-4444-4444-4444-444444444444", signals.Guaranteed, 300000000, 3},
		{"55555555-5555-5555-5555-555555555555", signals.Burstable, 250000000 - 50000000, 5},
		{"66666666-6666-6666-6666-666666666666", signals.BestEffort, 70000000 - 20000000, 2},
	}},
	"cgroupv2": {DriverCgroupfs, []podWant{
		{"77777777-7777-7777-7777-777777777777", signals.Guaranteed, 900000000 - 100000000, 9},
		{"88888888-8888-8888-8888-888888888888", signals.Burstable, 400000000, 4},
		{"99999999-9999-9999-9999-999999999999", signals.BestEffort, 50000000 - 10000000, 1},
	}},
	"cgroupv2-systemd": {DriverSystemd, []podWant{
		{"aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa", signals.Guaranteed, 123456789 - 23456789, 6},
		{"bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb", signals.Burstable, 64000000 - 4000000, 3},
		{"cccccccc-cccc-cccc-cccc-cccccccccccc", signals.BestEffort, 0, 1},
	}},
}

// allPodKinds are the kinds PodStatsReader reads.
const allPodKinds = signals.PodMemory | signals.PodProcesses

func (p podWant) pod() signals.Pod {
	return signals.Pod{Name: "pod" + p.uid, UID: p.uid, QOS: p.qos}
}

func (p podWant) stats() signals.PodStats {
	return signals.PodStats{UID: p.uid, Time: now, MemoryWorkingSet: signals.Int64(p.ws), Processes: signals.Int64(p.procs)}
}

func TestDiscoverPods(t *testing.T) {
	for tree, f := range fixturePods {
		t.Run(tree, func(t *testing.T) {
			got, err := DiscoverPods(fixtureConfig(t, fixture(t, "proc"), fixture(t, tree), f.driver))
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			var want []signals.Pod
			for _, p := range f.pods {
				want = append(want, p.pod())
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestDiscoverPodsEdges(t *testing.T) {
	v1 := fixturePods["cgroupv1"].pods
	tests := []struct {
		name    string
		tree    string
		edits   map[string]*string
		want    []podWant
		wantErr string
	}{
		{name: "missing besteffort tier has no pods", tree: "cgroupv1",
			edits: map[string]*string{"memory/kubepods/besteffort": nil}, want: v1[:2]},
		{name: "stray cgroups and files are not pods", tree: "cgroupv1",
			edits: map[string]*string{"memory/kubepods/system/x": str("1"), "memory/kubepods/podfile": str("1"), "memory/kubepods/pod/x": str("1")},
			want:  v1},
		{name: "missing kubepods", tree: "cgroupv1", edits: map[string]*string{"memory/kubepods": nil},
			wantErr: "memory/kubepods"},
		{name: "systemd slices of another parent are not pods", tree: "cgroupv2-systemd",
			edits: map[string]*string{"kubepods.slice/other-podx.slice/x": str("1"), "kubepods.slice/kubepods-pod.slice/x": str("1")},
			want:  fixturePods["cgroupv2-systemd"].pods},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cgroup := copyFixture(t, tc.tree)
			for rel := range tc.edits {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(cgroup, rel)), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			edit(t, cgroup, tc.edits)
			got, err := DiscoverPods(fixtureConfig(t, fixture(t, "proc"), cgroup, fixturePods[tc.tree].driver))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one holding %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			var want []signals.Pod
			for _, p := range tc.want {
				want = append(want, p.pod())
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestPodStatsReader(t *testing.T) {
	for tree, f := range fixturePods {
		t.Run(tree, func(t *testing.T) {
			r, err := NewPodStatsReader(fixtureConfig(t, fixture(t, "proc"), fixture(t, tree), f.driver))
			if err != nil {
				t.Fatal(err)
			}
			var pods []signals.Pod
			want := map[string]signals.PodStats{}
			for _, p := range f.pods {
				pods = append(pods, p.pod())
				want[p.uid] = p.stats()
			}
			got, err := r.Read(context.Background(), pods, now, allPodKinds)
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %s, want %s", dumpStats(got), dumpStats(want))
			}
		})
	}
}

func TestPodStatsReaderPartial(t *testing.T) {
	g, b, be := fixturePods["cgroupv1"].pods[0], fixturePods["cgroupv1"].pods[1], fixturePods["cgroupv1"].pods[2]
	bMem := "memory/kubepods/burstable/pod" + b.uid
	bPids := "pids/kubepods/burstable/pod" + b.uid
	noProcs := func(p podWant) signals.PodStats { s := p.stats(); s.Processes = nil; return s }
	noMem := func(p podWant) signals.PodStats { s := p.stats(); s.MemoryWorkingSet = nil; return s }
	tests := []struct {
		name    string
		pods    []signals.Pod
		edits   map[string]*string
		want    map[string]signals.PodStats
		wantErr []string
	}{
		{name: "garbled memory.stat leaves memory unmeasured",
			pods:    []signals.Pod{g.pod(), b.pod(), be.pod()},
			edits:   map[string]*string{bMem + "/memory.stat": str("total_inactive_file 1e9\n")},
			want:    map[string]signals.PodStats{g.uid: g.stats(), b.uid: noMem(b), be.uid: be.stats()},
			wantErr: []string{b.uid, bMem + "/memory.stat", `"1e9"`}},
		{name: "negative usage leaves memory unmeasured",
			pods:    []signals.Pod{b.pod()},
			edits:   map[string]*string{bMem + "/memory.usage_in_bytes": str("-8\n")},
			want:    map[string]signals.PodStats{b.uid: noMem(b)},
			wantErr: []string{bMem + "/memory.usage_in_bytes", `"-8" is negative`}},
		{name: "missing pids cgroup leaves processes unmeasured",
			pods:    []signals.Pod{g.pod(), b.pod()},
			edits:   map[string]*string{bPids: nil},
			want:    map[string]signals.PodStats{g.uid: g.stats(), b.uid: noProcs(b)},
			wantErr: []string{"processes", bPids + "/pids.current"}},
		{name: "pod whose cgroup is gone is absent",
			pods:    []signals.Pod{g.pod(), b.pod()},
			edits:   map[string]*string{bMem: nil, bPids: nil},
			want:    map[string]signals.PodStats{g.uid: g.stats()},
			wantErr: []string{b.uid, "memory.usage_in_bytes", "pids.current"}},
		{name: "pod in another QoS tier than it claims is absent",
			pods:    []signals.Pod{{UID: b.uid, QOS: signals.BestEffort}, be.pod()},
			want:    map[string]signals.PodStats{be.uid: be.stats()},
			wantErr: []string{"besteffort/pod" + b.uid}},
		{name: "pod without QoS is absent",
			pods:    []signals.Pod{{Namespace: "ns", Name: "web", UID: g.uid}},
			want:    map[string]signals.PodStats{},
			wantErr: []string{"ns/web", "unknown QoS class"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cgroup := copyFixture(t, "cgroupv1")
			edit(t, cgroup, tc.edits)
			r, err := NewPodStatsReader(fixtureConfig(t, fixture(t, "proc"), cgroup, DriverCgroupfs))
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Read(context.Background(), tc.pods, now, allPodKinds)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %s, want %s", dumpStats(got), dumpStats(tc.want))
			}
			if err == nil {
				t.Fatalf("got no error, want one holding %q", tc.wantErr)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("got error %q, want it to hold %q", err, s)
				}
			}
		})
	}
}

func TestPodStatsReaderCancelled(t *testing.T) {
	r, err := NewPodStatsReader(fixtureConfig(t, fixture(t, "proc"), fixture(t, "cgroupv1"), DriverCgroupfs))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := r.Read(ctx, []signals.Pod{fixturePods["cgroupv1"].pods[0].pod()}, now, allPodKinds)
	if len(got) != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("got %s, %v; want no stats and context.Canceled", dumpStats(got), err)
	}
}

func dumpStats(m map[string]signals.PodStats) string {
	var b strings.Builder
	for uid, s := range m {
		b.WriteString(uid + ":{")
		if s.MemoryWorkingSet != nil {
			b.WriteString(" ws=" + itoa(*s.MemoryWorkingSet))
		}
		if s.Processes != nil {
			b.WriteString(" procs=" + itoa(*s.Processes))
		}
		for _, c := range s.Containers {
			b.WriteString(" " + c.Name + "=")
			if c.MemoryWorkingSet != nil {
				b.WriteString(itoa(*c.MemoryWorkingSet))
			}
		}
		b.WriteString(" time=" + s.Time.String() + "} ")
	}
	return b.String()
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
