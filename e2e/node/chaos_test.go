package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/nodestatus"
	"github.com/evictd/evictd/internal/testing/testagent"
	"github.com/evictd/evictd/internal/testing/testalloc"
	"github.com/evictd/evictd/internal/testing/testnode"
	"github.com/evictd/evictd/internal/testing/testruntime"
	"github.com/evictd/evictd/signals"
)

// TestChaosNode is the chaos matrix: on one real node, faults of every
// part evictd depends on, each under memory pressure, and after each the
// same account: no pod evicted twice or for a wrong reason, every eviction
// owed completed, the node's conditions and taints where the pressure
// says, evictd not restarted (unless the fault is its own death). The
// runtime and the kubelet restarted while an evicted pod terminates; evictd
// OOM-killed by its memory limit then; the API server stopped and started
// every 10 s for 3 minutes while hogs cross a hard threshold; the clock
// stepped an hour forward and back inside a soft grace period; evictd's log
// and state directory on a full filesystem. evictd killed -9 mid-eviction
// is TestNodeFaults', and containerd down through a whole eviction too.
func TestChaosNode(t *testing.T) {
	n := testnode.StartForTest(t, testnode.Options{Name: "e2e-chaos", Kubelet: chaosKubelet})
	t.Run("containerd restarted while an evicted pod terminates", func(t *testing.T) { midEviction(t, n, containerdRestarted, nativeScale) })
	cleanPods(t, n)
	t.Run("kubelet restarted while an evicted pod terminates", func(t *testing.T) { midEviction(t, n, kubeletRestarted, nativeScale) })
	cleanPods(t, n)
	t.Run("evictd OOM-killed by its memory limit while an evicted pod terminates", func(t *testing.T) {
		if _, err := os.Stat(memoryV1); err != nil {
			t.Skipf("needs the cgroup v1 memory controller (%s): %v", memoryV1, err)
		}
		midEviction(t, n, evictdOOMKilled, nativeScale)
	})
	cleanPods(t, n)
	t.Run("API server stopped and started every 10 s for 3 minutes while hogs cross a hard threshold", func(t *testing.T) { apiServerFlapping(t, n) })
	cleanPods(t, n)
	t.Run("clock stepped an hour forward and back inside a soft grace period", func(t *testing.T) { clockStepped(t, n) })
	cleanPods(t, n)
	t.Run("log and state directory on a full filesystem", func(t *testing.T) { fullFilesystem(t, n) })
	cleanPods(t, n)
	t.Run("a tenant's million hard links do not blind the disk stats", func(t *testing.T) { hardLinkAttack(t, n) })
	cleanPods(t, n)
}

// chaosKubelet is the chaos node's kubelet: its eviction off, local
// storage limits included, so that every eviction is evictd's.
var chaosKubelet = testnode.KubeletOptions{Config: map[string]any{"localStorageCapacityIsolation": false}}

// memoryV1 is the cgroup v1 memory controller's mount.
const memoryV1 = "/sys/fs/cgroup/memory"

// midEvictionFault strikes while a pod evictd evicted terminates.
type midEvictionFault struct {
	// restartsEvictd: the fault ends evictd, and strike starts it again
	// with the same flags, as systemd's Restart=always would.
	restartsEvictd bool
	// setup, if not nil, prepares the node before evictd starts.
	setup  func(t *testing.T, n *testnode.Node)
	strike func(t *testing.T, n *testnode.Node, args []string)
}

var (
	killed9 = midEvictionFault{restartsEvictd: true, strike: func(t *testing.T, n *testnode.Node, args []string) {
		if err := n.KillEvictd(); err != nil {
			t.Fatal(err)
		}
		restartEvictd(t, n, args)
	}}
	evictdOOMKilled = midEvictionFault{restartsEvictd: true, setup: limitEvictdMemory, strike: func(t *testing.T, n *testnode.Node, args []string) {
		oomKillEvictd(t, n)
		restartEvictd(t, n, args)
	}}
	// containerdRestarted is `systemctl restart containerd`: the pods'
	// shims live on, the kubelet's and evictd's CRI calls fail meanwhile.
	containerdRestarted = midEvictionFault{strike: func(t *testing.T, n *testnode.Node, _ []string) {
		rt := n.Runtime()
		if err := rt.StopContainerd(); err != nil {
			t.Fatal(err)
		}
		if err := rt.StartContainerd(t.Context()); err != nil {
			t.Fatal(err)
		}
	}}
	kubeletRestarted = midEvictionFault{strike: func(t *testing.T, n *testnode.Node, _ []string) {
		if err := n.RestartKubelet(t.Context(), chaosKubelet); err != nil {
			t.Fatal(err)
		}
	}}
)

// killed9BySystemd is killed9 on a node whose evictd systemd runs
// (SetEvictdUnit, as evictdUnit sets up): systemd, not the test, starts
// it again, with the same flags.
var killed9BySystemd = midEvictionFault{restartsEvictd: true, setup: evictdUnit, strike: func(t *testing.T, n *testnode.Node, _ []string) {
	pid := n.EvictdPID()
	if err := n.KillEvictd(); err != nil {
		t.Fatal(err)
	}
	poll(t, "systemd to start evictd again", time.Minute, func() (bool, string) {
		now := n.EvictdPID()
		if now == 0 || now == pid {
			return false, fmt.Sprintf("main pid %d (%d killed)", now, pid)
		}
		_, err := n.EvictdGet(t.Context(), "/readyz")
		return err == nil, fmt.Sprintf("pid %d: /readyz: %v", now, err)
	})
}}

