package cri

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evictd/evictd/internal/testing/testruntime"
	"github.com/evictd/evictd/ranking"
	"github.com/evictd/evictd/signals"
)

const mib = 1 << 20

// TestDiskStats runs a pod whose container writes 20 MiB into its
// writable layer, logs under podLogsDir, and has an emptyDir and a configMap
// volume under the kubelet root dir; DiskStats reports each piece.
func TestDiskStats(t *testing.T) {
	// Removed after the runtime stops (cleanups run last first).
	cgroupParent := fmt.Sprintf("/evictd-cri-test-%d", os.Getpid())
	t.Cleanup(func() { removeCgroup(t, cgroupParent) })
	rt := testruntime.StartForTest(t, testruntime.Options{Root: testruntime.MountExt4(t, 256)})
	ctx := t.Context()
	const image = "evictd.test/workload:1"
	if err := rt.ImportImage(ctx, image, 0); err != nil {
		t.Fatal(err)
	}
	c := dial(t, rt)
	kubeletRoot, logsDir := t.TempDir(), t.TempDir()
	pod := signals.Pod{
		Namespace: "default", Name: "writer", UID: fmt.Sprintf("uid-%d", os.Getpid()),
		Containers:   []signals.Container{{Name: "writer"}},
		LocalVolumes: []string{"cache", "config", "host"},
	}
	podLogs := filepath.Join(logsDir, pod.Namespace+"_"+pod.Name+"_"+pod.UID)
	runPod(t, c, pod, podLogs, cgroupParent, image, []string{"write", "--dir", "/data", "--mib", "20"})

	// A log file of 3 MiB beside the one containerd writes; volumes of 5
	// and 1 MiB, and in the emptyDir a symlink to a big file elsewhere,
	// which must not be followed.
	writeFile(t, filepath.Join(podLogs, "writer", "1.log"), 3*mib)
	volumes := filepath.Join(kubeletRoot, "pods", pod.UID, "volumes")
	writeFile(t, filepath.Join(volumes, "kubernetes.io~empty-dir", "cache", "data"), 5*mib)
	writeFile(t, filepath.Join(volumes, "kubernetes.io~configmap", "config", "key"), 1*mib)
	writeFile(t, filepath.Join(kubeletRoot, "elsewhere"), 8*mib)
	if err := os.Symlink(filepath.Join(kubeletRoot, "elsewhere"), filepath.Join(volumes, "kubernetes.io~empty-dir", "cache", "link")); err != nil {
		t.Fatal(err)
	}

	ds, err := NewDiskStats(c, DiskStatsConfig{KubeletRootDir: kubeletRoot, PodLogsDir: logsDir})
	if err != nil {
		t.Fatal(err)
	}
	var st signals.PodStats
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := ds.PodStats(ctx, time.Now(), []signals.Pod{pod})
		st = got[pod.UID]
		if err == nil && len(st.Containers) == 1 && st.Containers[0].Rootfs != nil && st.Containers[0].Rootfs.Bytes >= 20*mib {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("DiskStats.PodStats: %+v, %v; want a writable layer of at least 20 MiB", st, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ctr := st.Containers[0]
	t.Logf("writer: rootfs %+v, logs %+v, volumes %+v", *ctr.Rootfs, *ctr.Logs, st.Volumes)
	if ctr.Name != "writer" {
		t.Errorf("container name %q, want writer", ctr.Name)
	}
	if ctr.Rootfs.Bytes > 22*mib || ctr.Rootfs.Inodes < 1 {
		t.Errorf("rootfs %+v, want about 20 MiB and some inodes", *ctr.Rootfs)
	}
	// The 3 MiB file, containerd's log and the directory.
	if ctr.Logs == nil || ctr.Logs.Bytes < 3*mib || ctr.Logs.Bytes > 3*mib+64<<10 || ctr.Logs.Inodes != 3 {
		t.Errorf("logs %+v, want 3 MiB and a few blocks in 3 inodes", ctr.Logs)
	}
	for name, want := range map[string]int64{"cache": 5 * mib, "config": 1 * mib} {
		got, ok := st.Volumes[name]
		// Directory, file (and in cache the symlink), a few blocks each.
		if !ok || got.Bytes < want || got.Bytes > want+64<<10 || got.Inodes < 2 || got.Inodes > 3 {
			t.Errorf("volume %s: %+v (present %v), want %d bytes and a few blocks, 2 or 3 inodes", name, got, ok, want)
		}
	}
	if u, ok := st.Volumes["host"]; ok {
		t.Errorf("volume host (no directory below the pod's) = %+v, want absent", u)
	}
	bytes, _, ok := ranking.DiskUsage(&pod, &st, signals.NodeFsAvailable, signals.SingleFs)
	if !ok || bytes < 29*mib {
		t.Errorf("ranking.DiskUsage single fs = %d, %v; want at least 29 MiB", bytes, ok)
	}

	// A pod the runtime does not know: logs and volumes absent or nil,
	// the writable layer nil.
	ghost := signals.Pod{Namespace: "default", Name: "ghost", UID: "ghost-uid", Containers: []signals.Container{{Name: "app"}}}
	got, err := ds.PodStats(ctx, time.Now(), []signals.Pod{ghost})
	if err == nil {
		t.Errorf("DiskStats.PodStats of a pod without a log directory: no error")
	}
	if g := got[ghost.UID]; len(g.Containers) != 1 || g.Containers[0].Rootfs != nil || g.Containers[0].Logs != nil {
		t.Errorf("ghost pod: %+v, want one container with nil Rootfs and Logs", g)
	}
	if _, _, ok := ranking.DiskUsage(&ghost, ptr(got[ghost.UID]), signals.NodeFsAvailable, signals.SingleFs); ok {
		t.Errorf("ranking.DiskUsage of the ghost pod: ok, want no stats")
	}
}

func ptr[T any](v T) *T { return &v }

// runPod runs a host-network sandbox labelled as the kubelet labels one,
// with one container of image running the workload with args.
func runPod(t *testing.T, c *Client, p signals.Pod, logDir, cgroupParent, image string, args []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	hostNet := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}
	labels := map[string]string{labelPodUID: p.UID, "io.kubernetes.pod.name": p.Name, "io.kubernetes.pod.namespace": p.Namespace}
	podCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: p.Name, Uid: p.UID, Namespace: p.Namespace},
		Labels:       labels,
		LogDirectory: logDir,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent:    cgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: hostNet},
		},
	}
	rs := c.rs.client
	sandbox, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox %s: %v", p.Name, err)
	}
	for _, c := range p.Containers {
		name := c.Name
		ctrCfg := &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name},
			Image:    &runtimeapi.ImageSpec{Image: image},
			Args:     args,
			Labels:   map[string]string{labelPodUID: p.UID, labelContainerName: name},
			LogPath:  filepath.Join(name, "0.log"),
			Linux: &runtimeapi.LinuxContainerConfig{
				SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: hostNet},
			},
		}
		ctr, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
			PodSandboxId: sandbox.GetPodSandboxId(), Config: ctrCfg, SandboxConfig: podCfg,
		})
		if err != nil {
			t.Fatalf("CreateContainer %s: %v", name, err)
		}
		if _, err := rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr.GetContainerId()}); err != nil {
			t.Fatalf("StartContainer %s: %v", name, err)
		}
	}
}

