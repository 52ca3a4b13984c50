package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/evictd/evictd/internal/testing/guestnode"
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

// v2RunEnv, on this machine, selects the guest's scenarios: a pattern of
// go test's -run for TestKubeletV2Guest's subtests (its part after the
// first slash), to run one again without the others. Default: all.
const v2RunEnv = "EVICTD_V2_GUEST_RUN"

// TestKubeletV2Node runs a whole node on cgroup v2: the control plane on
// this machine, and containerd, runc, the kubelet and evictd in a cgroup v2
// guest (internal/testing/testvm) that reaches the API server through
// qemu's forwarding of one port to this machine's loopback, and nowhere
// else. TestKubeletV2Guest, in the guest, runs the memory scenario end to
// end: once with the cgroupfs driver in a guest without systemd, once with
// the systemd driver (kubepods.slice, containers' scopes made by runc
// through systemd) in a guest whose PID 1 is systemd, as production nodes
// run; in that one also the v1 twins of the other families: a soft
// threshold, PIDs, evictd killed -9 mid-eviction and restarted by systemd,
// disk, and a real static pod spared. The guest runs the node lane this
// machine runs (EVICTD_NODE_LANE and the binaries' directories).
func TestKubeletV2Node(t *testing.T) {
	testvm.Need(t)
	t.Run("cgroupfs driver", func(t *testing.T) { runV2Node(t, "evictd-v2", false) })
	t.Run("systemd driver under systemd", func(t *testing.T) { runV2Node(t, "evictd-v2-systemd", true) })
}

// runV2Node runs TestKubeletV2Guest in a guest as node, with the systemd
// driver and systemd as PID 1 or not, against a control plane of its own.
func runV2Node(t *testing.T, node string, systemd bool) {
	dir := t.TempDir()
	h, err := guestnode.Start(t.Context(), dir, node)
	if errors.Is(err, testcluster.ErrNoBinaries) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Stop(); err != nil {
			t.Error(err)
		}
	})
	c, shared := h.Cluster, h.Shared
	env := []string{v2GuestEnv + "=" + testvm.GuestDir, v2NodeEnv + "=" + node}
	if systemd {
		env = append(env, v2SystemdEnv+"=1")
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The guest's scenarios stop and start the API server through the
	// shared directory.
	served := make(chan struct{})
	go func() { defer close(served); serveGuest(ctx, t, c, shared) }()

	// The guest's test runs in this package's directory, as this one
	// does: the repository's binaries and files are found from there.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	run := "^TestKubeletV2Guest$"
	if sub := os.Getenv(v2RunEnv); sub != "" {
		run += "/" + sub
	}
	if ds, err := guestSelects(os.Getenv(v2RunEnv), v2DaemonSetRun); err != nil {
		t.Fatal(err)
	} else if ds && systemd {
		env = append(env, v2ImageEnv+"="+buildEvictdImage(t, t.TempDir()))
	}
	res, err := h.Run(t.Context(), testvm.Options{
		Script:    guestnode.Script(wd, os.Args[0], "-test.run", run, "-test.v", "-test.count=1", "-test.timeout", guestTimeout.String()),
		Env:       env,
		MemoryMiB: 3072,
		Timeout:   guestTimeout + 2*time.Minute,
		Systemd:   systemd,
	})
	cancel()
	<-served
	if res != nil {
		t.Logf("guest booted in %s, powered off after %s; its test said:\n%s", res.Booted.Round(100*time.Millisecond), res.Took.Round(100*time.Millisecond), res.Output)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Which lane the guest ran, as its kubelet registered it.
	if admin, err := kubernetes.NewForConfig(c.AdminConfig()); err == nil {
		if no, err := admin.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{}); err == nil {
			t.Logf("the guest's node ran kubelet %s on %s", no.Status.NodeInfo.KubeletVersion, no.Status.NodeInfo.ContainerRuntimeVersion)
		}
	}
	if res.ExitCode != 0 || !strings.Contains(res.Output, "--- PASS: TestKubeletV2Guest") {
		t.Errorf("the guest's test failed (exit %d)", res.ExitCode)
	}
}

