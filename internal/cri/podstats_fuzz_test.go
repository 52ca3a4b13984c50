package cri

import (
	"math"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evictd/evictd/signals"
)

// u64 is a CRI UInt64Value.
func u64(v uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: v} }

// runtimeReplies is one seed of FuzzRuntimeUsage: what the runtime answers
// to ListPodSandbox, ListContainers, ListContainerStats and ImageFsInfo.
type runtimeReplies struct {
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
	stats      []*runtimeapi.ContainerStats
	fs         *runtimeapi.ImageFsInfoResponse
}

// marshal encodes the replies as they come over the wire.
func (r runtimeReplies) marshal(tb testing.TB) (sandboxes, containers, stats, fs []byte) {
	tb.Helper()
	enc := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	return enc(&runtimeapi.ListPodSandboxResponse{Items: r.sandboxes}), enc(&runtimeapi.ListContainersResponse{Containers: r.containers}),
		enc(&runtimeapi.ListContainerStatsResponse{Stats: r.stats}), enc(r.fs)
}

var runtimeSeeds = []runtimeReplies{
	// A node: a pod labelled as the kubelet labels it, with a running app
	// container, an earlier attempt of it and an exited init container; a
	// pod known by its sandbox metadata only; a container of a sandbox
	// gone. Stats complete, without inodes, with memory only.
	{
		sandboxes: []*runtimeapi.PodSandbox{
			{Id: "s1", Labels: map[string]string{labelPodUID: "uid-web"}, Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "shop", Uid: "uid-web"},
				State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: 1_700_000_000_000_000_000},
			{Id: "s2", Metadata: &runtimeapi.PodSandboxMetadata{Name: "db", Namespace: "shop", Uid: "uid-db"}},
		},
		containers: []*runtimeapi.Container{
			{Id: "c1", PodSandboxId: "s1", Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: 1}, Labels: map[string]string{labelContainerName: "app"},
				State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: 1_700_000_100_000_000_000},
			{Id: "c0", PodSandboxId: "s1", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Labels: map[string]string{labelContainerName: "app"},
				State: runtimeapi.ContainerState_CONTAINER_EXITED, CreatedAt: 1_700_000_050_000_000_000},
			{Id: "c2", PodSandboxId: "s1", Metadata: &runtimeapi.ContainerMetadata{Name: "init"}, State: runtimeapi.ContainerState_CONTAINER_EXITED},
			{Id: "c3", PodSandboxId: "s2", Metadata: &runtimeapi.ContainerMetadata{Name: "db"}, State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			{Id: "c4", PodSandboxId: "gone", Metadata: &runtimeapi.ContainerMetadata{Name: "x"}},
		},
		stats: []*runtimeapi.ContainerStats{
			{Attributes: &runtimeapi.ContainerAttributes{Id: "c1"}, Memory: &runtimeapi.MemoryUsage{Timestamp: 1, WorkingSetBytes: u64(64 << 20)},
				WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: 1, FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/containerd"}, UsedBytes: u64(20 << 20), InodesUsed: u64(12)}},
			{Attributes: &runtimeapi.ContainerAttributes{Id: "c2"}, WritableLayer: &runtimeapi.FilesystemUsage{UsedBytes: u64(4096)}},
			{Attributes: &runtimeapi.ContainerAttributes{Id: "c3"}, Memory: &runtimeapi.MemoryUsage{WorkingSetBytes: u64(0)}},
		},
		fs: &runtimeapi.ImageFsInfoResponse{
			ImageFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"},
				UsedBytes: u64(1 << 30), InodesUsed: u64(1000)}},
			ContainerFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/containers"}}},
		},
	},
	// Counts beyond int64, zero timestamps, two exited attempts created at
	// the same (zero) time, a stats entry without attributes.
	{
		sandboxes: []*runtimeapi.PodSandbox{{Id: "s", Labels: map[string]string{labelPodUID: "uid"}}},
		containers: []*runtimeapi.Container{
			{Id: "a", PodSandboxId: "s", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, State: runtimeapi.ContainerState_CONTAINER_EXITED},
			{Id: "b", PodSandboxId: "s", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, State: runtimeapi.ContainerState_CONTAINER_EXITED},
			{Id: "c", PodSandboxId: "s", Metadata: &runtimeapi.ContainerMetadata{Name: "side"}, State: runtimeapi.ContainerState_CONTAINER_UNKNOWN, CreatedAt: -1},
		},
		stats: []*runtimeapi.ContainerStats{
			{Attributes: &runtimeapi.ContainerAttributes{Id: "a"}, Memory: &runtimeapi.MemoryUsage{WorkingSetBytes: u64(math.MaxUint64)},
				WritableLayer: &runtimeapi.FilesystemUsage{UsedBytes: u64(math.MaxUint64), InodesUsed: u64(1 << 63)}},
			{Attributes: &runtimeapi.ContainerAttributes{Id: "b"}, Memory: &runtimeapi.MemoryUsage{WorkingSetBytes: u64(math.MaxInt64)},
				WritableLayer: &runtimeapi.FilesystemUsage{UsedBytes: u64(math.MaxInt64), InodesUsed: u64(0)}},
			{Memory: &runtimeapi.MemoryUsage{}, WritableLayer: &runtimeapi.FilesystemUsage{UsedBytes: u64(1), InodesUsed: u64(1)}},
			{},
		},
		fs: &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{UsedBytes: u64(math.MaxUint64)}, {FsId: &runtimeapi.FilesystemIdentifier{}}, {}}},
	},
	// Nothing at all.
	{fs: &runtimeapi.ImageFsInfoResponse{}},
}

