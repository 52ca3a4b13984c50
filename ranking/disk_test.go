package ranking

import (
	"math"
	"testing"

	"github.com/evictd/evictd/signals"
)

func fu(bytes, inodes int64) *signals.FsUsage { return &signals.FsUsage{Bytes: bytes, Inodes: inodes} }

// diskStats is the stats of pod name with one container "app".
func diskStats(name string, rootfs, logs *signals.FsUsage, vols map[string]signals.FsUsage) signals.PodStats {
	return signals.PodStats{
		UID:        "uid-" + name,
		Containers: []signals.ContainerStats{{Name: "app", Rootfs: rootfs, Logs: logs}},
		Volumes:    vols,
	}
}

func TestDiskUsage(t *testing.T) {
	pod := mk("p", signals.Burstable, vols("cache", "cfg", "not-measured"))
	pod.Containers = []signals.Container{{Name: "app"}, {Name: "sidecar"}}
	st := signals.PodStats{
		UID: "uid-p",
		Containers: []signals.ContainerStats{
			{Name: "app", Rootfs: fu(100*Mi, 10), Logs: fu(Mi, 1)},
			{Name: "sidecar", Rootfs: fu(50*Mi, 5), Logs: fu(2*Mi, 2)},
		},
		Volumes: map[string]signals.FsUsage{
			"cache": {Bytes: Gi, Inodes: 100},
			"cfg":   {Bytes: Ki, Inodes: 3},
			"pvc":   {Bytes: 5 * Gi, Inodes: 500}, // not a local volume
		},
	}
	const (
		rootB, rootI = 150 * Mi, 15
		logB, logI   = 3 * Mi, 3
		volB, volI   = Gi + Ki, 103
	)
	type want struct {
		bytes, inodes int64
		ok            bool
	}
	all := want{rootB + logB + volB, rootI + logI + volI, true}
	cases := []struct {
		name   string
		pod    *signals.Pod
		st     *signals.PodStats
		sig    signals.Signal
		layout signals.FsLayout
		want   want
	}{
		{"single nodefs", &pod, &st, signals.NodeFsAvailable, signals.SingleFs, all},
		{"single imagefs", &pod, &st, signals.ImageFsAvailable, signals.SingleFs, all},
		{"single containerfs inodes", &pod, &st, signals.ContainerFsInodesFree, signals.SingleFs, all},
		{"dedicated nodefs", &pod, &st, signals.NodeFsAvailable, signals.DedicatedImageFs, want{logB + volB, logI + volI, true}},
		{"dedicated nodefs inodes", &pod, &st, signals.NodeFsInodesFree, signals.DedicatedImageFs, want{logB + volB, logI + volI, true}},
		{"dedicated imagefs", &pod, &st, signals.ImageFsAvailable, signals.DedicatedImageFs, want{rootB, rootI, true}},
		{"dedicated containerfs is imagefs", &pod, &st, signals.ContainerFsAvailable, signals.DedicatedImageFs, want{rootB, rootI, true}},
		{"split nodefs", &pod, &st, signals.NodeFsAvailable, signals.SplitImageFs, all},
		{"split containerfs is nodefs", &pod, &st, signals.ContainerFsInodesFree, signals.SplitImageFs, all},
		{"split imagefs measures nothing", &pod, &st, signals.ImageFsAvailable, signals.SplitImageFs, want{0, 0, true}},
		{"nil stats", &pod, nil, signals.NodeFsAvailable, signals.SingleFs, want{}},
		{"nil pod", nil, &st, signals.NodeFsAvailable, signals.SingleFs, want{}},
		{"memory signal", &pod, &st, signals.MemoryAvailable, signals.SingleFs, want{}},
		{"pid signal", &pod, &st, signals.PIDAvailable, signals.SingleFs, want{}},
		{"unknown layout", &pod, &st, signals.NodeFsAvailable, signals.FsLayout(7), want{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, i, ok := DiskUsage(tc.pod, tc.st, tc.sig, tc.layout)
			if got := (want{b, i, ok}); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDiskUsageMissingPieces(t *testing.T) {
	pod := mk("p", signals.BestEffort, vols("v"))
	pod.Containers = []signals.Container{{Name: "app"}}
	half := int64(math.MaxInt64/2 + 1)
	cases := []struct {
		name   string
		pod    signals.Pod
		st     signals.PodStats
		sig    signals.Signal
		layout signals.FsLayout
		bytes  int64
		ok     bool
	}{
		{"pod container without stats", withContainers(pod, "app", "ghost"),
			diskStats("p", fu(1, 1), fu(1, 1), nil), signals.NodeFsAvailable, signals.SingleFs, 0, false},
		{"nil logs where logs count", pod,
			diskStats("p", fu(Mi, 1), nil, nil), signals.NodeFsAvailable, signals.DedicatedImageFs, 0, false},
		{"nil rootfs where it does not count", pod,
			diskStats("p", nil, fu(Mi, 1), nil), signals.NodeFsAvailable, signals.DedicatedImageFs, Mi, true},
		{"nil rootfs where it counts", pod,
			diskStats("p", nil, fu(Mi, 1), nil), signals.ImageFsAvailable, signals.DedicatedImageFs, 0, false},
		{"negative volume", pod,
			diskStats("p", fu(1, 1), fu(1, 1), map[string]signals.FsUsage{"v": {Bytes: -1}}), signals.NodeFsAvailable, signals.SingleFs, 0, false},
		{"negative inodes", pod,
			diskStats("p", fu(1, -1), fu(1, 1), nil), signals.NodeFsAvailable, signals.SingleFs, 0, false},
		{"named volume without stats adds nothing", pod,
			diskStats("p", fu(Mi, 1), fu(Mi, 1), nil), signals.NodeFsAvailable, signals.SingleFs, 2 * Mi, true},
		{"no container stats", withContainers(pod),
			signals.PodStats{UID: "uid-p"}, signals.NodeFsAvailable, signals.SingleFs, 0, false},
		{"no container stats, volumes only needed: still logs", withContainers(pod),
			signals.PodStats{UID: "uid-p", Volumes: map[string]signals.FsUsage{"v": {Bytes: Gi}}}, signals.NodeFsAvailable, signals.DedicatedImageFs, 0, false},
		{"sums saturate", pod,
			diskStats("p", fu(half, 1), fu(half, 1), nil), signals.NodeFsAvailable, signals.SingleFs, math.MaxInt64, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, _, ok := DiskUsage(&tc.pod, &tc.st, tc.sig, tc.layout)
			if b != tc.bytes || ok != tc.ok {
				t.Errorf("got %d, %v, want %d, %v", b, ok, tc.bytes, tc.ok)
			}
		})
	}
}

func withContainers(p signals.Pod, names ...string) signals.Pod {
	p.Containers = nil
	for _, n := range names {
		p.Containers = append(p.Containers, signals.Container{Name: n})
	}
	return p
}

func TestRankDisk(t *testing.T) {
	pods := []signals.Pod{
		mk("layer", signals.BestEffort),
		mk("vol", signals.BestEffort, vols("cache")),
		mk("mixed", signals.BestEffort, vols("data")),
	}
	stats := byUID(
		diskStats("layer", fu(4*Gi, 40), fu(Mi, 1), nil),
		diskStats("vol", fu(10*Mi, 1), fu(Mi, 1), map[string]signals.FsUsage{"cache": {Bytes: 5 * Gi, Inodes: 50}}),
		diskStats("mixed", fu(3*Gi, 30), fu(Mi, 1), map[string]signals.FsUsage{"data": {Bytes: 3 * Gi, Inodes: 30}}),
	)
	row := func(name string, sig signals.Signal, layout signals.FsLayout, want ...string) rankCase {
		return rankCase{name: name, sig: sig, layout: layout, pods: pods, stats: stats, want: want, first: want[0]}
	}
	cases := []rankCase{
		row("single: writable layers, logs and volumes", signals.NodeFsAvailable, signals.SingleFs, "mixed", "vol", "layer"),
		row("dedicated imagefs, nodefs: the big emptyDir wins", signals.NodeFsAvailable, signals.DedicatedImageFs, "vol", "mixed", "layer"),
		row("dedicated imagefs, imagefs: the big writable layer wins", signals.ImageFsAvailable, signals.DedicatedImageFs, "layer", "mixed", "vol"),
		row("dedicated imagefs, containerfs: as imagefs", signals.ContainerFsAvailable, signals.DedicatedImageFs, "layer", "mixed", "vol"),
		row("split, nodefs: layers, logs and volumes", signals.NodeFsAvailable, signals.SplitImageFs, "mixed", "vol", "layer"),
		row("split, containerfs: as nodefs", signals.ContainerFsAvailable, signals.SplitImageFs, "mixed", "vol", "layer"),
		{
			name: "split, imagefs: priority only", sig: signals.ImageFsAvailable, layout: signals.SplitImageFs,
			pods: []signals.Pod{mk("big", signals.BestEffort, prio(10)), mk("small", signals.BestEffort), guaranteed("g", Gi, prio(-5))},
			stats: byUID(diskStats("big", fu(9*Gi, 1), fu(0, 0), nil), diskStats("small", fu(Mi, 1), fu(0, 0), nil),
				diskStats("g", fu(20*Gi, 1), fu(0, 0), nil)),
			want: []string{"small", "big", "g"}, first: "small",
			keys: map[string]string{
				"small": "priority 0 (imagefs holds only images in the split-imagefs layout: no pod usage to measure)",
			},
		},
		{
			name: "ephemeral-storage request: within it ranks after", sig: signals.NodeFsAvailable, layout: signals.DedicatedImageFs,
			pods: []signals.Pod{mk("burst-req", signals.Burstable, ephReq(10*Gi), vols("v")), mk("be-small", signals.BestEffort, vols("v"))},
			stats: byUID(
				diskStats("burst-req", fu(0, 0), fu(0, 0), map[string]signals.FsUsage{"v": {Bytes: 6 * Gi}}),
				diskStats("be-small", fu(0, 0), fu(0, 0), map[string]signals.FsUsage{"v": {Bytes: 100 * Mi}})),
			want: []string{"be-small", "burst-req"}, first: "be-small",
			keys: map[string]string{"burst-req": "within request: usage 6Gi ≤ request 10Gi"},
		},
		{
			name: "disk stats missing for the signal: first", sig: signals.ImageFsAvailable, layout: signals.DedicatedImageFs,
			pods:  []signals.Pod{mk("big", signals.BestEffort), mk("no-rootfs", signals.BestEffort, prio(100))},
			stats: byUID(diskStats("big", fu(9*Gi, 1), fu(0, 0), nil), diskStats("no-rootfs", nil, fu(Gi, 1), nil)),
			want:  []string{"no-rootfs", "big"}, first: "no-rootfs",
			keys: map[string]string{"no-rootfs": "no stats"},
		},
	}
	runRankCases(t, cases)
}
