package node

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/evictd/evictd/internal/testing/testcluster"
	"github.com/evictd/evictd/internal/testing/testnode"
	"github.com/evictd/evictd/internal/testing/testruntime"
	"github.com/evictd/evictd/internal/testing/testvm"
)

// v2GuestEnv is set only in TestKubeletV2Node's guest: the directory the
// guest shares with the host, where the host leaves the kubeconfigs.
const v2GuestEnv = "EVICTD_V2_GUEST"

// v2NodeEnv names the guest's node; v2SystemdEnv=1 runs it with the
// systemd cgroup driver.
const (
	v2NodeEnv    = "EVICTD_V2_NODE"
	v2SystemdEnv = "EVICTD_V2_SYSTEMD"
)

// v2APIPort is the port the guest reaches the host's API server on, at
// testvm.ForwardAddr.
const v2APIPort = 6443

// TestKubeletV2Node runs a whole node on cgroup v2: the control plane on
// this machine, and containerd, runc, the kubelet and evictd in a cgroup v2
// guest (internal/testing/testvm) that reaches the API server through
// qemu's forwarding of one port to this machine's loopback, and nowhere
// else. TestKubeletV2Guest, in the guest, runs the memory scenario end to
// end: once with the cgroupfs driver in a guest without systemd, once with
// the systemd driver (kubepods.slice, containers' scopes made by runc
// through systemd) in a guest whose PID 1 is systemd, as production nodes
// run.
func TestKubeletV2Node(t *testing.T) {
	testvm.Need(t)
	t.Run("cgroupfs driver", func(t *testing.T) { runV2Node(t, "evictd-v2", false) })
	t.Run("systemd driver under systemd", func(t *testing.T) { runV2Node(t, "evictd-v2-systemd", true) })
}

// runV2Node runs TestKubeletV2Guest in a guest as node, with the systemd
// driver and systemd as PID 1 or not, against a control plane of its own.
func runV2Node(t *testing.T, node string, systemd bool) {
	c, err := testcluster.Start(t.Context(), testcluster.Options{
		Tokens:            map[string][]string{testnode.NodeUser(node): {"system:nodes"}},
		ControllerManager: true,
		Scheduler:         true,
	})
	if errors.Is(err, testcluster.ErrNoBinaries) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	u, err := url.Parse(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, user := range map[string]string{"admin.kubeconfig": testcluster.AdminUser, "kubelet.kubeconfig": testnode.NodeUser(node)} {
		if err := writeGuestKubeconfig(filepath.Join(shared, file), c, c.Token(user)); err != nil {
			t.Fatal(err)
		}
	}
	// The guest runs this machine's binaries, built here: building them
	// under the guest's emulated CPUs would take minutes.
	env := []string{v2GuestEnv + "=/run/vm", v2NodeEnv + "=" + node}
	if systemd {
		env = append(env, v2SystemdEnv+"=1")
	}
	bins := t.TempDir()
	workload, err := testruntime.WorkloadBinary(bins)
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, testruntime.EnvWorkloadBin+"="+workload)
	evictd := os.Getenv(testnode.EnvEvictdBin)
	if evictd == "" {
		evictd = filepath.Join(bins, "evictd")
		if err := testruntime.GoBuild("github.com/evictd/evictd/cmd/evictd", evictd); err != nil {
			t.Fatal(err)
		}
	}
	env = append(env, testnode.EnvEvictdBin+"="+evictd)

	// evictd's token is bound to the Node object: it is made once the
	// guest's kubelet has registered it.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tokenDone := make(chan error, 1)
	go func() { tokenDone <- writeEvictdKubeconfig(ctx, c, node, filepath.Join(shared, "evictd.kubeconfig")) }()

	// The guest's test runs in this package's directory, as this one
	// does: the repository's binaries and files are found from there.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	res, err := testvm.Run(t.Context(), dir, testvm.Options{
		Script:    "cd '" + wd + "' && exec '" + os.Args[0] + "' -test.run '^TestKubeletV2Guest$' -test.v -test.count=1 -test.timeout 14m",
		Env:       env,
		MemoryMiB: 3072,
		Timeout:   16 * time.Minute,
		Forward:   map[int]string{v2APIPort: u.Host},
		Systemd:   systemd,
	})
	cancel()
	if res != nil {
		t.Logf("guest booted in %s, powered off after %s; its test said:\n%s", res.Booted.Round(100*time.Millisecond), res.Took.Round(100*time.Millisecond), res.Output)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := <-tokenDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("evictd's kubeconfig for the guest: %v", err)
	}
	if res.ExitCode != 0 || !strings.Contains(res.Output, "--- PASS: TestKubeletV2Guest") {
		t.Errorf("the guest's test failed (exit %d)", res.ExitCode)
	}
}