// FuzzRuntimeUsage decodes the runtime's replies from the wire, as the
// client does, and converts them (runtimeUsage, filesystems). Whatever the
// runtime says: no panic; no byte or inode count is
// negative, and one beyond int64 is clamped to math.MaxInt64, never
// wrapped; a container stands for its pod's name only if the runtime
// listed it in a sandbox of that pod, running before exited, then the
// latest created, whatever the order of the list; a filesystem has a
// mountpoint and the runtime's counts.
func FuzzRuntimeUsage(f *testing.F) {
	for _, r := range runtimeSeeds {
		sandboxes, containers, stats, fs := r.marshal(f)
		f.Add(sandboxes, containers, stats, fs)
	}
	f.Fuzz(func(t *testing.T, sandboxesWire, containersWire, statsWire, fsWire []byte) {
		var (
			sandboxes  runtimeapi.ListPodSandboxResponse
			containers runtimeapi.ListContainersResponse
			stats      runtimeapi.ListContainerStatsResponse
			fs         runtimeapi.ImageFsInfoResponse
		)
		if proto.Unmarshal(sandboxesWire, &sandboxes) != nil || proto.Unmarshal(containersWire, &containers) != nil ||
			proto.Unmarshal(statsWire, &stats) != nil || proto.Unmarshal(fsWire, &fs) != nil {
			return
		}
		byPod, layers := runtimeUsage(sandboxes.GetItems(), containers.GetContainers(), stats.GetStats())
		checkRuntimeUsage(t, sandboxes.GetItems(), containers.GetContainers(), stats.GetStats(), byPod, layers)

		// The runtime lists containers in no particular order (containerd
		// from a map): the pick must not depend on it.
		reversed := slices.Clone(containers.GetContainers())
		slices.Reverse(reversed)
		if again, _ := runtimeUsage(sandboxes.GetItems(), reversed, stats.GetStats()); !equalByPod(again, byPod) {
			t.Errorf("containers picked depend on the list's order:\n%v\n%v", byPod, again)
		}

		checkFilesystems(t, fs.GetImageFilesystems(), filesystems(fs.GetImageFilesystems()))
		checkFilesystems(t, fs.GetContainerFilesystems(), filesystems(fs.GetContainerFilesystems()))
	})
}

func equalByPod(a, b map[string]map[string]runtimeContainer) bool {
	if len(a) != len(b) {
		return false
	}
	for uid, ca := range a {
		cb, ok := b[uid]
		if !ok || len(ca) != len(cb) {
			return false
		}
		for name, x := range ca {
			if y, ok := cb[name]; !ok || x != y {
				return false
			}
		}
	}
	return true
}

