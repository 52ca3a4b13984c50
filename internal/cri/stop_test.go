package cri

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evictd/evictd/internal/testing/testruntime"
	"github.com/evictd/evictd/signals"
)

// TestStopPodContainers stops the running container of one pod on a real
// containerd and leaves another pod's running.
func TestStopPodContainers(t *testing.T) {
	cgroupParent := fmt.Sprintf("/evictd-cri-stop-test-%d", os.Getpid())
	t.Cleanup(func() { removeCgroup(t, cgroupParent) })
	rt := testruntime.StartForTest(t, testruntime.Options{})
	ctx := t.Context()
	const image = "evictd.test/workload:1"
	if err := rt.ImportImage(ctx, image, 0); err != nil {
		t.Fatal(err)
	}
	c := dial(t, rt)
	pod := func(name string) signals.Pod {
		return signals.Pod{Namespace: "default", Name: name, UID: fmt.Sprintf("uid-%s-%d", name, os.Getpid()),
			Containers: []signals.Container{{Name: "app"}}}
	}
	victim, bystander := pod("victim"), pod("bystander")
	before := time.Now()
	for _, p := range []signals.Pod{victim, bystander} {
		runPod(t, c, p, t.TempDir(), cgroupParent, image, []string{"sleep"})
	}
	// The ready sandboxes, named and dated by the runtime (the age of a
	// pod the pod cache has never held is its sandbox's).
	ready, err := c.ReadySandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []signals.Pod{victim, bystander} {
		sb, ok := ready[p.UID]
		switch {
		case !ok:
			t.Errorf("ReadySandboxes has no sandbox of %s: %+v", p.UID, ready)
		case sb.Namespace != p.Namespace || sb.Name != p.Name:
			t.Errorf("ReadySandboxes[%s] is %s/%s, want %s", p.UID, sb.Namespace, sb.Name, p.Ref())
		case sb.Created.Before(before.Add(-time.Second)) || sb.Created.After(time.Now()):
			t.Errorf("ReadySandboxes[%s] created %s, want between %s and now", p.UID, sb.Created, before)
		}
	}

	start := time.Now()
	n, err := c.StopPodContainers(ctx, victim.UID, 1)
	if err != nil || n != 1 {
		t.Fatalf("StopPodContainers: stopped %d, %v; want 1, nil", n, err)
	}
	t.Logf("stopped in %s", time.Since(start).Round(time.Millisecond))
	// containerd 2 records a container's exit when it handles its task's
	// exit event, which can come after StopContainer has returned: seen
	// in make test beside e2e/node and a CPU burner, where a StopContainer
	// that had to kill after its timeout found the shim gone and returned
	// at once, the exit handled more than a second later. The victim's
	// container is waited for (waitExited) before the states are read.
	stopReturned := time.Now()
	states := map[string]runtimeapi.ContainerState{}
	var victimID string
	ctrs, err := c.rs.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ctr := range ctrs {
		if ctr.GetLabels()[labelPodUID] == victim.UID {
			victimID = ctr.GetId()
		}
	}
	if victimID == "" {
		t.Fatalf("the runtime lists no container of the victim %s", victim.UID)
	}
	waitExited(t, c, victimID)
	t.Logf("the victim's container read exited %s after its stop returned", time.Since(stopReturned).Round(time.Millisecond))
	if ctrs, err = c.rs.ListContainers(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, ctr := range ctrs {
		states[ctr.GetLabels()[labelPodUID]] = ctr.GetState()
	}
	if got := states[victim.UID]; got != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("victim's container %s, want exited", got)
	}
	if got := states[bystander.UID]; got != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("bystander's container %s, want running", got)
	}
	for _, c2 := range []struct {
		p    signals.Pod
		want bool
	}{{victim, true}, {bystander, true}, {signals.Pod{UID: "no-such-pod"}, false}} {
		if ready, err := c.PodSandboxReady(ctx, c2.p.UID); err != nil || ready != c2.want {
			t.Errorf("PodSandboxReady(%s) = %v, %v; want %v (its containers stopped, not its sandbox)", c2.p.UID, ready, err, c2.want)
		}
	}
	sbs, err := c.listPodSandboxesWith(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelPodUID: victim.UID}})
	if err != nil || len(sbs) != 1 {
		t.Fatalf("the victim's sandboxes: %v, %v", sbs, err)
	}
	// The test's own step, without the client's call timeout: under
	// load containerd 2 can take longer than it to stop a sandbox.
	if _, err := c.rs.client.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sbs[0].GetId()}); err != nil {
		t.Fatal(err)
	}
	// containerd 2 marks the sandbox not ready when it handles its
	// task's exit, which can come after StopPodSandbox has returned (seen
	// under a CPU burner): a ready sandbox is waited out, as evictd's
	// wait for it (Config.SandboxReady) does.
	stopped := time.Now()
	for {
		ready, err := c.PodSandboxReady(ctx, victim.UID)
		if err == nil && !ready {
			t.Logf("the victim's sandbox read not ready %s after its stop returned", time.Since(stopped).Round(time.Millisecond))
			break
		}
		if time.Since(stopped) > 10*time.Second {
			t.Fatalf("PodSandboxReady(victim) 10 s after its sandbox's stop = %v, %v; want false", ready, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n, err := c.StopPodContainers(ctx, victim.UID, 1); err != nil || n != 0 {
		t.Errorf("second StopPodContainers: stopped %d, %v; want 0, nil", n, err)
	}
	if _, err := c.StopPodContainers(ctx, "", 1); err == nil {
		t.Errorf("StopPodContainers with no UID: no error")
	}
	checkStopSignalLearnt(t, c, bystander.UID)
}

// TestStopPodContainersInParallel stops a pod of two containers that ignore
// SIGTERM, so each lives out its grace period until its SIGKILL: both
// have their SIGTERM before either has exited. Stopped one after the
// other, the second would have its SIGTERM only after the first's SIGKILL.
// The client knows the containers from a full listing, as the agent's
// disk stats leave it, and a container it knows that has gone since is no
// error.
func TestStopPodContainersInParallel(t *testing.T) {
	cgroupParent := fmt.Sprintf("/evictd-cri-parallel-test-%d", os.Getpid())
	t.Cleanup(func() { removeCgroup(t, cgroupParent) })
	rt := testruntime.StartForTest(t, testruntime.Options{})
	ctx := t.Context()
	const image = "evictd.test/workload:1"
	if err := rt.ImportImage(ctx, image, 0); err != nil {
		t.Fatal(err)
	}
	c := dial(t, rt)
	pod := signals.Pod{Namespace: "default", Name: "pair", UID: fmt.Sprintf("uid-pair-%d", os.Getpid()),
		Containers: []signals.Container{{Name: "a"}, {Name: "b"}}}
	logDir := t.TempDir()
	runPod(t, c, pod, logDir, cgroupParent, image, []string{"stubborn"})
	for _, name := range []string{"a", "b"} {
		waitLogLine(t, filepath.Join(logDir, name, "0.log"), "workload: ready (stubborn)")
	}
	sandboxes, err := c.listPodSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	containers, err := c.listContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.running.learn(sandboxes, containers)
	if got := len(c.running.of(pod.UID)); got != 2 {
		t.Fatalf("the listing knows %d running containers of the pod, want 2", got)
	}

	const grace = 2
	n, err := c.StopPodContainers(ctx, pod.UID, grace)
	if err != nil || n != 2 {
		t.Fatalf("StopPodContainers: stopped %d, %v; want 2, nil", n, err)
	}
	termAt := map[string]time.Time{}
	finishedAt := map[string]time.Time{}
	for _, ctr := range containers {
		if ctr.GetLabels()[labelPodUID] != pod.UID {
			continue
		}
		name := ctr.GetMetadata().GetName()
		finishedAt[name] = time.Unix(0, waitExited(t, c, ctr.GetId()).GetFinishedAt())
		termAt[name] = waitLogLine(t, filepath.Join(logDir, name, "0.log"), "workload: terminated, ignored")
	}
	t.Logf("SIGTERM a %s, b %s; exited a %s, b %s", termAt["a"].Format(time.StampMicro), termAt["b"].Format(time.StampMicro),
		finishedAt["a"].Format(time.StampMicro), finishedAt["b"].Format(time.StampMicro))
	for _, x := range []string{"a", "b"} {
		for _, y := range []string{"a", "b"} {
			if !termAt[x].Before(finishedAt[y]) {
				t.Errorf("container %s had its SIGTERM at %s, after container %s exited at %s: stopped one after the other",
					x, termAt[x].Format(time.StampMicro), y, finishedAt[y].Format(time.StampMicro))
			}
		}
	}

	// Both known containers are gone now (exited, then removed): a stop
	// of the pod is no error. containerd 1.6 answers NotFound, which
	// stops nothing; containerd 2 answers success, as the CRI's
	// StopContainer, idempotent, allows for a container it does not know,
	// and the count says the runtime's answer.
	for _, ctr := range containers {
		if ctr.GetLabels()[labelPodUID] == pod.UID {
			if _, err := c.rs.client.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: ctr.GetId()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	v, err := c.rs.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	if !strings.HasPrefix(v.GetRuntimeVersion(), "1.") {
		want = 2
	}
	if n, err := c.StopPodContainers(ctx, pod.UID, grace); err != nil || n != want {
		t.Errorf("StopPodContainers of removed containers it knew, on %s %s: stopped %d, %v; want %d, nil", v.GetRuntimeName(), v.GetRuntimeVersion(), n, err, want)
	}
}

// failingStop is the runtime's client with its StopContainer failing:
// after doing the stop (as containerd 1.6 may when the container exits
// during the call), or without doing it.
type failingStop struct {
	runtimeapi.RuntimeServiceClient
	stopFirst bool
	// failOnly > 0 fails only the first failOnly calls.
	failOnly int32
	calls    *atomic.Int32
}

func (f failingStop) StopContainer(ctx context.Context, in *runtimeapi.StopContainerRequest, opts ...grpc.CallOption) (*runtimeapi.StopContainerResponse, error) {
	if n := f.calls.Add(1); f.failOnly > 0 && n > f.failOnly {
		return f.RuntimeServiceClient.StopContainer(ctx, in, opts...)
	}
	if f.stopFirst {
		if _, err := f.RuntimeServiceClient.StopContainer(ctx, in, opts...); err != nil {
			return nil, err
		}
		// The failure comes once the runtime reports the container
		// exited, as it does when containerd has handled the exit:
		// containerd 2 can return from StopContainer before it has (see
		// TestStopPodContainers), and then the stop is rightly tried again.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			st, err := f.RuntimeServiceClient.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: in.GetContainerId()}, opts...)
			if err == nil && st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
				break
			}
		}
	}
	return nil, status.Error(codes.Unknown, "failed to kill container: ttrpc: closed")
}

// TestStopPodContainersFailedCall: a StopContainer that fails is a stop
// if the runtime then reports the container exited; one that fails with
// the container still running is made again, stopTries times in all, and
// is then an error naming the container.
func TestStopPodContainersFailedCall(t *testing.T) {
	cgroupParent := fmt.Sprintf("/evictd-cri-failstop-test-%d", os.Getpid())
	t.Cleanup(func() { removeCgroup(t, cgroupParent) })
	rt := testruntime.StartForTest(t, testruntime.Options{})
	ctx := t.Context()
	const image = "evictd.test/workload:1"
	if err := rt.ImportImage(ctx, image, 0); err != nil {
		t.Fatal(err)
	}
	c := dial(t, rt)
	real := c.rs.client
	// The first call fails with the container running (containerd has
	// not yet cleaned up after the shim): the next one stops it.
	pod := signals.Pod{Namespace: "default", Name: "failstop-once", UID: fmt.Sprintf("uid-failstop-once-%d", os.Getpid()),
		Containers: []signals.Container{{Name: "app"}}}
	runPod(t, c, pod, t.TempDir(), cgroupParent, image, []string{"sleep"})
	var calls atomic.Int32
	c.rs.client = failingStop{RuntimeServiceClient: real, failOnly: 1, calls: &calls}
	n, err := c.StopPodContainers(ctx, pod.UID, 1)
	c.rs.client = real
	if n != 1 || err != nil || calls.Load() != 2 {
		t.Errorf("one failed call, then the stop: stopped %d in %d calls, %v; want 1 in 2, nil", n, calls.Load(), err)
	}
	for _, stopFirst := range []bool{false, true} {
		pod := signals.Pod{Namespace: "default", Name: fmt.Sprintf("failstop-%t", stopFirst),
			UID: fmt.Sprintf("uid-failstop-%t-%d", stopFirst, os.Getpid()), Containers: []signals.Container{{Name: "app"}}}
		runPod(t, c, pod, t.TempDir(), cgroupParent, image, []string{"sleep"})
		var calls atomic.Int32
		c.rs.client = failingStop{RuntimeServiceClient: real, stopFirst: stopFirst, calls: &calls}
		n, err := c.StopPodContainers(ctx, pod.UID, 1)
		c.rs.client = real
		t.Logf("stop done before the failure %t: stopped %d in %d calls, %v", stopFirst, n, calls.Load(), err)
		if want := map[bool]int32{true: 1, false: stopTries}[stopFirst]; calls.Load() != want {
			t.Errorf("%d StopContainer calls, want %d", calls.Load(), want)
		}
		if stopFirst && (n != 1 || err != nil) {
			t.Errorf("failed call, container exited: stopped %d, %v; want 1, nil", n, err)
		}
		if !stopFirst && (n != 0 || err == nil || !strings.Contains(err.Error(), "ttrpc: closed")) {
			t.Errorf("failed call, container running: stopped %d, %v; want 0 and the runtime's error", n, err)
		}
	}
}

// waitExited reads the status of the container id until the runtime
// reports it exited, for at most 10 s, and returns it. containerd 2 can
// return from StopContainer before it has handled the container's exit
// (TestStopPodContainers).
func waitExited(t *testing.T, c *Client, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := c.rs.client.ContainerStatus(t.Context(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			t.Fatal(err)
		}
		st := resp.GetStatus()
		if st.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s is %s 10 s after its stop returned, want exited", id, st.GetState())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitLogLine waits for a line containing want in the CRI log at path and
// returns its time.
func waitLogLine(t *testing.T, path, want string) time.Time {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		for line := range strings.SplitSeq(string(b), "\n") {
			if !strings.Contains(line, want) {
				continue
			}
			stamp, _, _ := strings.Cut(line, " ")
			at, err := time.Parse(time.RFC3339Nano, stamp)
			if err != nil {
				t.Fatalf("%s: a line without a time: %q", path, line)
			}
			return at
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no line %q in %s within 30s", want, path)
	return time.Time{}
}

// TestRunningContainersLearn: the running containers of a listing, by
// their sandbox's pod UID (the label, else the metadata's), and nothing
// else.
func TestRunningContainersLearn(t *testing.T) {
	running, exited := runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_EXITED
	sandboxes := []*runtimeapi.PodSandbox{
		{Id: "s1", Labels: map[string]string{labelPodUID: "u1"}, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "other"}},
		{Id: "s2", Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u2"}},
	}
	ctr := func(id, sandbox string, st runtimeapi.ContainerState) *runtimeapi.Container {
		return &runtimeapi.Container{Id: id, PodSandboxId: sandbox, State: st, Metadata: &runtimeapi.ContainerMetadata{Name: "n-" + id}}
	}
	var r runningContainers
	r.learn(sandboxes, []*runtimeapi.Container{
		ctr("c1", "s1", running), ctr("c2", "s1", exited), ctr("c3", "s2", running), ctr("c4", "s-unknown", running), ctr("c5", "s1", running),
	})
	for uid, want := range map[string][]knownContainer{
		"u1":    {{"c1", "n-c1"}, {"c5", "n-c5"}},
		"u2":    {{"c3", "n-c3"}},
		"other": nil,
		"":      nil,
	} {
		if got := r.of(uid); !slices.Equal(got, want) {
			t.Errorf("of(%q) = %v, want %v", uid, got, want)
		}
	}
	r.learn(nil, nil)
	if got := r.of("u1"); got != nil {
		t.Errorf("after an empty listing, of(u1) = %v, want none", got)
	}
}

// checkStopSignalLearnt lists the runtime as the disk stats do and checks
// what it learnt of the stop signal of the running container of the pod
// with uid, whose image has no STOPSIGNAL: SIGTERM from a containerd that
// reports stop_signal (2.1 and later), nothing from one that does not
// (Debian 12's 1.6).
func checkStopSignalLearnt(t *testing.T, c *Client, uid string) {
	t.Helper()
	ctx := t.Context()
	if _, _, err := c.writableLayers(ctx); err != nil {
		t.Fatal(err)
	}
	known := c.running.of(uid)
	if len(known) != 1 {
		t.Fatalf("running containers of %s: %v, want one", uid, known)
	}
	v, err := c.rs.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Asked verbose, as CRI-O needs: the call must succeed on containerd.
	if _, err := c.containerStatusVerbose(ctx, known[0].id); err != nil {
		t.Errorf("verbose ContainerStatus: %v", err)
	}
	sig, ok := c.StopSignal(known[0].id)
	version := strings.TrimPrefix(v.GetRuntimeVersion(), "v")
	if strings.HasPrefix(version, "1.") || strings.HasPrefix(version, "2.0.") {
		if ok {
			t.Errorf("%s %s: stop signal %v known, want not (no stop_signal in its ContainerStatus)", v.GetRuntimeName(), version, sig)
		}
		return
	}
	if !ok || sig != syscall.SIGTERM {
		t.Errorf("%s %s: stop signal %v, %v; want SIGTERM", v.GetRuntimeName(), version, sig, ok)
	}
}