// guestTimeout bounds TestKubeletV2Guest in the guest: the node's start
// (up to 6 minutes under emulation) and its scenarios.
const guestTimeout = 40 * time.Minute

// The files of the guest's requests to the host (hostControlPlane,
// serveGuest), in the shared directory: a request, then its answer, "ok"
// or what failed, each renamed into place.
const (
	guestRequestFile = "host-request"
	guestReplyFile   = "host-reply"
)

// Requests a guest makes of the host's control plane.
const (
	stopAPIServer  = "stop-apiserver"
	startAPIServer = "start-apiserver"
)

// serveGuest answers the guest's requests to stop and start c's API server
// until ctx ends, with the API server running again then.
func serveGuest(ctx context.Context, t *testing.T, c apiServer, shared string) {
	req := filepath.Join(shared, guestRequestFile)
	stopped := false
	defer func() {
		if stopped {
			if err := c.StartAPIServer(); err != nil {
				t.Errorf("start the API server the guest left stopped: %v", err)
			}
		}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		b, err := os.ReadFile(req)
		if err != nil {
			continue
		}
		if err := os.Remove(req); err != nil {
			t.Errorf("the guest's request: %v", err)
		}
		reply := "ok"
		switch what := strings.TrimSpace(string(b)); what {
		case stopAPIServer:
			err = c.StopAPIServer()
			stopped = err == nil || stopped
		case startAPIServer:
			err = c.StartAPIServer()
			stopped = err != nil && stopped
		default:
			err = fmt.Errorf("unknown request %q", what)
		}
		if err != nil {
			reply = err.Error()
		}
		t.Logf("the guest asked to %s: %s", strings.TrimSpace(string(b)), reply)
		if err := writeRenamed(filepath.Join(shared, guestReplyFile), reply); err != nil {
			t.Errorf("answer the guest: %v", err)
		}
	}
}

// hostControlPlane is, in TestKubeletV2Node's guest, the host's control
// plane: its API server is stopped and started by the host on the
// guest's request (serveGuest), through the shared directory.
type hostControlPlane struct{ shared string }

func (h hostControlPlane) StopAPIServer() error  { return h.ask(stopAPIServer) }
func (h hostControlPlane) StartAPIServer() error { return h.ask(startAPIServer) }

// ask makes a request of the host and waits, at most 2 minutes, for its
// answer.
func (h hostControlPlane) ask(what string) error {
	reply := filepath.Join(h.shared, guestReplyFile)
	if err := os.Remove(reply); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := writeRenamed(filepath.Join(h.shared, guestRequestFile), what); err != nil {
		return fmt.Errorf("ask the host to %s: %w", what, err)
	}
	var b []byte
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		var err error
		b, err = os.ReadFile(reply)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the host did not answer the request to %s: %w", what, err)
	}
	if err := os.Remove(reply); err != nil {
		return err
	}
	if a := string(b); a != "ok" {
		return fmt.Errorf("the host could not %s: %s", what, a)
	}
	return nil
}