// checkRuntimeUsage checks runtimeUsage's answer against the runtime's.
func checkRuntimeUsage(t *testing.T, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container, stats []*runtimeapi.ContainerStats,
	byPod map[string]map[string]runtimeContainer, layers map[string]*signals.FsUsage) {
	t.Helper()
	clamped := func(v uint64) int64 {
		if v > math.MaxInt64 {
			return math.MaxInt64
		}
		return int64(v)
	}
	// The last stats entry of each ID that reports the value decides it.
	wantLayer := map[string]signals.FsUsage{}
	for _, s := range stats {
		id := s.GetAttributes().GetId()
		if wl := s.GetWritableLayer(); wl.GetUsedBytes() != nil && wl.GetInodesUsed() != nil {
			wantLayer[id] = signals.FsUsage{Bytes: clamped(wl.GetUsedBytes().GetValue()), Inodes: clamped(wl.GetInodesUsed().GetValue())}
		}
	}
	if len(layers) != len(wantLayer) {
		t.Errorf("%d writable layers, want %d", len(layers), len(wantLayer))
	}
	for id, l := range layers {
		if l == nil || l.Bytes < 0 || l.Inodes < 0 || *l != wantLayer[id] {
			t.Errorf("writable layer of %q = %+v, want %+v", id, l, wantLayer[id])
		}
	}

	// The pod of each sandbox, the last listed of an ID deciding.
	uidOf := map[string]string{}
	for _, s := range sandboxes {
		uid := s.GetLabels()[labelPodUID]
		if uid == "" {
			uid = s.GetMetadata().GetUid()
		}
		uidOf[s.GetId()] = uid
	}
	for uid, byName := range byPod {
		if uid == "" {
			t.Errorf("containers of a pod without a UID: %v", byName)
		}
		for name, rc := range byName {
			if rc.name != name {
				t.Errorf("container %q under the name %q", rc.name, name)
			}
			// Every listed container of that pod and name: the pick is one
			// of them, and none is better.
			found := false
			for _, c := range containers {
				if uidOf[c.GetPodSandboxId()] != uid || containerName(c) != name {
					continue
				}
				other := runtimeContainer{id: c.GetId(), name: name, created: c.GetCreatedAt(), attempt: c.GetMetadata().GetAttempt(),
					running: c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING}
				found = found || other == rc
				if better(other, rc) {
					t.Errorf("pod %s container %s: picked %+v, but %+v is better", uid, name, rc, other)
				}
			}
			if !found {
				t.Errorf("pod %s container %s: picked %+v, which the runtime did not list", uid, name, rc)
			}
		}
	}
	for _, c := range containers {
		uid := uidOf[c.GetPodSandboxId()]
		if _, ok := byPod[uid][containerName(c)]; uid != "" && !ok {
			t.Errorf("container %q of pod %s is missing", c.GetId(), uid)
		}
	}
}

// containerName is the kubelet's name of the container: its label, else
// its metadata's.
func containerName(c *runtimeapi.Container) string {
	if n := c.GetLabels()[labelContainerName]; n != "" {
		return n
	}
	return c.GetMetadata().GetName()
}

// checkFilesystems checks filesystems' answer against the runtime's.
func checkFilesystems(t *testing.T, in []*runtimeapi.FilesystemUsage, out []Filesystem) {
	t.Helper()
	var want []*runtimeapi.FilesystemUsage
	for _, f := range in {
		if f.GetFsId().GetMountpoint() != "" {
			want = append(want, f)
		}
	}
	if len(out) != len(want) {
		t.Fatalf("%d filesystems, want %d", len(out), len(want))
	}
	for i, fs := range out {
		w := want[i]
		if fs.Mountpoint != w.GetFsId().GetMountpoint() ||
			(fs.UsedBytes == nil) != (w.GetUsedBytes() == nil) || fs.UsedBytes != nil && *fs.UsedBytes != w.GetUsedBytes().GetValue() ||
			(fs.InodesUsed == nil) != (w.GetInodesUsed() == nil) || fs.InodesUsed != nil && *fs.InodesUsed != w.GetInodesUsed().GetValue() {
			t.Errorf("filesystem %d = %+v, want %v", i, fs, w)
		}
	}
}
