package testruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	workloadImage = "evictd.test/workload:1"
	bigImage      = "evictd.test/big:1"
	bigImageMiB   = 20
	writeMiB      = 10
)

// TestRuntime runs pods on a containerd whose root is a small filesystem: a
// container that writes 10 MiB and one left running for Stop to clean up;
// then checks that Stop leaves no process and no mount behind. On ext4 the
// snapshotter is chosen (overlayfs here), on tmpfs it is native.
func TestRuntime(t *testing.T) {
	tests := []struct {
		name        string
		mount       func(t *testing.T) string
		snapshotter string
	}{
		{"ext4", func(t *testing.T) string { return MountExt4(t, 256) }, ""},
		{"tmpfs native", func(t *testing.T) string { return MountTmpfs(t, "256m", 10000) }, "native"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			testRuntime(t, tt.mount(t), tt.snapshotter, fmt.Sprintf("/evictd-testruntime-%d-%d", os.Getpid(), i))
		})
	}
}

func testRuntime(t *testing.T, root, snapshotter, cgroupParent string) {
	begin := time.Now()
	rt := StartForTest(t, Options{Root: root, Snapshotter: snapshotter})
	t.Logf("start (containerd, CRI ready, pause image imported): %s", time.Since(begin).Round(time.Millisecond))
	ctx := t.Context()

	usedBefore := statfsUsed(t, root)
	begin = time.Now()
	if err := rt.ImportImage(ctx, workloadImage, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("import %s: %s", workloadImage, time.Since(begin).Round(time.Millisecond))
	begin = time.Now()
	if err := rt.ImportImage(ctx, bigImage, bigImageMiB); err != nil {
		t.Fatal(err)
	}
	t.Logf("import %s (extra layer of %d MiB): %s", bigImage, bigImageMiB, time.Since(begin).Round(time.Millisecond))
	if grew := statfsUsed(t, root) - usedBefore; grew < 2*bigImageMiB<<20 {
		t.Errorf("root filesystem grew by %d bytes with the images, want at least %d (blob and snapshot of the extra layer)", grew, 2*bigImageMiB<<20)
	}
	images, err := rt.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{PauseImage, workloadImage, bigImage} {
		if !slices.Contains(images, want) {
			t.Errorf("Images() = %q, want %s among them", images, want)
		}
	}

	rs, is := rt.RuntimeService(), rt.ImageService()
	for _, ref := range []string{PauseImage, workloadImage, bigImage} {
		img, err := is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
		if err != nil || img.GetImage() == nil {
			t.Fatalf("CRI ImageStatus(%s) = %v, %v; want the image", ref, img, err)
		}
	}

	t.Cleanup(func() { removeCgroup(t, cgroupParent) })
	logDir := t.TempDir()

	begin = time.Now()
	writer := runPod(t, rs, "writer", cgroupParent, logDir, workloadImage,
		[]string{"write", "--dir", "/data", "--mib", fmt.Sprint(writeMiB)})
	waitLog(t, filepath.Join(logDir, "writer", "writer.log"), "workload: ready (wrote")
	t.Logf("sandbox and container started, %d MiB written: %s", writeMiB, time.Since(begin).Round(time.Millisecond))
	sleeper := runPod(t, rs, "sleeper", cgroupParent, logDir, bigImage, []string{"sleep"})
	waitLog(t, filepath.Join(logDir, "sleeper", "sleeper.log"), "workload: ready (sleeping)")

	st, err := rs.ContainerStatus(ctx, writer.ctr, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.GetStatus().GetState(); got != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("writer state = %s, want running", got)
	}

	// The processes of this runtime, to check after Stop: containerd, its
	// shims (one per pod), the containers' processes (from the CRI's
	// verbose status, not from the shims' children as Stop finds them).
	var watched []proc
	shimPIDs, err := Processes(rt.Socket())
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range append([]int{rt.PID(), containerPID(t, st), containerPID(t, mustStatus(t, rs, sleeper.ctr))}, shimPIDs...) {
		p, err := readProc(pid)
		if err != nil {
			t.Fatalf("pid %d: %v", pid, err)
		}
		watched = append(watched, p)
	}
	var shims int
	for _, p := range watched {
		if strings.HasSuffix(p.argv[0], "containerd-shim-runc-v2") {
			shims++
		}
	}
	if shims < 2 {
		t.Errorf("found %d shims naming %s among %v, want one per pod", shims, rt.Socket(), watched)
	}

	// The writable layer and the image filesystem, as the CRI reports them.
	waitFor(t, "writer's writable layer to reach the written data", func() (bool, string) {
		stats, err := rs.ContainerStats(ctx, writer.ctr)
		if err != nil {
			return false, err.Error()
		}
		used := stats.GetWritableLayer().GetUsedBytes().GetValue()
		return used >= writeMiB<<20, fmt.Sprintf("writable layer used %d bytes", used)
	})
	var imageFs string
	waitFor(t, "ImageFsInfo to count images and writable layers", func() (bool, string) {
		fs, err := is.ImageFsInfo(ctx)
		if err != nil {
			return false, err.Error()
		}
		if len(fs.GetImageFilesystems()) != 1 {
			return false, fmt.Sprintf("image filesystems %v", fs.GetImageFilesystems())
		}
		f := fs.GetImageFilesystems()[0]
		mp, used := f.GetFsId().GetMountpoint(), f.GetUsedBytes().GetValue()
		if !strings.HasPrefix(mp, rt.RootDir()+"/") || statDev(t, mp) != statDev(t, root) {
			t.Fatalf("ImageFsInfo mountpoint %s, want one below %s on the filesystem mounted at %s", mp, rt.RootDir(), root)
		}
		min, max := uint64(writeMiB+bigImageMiB)<<20, statfsUsed(t, root)
		imageFs = fmt.Sprintf("mountpoint %s used %d bytes, want [%d, %d] (inodes used %d)",
			mp, used, min, max, f.GetInodesUsed().GetValue())
		return used >= min && used <= max, imageFs
	})
	t.Logf("ImageFsInfo: %s", imageFs)

	// SIGTERM ends the workload, with exit code 0: one that ignored it
	// would be killed when the 10 s timeout ran out, with 137. How long
	// the stop took is logged, not bounded: on a busy machine (make test,
	// tier 1 at a lower priority beside e2e/node) it took 9.8 s once, and
	// the workload had still exited 0 on its SIGTERM.
	begin = time.Now()
	if err := rs.StopContainer(ctx, writer.ctr, 10); err != nil {
		t.Fatal(err)
	}
	t.Logf("StopContainer took %s", time.Since(begin).Round(time.Millisecond))
	if st := mustStatus(t, rs, writer.ctr).GetStatus(); st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.GetExitCode() != 0 {
		t.Errorf("writer after StopContainer: %s, exit code %d (reason %q); want exited with 0, on its SIGTERM", st.GetState(), st.GetExitCode(), st.GetReason())
	}
	for _, step := range []func() error{
		func() error { return rs.RemoveContainer(ctx, writer.ctr) },
		func() error { return rs.StopPodSandbox(ctx, writer.pod) },
		func() error { return rs.RemovePodSandbox(ctx, writer.pod) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}

	// Stop with the sleeper pod still running.
	dirs := []string{rt.RootDir(), rt.StateDir(), rt.Dir()}
	begin = time.Now()
	if err := rt.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Stop with one pod running: %s", time.Since(begin).Round(time.Millisecond))
	for _, p := range watched {
		if now, err := readProc(p.pid); err == nil && now.start == p.start && now.state != 'Z' {
			t.Errorf("after Stop, %s still runs", p)
		}
	}
	if left, err := Processes(rt.Socket()); err != nil || len(left) > 0 {
		t.Errorf("after Stop, processes of %s: %v, %v; want none", rt.Socket(), left, err)
	}
	for _, d := range dirs {
		if m, err := MountsUnder(d); err != nil || len(m) > 0 {
			t.Errorf("after Stop, mounts under %s: %q, %v; want none", d, m, err)
		}
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after Stop, %s: %v; want it removed", d, err)
		}
	}
}

type pod struct{ pod, ctr string }

// runPod runs a host-network pod sandbox with one container of image running
// the workload with args, logging to logDir/<name>/<name>.log.
func runPod(t *testing.T, rs internalapi.RuntimeService, name, cgroupParent, logDir, image string, args []string) pod {
	t.Helper()
	ctx := t.Context()
	hostNet := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}
	podCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Uid: name + "-uid", Namespace: "default"},
		LogDirectory: filepath.Join(logDir, name),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent:    cgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: hostNet},
		},
	}
	podID, err := rs.RunPodSandbox(ctx, podCfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	ctrCfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Args:     args,
		LogPath:  name + ".log",
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: hostNet},
		},
	}
	ctrID, err := rs.CreateContainer(ctx, podID, ctrCfg, podCfg)
	if err != nil {
		t.Fatalf("CreateContainer %s: %v", name, err)
	}
	if err := rs.StartContainer(ctx, ctrID); err != nil {
		t.Fatalf("StartContainer %s: %v", name, err)
	}
	return pod{pod: podID, ctr: ctrID}
}

