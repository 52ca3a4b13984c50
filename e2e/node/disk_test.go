package node

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/testing/testnode"
	"github.com/evictd/evictd/internal/testing/testruntime"
)

// TestDiskNode fills a real node's single small filesystem (the kubelet's
// root, the pods' logs and containerd's root on one 1 GiB ext4): evictd
// first removes the unused images, and when that is not enough evicts the
// pod that uses the most local storage, not the one that asked for least;
// then the same for inodes.
func TestDiskNode(t *testing.T) {
	fs := testruntime.MountExt4(t, 1024)
	n := testnode.StartForTest(t, testnode.Options{Name: "e2e-disk", NodeFs: fs, ImageFs: fs})
	diskPressure(t, n)
}

// diskPressure runs TestDiskNode's scenarios on n, whose kubelet root,
// pod logs and containerd root share one filesystem with at least 500 MiB
// free.
func diskPressure(t *testing.T, n *testnode.Node) {
	ctx := t.Context()
	unused := []string{"evictd.test/unused-a:1", "evictd.test/unused-b:1"}
	for _, ref := range unused {
		if err := n.Runtime().ImportImage(ctx, ref, 40); err != nil {
			t.Fatal(err)
		}
	}
	writer := func(name string) *v1.Pod { return emptyDirPod(n, name, "sleep") }
	// The small writer is Burstable and the big one BestEffort, but disk
	// ranking goes by usage over request first: big is the one to go.
	small := writer("small")
	small.Spec.Containers[0].Args = []string{"write", "--dir", "/data", "--mib", "20"}
	run(t, n, testnode.Resources(small, "64Mi", "", ""))

	free0 := statfsFree(t, n.RootDir())
	threshold := free0 - 100<<20
	startEvictd(t, n,
		fmt.Sprintf("--eviction-hard=nodefs.available<%d", threshold),
		"--minimum-image-ttl-duration=0s",
		"--eviction-pressure-transition-period=5s")
	t.Logf("nodefs free %d MiB; threshold nodefs.available<%d MiB", free0>>20, threshold>>20)

	// The big pod writes 300 MiB: 200 MiB below the threshold, more than
	// the two unused images (about 80 MiB each) give back.
	deleted := watchDeletion(t, n, "default", "big")
	big := writer("big")
	big.Spec.Containers[0].Args = []string{"write", "--dir", "/data", "--mib", "300"}
	if _, err := n.Admin().CoreV1().Pods("default").Create(ctx, big, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-deleted:
		if g := evictedGrace(t, d, "default", "big", evictdLog(n)); g != 1 {
			t.Errorf("hard disk eviction with grace %d, want 1", g)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("big not evicted within 90 s (nodefs free %d MiB)", statfsFree(t, n.RootDir())>>20)
	}
	images, err := n.Runtime().Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range unused {
		if slices.Contains(images, ref) {
			t.Errorf("unused image %s still there after the reclaim: %v", ref, images)
		}
	}
	for _, ref := range []string{testnode.WorkloadImage, testruntime.PauseImage} {
		if !slices.Contains(images, ref) {
			t.Errorf("image %s in use, removed: %v", ref, images)
		}
	}
	if v := metric(t, n, `evictd_reclaimed_bytes_total{kind="images"}`); v <= 0 {
		t.Errorf("evictd_reclaimed_bytes_total{kind=images} = %v, want > 0", v)
	}
	poll(t, "big to go", 30*time.Second, func() (bool, string) { return gone(t, n, "default", "big") })
	evs := evictedEvents(t, n, "default", "big")
	if len(evs) == 0 || !strings.Contains(evs[len(evs)-1].Message, "The node was low on resource: ephemeral-storage.") {
		t.Errorf("big's Evicted events: %+v", evs)
	}
	alive(t, n, "default", "small")
	poll(t, "EvictdDiskPressure=False", 30*time.Second, func() (bool, string) {
		return conditionIs(t, n, diskCondition, v1.ConditionFalse)
	})
	if err := n.StopEvictd(); err != nil {
		t.Fatal(err)
	}

	// Inodes: a pod creating 6000 files crosses nodefs.inodesFree 3000
	// below what is free now; nothing is left to reclaim, and it is the
	// BestEffort pod, not the Burstable one, that goes: inodes take the
	// lowest QoS class first (seed 001), whatever the inode counts.
	inodes0 := statfsFiles(t, n.RootDir())
	inodeThreshold := inodes0 - 3000
	startEvictd(t, n,
		fmt.Sprintf("--eviction-hard=nodefs.inodesFree<%d", inodeThreshold),
		"--minimum-image-ttl-duration=0s",
		"--eviction-pressure-transition-period=5s")
	t.Logf("nodefs inodes free %d; threshold nodefs.inodesFree<%d", inodes0, inodeThreshold)
	deleted = watchDeletion(t, n, "default", "files")
	files := writer("files")
	files.Spec.Containers[0].Args = []string{"files", "--dir", "/data", "--count", "6000"}
	if _, err := n.Admin().CoreV1().Pods("default").Create(ctx, files, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-deleted:
	case <-time.After(90 * time.Second):
		t.Fatalf("files not evicted within 90 s (inodes free %d)", statfsFiles(t, n.RootDir()))
	}
	poll(t, "files to go", 30*time.Second, func() (bool, string) { return gone(t, n, "default", "files") })
	evs = evictedEvents(t, n, "default", "files")
	if len(evs) == 0 || !strings.Contains(evs[len(evs)-1].Message, "The node was low on resource: inodes.") {
		t.Errorf("files' Evicted events: %+v", evs)
	}
	alive(t, n, "default", "small")
}

// statfsFiles returns the free inodes of the filesystem holding dir.
func statfsFiles(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Ffree)
}