// writeFile writes n bytes of data (not a hole) to path, making its parents.
func writeFile(t *testing.T, path string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i)
	}
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
}

// removeCgroup removes the pods' parent cgroup (v1 hierarchies and v2).
func removeCgroup(t *testing.T, parent string) {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", parent))
	dirs = append(dirs, filepath.Join("/sys/fs/cgroup", parent))
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
			t.Errorf("remove cgroup %s: %v", d, err)
		}
	}
}

// TestMergeDisk: the disk pieces join the cgroups' stats by pod and
// container name; a container's working set is only ever the cgroups'
// (read with its pod's), never one the disk stats carry, gathered at
// another time.
func TestMergeDisk(t *testing.T) {
	rootfs, logs := &signals.FsUsage{Bytes: 1, Inodes: 1}, &signals.FsUsage{Bytes: 2, Inodes: 2}
	cgroups := map[string]signals.PodStats{
		"a": {UID: "a", MemoryWorkingSet: signals.Int64(100), Containers: []signals.ContainerStats{{Name: "app", MemoryWorkingSet: signals.Int64(90)}}},
	}
	disk := map[string]signals.PodStats{
		"a": {UID: "a", Containers: []signals.ContainerStats{{Name: "app", Rootfs: rootfs, Logs: logs, MemoryWorkingSet: signals.Int64(7)},
			{Name: "init", Logs: logs, MemoryWorkingSet: signals.Int64(8)}},
			Volumes: map[string]signals.FsUsage{"cache": {Bytes: 3}}},
		"b": {UID: "b", Containers: []signals.ContainerStats{{Name: "x", Rootfs: rootfs, MemoryWorkingSet: signals.Int64(9)}}},
	}
	got := MergeDisk(cgroups, disk)
	a := got["a"]
	if a.MemoryWorkingSet == nil || *a.MemoryWorkingSet != 100 || len(a.Containers) != 2 {
		t.Fatalf("pod a = %+v, want the memory kept and two containers", a)
	}
	if c := a.Containers[0]; c.Name != "app" || c.MemoryWorkingSet == nil || *c.MemoryWorkingSet != 90 || c.Rootfs != rootfs || c.Logs != logs {
		t.Errorf("container app = %+v, want the cgroups' memory, rootfs and logs", c)
	}
	if c := a.Containers[1]; c.Name != "init" || c.Rootfs != nil || c.Logs != logs || c.MemoryWorkingSet != nil {
		t.Errorf("container init = %+v, want logs only", c)
	}
	if a.Volumes["cache"].Bytes != 3 {
		t.Errorf("volumes = %v, want cache", a.Volumes)
	}
	b, ok := got["b"]
	if !ok || len(b.Containers) != 1 {
		t.Fatalf("pod b (disk only) = %+v, want its container", b)
	}
	if c := b.Containers[0]; c.Name != "x" || c.Rootfs != rootfs || c.MemoryWorkingSet != nil {
		t.Errorf("pod b's container = %+v, want its rootfs and no working set", c)
	}
}