// evictdUnit has systemd run the node's evictd as a unit of its own, with
// Restart=always, until t ends.
func evictdUnit(t *testing.T, n *testnode.Node) {
	n.SetEvictdUnit(fmt.Sprintf("evictd-e2e-%d.service", os.Getpid()))
	t.Cleanup(func() { n.SetEvictdUnit("") })
}

// restartEvictd starts evictd again after it died, as systemd would.
func restartEvictd(t *testing.T, n *testnode.Node, args []string) {
	t.Helper()
	if err := n.StartEvictd(t.Context(), args...); err != nil {
		t.Fatal(err)
	}
}

// midEviction strikes the node with f while evictd's Evicter waits for a
// pod that takes a minute to terminate (a preStop hook that never ends,
// under the pod's own 60 s grace period), with the node still under
// pressure (a critical pod holds a soft threshold met) and an evictable
// bystander running. Whatever the fault, evictd evicts no second pod while
// slow terminates, keeps its condition and taint without a flap, and
// evicts the bystander once slow has gone, the pressure being real. A
// restarted evictd finds its eviction in flight in the API server and
// says it waits for it; one that lived through the fault is the same
// process at the end.
func midEviction(t *testing.T, n *testnode.Node, f midEvictionFault, sc memoryScale) {
	args := []string{
		"--eviction-soft=allocatableMemory.available<" + sc.quantity(1200),
		"--eviction-soft-grace-period=allocatableMemory.available=1s",
		"--eviction-max-pod-grace-period=-1",
		"--eviction-pressure-transition-period=5s",
		"--housekeeping-interval=2s",
	}
	if f.setup != nil {
		f.setup(t, n)
	}
	startEvictd(t, n, args...)
	// slow runs before the pressure begins: a pod still being created is
	// evictable too, and on a loaded machine the pass after the pressure
	// can come before it runs.
	slow := labelled(n.Pod("slow", "alloc", "--mib", sc.mibArg(50)))
	grace := int64(60)
	slow.Spec.TerminationGracePeriodSeconds = &grace
	slow.Spec.Containers[0].Lifecycle = &v1.Lifecycle{
		PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/workload", "sleep"}}},
	}
	deleted := watchDeletion(t, n, "default", "slow")
	run(t, n, slow)
	// A critical pod holds the node under pressure that no eviction can
	// relieve, so the condition stays True across the fault.
	since := holdPressure(t, n, sc)

	select {
	case d := <-deleted:
		if g := evictedGrace(t, d, "default", "slow", evictdLog(n)); g != grace {
			t.Errorf("slow evicted with grace %d s, want its own %d", g, grace)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("slow not evicted within 60 s")
	}
	// The Evicted event goes out just after the eviction; once it is there
	// the Evicter is waiting for the pod to go.
	poll(t, "the Evicted event", 10*time.Second, func() (bool, string) {
		k := evictions(t, n, "default", "slow")
		return k >= 1, fmt.Sprintf("%d events", k)
	})
	// The bystander starts while the Evicter waits (and the loop with it),
	// so slow was the only candidate. It is the next one: evictable
	// (BestEffort, default namespace) and, with slow terminating and left
	// out, alone in the ranking; the critical pod keeps the soft threshold
	// met on its own. Without the in-flight wait a restarted evictd
	// evicts it a grace period (1 s) after its first pass.
	bystanderDeleted := watchDeletion(t, n, "default", "bystander")
	bystander := labelled(n.Pod("bystander", "sleep"))
	short := int64(2)
	bystander.Spec.TerminationGracePeriodSeconds = &short
	run(t, n, bystander)
	if ok, desc := gone(t, n, "default", "slow"); ok {
		t.Fatalf("slow went before the fault (%s): not mid-eviction", desc)
	}
	pid := n.EvictdPID()
	offset := logSize(t, n)
	f.strike(t, n, args)
	if f.restartsEvictd {
		t.Logf("evictd pid %d ended while slow terminates, restarted as pid %d", pid, n.EvictdPID())
		restartedMidEviction(t, n)
	} else {
		if got := n.EvictdPID(); got != pid {
			t.Fatalf("evictd pid %d after the fault, want %d: it restarted", got, pid)
		}
		// Three housekeeping intervals for evictd to act on what the
		// fault left.
		time.Sleep(6 * time.Second)
	}
	if k := evictions(t, n, "default", "slow"); k != 1 {
		t.Errorf("slow: %d Evicted events across the fault, want 1", k)
	}
	if k := logLines(t, n, offset, `msg="eviction failed"`); k > 0 {
		t.Errorf("evictd tried to evict again after the fault:\n%s", tail(n.LogPath("evictd"), 100))
	}
	// The fault may end slow sooner (the runtime's restart cuts its preStop
	// hook): the bystander may then go, but never before slow.
	select {
	case <-bystanderDeleted:
		if ok, desc := gone(t, n, "default", "slow"); !ok {
			t.Fatalf("evictd evicted the bystander while slow, its eviction in flight, terminates (%s)", desc)
		}
		bystanderDeleted = nil
	default:
		alive(t, n, "default", "bystander")
	}
	c := condition(t, n, memoryCondition)
	if c.Status != v1.ConditionTrue || !c.LastTransitionTime.Equal(&since) {
		t.Errorf("condition across the fault: %s since %s, want True since %s", c.Status, c.LastTransitionTime, since)
	}
	if !hasTaint(t, n, memoryTaint) {
		t.Errorf("the taint %s went away across the fault", memoryTaint)
	}
	noFlap(t, n, since)
	alive(t, n, "kube-system", "critical")

	// Once slow has gone the pressure is still there, and real: the
	// bystander is evicted.
	poll(t, "slow to go", sc.wait(90*time.Second), func() (bool, string) { return gone(t, n, "default", "slow") })
	if bystanderDeleted != nil {
		select {
		case <-bystanderDeleted:
		case <-time.After(30 * time.Second):
			t.Fatalf("bystander not evicted within 30 s of slow's end; last lines of evictd's log:\n%s", tail(n.LogPath("evictd"), 20))
		}
	}
	// Counted once the Evicter has seen it go: the bystander, and slow
	// too by an evictd that lived through the fault.
	want := 2.0
	if f.restartsEvictd {
		want = 1
	}
	const evicted = `evictd_evictions_total{eviction_signal="allocatableMemory.available",result="evicted",signal="allocatableMemory.available"}`
	poll(t, "the evictions counted", 30*time.Second, func() (bool, string) {
		v := metric(t, n, evicted)
		return v == want, fmt.Sprintf("%s = %v, want %v", evicted, v, want)
	})
	if k := evictions(t, n, "default", "bystander"); k != 1 {
		t.Errorf("bystander: %d Evicted events, want 1", k)
	}
	if !f.restartsEvictd {
		if got := n.EvictdPID(); got != pid {
			t.Errorf("evictd pid %d at the end, want %d: it restarted", got, pid)
		}
	}
}

// restartedMidEviction checks a restarted evictd while slow terminates:
// after two passes under pressure slow is still terminating, the new
// evictd has evicted nothing and says once that it waits for slow.
func restartedMidEviction(t *testing.T, n *testnode.Node) {
	t.Helper()
	offset := int64(0)
	if b, err := os.ReadFile(n.LogPath("evictd")); err == nil {
		offset = int64(strings.LastIndex(string(b), "==== evictd "))
	}
	poll(t, "two passes of the new evictd", 30*time.Second, func() (bool, string) {
		v := passes(t, n)
		return v >= 3, fmt.Sprintf("%v passes", v)
	})
	// Terminating: deleted, or Failed (evictd's terminal status) with its
	// container still running its preStop hook.
	p, err := n.Admin().CoreV1().Pods("default").Get(t.Context(), "slow", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil && !(p.Status.Phase == v1.PodFailed && kubeclient.ContainersRunning(p)) {
		t.Fatalf("slow should still be terminating: %v %s", err, podSummary(p))
	}
	// 0, or no series (-1): none issued.
	if v := metric(t, n, `evictd_evictions_total{eviction_signal="allocatableMemory.available",result="evicted",signal="allocatableMemory.available"}`); v > 0 {
		t.Errorf("the restarted evictd counts %v evictions, want 0: slow is already terminating", v)
	}
	const withheld = `evictd_evictions_withheld_total{reason="eviction-in-flight"}`
	if v := metric(t, n, withheld); v < 1 {
		t.Errorf("%s = %v, want at least 1", withheld, v)
	}
	waits := logLinesWith(t, n, offset, `msg="eviction withheld: a pod evictd evicted is still terminating; waiting until it has gone"`)
	if len(waits) != 1 || !strings.Contains(waits[0], "terminating=default/slow") || !strings.Contains(waits[0], "pod=default/bystander") {
		t.Errorf("log lines about the wait for slow: %q, want one naming slow and the bystander", waits)
	}
}

// noFlap fails t if a node event says the memory pressure began or ended
// after since, when it began: the condition flapped.
func noFlap(t *testing.T, n *testnode.Node, since metav1.Time) {
	t.Helper()
	for _, reason := range []string{nodestatus.EventReason(signals.MemoryPressure, true), nodestatus.EventReason(signals.MemoryPressure, false)} {
		for _, e := range events(t, n, "default", "Node", n.Name(), reason) {
			if e.LastTimestamp.After(since.Time.Add(time.Second)) {
				t.Errorf("node event %s at %s, after the pressure began at %s: the condition flapped", reason, e.LastTimestamp, since)
			}
		}
	}
}

// evictdMemoryCgroup is the v1 memory cgroup evictd runs in for
// evictdOOMKilled, as in its unit's slice.
func evictdMemoryCgroup() string {
	return filepath.Join(memoryV1, fmt.Sprintf("evictd-chaos-%d", os.Getpid()))
}

// evictdMemoryMax is the unit's MemoryMax.
const evictdMemoryMax = 256 << 20

// limitEvictdMemory has evictd started, from now until t ends, in a memory
// cgroup of its own limited to the unit's MemoryMax, so that all its
// memory is charged there: a wrapper moves itself there and executes
// evictd.
func limitEvictdMemory(t *testing.T, n *testnode.Node) {
	t.Helper()
	dir := evictdMemoryCgroup()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	writeFile := func(path, value string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			t.Fatalf("write %q to %s: %v", value, path, err)
		}
	}
	writeFile(filepath.Join(dir, "memory.limit_in_bytes"), strconv.Itoa(evictdMemoryMax))
	bin := n.EvictdBinary()
	wrapper := filepath.Join(t.TempDir(), "evictd-in-cgroup")
	writeFile(wrapper, fmt.Sprintf("#!/bin/sh\necho $$ > %s/cgroup.procs || exit 1\nexec %s \"$@\"\n", dir, bin))
	if err := os.Chmod(wrapper, 0o755); err != nil {
		t.Fatal(err)
	}
	n.SetEvictdBinary(wrapper)
	t.Cleanup(func() { n.SetEvictdBinary(bin) })
}

// oomKillEvictd has the kernel's OOM killer kill evictd in its memory
// cgroup (limitEvictdMemory), as its unit's MemoryMax would: evictd's
// oom_score_adj is raised to 1000 so that it is the first chosen, and
// children take the rest of the limit and 16 MiB more. What evictd's death
// gives back at once may not be enough for them, and the kernel may then
// kill one too: they are only the test's means. Evictd must be gone,
// killed by the kernel (SIGKILL, an OOM kill counted in its cgroup).
func oomKillEvictd(t *testing.T, n *testnode.Node) {
	t.Helper()
	pid := n.EvictdPID()
	dir := evictdMemoryCgroup()
	before := oomKillCount(t, dir)
	// Raised, not the child's lowered: that takes CAP_SYS_RESOURCE,
	// which the test may not have.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), []byte("1000"), 0o644); err != nil {
		t.Fatal(err)
	}
	held := testagent.ReadInt(t, filepath.Join(dir, "memory.usage_in_bytes"))
	// Four children, so that each counts for less than evictd with its
	// raised oom_score_adj (its resident memory and the whole limit):
	// one child holding the rest of the limit would count for as much.
	const children = 4
	mib := (evictdMemoryMax-held)>>20 + 16
	var err error
	for range children {
		child := testalloc.Start(t, t, allocEnv, int(mib/children+1))
		child.MoveTo(t, dir)
		err = child.TryAllocate()
		defer child.Kill()
		if n.EvictdPID() == 0 {
			break
		}
	}
	poll(t, "evictd to be OOM-killed", 10*time.Second, func() (bool, string) {
		return n.EvictdPID() == 0, fmt.Sprintf("evictd pid %d still running", pid)
	})
	if k := oomKillCount(t, dir) - before; k < 1 {
		t.Fatalf("evictd exited; %s counts no OOM kill", dir)
	}
	t.Logf("evictd (pid %d, %d MiB charged) OOM-killed at its limit of %d MiB beside children of %d MiB (the last: %v)",
		pid, held>>20, evictdMemoryMax>>20, mib/children+1, err)
}