// statfsFree returns the bytes available to unprivileged users on the
// filesystem holding dir, as nodefs.available counts them.
func statfsFree(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// localStorageLimit: a pod that writes 60 MiB into an emptyDir of sizeLimit
// 20Mi beside a steady one, with no disk threshold near: evictd evicts it
// for its own limit (--local-storage-eviction=evictd, the default) within
// the wait, once, in the kubelet's words, and the steady pod stays. The
// kubelet beside it enforces the same limit (localStorageCapacityIsolation
// on by default) but measures emptyDirs once a minute
// (volumeStatsAggPeriod), so evictd is first; which agent evicted is in the
// event's source. The v1 twins: TestChaosNode's hard links and
// TestMigrationNode.
func localStorageLimit(t *testing.T, n *testnode.Node, wait time.Duration) {
	startEvictd(t, n)
	run(t, n, emptyDirPod(n, "steady", "write", "--dir", "/data", "--mib", "5"))
	t.Logf("over evicted %s after it ran", overEvicted(t, n, wait).Round(time.Millisecond))
	evs := evictedEvents(t, n, "default", "over")
	if len(evs) != 1 || evs[0].Source.Component != "evictd" || !strings.Contains(evs[0].Message, `Usage of EmptyDir volume "data" exceeds the limit "20Mi".`) {
		t.Errorf("over's Evicted events: %+v; want one from evictd, for its emptyDir's limit", evs)
	}
	alive(t, n, "default", "steady")
}

// overEvicted runs overSizeLimit's pod on n and returns how long after it
// ran its deletion came; it fails t, with the end of evictd's log, when
// none came within wait.
func overEvicted(t *testing.T, n *testnode.Node, wait time.Duration) time.Duration {
	t.Helper()
	deleted := watchDeletion(t, n, "default", "over")
	run(t, n, overSizeLimit(n))
	started := time.Now()
	select {
	case d := <-deleted:
		return d.at.Sub(started)
	case <-time.After(wait):
		t.Fatalf("over not evicted within %s; last lines of evictd's log:\n%s", wait, tail(n.LogPath("evictd"), 30))
		return 0
	}
}

// emptyDirPod is a test pod running the workload with args, with an
// emptyDir "data" mounted at /data.
func emptyDirPod(n *testnode.Node, name string, args ...string) *v1.Pod {
	p := labelled(n.Pod(name, args...))
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return p
}

// overSizeLimit is the pod "over", which writes 60 MiB into its emptyDir
// of sizeLimit 20Mi.
func overSizeLimit(n *testnode.Node) *v1.Pod {
	p := emptyDirPod(n, "over", "write", "--dir", "/data", "--mib", "60")
	limit := resource.MustParse("20Mi")
	p.Spec.Volumes[0].EmptyDir.SizeLimit = &limit
	return p
}