// TestRuntimeUsagePick: of several containers of one pod and name, the
// running one, else the latest created, stands for the name; a tie (two
// attempts created at the same time, as a runtime reporting no creation
// time lists them) goes to the later attempt, then to the greater ID, in
// whatever order the runtime lists them.
func TestRuntimeUsagePick(t *testing.T) {
	ctr := func(id string, state runtimeapi.ContainerState, created int64, attempt uint32) *runtimeapi.Container {
		return &runtimeapi.Container{Id: id, PodSandboxId: "s", State: state, CreatedAt: created,
			Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: attempt}}
	}
	const (
		running = runtimeapi.ContainerState_CONTAINER_RUNNING
		exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	)
	tests := []struct {
		name       string
		containers []*runtimeapi.Container
		want       string
	}{
		{"running before exited", []*runtimeapi.Container{ctr("old", running, 1, 0), ctr("new", exited, 2, 1)}, "old"},
		{"latest created", []*runtimeapi.Container{ctr("a", exited, 2, 0), ctr("b", exited, 1, 1)}, "a"},
		{"no creation times: the later attempt", []*runtimeapi.Container{ctr("a", exited, 0, 1), ctr("b", exited, 0, 0)}, "a"},
		{"no creation times, no attempts: the greater ID", []*runtimeapi.Container{ctr("a", exited, 0, 0), ctr("b", exited, 0, 0)}, "b"},
	}
	sandboxes := []*runtimeapi.PodSandbox{{Id: "s", Metadata: &runtimeapi.PodSandboxMetadata{Uid: "uid"}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, order := range [][]*runtimeapi.Container{tt.containers, {tt.containers[1], tt.containers[0]}} {
				byPod, _ := runtimeUsage(sandboxes, order, nil)
				if got := byPod["uid"]["app"].id; got != tt.want {
					t.Errorf("listed as %s, %s: picked %q, want %q", order[0].GetId(), order[1].GetId(), got, tt.want)
				}
			}
		})
	}
}