// oomKillCount reads the oom_kill counter of a v1 memory cgroup.
func oomKillCount(t *testing.T, dir string) int64 {
	t.Helper()
	return oomKillLine(t, filepath.Join(dir, "memory.oom_control"))
}

// apiServerFlapping stops the API server for 10 s and starts it again,
// 10 s up and 10 s down, for 3 minutes, while hogs (one at a time, each
// created when the server answers) grow to a hard threshold; a Guaranteed
// and a Burstable pod idle beside them. Whether a hog crosses with the
// server up or down, it is stopped at the crossing and its eviction
// completed: at the end every hog has gone with exactly one Evicted event,
// nothing is owed, neither bystander was touched, the kernel killed
// nothing, the pressure condition and taint are gone, and evictd is the
// process it was.
func apiServerFlapping(t *testing.T, n *testnode.Node) {
	ctx := t.Context()
	startEvictd(t, n,
		"--eviction-hard=memory.available<500Mi",
		"--eviction-pressure-transition-period=5s",
		"--local-kill-after=2s")
	run(t, n, labelled(testnode.Resources(n.Pod("guaranteed", "alloc", "--mib", "50"), "100Mi", "100Mi", "100m")))
	run(t, n, labelled(testnode.Resources(n.Pod("burstable", "alloc", "--mib", "50"), "100Mi", "", "")))
	pid := n.EvictdPID()
	kernelKills := watchOOMKills(t, n)

	var (
		mu        sync.Mutex
		flapErrs  []error
		down      bool
		downTimes int
	)
	stop := make(chan struct{})
	var stopOnce sync.Once
	stopFlapping := func() { stopOnce.Do(func() { close(stop) }) }
	flapped := make(chan struct{})
	end := time.Now().Add(3 * time.Minute)
	go func() {
		defer close(flapped)
		for time.Now().Before(end) {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Second):
			}
			if err := n.Cluster().StopAPIServer(); err != nil {
				mu.Lock()
				flapErrs = append(flapErrs, fmt.Errorf("stop: %w", err))
				mu.Unlock()
			}
			mu.Lock()
			down, downTimes = true, downTimes+1
			mu.Unlock()
			select {
			case <-stop:
			case <-time.After(10 * time.Second):
			}
			err := n.Cluster().StartAPIServer()
			mu.Lock()
			if err != nil {
				flapErrs = append(flapErrs, fmt.Errorf("start: %w", err))
			} else {
				down = false
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		stopFlapping()
		<-flapped
		mu.Lock()
		defer mu.Unlock()
		if down { // the node's cleanup needs it
			if err := n.Cluster().StartAPIServer(); err != nil {
				t.Errorf("start the API server: %v", err)
			}
		}
	})

	rs := n.Runtime().RuntimeService()
	var hogs []string // the hogs the kubelet started
	unstarted := 0
	for i := 1; time.Now().Add(20 * time.Second).Before(end); i++ {
		name := fmt.Sprintf("hog-%d", i)
		hog := labelled(n.Pod(name, "alloc", "--mib", "2300", "--rate", "100"))
		// Not restarted by the kubelet once stopped (apiServerDown).
		hog.Spec.RestartPolicy = v1.RestartPolicyNever
		poll(t, "the API server to take "+name, 60*time.Second, func() (bool, string) {
			_, err := n.Admin().CoreV1().Pods("default").Create(ctx, hog, metav1.CreateOptions{})
			return err == nil || apierrors.IsAlreadyExists(err), fmt.Sprint(err)
		})
		mu.Lock()
		t.Logf("%s created (API server down %v)", name, down)
		mu.Unlock()
		// Stopped: its container has run and exited, whether evictd or
		// the kubelet stopped it. A hog the kubelet has not started
		// within a minute (its own watch of the API server backing off)
		// is deleted once the API server answers, and left out: what
		// is asserted is evictd's part.
		started := false
		deadline := time.Now().Add(time.Minute)
		poll(t, name+" to be stopped", 150*time.Second, func() (bool, string) {
			cs, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.name": name}})
			if err != nil {
				return false, err.Error()
			}
			var states []string
			for _, c := range cs {
				started = true
				if c.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
					return true, ""
				}
				states = append(states, c.GetState().String())
			}
			if !started && time.Now().After(deadline) {
				return true, ""
			}
			ws, err := workingSet(n)
			return false, fmt.Sprintf("containers %v, none exited; kubepods working set %d MiB (%v)", states, ws>>20, err)
		})
		if !started {
			t.Logf("%s: the kubelet started no container of it within a minute; deleted, left out", name)
			zero := int64(0)
			poll(t, "the API server to delete "+name, 60*time.Second, func() (bool, string) {
				err := n.Admin().CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				return err == nil || apierrors.IsNotFound(err), fmt.Sprint(err)
			})
			unstarted++
			continue
		}
		hogs = append(hogs, name)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of the kubelet's log:\n%s", tail(n.LogPath("kubelet"), 60))
			// What evictd decided and did about each pod of the
			// scenario: the first thing to read when a bystander went.
			var lines []string
			for _, l := range strings.Split(tail(n.LogPath("evictd"), 5000), "\n") {
				if !strings.Contains(l, "level=DEBUG") && (strings.Contains(l, "default/") || strings.Contains(l, "pod cache") || strings.Contains(l, "relist")) {
					lines = append(lines, l)
				}
			}
			t.Logf("evictd's lines about the pods (%d):\n%s", len(lines), strings.Join(lines[max(0, len(lines)-150):], "\n"))
		}
	})
	stopFlapping()
	<-flapped
	mu.Lock()
	errs, times, isDown := flapErrs, downTimes, down
	mu.Unlock()
	if isDown {
		if err := n.Cluster().StartAPIServer(); err != nil {
			t.Fatalf("start the API server: %v", err)
		}
		mu.Lock()
		down = false
		mu.Unlock()
	}
	if len(errs) > 0 {
		t.Fatalf("the API server's stops and starts: %v", errors.Join(errs...))
	}
	t.Logf("the API server went down %d times; %d hogs ran, %d more the kubelet did not start", times, len(hogs), unstarted)
	if times < 6 || len(hogs) < 2 {
		t.Fatalf("%d stops of the API server and %d hogs that ran: too few for the scenario", times, len(hogs))
	}

	for _, name := range hogs {
		poll(t, name+" to go", 120*time.Second, func() (bool, string) { return gone(t, n, "default", name) })
	}
	poll(t, "nothing owed", 60*time.Second, func() (bool, string) {
		v := metric(t, n, "evictd_evictions_owed")
		return v == 0, fmt.Sprint("evictd_evictions_owed ", v)
	})
	for _, name := range hogs {
		evs := evictedEvents(t, n, "default", name)
		k := 0
		for _, e := range evs {
			k += max(int(e.Count), 1)
			if !strings.HasPrefix(e.Message, "The node was low on resource: memory.") {
				t.Errorf("%s's Evicted event: %q", name, e.Message)
			}
		}
		if k != 1 {
			t.Errorf("%s: %d Evicted events, want 1", name, k)
		}
	}
	for _, name := range []string{"guaranteed", "burstable"} {
		alive(t, n, "default", name)
		if k := evictions(t, n, "default", name); k != 0 {
			t.Errorf("%s: %d Evicted events, want none", name, k)
		}
	}
	if k := kernelKills(); k != 0 {
		t.Errorf("the kernel OOM-killed %d processes in kubepods", k)
	}
	poll(t, "EvictdMemoryPressure=False", 30*time.Second, func() (bool, string) {
		return conditionIs(t, n, memoryCondition, v1.ConditionFalse)
	})
	poll(t, "the memory taint to go", 30*time.Second, func() (bool, string) {
		return !hasTaint(t, n, memoryTaint), "still tainted"
	})
	if got := n.EvictdPID(); got != pid {
		t.Errorf("evictd pid %d, want %d: it restarted", got, pid)
	}
	t.Logf("stopped locally: %v; evicted: %v",
		metric(t, n, `evictd_evictions_total{eviction_signal="allocatableMemory.available",result="stopped-locally",signal="allocatableMemory.available"}`),
		metric(t, n, `evictd_evictions_total{eviction_signal="allocatableMemory.available",result="evicted",signal="allocatableMemory.available"}`))
}

