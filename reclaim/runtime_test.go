package reclaim

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/cri"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/testing/testruntime"
	"github.com/evictd/evictd/signals"
)

const (
	usedImage = "evictd.test/used:1"
	bigImage1 = "evictd.test/big1:1"
	bigImage2 = "evictd.test/big2:1"
	bigMiB    = 32
	mib       = 1 << 20
)

// TestImagesOnContainerd fills a dedicated imagefs (containerd's root on a
// 256 MiB ext4) with two unused images of 32 MiB extra layers beside the
// image of a running container and the pause image. A Reclaimer that has
// just met the images leaves them (younger than 2m); once the clock is past
// the age, the unused images go, the used and pause images stay, and the
// freed bytes are what statfs shows.
func TestImagesOnContainerd(t *testing.T) {
	cgroupParent := cgroupForTest(t)
	rt := testruntime.StartForTest(t, testruntime.Options{Root: testruntime.MountExt4(t, 256)})
	ctx := t.Context()
	for _, im := range []struct {
		ref string
		mib int
	}{{usedImage, 0}, {bigImage1, bigMiB}, {bigImage2, bigMiB}} {
		if err := rt.ImportImage(ctx, im.ref, im.mib); err != nil {
			t.Fatal(err)
		}
	}
	rs, is := rt.RuntimeService(), rt.ImageService()
	agent := agentCRI(t, rt)
	p := runSandbox(t, rs, "user", cgroupParent)
	p.start(t, "app", 0, usedImage, "sleep")

	clk := clocktesting.NewFakeClock(time.Now())
	r := New(Config{
		NodeFsPath: t.TempDir(), ImageFsPath: rt.RootDir(), MinImageAge: 2 * time.Minute,
		SandboxImage: sandboxImage(t, agent), Clock: clk, Timeout: 20 * time.Second,
		// The CRI removes an image and its content synchronously: no
		// settling (which the fake clock would never let end).
		Settle: -1,
	}, agent.RuntimeService(), agent.ImageService(), logger(t))

	actions := reclaim(t, r, signals.ImageFsAvailable, signals.DedicatedImageFs)
	if got := removed(actions); got[decide.ReclaimContainers] != 0 || got[decide.ReclaimImages] != 0 {
		t.Errorf("first reclaim removed %v; want nothing: no dead container, every image younger than 2m", got)
	}
	wantTags(t, is, []string{testruntime.PauseImage, usedImage, bigImage1, bigImage2}, nil)

	var sizes uint64
	for _, ref := range []string{bigImage1, bigImage2} {
		st, err := is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
		if err != nil {
			t.Fatal(err)
		}
		sizes += st.GetImage().GetSize()
	}
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	before := available(t, rt.RootDir())
	actions = reclaim(t, r, signals.ImageFsAvailable, signals.DedicatedImageFs)
	shown := available(t, rt.RootDir()) - before
	if got := removed(actions); got[decide.ReclaimContainers] != 0 || got[decide.ReclaimImages] != 2 {
		t.Errorf("reclaim 2m later removed %v; want the 2 unused images", got)
	}
	wantTags(t, is, []string{testruntime.PauseImage, usedImage}, []string{bigImage1, bigImage2})
	freed := actions[1].FreedBytes
	t.Logf("images: freed %d bytes (%.1f MiB) by the Reclaimer's count, %d (%.1f MiB) by statfs around the call; CRI sizes of the removed images %d (%.1f MiB)",
		freed, float64(freed)/mib, shown, float64(shown)/mib, sizes, float64(sizes)/mib)
	// Blob and snapshot of each extra layer: about 2×32 MiB per image.
	if min := int64(2 * 2 * bigMiB * mib * 9 / 10); freed < min {
		t.Errorf("images freed %d bytes, want at least %d (blob and snapshot of two %d MiB layers)", freed, min, bigMiB)
	}
	if d := shown - freed; d < 0 || d > 4*mib {
		t.Errorf("images freed %d bytes, statfs shows %d around the call; want them within 4 MiB", freed, shown)
	}
	if st := p.status(t, "app", 0); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("user's container after reclaim: %s, want running", st.GetState())
	}
}