// writeGuestKubeconfig writes a kubeconfig with token that reaches c from
// the guest: the forwarded port, with the serving certificate checked for
// the name it has on this machine.
func writeGuestKubeconfig(path string, c *testcluster.Cluster, token string) error {
	return c.WriteKubeconfigVia(path, token, "https://"+testvm.ForwardAddr+":"+strconv.Itoa(v2APIPort), "localhost")
}

// writeEvictdKubeconfig waits for the guest's Node object and writes
// evictd's kubeconfig for the guest, with a token bound to it (renamed
// into place, so the guest never reads half a file).
func writeEvictdKubeconfig(ctx context.Context, c *testcluster.Cluster, node, path string) error {
	admin, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		return err
	}
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil, notFoundIsNil(err)
	})
	if err != nil {
		return err
	}
	token, err := c.EvictdNodeToken(ctx, node)
	if err != nil {
		return err
	}
	if err := writeGuestKubeconfig(path+".new", c, token); err != nil {
		return err
	}
	return os.Rename(path+".new", path)
}

// notFoundIsNil returns err unless it is NotFound.
func notFoundIsNil(err error) error {
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// TestKubeletV2Guest runs in TestKubeletV2Node's guest: the node joins the
// host's control plane, and evictd, beside its kubelet, evicts a
// BestEffort hog before the kubepods cgroup reaches its limit.
func TestKubeletV2Guest(t *testing.T) {
	shared := os.Getenv(v2GuestEnv)
	if shared == "" {
		t.Skip("runs in TestKubeletV2Node's cgroup v2 guest")
	}
	// The pod network's bridge and veth pairs.
	for _, m := range []string{"bridge", "veth"} {
		if out, err := exec.Command("modprobe", m).CombinedOutput(); err != nil {
			t.Fatalf("modprobe %s: %v: %s", m, err, out)
		}
	}
	// The kubelet's root, the pods' logs and containerd's root: a tmpfs,
	// where containerd's overlay snapshotter works (the guest's root is an
	// overlay, which cannot be an overlay's upper layer).
	fs := testruntime.MountTmpfs(t, "512m", 0)
	n := testnode.StartForTest(t, testnode.Options{
		Name:          os.Getenv(v2NodeEnv),
		SystemdDriver: os.Getenv(v2SystemdEnv) == "1",
		NodeFs:        fs,
		ImageFs:       fs,
		PodsMemory:    1 << 30,
		ReadyTimeout:  6 * time.Minute,
		ControlPlane: &testnode.Remote{
			Admin:   filepath.Join(shared, "admin.kubeconfig"),
			Kubelet: filepath.Join(shared, "kubelet.kubeconfig"),
			Evictd: func(ctx context.Context) (string, error) {
				path := filepath.Join(shared, "evictd.kubeconfig")
				err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
					_, err := os.Stat(path)
					return err == nil, nil
				})
				return path, err
			},
		},
	})
	t.Run("allocatable: evicted before the kubepods cgroup OOMs", func(t *testing.T) { v2Allocatable(t, n) })
}