// clockStepped steps the system clock an hour forward and back again, then
// an hour back and forward again, inside a soft threshold's 30 s grace
// period: the grace period is measured on evictd's own clock, so the
// victim is evicted 30 s after the pressure began, neither at the first
// step nor an hour late, once, and the condition does not flap. Every
// process on the machine sees the steps: make test runs this alone, after
// the tests it runs beside the others (make e2e-clock).
func clockStepped(t *testing.T, n *testnode.Node) {
	const gracePeriod = 30 * time.Second
	startEvictd(t, n,
		"--eviction-soft=allocatableMemory.available<1200Mi",
		"--eviction-soft-grace-period=allocatableMemory.available=30s",
		"--eviction-max-pod-grace-period=-1",
		"--eviction-pressure-transition-period=5s",
		"--housekeeping-interval=2s")
	pid := n.EvictdPID()
	victim := labelled(n.Pod("victim", "sleep"))
	short := int64(2)
	victim.Spec.TerminationGracePeriodSeconds = &short
	run(t, n, victim)
	deleted := watchDeletion(t, n, "default", "victim")
	// The pressure cannot begin before the critical pod is created.
	created := time.Now()
	since := holdPressure(t, n, nativeScale)
	seen := time.Now()
	// evictd posts the transition's event after its condition and taint
	// patches, stamped with the wall clock when it is emitted: the clock
	// is stepped only once it is there, else a step an hour forward lands
	// between the patch and the event (seen in CI), and the event reads
	// as an hour after the pressure began.
	poll(t, "the pressure's node event", 30*time.Second, func() (bool, string) {
		for _, e := range events(t, n, "default", "Node", n.Name(), nodestatus.EventReason(signals.MemoryPressure, true)) {
			if !e.LastTimestamp.Before(&since) {
				return true, ""
			}
		}
		return false, "no event since " + since.String()
	})

	clk := newClock(t)
	for _, offset := range []time.Duration{time.Hour, 0, -time.Hour, 0} {
		clk.step(t, offset)
		time.Sleep(4 * time.Second) // two passes
		select {
		case d := <-deleted:
			t.Fatalf("victim evicted %s after the pressure was seen, with the clock %s off: before its grace period of %s",
				d.at.Sub(seen).Round(time.Millisecond), offset, gracePeriod)
		default:
		}
	}
	select {
	case d := <-deleted:
		if early := created.Add(gracePeriod); d.at.Before(early) {
			t.Errorf("victim evicted %s after the critical pod's creation, before the grace period of %s", d.at.Sub(created), gracePeriod)
		}
		if late := seen.Add(gracePeriod + 10*time.Second); d.at.After(late) {
			t.Errorf("victim evicted %s after the pressure was seen, later than its grace period of %s and a few passes", d.at.Sub(seen), gracePeriod)
		}
		t.Logf("victim evicted %s after the pressure was seen (grace period %s)", d.at.Sub(seen).Round(time.Millisecond), gracePeriod)
	case <-time.After(gracePeriod + 30*time.Second):
		t.Fatalf("victim not evicted; last lines of evictd's log:\n%s", tail(n.LogPath("evictd"), 30))
	}
	poll(t, "victim to go", 60*time.Second, func() (bool, string) { return gone(t, n, "default", "victim") })
	if k := evictionsOf(t, n, "default", "victim"); k != 1 {
		t.Errorf("victim: %d Evicted events, want 1", k)
	}
	c := condition(t, n, memoryCondition)
	if c.Status != v1.ConditionTrue || !c.LastTransitionTime.Equal(&since) {
		t.Errorf("condition across the steps: %s since %s, want True since %s", c.Status, c.LastTransitionTime, since)
	}
	noFlap(t, n, since)
	alive(t, n, "kube-system", "critical")
	if got := n.EvictdPID(); got != pid {
		t.Errorf("evictd pid %d, want %d: it restarted", got, pid)
	}
}