// TestContainersOnContainerd: on a single filesystem (containerd's root on a
// 256 MiB ext4), a pod that ran a container writing 10 MiB and was then
// stopped (sandbox not ready) goes with its container; in a running pod the
// oldest of two exited instances of a container goes, the newest exited one
// and the running one stay; the image all of them use stays.
func TestContainersOnContainerd(t *testing.T) {
	cgroupParent := cgroupForTest(t)
	// containerd collects the removed containers' snapshots after each
	// deletion (PromptGC): by its defaults the 10 MiB layer came back after
	// the Reclaimer's settle on the busy machine (make test beside a CPU
	// burner), and the test counted 8 KiB, the logs alone.
	rt := testruntime.StartForTest(t, testruntime.Options{Root: testruntime.MountExt4(t, 256), PromptGC: true})
	ctx := t.Context()
	if err := rt.ImportImage(ctx, usedImage, 0); err != nil {
		t.Fatal(err)
	}
	rs, is := rt.RuntimeService(), rt.ImageService()
	agent := agentCRI(t, rt)

	gone := runSandbox(t, rs, "gone", cgroupParent)
	writer := gone.start(t, "writer", 0, usedImage, "write", "--dir", "/data", "--mib", "10")
	waitLog(t, filepath.Join(gone.logDir, "writer_0.log"), "workload: ready (wrote")
	if err := rs.StopContainer(ctx, writer, 10); err != nil {
		t.Fatal(err)
	}
	if err := rs.StopPodSandbox(ctx, gone.id); err != nil {
		t.Fatal(err)
	}

	keep := runSandbox(t, rs, "keep", cgroupParent)
	var attempts []string
	for attempt := range uint32(3) {
		id := keep.start(t, "app", attempt, usedImage, "sleep")
		attempts = append(attempts, id)
		if attempt < 2 {
			if err := rs.StopContainer(ctx, id, 10); err != nil {
				t.Fatal(err)
			}
		}
	}

	r := New(Config{NodeFsPath: rt.RootDir(), SandboxImage: sandboxImage(t, agent), Timeout: 20 * time.Second}, agent.RuntimeService(), agent.ImageService(), logger(t))
	before := available(t, rt.RootDir())
	actions := reclaim(t, r, signals.NodeFsAvailable, signals.SingleFs)
	shown := available(t, rt.RootDir()) - before
	// Attempt 0 of app, the sandbox "gone" and its writer.
	if got := removed(actions); got[decide.ReclaimContainers] != 3 || got[decide.ReclaimImages] != 0 {
		t.Errorf("reclaim removed %v; want 3 containers and sandboxes, no image (all in use)", got)
	}
	freed := actions[0].FreedBytes
	t.Logf("containers: freed %d bytes (%.1f MiB) by the Reclaimer's count, %d (%.1f MiB) by statfs around the call",
		freed, float64(freed)/mib, shown, float64(shown)/mib)
	if freed < 10*mib {
		t.Errorf("containers freed %d bytes, want at least the 10 MiB the writer wrote in its writable layer", freed)
	}

	sandboxes, err := rs.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sbs []string
	for _, s := range sandboxes {
		sbs = append(sbs, s.GetMetadata().GetName())
	}
	if !slices.Equal(sbs, []string{"keep"}) {
		t.Errorf("sandboxes after reclaim %q, want [keep]", sbs)
	}
	containers, err := rs.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]runtimeapi.ContainerState{}
	for _, c := range containers {
		left[c.GetId()] = c.GetState()
	}
	want := map[string]runtimeapi.ContainerState{
		attempts[1]: runtimeapi.ContainerState_CONTAINER_EXITED,
		attempts[2]: runtimeapi.ContainerState_CONTAINER_RUNNING,
	}
	if fmt.Sprint(left) != fmt.Sprint(want) {
		t.Errorf("containers after reclaim %v, want %v (attempt 1 exited, attempt 2 running)", left, want)
	}
	wantTags(t, is, []string{testruntime.PauseImage, usedImage}, nil)
}

func reclaim(t *testing.T, r *Reclaimer, sig signals.Signal, layout signals.FsLayout) []decide.ReclaimAction {
	t.Helper()
	actions, err := r.Reclaim(t.Context(), sig, layout)
	if err != nil {
		t.Fatalf("Reclaim(%s, %s): %v", sig, layout, err)
	}
	for _, a := range actions {
		if a.Err != nil {
			t.Errorf("Reclaim(%s, %s): %s: %v", sig, layout, a.Kind, a.Err)
		}
	}
	return actions
}

func removed(actions []decide.ReclaimAction) map[decide.ReclaimKind]int {
	m := map[decide.ReclaimKind]int{}
	for _, a := range actions {
		m[a.Kind] += a.Removed
	}
	return m
}