func mustStatus(t *testing.T, rs internalapi.RuntimeService, id string) *runtimeapi.ContainerStatusResponse {
	t.Helper()
	st, err := rs.ContainerStatus(t.Context(), id, true)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// containerPID returns the PID of a container's process from containerd's
// verbose status ({"info": "{\"pid\": …}"}).
func containerPID(t *testing.T, st *runtimeapi.ContainerStatusResponse) int {
	t.Helper()
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil || info.PID == 0 {
		t.Fatalf("container status info %q: pid %d, %v", st.GetInfo()["info"], info.PID, err)
	}
	return info.PID
}

// waitLog waits until the file at path contains want.
func waitLog(t *testing.T, path, want string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%q in %s", want, path), func() (bool, string) {
		b, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(b), want), fmt.Sprintf("%q, %v", b, err)
	})
}

// waitFor polls cond until it holds, for at most 30 s; cond's string tells
// what it saw last.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		ok, last := cond()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; last: %s", what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func statfsUsed(t *testing.T, dir string) uint64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return (st.Blocks - st.Bfree) * uint64(st.Bsize)
}

func statDev(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Dev
}

// removeCgroup removes the pods' parent cgroup in every v1 hierarchy, and
// fails t if a pod's cgroup is left below it.
func removeCgroup(t *testing.T, parent string) {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", parent))
	for _, d := range dirs {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() {
				t.Errorf("cgroup %s left below %s", e.Name(), d)
			}
		}
		if err := os.Remove(d); err != nil {
			t.Errorf("remove cgroup %s: %v", d, err)
		}
	}
}