// clock steps the system's real-time clock by an offset from the true
// time, which it keeps from the monotonic clock, and puts it back when the
// test ends, whatever else set it meanwhile.
type clock struct {
	wall0 time.Time // the real time at newClock, with its monotonic reading
}

func newClock(t *testing.T) *clock {
	c := &clock{wall0: time.Now()}
	t.Cleanup(func() { c.step(t, 0) })
	return c
}

// step sets the real-time clock to the true time plus offset.
func (c *clock) step(t *testing.T, offset time.Duration) {
	t.Helper()
	now := c.wall0.Round(0).Add(time.Since(c.wall0)).Add(offset)
	ts := unix.NsecToTimespec(now.UnixNano())
	if err := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); err != nil {
		t.Fatalf("set the clock to %s: %v", now, err)
	}
	t.Logf("clock set %s off", offset)
}

// fullFilesystem runs evictd with its log and its state directory (the
// kubeconfig's token file, renewed every 10 s) on a tmpfs that is full
// from before it starts: it starts, evicts a hog past a hard threshold,
// publishes the pressure and its end; each renewal that cannot be written
// is counted and the old token kept whole, and once there is room again
// the token is renewed and the log written.
func fullFilesystem(t *testing.T, n *testnode.Node) {
	ctx := t.Context()
	fs := testruntime.MountTmpfs(t, "4m", 0)
	state := filepath.Join(fs, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	node, err := n.Admin().CoreV1().Nodes().Get(ctx, n.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ttl := int64(600)
	tr, err := n.Admin().CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "evictd", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &ttl,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(state, "token")
	if err := os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	writeTokenFileKubeconfig(t, n, kubeconfig, tokenFile)
	n.SetEvictdLog(filepath.Join(fs, "evictd.log"))
	t.Cleanup(func() { n.SetEvictdLog("") })
	filler := filepath.Join(fs, "filler")
	fill(t, filler)

	startEvictd(t, n,
		"--kubeconfig="+kubeconfig,
		"--token-lifetime=10m",
		"--token-renew-before=9m50s",
		"--eviction-hard=memory.available<500Mi",
		"--eviction-pressure-transition-period=5s")
	pid := n.EvictdPID()
	const failed = `evictd_token_renewals_total{result="failed"}`
	poll(t, "a renewal that cannot be written", 60*time.Second, func() (bool, string) {
		v := metric(t, n, failed)
		return v >= 1, fmt.Sprintf("%s = %v", failed, v)
	})
	if b, err := os.ReadFile(tokenFile); err != nil || string(b) != tr.Status.Token {
		t.Errorf("the token file after a renewal that could not be written: %d bytes, %v; want the first token whole", len(b), err)
	}

	deleted := watchDeletion(t, n, "default", "hog")
	hog := labelled(n.Pod("hog", "alloc", "--mib", "2300", "--rate", "100"))
	hog.Spec.RestartPolicy = v1.RestartPolicyNever
	run(t, n, hog)
	select {
	case <-deleted:
	case <-time.After(90 * time.Second):
		t.Fatalf("hog not evicted within 90 s with evictd's filesystem full")
	}
	poll(t, "hog to go", 60*time.Second, func() (bool, string) { return gone(t, n, "default", "hog") })
	if k := evictionsOf(t, n, "default", "hog"); k != 1 {
		t.Errorf("hog: %d Evicted events, want 1", k)
	}
	poll(t, "EvictdMemoryPressure=False", 30*time.Second, func() (bool, string) {
		return conditionIs(t, n, memoryCondition, v1.ConditionFalse)
	})
	if _, err := n.EvictdGet(ctx, "/healthz"); err != nil {
		t.Errorf("/healthz with the filesystem full: %v", err)
	}
	entries, err := os.ReadDir(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the state directory holds %q, want the token alone: a renewal left a partial file", names)
	}

	logged := logSize(t, n)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	const renewed = `evictd_token_renewals_total{result="renewed"}`
	poll(t, "a renewal once there is room", 90*time.Second, func() (bool, string) {
		v := metric(t, n, renewed)
		return v >= 1, fmt.Sprintf("%s = %v", renewed, v)
	})
	if b, err := os.ReadFile(tokenFile); err != nil || string(b) == tr.Status.Token || len(b) == 0 {
		t.Errorf("the token file once there is room: %d bytes, %v; want a new token", len(b), err)
	}
	poll(t, "evictd to write its log again", 30*time.Second, func() (bool, string) {
		return logSize(t, n) > logged, "nothing written"
	})
	if got := n.EvictdPID(); got != pid {
		t.Errorf("evictd pid %d, want %d: it restarted", got, pid)
	}
}

// writeTokenFileKubeconfig writes a kubeconfig for the node's API server
// whose user reads its token from tokenFile, as the package's does.
func writeTokenFileKubeconfig(t *testing.T, n *testnode.Node, path, tokenFile string) {
	t.Helper()
	ref, err := clientcmd.LoadFromFile(evictdKubeconfig(t, n))
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	for name, c := range ref.Clusters {
		cfg.Clusters[name] = c
	}
	cfg.AuthInfos["evictd"] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	for name, c := range ref.Contexts {
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: c.Cluster, AuthInfo: "evictd"}
	}
	cfg.CurrentContext = ref.CurrentContext
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

// evictdKubeconfig returns the path of the kubeconfig the node gives
// evictd.
func evictdKubeconfig(t *testing.T, n *testnode.Node) string {
	t.Helper()
	for _, f := range n.EvictdFlags() {
		if p, ok := strings.CutPrefix(f, "--kubeconfig="); ok {
			return p
		}
	}
	t.Fatal("the node gives evictd no --kubeconfig")
	return ""
}

// fill writes zeros to path until its filesystem is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	// The last partial block too.
	for _, size := range []int{4096, 512, 1} {
		for {
			if _, err := f.Write(buf[:size]); err != nil {
				break
			}
		}
	}
}

// hardLinkAttack: two tenant pods hold 1,100,000 hard links each in an
// emptyDir, more than a pod's walk may take (its time budget, 2 s, or its
// entries, 1,000,000). Beside them a pod writes 60 MiB into an emptyDir
// of 20 MiB: evictd evicts it for its limit within a refresh or two of its
// disk stats, as without the attack; a steady pod's stats stay fresh and
// only the tenants' pods are reported stale.
func hardLinkAttack(t *testing.T, n *testnode.Node) {
	startEvictd(t, n, "--eviction-pressure-transition-period=5s")
	offset := logSize(t, n)
	steady := emptyDirPod(n, "steady", "write", "--dir", "/data", "--mib", "5")
	run(t, n, steady)
	const links = 1_100_000
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		p := run(t, n, emptyDirPod(n, fmt.Sprintf("links-%d", i+1), "sleep"))
		dir := filepath.Join(n.RootDir(), "pods", string(p.UID), "volumes", "kubernetes.io~empty-dir", "data")
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = hardLinks(dir, links)
		}()
	}
	begin := time.Now()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("2 × %d hard links in %s", links, time.Since(begin).Round(time.Millisecond))
	// Two refreshes with the links in place before the writer starts.
	const cuts = `evictd_pod_disk_walks_cut_total{reason="time"}`
	const entryCuts = `evictd_pod_disk_walks_cut_total{reason="entries"}`
	poll(t, "the tenants' walks to be cut", 60*time.Second, func() (bool, string) {
		v, e := max(metric(t, n, cuts), 0), max(metric(t, n, entryCuts), 0)
		return v+e >= 4, fmt.Sprintf("cut for time %v, for entries %v", v, e)
	})

	took := overEvicted(t, n, 90*time.Second)
	t.Logf("over evicted %s after it ran, with the walks of 2 tenants' pods cut", took.Round(time.Millisecond))
	// A refresh every 10 s (--volume-stats-agg-period), each within its
	// 9 s deadline whatever the tenants hold, and a pass every 10 s: the
	// write can miss one refresh and land in the next, read by the pass
	// after it. Frozen stats (the attack before the walk budgets) never
	// evict it.
	if took > 35*time.Second {
		t.Errorf("over evicted %s after it ran: later than two refreshes of the disk stats and a pass", took)
	}
	evs := evictedEvents(t, n, "default", "over")
	if len(evs) != 1 || evs[0].Source.Component != "evictd" || !strings.Contains(evs[0].Message, `Usage of EmptyDir volume "data" exceeds the limit "20Mi".`) {
		t.Errorf("over's Evicted events: %+v", evs)
	}
	alive(t, n, "default", "steady")
	// Stale: the tenants' pods at most, never the steady pod nor over.
	poll(t, "the tenants' pods reported stale", 60*time.Second, func() (bool, string) {
		v := metric(t, n, "evictd_pod_disk_stats_stale_pods")
		return v >= 1 && v <= 2, fmt.Sprintf("evictd_pod_disk_stats_stale_pods = %v", v)
	})
	for _, pod := range []string{"default/steady", "default/over"} {
		for _, line := range logLinesWith(t, n, offset, "pod="+pod) {
			if strings.Contains(line, "stale") || strings.Contains(line, "without disk stats") {
				t.Errorf("%s reported without fresh stats: %s", pod, line)
			}
		}
	}
	for _, pod := range []string{"links-1", "links-2"} {
		alive(t, n, "default", pod)
	}
}

// hardLinks makes count hard links in dir, as a tenant can in its own
// emptyDir: to one file per 60,000 (ext4 allows 65,000 links to a file).
func hardLinks(dir string, count int) error {
	const perFile = 60_000
	var target string
	for i := range count {
		if i%perFile == 0 {
			target = filepath.Join(dir, fmt.Sprintf("f%02d", i/perFile))
			if err := os.WriteFile(target, []byte("x"), 0o644); err != nil {
				return err
			}
		}
		if err := os.Link(target, filepath.Join(dir, fmt.Sprintf("l%07d", i))); err != nil {
			return err
		}
	}
	return nil
}