// writeRenamed writes content to path through a file renamed into place,
// so that the other side never reads half of it.
func writeRenamed(path, content string) error {
	if err := os.WriteFile(path+".new", []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(path+".new", path)
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
	// overlay, which cannot be an overlay's upper layer), with room for
	// the disk scenario's images and writes.
	fs := testruntime.MountTmpfs(t, "1g", 0)
	// Static pods, for the trust scenario.
	manifests := t.TempDir()
	n := testnode.StartForTest(t, testnode.Options{
		Name:          os.Getenv(v2NodeEnv),
		SystemdDriver: os.Getenv(v2SystemdEnv) == "1",
		Kubelet:       testnode.KubeletOptions{Config: map[string]any{"staticPodPath": manifests}},
		NodeFs:        fs,
		ImageFs:       fs,
		PodsMemory:    int64(v2Scale.mem * testnode.DefaultPodsMemory),
		ReadyTimeout:  6 * time.Minute,
		ControlPlane:  guestnode.Remote(shared),
	})
	t.Run("allocatable: evicted before the kubepods cgroup OOMs", func(t *testing.T) { v2Allocatable(t, n) })
	// The other families once, on production's layout (the systemd
	// driver under systemd), as their twins on this machine's v1.
	if os.Getenv(v2SystemdEnv) != "1" {
		return
	}
	cleanPods(t, n)
	t.Run("soft threshold: the hog goes first, after the grace period", func(t *testing.T) { softMemory(t, n, v2Scale) })
	cleanPods(t, n)
	t.Run("pids: the fork-heavy pod", func(t *testing.T) { pids(t, n) })
	cleanPods(t, n)
	t.Run("OOM kills no agent could prevent, counted for the node and for kubepods", func(t *testing.T) {
		oomKillsNotPrevented(t, n, false) // kubepods: v2Scale's 1 GiB
	})
	cleanPods(t, n)
	// TestAPIServerFaults' twin: the host's API server stopped through
	// hostControlPlane, the hogs at half v2Scale's rates (v2SlowScale).
	// In a subtest of its own: the evictd it starts stops with it, before
	// the next family starts its own.
	t.Run("the API server stopped and started", func(t *testing.T) {
		apiServerFaults(t, n, hostControlPlane{shared}, v2SlowScale)
	})
	cleanPods(t, n)
	t.Run("evictd killed -9 while an evicted pod terminates, restarted by systemd", func(t *testing.T) {
		midEviction(t, n, killed9BySystemd, v2Scale)
	})
	cleanPods(t, n)
	t.Run("disk: reclaim through the CRI, then the biggest local storage user evicted; inodes", func(t *testing.T) { diskPressure(t, n) })
	cleanPods(t, n)
	t.Run("local storage: a pod over its emptyDir's sizeLimit evicted", func(t *testing.T) {
		localStorageLimit(t, n, v2Scale.wait(30*time.Second))
	})
	cleanPods(t, n)
	t.Run("a real static pod spared, a tenant's pod claiming config.source file evicted", func(t *testing.T) {
		staticSpared(t, n, manifests, v2Scale)
	})
	cleanPods(t, n)
	t.Run(v2DaemonSetRun, func(t *testing.T) {
		archive := os.Getenv(v2ImageEnv)
		if archive == "" {
			t.Fatalf("%s is not set: this machine builds evictd's image for the guest when its pattern selects %q", v2ImageEnv, v2DaemonSetRun)
		}
		importEvictdImage(t, n, archive)
		admin, err := clientcmd.BuildConfigFromFlags("", filepath.Join(shared, "admin.kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		evictdDaemonSet(t, n, admin, "https://localhost:"+strconv.Itoa(proxyAPIServer(t, admin.Host)), v2DaemonSetScale)
	})
	cleanPods(t, n)
}

// v2DaemonSetRun is the guest's DaemonSet scenario, which needs evictd's
// image built on this machine (hack/image under emulation takes minutes).
const v2DaemonSetRun = "evictd run as the DaemonSet of its chart, from its image"

// v2ImageEnv is the OCI archive of evictd's image, built on this machine
// for the guest's DaemonSet scenario.
const v2ImageEnv = "EVICTD_V2_IMAGE"

// v2DaemonSetScale sizes TestDaemonSetNode's hogs for the guest: v2Scale
// with a quarter of its rate (the twin's 200 MiB/s becomes 20, what
// v2Allocatable's hog grows at), evictd in its pod stopping them under
// emulation.
var v2DaemonSetScale = memoryScale{mem: v2Scale.mem, rate: v2Scale.rate / 4, slow: v2Scale.slow}

// guestSelects reports whether pattern, the guest's -test.run below
// TestKubeletV2Guest, selects its subtest name, as go test matches: its
// first element against the name, spaces made underscores in both.
func guestSelects(pattern, name string) (bool, error) {
	if pattern == "" {
		return true, nil
	}
	first, _, _ := strings.Cut(pattern, "/")
	re, err := regexp.Compile(strings.ReplaceAll(first, " ", "_"))
	if err != nil {
		return false, fmt.Errorf("%s %q: %w", v2RunEnv, pattern, err)
	}
	return re.MatchString(strings.ReplaceAll(name, " ", "_")), nil
}

// proxyAPIServer forwards a port on the guest's loopback to the API
// server at host (the forwarded address), for evictd's pod: in-cluster it
// reaches the API server at KUBERNETES_SERVICE_HOST, whose name must be
// one the serving certificate has (localhost, not the forwarded address).
// It returns the port; it stops when t ends.
func proxyAPIServer(t *testing.T, host string) int {
	t.Helper()
	u, err := url.Parse(host)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				up, err := net.Dial("tcp", u.Host)
				if err != nil {
					return
				}
				defer up.Close()
				go func() {
					_, _ = io.Copy(up, c)
					up.(*net.TCPConn).CloseWrite()
				}()
				_, _ = io.Copy(c, up)
			})
		}
	})
	return l.Addr().(*net.TCPAddr).Port
}

