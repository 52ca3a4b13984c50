package cri

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testruntime"
	"github.com/evictd/evictd/ranking"
	"github.com/evictd/evictd/signals"
)

// TestPending: a pod's disk stats are pending while they lack a container
// of its spec, or a container's writable layer or logs: what a container
// that has just been created gives at the next measurement.
func TestPending(t *testing.T) {
	u := func(b int64) *signals.FsUsage { return &signals.FsUsage{Bytes: b, Inodes: 1} }
	whole := func(name string) signals.ContainerStats {
		return signals.ContainerStats{Name: name, Rootfs: u(1), Logs: u(0)}
	}
	pod := &signals.Pod{Name: "p", UID: "u", Containers: []signals.Container{{Name: "app"}, {Name: "init"}}}
	tests := []struct {
		name string
		st   signals.PodStats
		want bool
	}{
		{"every container whole", signals.PodStats{Containers: []signals.ContainerStats{whole("app"), whole("init")}}, false},
		{"whole, and one the spec does not name", signals.PodStats{Containers: []signals.ContainerStats{whole("app"), whole("init"), whole("extra")}}, false},
		{"whole with volumes", signals.PodStats{Containers: []signals.ContainerStats{whole("app"), whole("init")}, Volumes: map[string]signals.FsUsage{"v": {}}}, false},
		{"no container yet", signals.PodStats{}, true},
		{"a container of the spec missing", signals.PodStats{Containers: []signals.ContainerStats{whole("app")}}, true},
		{"not created: no writable layer", signals.PodStats{Containers: []signals.ContainerStats{{Name: "app", Logs: u(0)}, whole("init")}}, true},
		{"no log directory yet", signals.PodStats{Containers: []signals.ContainerStats{{Name: "app", Rootfs: u(1)}, whole("init")}}, true},
		{"an extra container without its layer", signals.PodStats{Containers: []signals.ContainerStats{whole("app"), whole("init"), {Name: "x", Logs: u(0)}}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Pending(pod, &tc.st); got != tc.want {
				t.Errorf("Pending = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFillPending runs a pod that has just started, whose stats a pass has
// from before its container was created (and a pass that has none of it):
// FillPending reads it afresh, asking the runtime about it alone, and gives
// its writable layer and logs; a pod whose stats are whole is left as it
// is; a pod the runtime does not know stays pending, keeping what the pass
// had; at most MaxPending pods are read; the pass's map is not changed;
// past its deadline it gives back what it had.
func TestFillPending(t *testing.T) {
	cgroupParent := fmt.Sprintf("/evictd-cri-pending-test-%d", os.Getpid())
	t.Cleanup(func() { removeCgroup(t, cgroupParent) })
	rt := testruntime.StartForTest(t, testruntime.Options{Root: testruntime.MountExt4(t, 256)})
	ctx := t.Context()
	const image = "evictd.test/workload:1"
	if err := rt.ImportImage(ctx, image, 0); err != nil {
		t.Fatal(err)
	}
	c := dial(t, rt)
	kubeletRoot, logsDir := t.TempDir(), t.TempDir()
	young := signals.Pod{Namespace: "default", Name: "young", UID: fmt.Sprintf("young-%d", os.Getpid()), Containers: []signals.Container{{Name: "writer"}}}
	busy := signals.Pod{Namespace: "default", Name: "busy", UID: fmt.Sprintf("busy-%d", os.Getpid()), Containers: []signals.Container{{Name: "app"}}}
	runPod(t, c, busy, filepath.Join(logsDir, "default_busy_"+busy.UID), cgroupParent, image, []string{"sleep"})
	runPod(t, c, young, filepath.Join(logsDir, "default_young_"+young.UID), cgroupParent, image, []string{"write", "--dir", "/data", "--mib", "20"})

	// The runtime answers about the pods asked for alone.
	byPod, layers, err := c.writableLayersOf(ctx, []signals.Pod{young})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := byPod[busy.UID]; ok || len(byPod) != 1 || len(byPod[young.UID]) != 1 {
		t.Fatalf("containers of the young pod alone: got %v", byPod)
	}
	if l := layers[byPod[young.UID]["writer"].id]; l == nil {
		t.Errorf("no writable layer for the young pod's container: %v", layers)
	}

	ds, err := NewDiskStats(c, DiskStatsConfig{KubeletRootDir: kubeletRoot, PodLogsDir: logsDir})
	if err != nil {
		t.Fatal(err)
	}
	wholeBusy := signals.PodStats{UID: busy.UID, Time: time.Unix(1, 0), Containers: []signals.ContainerStats{
		{Name: "app", Rootfs: &signals.FsUsage{Bytes: 7}, Logs: &signals.FsUsage{Bytes: 8}}}}
	ghost := signals.Pod{Namespace: "default", Name: "ghost", UID: "ghost-uid", Containers: []signals.Container{{Name: "app"}}}
	ghostHad := signals.PodStats{UID: ghost.UID, Volumes: map[string]signals.FsUsage{"kept": {Bytes: 1}}}
	for _, tc := range []struct {
		name string
		had  map[string]signals.PodStats
	}{
		{"from before its container was created", map[string]signals.PodStats{
			young.UID: {UID: young.UID, Containers: []signals.ContainerStats{{Name: "writer"}}},
			busy.UID:  wholeBusy, ghost.UID: ghostHad,
		}},
		{"none of it yet", map[string]signals.PodStats{busy.UID: wholeBusy, ghost.UID: ghostHad}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.had)
			var got map[string]signals.PodStats
			deadline := time.Now().Add(30 * time.Second)
			for {
				got, err = ds.FillPending(ctx, time.Now(), []signals.Pod{busy, young, ghost}, tc.had)
				st := got[young.UID]
				if len(st.Containers) == 1 && st.Containers[0].Rootfs != nil && st.Containers[0].Rootfs.Bytes >= 20*mib {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("FillPending: young %+v, %v; want a writable layer of at least 20 MiB", st, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err == nil {
				t.Errorf("no error for the ghost pod's missing log directory")
			}
			st := got[young.UID]
			if Pending(&young, &st) || st.Containers[0].Logs == nil {
				t.Errorf("young pod %+v: want its writable layer and logs", st)
			}
			if bytes, _, ok := ranking.DiskUsage(&young, &st, signals.NodeFsAvailable, signals.SingleFs); !ok || bytes < 20*mib {
				t.Errorf("ranking.DiskUsage = %d, %v; want the 20 MiB written", bytes, ok)
			}
			if !reflect.DeepEqual(got[busy.UID], wholeBusy) {
				t.Errorf("busy pod, whole: %+v, want it left as the pass had it %+v", got[busy.UID], wholeBusy)
			}
			if !reflect.DeepEqual(got[ghost.UID], ghostHad) {
				t.Errorf("ghost pod, still pending: %+v, want what the pass had %+v", got[ghost.UID], ghostHad)
			}
			if !reflect.DeepEqual(tc.had, before) {
				t.Errorf("the pass's map changed: %v, was %v", tc.had, before)
			}
		})
	}

	t.Run("at most MaxPending pods", func(t *testing.T) {
		var pods []signals.Pod
		for i := range MaxPending + 3 {
			pods = append(pods, signals.Pod{Namespace: "default", Name: fmt.Sprintf("g%d", i), UID: fmt.Sprintf("g%d-uid", i),
				Containers: []signals.Container{{Name: "app"}}})
		}
		got, _ := ds.FillPending(ctx, time.Now(), pods, nil)
		for i, p := range pods {
			if _, ok := got[p.UID]; ok != (i < MaxPending) {
				t.Errorf("pod %d of %d read: %v, want %v", i+1, len(pods), ok, i < MaxPending)
			}
		}
	})

	t.Run("past its deadline", func(t *testing.T) {
		quick, err := NewDiskStats(c, DiskStatsConfig{KubeletRootDir: kubeletRoot, PodLogsDir: logsDir, PendingDeadline: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		had := map[string]signals.PodStats{young.UID: {UID: young.UID, Containers: []signals.ContainerStats{{Name: "writer"}}}}
		start := time.Now()
		got, err := quick.FillPending(ctx, time.Now(), []signals.Pod{young}, had)
		if err == nil {
			t.Errorf("no error past the deadline")
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("took %s past a deadline of 1 ns", took)
		}
		if !reflect.DeepEqual(got, had) {
			t.Errorf("got %v, want what the pass had %v", got, had)
		}
	})
}