func available(t *testing.T, path string) int64 {
	t.Helper()
	n, err := StatfsAvailable(path)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantTags checks that the runtime lists every image of present and none of
// absent.
func wantTags(t *testing.T, is internalapi.ImageManagerService, present, absent []string) {
	t.Helper()
	images, err := is.ListImages(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, img := range images {
		tags = append(tags, img.GetRepoTags()...)
	}
	for _, ref := range present {
		if !slices.Contains(tags, ref) {
			t.Errorf("images %q: want %s among them", tags, ref)
		}
	}
	for _, ref := range absent {
		if slices.Contains(tags, ref) {
			t.Errorf("images %q: want %s removed", tags, ref)
		}
	}
}

// testPod is a host-network pod sandbox running on the test runtime.
type testPod struct {
	rs     internalapi.RuntimeService
	id     string
	cfg    *runtimeapi.PodSandboxConfig
	logDir string
}

func runSandbox(t *testing.T, rs internalapi.RuntimeService, name, cgroupParent string) testPod {
	t.Helper()
	hostNet := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Uid: name + "-uid", Namespace: "default"},
		LogDirectory: t.TempDir(),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent:    cgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: hostNet},
		},
	}
	id, err := rs.RunPodSandbox(t.Context(), cfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	return testPod{rs: rs, id: id, cfg: cfg, logDir: cfg.LogDirectory}
}

// start creates and starts attempt of container name running the workload
// with args, logging to <logDir>/<name>_<attempt>.log.
func (p testPod) start(t *testing.T, name string, attempt uint32, image string, args ...string) string {
	t.Helper()
	hostNet := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Args:     args,
		LogPath:  fmt.Sprintf("%s_%d.log", name, attempt),
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: hostNet},
		},
	}
	id, err := p.rs.CreateContainer(t.Context(), p.id, cfg, p.cfg)
	if err != nil {
		t.Fatalf("CreateContainer %s attempt %d: %v", name, attempt, err)
	}
	if err := p.rs.StartContainer(t.Context(), id); err != nil {
		t.Fatalf("StartContainer %s attempt %d: %v", name, attempt, err)
	}
	return id
}

func (p testPod) status(t *testing.T, name string, attempt uint32) *runtimeapi.ContainerStatus {
	t.Helper()
	cs, err := p.rs.ListContainers(t.Context(), &runtimeapi.ContainerFilter{PodSandboxId: p.id})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.GetMetadata().GetName() == name && c.GetMetadata().GetAttempt() == attempt {
			st, err := p.rs.ContainerStatus(t.Context(), c.GetId(), false)
			if err != nil {
				t.Fatal(err)
			}
			return st.GetStatus()
		}
	}
	t.Fatalf("container %s attempt %d not listed in sandbox %s", name, attempt, p.id)
	return nil
}

// cgroupForTest returns a cgroup parent for the test's pods and removes it in
// every hierarchy (v1 and v2) once the runtime started after this call has
// stopped.
func cgroupForTest(t *testing.T) string {
	parent := fmt.Sprintf("/evictd-reclaim-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	t.Cleanup(func() {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", parent))
		dirs2, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", parent))
		for _, d := range append(dirs, dirs2...) {
			if err := os.Remove(d); err != nil {
				t.Errorf("remove cgroup %s: %v", d, err)
			}
		}
	})
	return parent
}

func waitLog(t *testing.T, path, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), want) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %q in %s: %v; last: %q, %v", want, path, ctx.Err(), b, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// agentCRI dials the CRI client the agent gives reclaim (internal/cri over
// cri-api's gRPC client); the tests set their pods up with the runtime's
// own (k8s.io/cri-client).
// sandboxImage is what the agent gives reclaim as the sandbox image: the
// runtime's own answer (containerd 1.x names it; containerd 2 names none and
// reports it pinned), so that the pause image's survival below is the
// agent's, on either runtime.
func sandboxImage(t *testing.T, c *cri.Client) string {
	t.Helper()
	img, err := c.SandboxImage(t.Context())
	if err != nil {
		t.Fatalf("SandboxImage: %v", err)
	}
	t.Logf("the runtime names the sandbox image %q", img)
	return img
}

func agentCRI(t *testing.T, rt *testruntime.Runtime) *cri.Client {
	t.Helper()
	c, err := cri.Dial(t.Context(), rt.Endpoint(), "", 20*time.Second, logger(t))
	if err != nil {
		t.Fatalf("Dial(%s): %v", rt.Endpoint(), err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}