// v2Scale sizes the memory scenarios for the guest's node: a kubepods
// cgroup of 1 GiB, half the default, allocation rates the emulated guest
// can keep (v2Allocatable's 20 MiB/s for a twin's 50), and four times the
// wait for the emulated kubelet to report an evicted pod's containers
// stopped (v2Allocatable's 2 minutes for a twin's 30 s; seen: more than
// 30 s after evictd had stopped them itself).
var v2Scale = memoryScale{mem: 0.5, rate: 0.4, slow: 4}

// v2SlowScale is v2Scale with its hogs at half its rates, for the API
// server down: evictd stops the hog through the runtime only once the API
// server has not answered for --local-kill-after (2 s), and the emulated
// guest's CRI stop takes seconds more. At v2Scale's rate (20 MiB/s, 12 s
// from the threshold to the kubepods limit) the kernel OOM-killed the hog
// first, with evictd's stop under way.
var v2SlowScale = memoryScale{mem: v2Scale.mem, rate: v2Scale.rate / 2, slow: v2Scale.slow}

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

// TestGuestRequests runs the guest's side of the API server's stop and
// start (hostControlPlane) against the host's (serveGuest) over a
// directory, the host's API server a fake: each request is done once and
// answered, a failure comes back as the guest's error, and the host
// starts an API server the guest left stopped.
func TestGuestRequests(t *testing.T) {
	dir := t.TempDir()
	api := &fakeAPIServer{}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan struct{})
	go func() { defer close(served); serveGuest(ctx, t, api, dir) }()
	guest := hostControlPlane{dir}
	if err := guest.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if stops, starts := api.counts(); stops != 1 || starts != 0 {
		t.Errorf("after a stop: %d stops, %d starts", stops, starts)
	}
	api.setFail(errors.New("port in use"))
	if err := guest.StartAPIServer(); err == nil || !strings.Contains(err.Error(), "port in use") {
		t.Errorf("a failed start: %v, want the host's error", err)
	}
	api.setFail(nil)
	cancel()
	<-served
	if stops, starts := api.counts(); stops != 1 || starts != 2 {
		t.Errorf("the host's end, the API server left stopped: %d stops, %d starts, want 1 and 2", stops, starts)
	}
	for _, f := range []string{guestRequestFile, guestReplyFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", f, err)
		}
	}
}

// fakeAPIServer counts stops and starts; a start fails with fail.
type fakeAPIServer struct {
	mu            sync.Mutex
	stops, starts int
	fail          error
}

func (f *fakeAPIServer) StopAPIServer() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops++
	return nil
}

func (f *fakeAPIServer) StartAPIServer() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	return f.fail
}

// counts returns the stops and starts so far.
func (f *fakeAPIServer) counts() (stops, starts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stops, f.starts
}

// setFail makes the next starts fail with err.
func (f *fakeAPIServer) setFail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = err
}
