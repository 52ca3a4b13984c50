package cri

import (
	"fmt"
	"os"
	"testing"
	"time"

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
	for _, p := range []signals.Pod{victim, bystander} {
		runPod(t, c, p, t.TempDir(), cgroupParent, image, []string{"sleep"})
	}

	start := time.Now()
	n, err := c.StopPodContainers(ctx, victim.UID, 1)
	if err != nil || n != 1 {
		t.Fatalf("StopPodContainers: stopped %d, %v; want 1, nil", n, err)
	}
	t.Logf("stopped in %s", time.Since(start).Round(time.Millisecond))
	states := map[string]runtimeapi.ContainerState{}
	ctrs, err := c.rs.ListContainers(ctx, nil)
	if err != nil {
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
	if n, err := c.StopPodContainers(ctx, victim.UID, 1); err != nil || n != 0 {
		t.Errorf("second StopPodContainers: stopped %d, %v; want 0, nil", n, err)
	}
	if _, err := c.StopPodContainers(ctx, "", 1); err == nil {
		t.Errorf("StopPodContainers with no UID: no error")
	}
}