// v2Allocatable: a steady Burstable pod and a BestEffort hog that grows
// toward the kubepods cgroup's limit (1 GiB) at a rate the emulated guest
// can keep. evictd, woken on v2 files, evicts the hog with grace 1 s and
// stops its containers itself, and the kernel kills nothing; the node's
// memory condition and taint come with the pressure and go after it.
func v2Allocatable(t *testing.T, n *testnode.Node) {
	pressure := filepath.Join(n.PodsMemoryCgroup(), "memory.pressure")
	startEvictd(t, n,
		"--eviction-hard=memory.available<300Mi",
		"--eviction-pressure-transition-period=5s")
	log := tail(n.LogPath("evictd"), 200)
	if !strings.Contains(log, "PSI trigger") || !strings.Contains(log, pressure) {
		t.Errorf("evictd armed no PSI trigger on %s:\n%s", pressure, log)
	}
	oomKilled := watchOOMKills(t, n)
	steady := run(t, n, labelled(testnode.Resources(n.Pod("steady", "alloc", "--mib", "100"), "128Mi", "", "")))
	// The pod's cgroup where evictd's layout for the driver puts it.
	dir := filepath.Join(n.PodsMemoryCgroup(), "burstable", "pod"+string(steady.UID))
	if os.Getenv(v2SystemdEnv) == "1" {
		dir = filepath.Join(n.PodsMemoryCgroup(), "kubepods-burstable.slice",
			"kubepods-burstable-pod"+strings.ReplaceAll(string(steady.UID), "-", "_")+".slice")
	}
	if _, err := os.Stat(filepath.Join(dir, "memory.current")); err != nil {
		t.Errorf("steady (%s): no pod cgroup where evictd looks: %v", steady.Status.QOSClass, err)
	}
	// Its containers' cgroups, made by runc: scopes through systemd with
	// the systemd driver, plain directories with cgroupfs.
	var ctrs []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			ctrs = append(ctrs, e.Name())
		}
	}
	t.Logf("steady's pod cgroup %s holds %q", dir, ctrs)
	scopes := slices.ContainsFunc(ctrs, func(name string) bool {
		return strings.HasPrefix(name, "cri-containerd-") && strings.HasSuffix(name, ".scope")
	})
	if systemd := os.Getenv(v2SystemdEnv) == "1"; len(ctrs) == 0 || scopes != systemd {
		t.Errorf("steady's container cgroups %q: want systemd scopes %t", ctrs, systemd)
	}
	if ok, desc := conditionIs(t, n, memoryCondition, v1.ConditionFalse); !ok {
		t.Fatalf("before the hog: %s", desc)
	}
	deleted := watchDeletion(t, n, "default", "hog")
	history := watchHistory(t, n, "default", "hog")
	hog := labelled(n.Pod("hog", "alloc", "--base", "450", "--mib", "1100", "--rate", "20"))
	created := time.Now()
	if _, err := n.Admin().CoreV1().Pods("default").Create(t.Context(), hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var d deletion
	select {
	case d = <-deleted:
	case <-time.After(4 * time.Minute):
		t.Fatalf("hog not evicted within 4 minutes; %d OOM kills in kubepods", oomKilled())
	}
	t.Logf("hog created → deletion seen %s; deletion grace %d s", d.at.Sub(created).Round(time.Millisecond), d.grace)
	if g := evictedGrace(t, d, "default", "hog", evictdLog(n)); g != 1 {
		t.Errorf("hard threshold: deletion grace %d s, want 1", g)
	}
	// The node says so while the pressure lasts (the transition period
	// is 5 s), and the taint keeps new pods off it.
	poll(t, "EvictdMemoryPressure=True", 10*time.Second, func() (bool, string) {
		return conditionIs(t, n, memoryCondition, v1.ConditionTrue)
	})
	poll(t, "the taint", 10*time.Second, func() (bool, string) { return hasTaint(t, n, memoryTaint), "no taint" })
	poll(t, "the hog to go", 2*time.Minute, func() (bool, string) { return gone(t, n, "default", "hog") })
	select {
	case h := <-history:
		checkEvictedByEvictd(t, h)
	case <-time.After(30 * time.Second):
		t.Error("the watch never saw the hog deleted")
	}
	if line := localStop("default/hog", evictdLog(n)); line == "" {
		t.Errorf("evictd did not stop the hog's containers itself")
	} else {
		t.Logf("evictd's local stop: %s", line)
	}
	log = tail(n.LogPath("evictd"), 400)
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "default/hog") && strings.Contains(line, "observedAt=") {
			t.Logf("evictd's decision: %s", line)
		}
	}
	var wakes []string
	for _, src := range []string{"psi", "memory-events", "fast-poll"} {
		wakes = append(wakes, fmt.Sprintf("%s %v", src, metric(t, n, `evictd_wakeups_total{source="`+src+`"}`)))
	}
	t.Logf("evictd's wake-ups: %s; kubepods memory.peak %d MiB of memory.max %d MiB", strings.Join(wakes, ", "),
		readCgroupInt(t, n, "memory.peak")>>20, readCgroupInt(t, n, "memory.max")>>20)
	if k := oomKilled(); k != 0 {
		t.Errorf("the kernel OOM-killed %d processes in kubepods before evictd's eviction took effect", k)
	}
	alive(t, n, "default", "steady")
	poll(t, "EvictdMemoryPressure=False after the transition period", time.Minute, func() (bool, string) {
		return conditionIs(t, n, memoryCondition, v1.ConditionFalse)
	})
	poll(t, "the taint gone", 30*time.Second, func() (bool, string) { return !hasTaint(t, n, memoryTaint), "tainted" })
	if v := metric(t, n, `evictd_evictions_total{eviction_signal="allocatableMemory.available",result="evicted",signal="allocatableMemory.available"}`); v != 1 {
		t.Errorf("evictd_evictions_total for allocatableMemory.available = %v, want 1", v)
	}
}
