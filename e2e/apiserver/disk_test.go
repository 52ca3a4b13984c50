package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/testing/testagent"
	"github.com/evictd/evictd/internal/testing/testcluster"
	"github.com/evictd/evictd/internal/testing/testnode"
	"github.com/evictd/evictd/internal/testing/testruntime"
)

// The disk end-to-end test: the real agent (the evictd binary, $EVICTD_BIN) with a
// real containerd (internal/testing/testruntime) whose root is a small loop-mounted
// ext4, and a real kube-apiserver (internal/testing/testcluster). No kubelet runs;
// the test plays its part: for every API pod bound to the node it runs a CRI
// sandbox labelled with the pod's uid, name and namespace and the pod's
// containers (named as in the spec, running the workload image), creates the
// pod's emptyDir directories under --root-dir, and the test itself writes
// the files of an emptyDir that must fill the disk. When a pod gets a
// deletionTimestamp it stops and removes the pod's sandbox via the CRI,
// removes its volumes and logs, and deletes the pod with grace period 0.
const (
	diskNS         = "disk"
	workloadImage  = "evictd.test/workload:1"
	diskDeadline   = 60 * time.Second
	lowStorageText = "The node was low on resource: ephemeral-storage. "
)

func TestDiskE2E(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: loop mounts, containerd, cgroups")
	}
	if why := cgroupV1Available(); why != "" {
		t.Skip(why)
	}
	begin := time.Now()
	dc := newDiskCluster(t)
	t.Run("dedicated imagefs filled by unused images: images reclaimed, no eviction", dc.dedicatedImageFs)
	t.Run("single fs", func(t *testing.T) {
		env := dc.newEnv(t, "single-node", true, "nodefs.available<100Mi")
		if !t.Run("filled by dead containers: they go, no eviction", env.deadContainers) {
			return
		}
		if !t.Run("filled by a running pod's emptyDir: that pod alone is evicted", env.emptyDirHog) {
			return
		}
		t.Run("pods over their local-storage limits, no threshold met", env.overLimits)
	})
	t.Run("inode exhaustion: the lower QoS tier goes first", dc.inodes)
	t.Logf("TestDiskE2E wall time: %s", time.Since(begin).Round(time.Millisecond))
}

// diskCluster is the control plane shared by the scenarios.
type diskCluster struct {
	c     *testcluster.Cluster
	admin kubernetes.Interface
}

func newDiskCluster(t *testing.T) *diskCluster {
	c := testcluster.StartForTest(t, testcluster.Options{})
	ctx := t.Context()
	admin := c.AdminClient(t)
	dc := &diskCluster{c: c, admin: admin}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: diskNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", diskNS, err)
	}
	if _, err := admin.CoreV1().ServiceAccounts(diskNS).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create ServiceAccount %s/default: %v", diskNS, err)
	}
	return dc
}

// diskEnv is one node: a containerd, a --root-dir, the test's kubelet and
// (once started) the agent.
type diskEnv struct {
	dc         *diskCluster
	t          *testing.T
	ctx        context.Context
	node       string
	rt         *testruntime.Runtime
	rs         runtimeService
	imageFs    string // the filesystem of containerd's root
	nodeFs     string // the filesystem of --root-dir
	rootDir    string
	logsDir    string
	cgroupRoot string
	threshold  string
	kubeconfig string // evictd's ServiceAccount, token bound to the node
	addr       string
	agentStart time.Time
	logs       *testagent.Log // the agent's log

	mu      sync.Mutex
	tiers   map[string]string     // pod uid → its QoS tier's cgroup below kubepods ("" or "/burstable" ...); besteffort if absent
	pods    map[string]*v1.Pod    // name → as created
	handled map[types.UID]bool    // terminating pods taken care of
	evicted map[string]*diskEvict // name → what the kubelet saw
	wg      sync.WaitGroup
}

type runtimeService interface {
	RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error)
	StopPodSandbox(ctx context.Context, podSandboxID string) error
	RemovePodSandbox(ctx context.Context, podSandboxID string) error
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	StartContainer(ctx context.Context, containerID string) error
	StopContainer(ctx context.Context, containerID string, timeout int64) error
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

type diskEvict struct {
	first *v1.Pod // the first version with a deletionTimestamp, or evictd's terminal status
	final *v1.Pod // the last version read before it went
	seen  time.Time
	// terminal is true when first is evictd's terminal status (phase
	// Failed, not deleted): evictd deletes the pod once the stand-in
	// kubelet has reported its containers stopped.
	terminal bool
}

// newEnv mounts the filesystems (one ext4 for both containerd's root and
// --root-dir when single, else a 256 MiB imagefs and a 64 MiB nodefs),
// starts containerd, imports the workload image, creates the node and
// starts the test's kubelet. The agent is started by startAgent.
func (dc *diskCluster) newEnv(t *testing.T, node string, single bool, threshold string) *diskEnv {
	return dc.newEnvSized(t, node, single, 256, threshold)
}

func (dc *diskCluster) newEnvSized(t *testing.T, node string, single bool, imageFsMiB int, threshold string) *diskEnv {
	ctx, cancel := context.WithCancel(context.Background())
	e := &diskEnv{dc: dc, t: t, ctx: ctx, node: node, threshold: threshold,
		pods: map[string]*v1.Pod{}, handled: map[types.UID]bool{}, evicted: map[string]*diskEvict{}, tiers: map[string]string{}}
	e.imageFs = testruntime.MountExt4(t, imageFsMiB)
	if single {
		e.nodeFs = e.imageFs
	} else {
		e.nodeFs = testruntime.MountExt4(t, 64)
	}
	e.rootDir = filepath.Join(e.nodeFs, "kubelet")
	e.logsDir = filepath.Join(e.nodeFs, "pod-logs")
	for _, d := range []string{e.rootDir, e.logsDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The pods' cgroups (runc creates them below the kubepods tiers): gone
	// after containerd has stopped (cleanups run last-registered first).
	e.cgroupRoot = "/evictd-disk-" + randomID(t)
	t.Cleanup(func() { removeCgroupTree(t, e.cgroupRoot) })
	for _, rel := range []string{"", "/kubepods", "/kubepods/besteffort", "/kubepods/burstable"} {
		for _, c := range []string{"memory", "pids"} {
			if err := os.MkdirAll(filepath.Join(cgroupMount, c, e.cgroupRoot+rel), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.rt = testruntime.StartForTest(t, testruntime.Options{Root: e.imageFs, PromptGC: true})
	e.rs = e.rt.RuntimeService()
	if err := e.rt.ImportImage(t.Context(), workloadImage, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	// evictd's identity on this node (deploy/: RBAC and admission policy).
	token, err := dc.c.EvictdNodeToken(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := kubernetes.NewForConfig(dc.c.TokenConfig(token))
	if err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, sa, authorizationv1.ResourceAttributes{Verb: "impersonate-on:associated-node:create", Resource: "pods", Subresource: "eviction"})
	e.kubeconfig = filepath.Join(t.TempDir(), "evictd.kubeconfig")
	if err := dc.c.WriteKubeconfig(e.kubeconfig, token); err != nil {
		t.Fatal(err)
	}
	pods := informers.NewSharedInformerFactoryWithOptions(dc.admin, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}))
	if _, err := pods.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    e.onPod,
		UpdateFunc: func(_, cur any) { e.onPod(cur) },
	}); err != nil {
		t.Fatal(err)
	}
	pods.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		pods.Shutdown()
		e.wg.Wait()
	})
	for typ, ok := range pods.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer for %v never synced", typ)
		}
	}
	return e
}

// startAgent starts evictd for this node with disk thresholds only.
func (e *diskEnv) startAgent(t *testing.T) {
	e.addr = testagent.FreeAddr(t)
	args := []string{
		"--kubeconfig", e.kubeconfig,
		"--hostname-override", e.node,
		"--root-dir", e.rootDir,
		"--pod-logs-dir", e.logsDir,
		"--container-runtime-endpoint", e.rt.Endpoint(),
		"--cgroup-root", e.cgroupRoot,
		"--cgroup-driver", "cgroupfs",
		"--housekeeping-interval", "1s",
		"--node-status-update-frequency", "2s",
		"--eviction-pressure-transition-period", "5s",
		"--minimum-image-ttl-duration", "0s",
		"--volume-stats-agg-period", "1s",
		"--eviction-hard=" + e.threshold,
		"--metrics-bind-address", e.addr,
		"--log-level", "debug",
	}
	if out, errOut, code := testagent.Run(t, append([]string{"check-config"}, args...)...); code != 0 {
		t.Fatalf("check-config: exit %d\n%s%s", code, out, errOut)
	}
	e.agentStart = time.Now()
	_, e.logs = testagent.Start(e.t, nil, args...)
	testagent.WaitHTTP(t, "http://"+e.addr+"/readyz")
}

// pod is what the test creates: an API pod bound to the node, reported
// Running, with its sandbox and containers in containerd.
type diskPod struct {
	api     *v1.Pod
	sandbox string
}

// runAPIPod creates a BestEffort pod with one container "app" running the
// workload image and the given emptyDir volumes, reports it Running, and
// runs it in containerd with its emptyDir directories under --root-dir.
func (e *diskEnv) runAPIPod(t *testing.T, name string, emptyDirs []string, mutate func(*v1.PodSpec)) *diskPod {
	t.Helper()
	spec := v1.PodSpec{
		NodeName:                     e.node,
		AutomountServiceAccountToken: ptr.To(false),
		Containers:                   []v1.Container{{Name: "app", Image: workloadImage}},
	}
	for _, v := range emptyDirs {
		spec.Volumes = append(spec.Volumes, v1.Volume{Name: v, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	}
	if mutate != nil {
		mutate(&spec)
	}
	pod, err := e.dc.admin.CoreV1().Pods(diskNS).Create(e.ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	for _, v := range emptyDirs {
		if err := os.MkdirAll(e.emptyDir(pod, v), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	e.mu.Lock()
	switch pod.Status.QOSClass {
	case v1.PodQOSGuaranteed:
		e.tiers[string(pod.UID)] = ""
	case v1.PodQOSBurstable:
		e.tiers[string(pod.UID)] = "/burstable"
	}
	e.mu.Unlock()
	sb, _ := e.runSandbox(t, string(pod.UID), name, "app", workloadImage, nil)
	now := metav1.Now()
	pod.Status.Phase = v1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: now},
	}
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", Image: workloadImage, Ready: true,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}}}}
	if pod, err = e.dc.admin.CoreV1().Pods(diskNS).UpdateStatus(e.ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("report pod %s running: %v", name, err)
	}
	e.mu.Lock()
	e.pods[name] = pod
	e.mu.Unlock()
	return &diskPod{api: pod, sandbox: sb}
}

func (e *diskEnv) emptyDir(pod *v1.Pod, volume string) string {
	return filepath.Join(e.rootDir, "pods", string(pod.UID), "volumes", "kubernetes.io~empty-dir", volume)
}

// runSandbox runs a host-network sandbox labelled as the kubelet labels
// them, with one container ctr of the workload image (args: the image's
// sleep when nil), and waits for the workload's ready line. It returns the
// sandbox and container IDs.
func (e *diskEnv) runSandbox(t *testing.T, uid, name, ctr, image string, args []string) (string, string) {
	t.Helper()
	ctx := t.Context()
	hostNet := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}
	labels := map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": diskNS}
	logDir := filepath.Join(e.logsDir, diskNS+"_"+name+"_"+uid)
	e.mu.Lock()
	tier, ok := e.tiers[uid]
	e.mu.Unlock()
	if !ok {
		tier = "/besteffort"
	}
	podCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Uid: uid, Namespace: diskNS},
		Labels:       labels,
		LogDirectory: logDir,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent:    e.cgroupRoot + "/kubepods" + tier + "/pod" + uid,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: hostNet},
		},
	}
	sb, err := e.rs.RunPodSandbox(ctx, podCfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	ctrLabels := map[string]string{"io.kubernetes.container.name": ctr}
	for k, v := range labels {
		ctrLabels[k] = v
	}
	id, err := e.rs.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: ctr},
		Labels:   ctrLabels,
		Image:    &runtimeapi.ImageSpec{Image: image},
		Args:     args,
		LogPath:  filepath.Join(ctr, "0.log"),
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: hostNet},
		},
	}, podCfg)
	if err != nil {
		t.Fatalf("CreateContainer %s/%s: %v", name, ctr, err)
	}
	if err := e.rs.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer %s/%s: %v", name, ctr, err)
	}
	logPath := filepath.Join(logDir, ctr, "0.log")
	diskPoll(t, "the workload of "+name+" ready", func() (bool, string) {
		b, err := os.ReadFile(logPath)
		return err == nil && strings.Contains(string(b), "workload: ready"), fmt.Sprintf("%s: %q, %v", logPath, b, err)
	})
	return sb, id
}

// onPod is the test's kubelet: a pod with a deletionTimestamp has its
// sandbox stopped and removed, its volumes and logs removed, and is deleted
// with grace period 0 once evictd's DisruptionTarget condition is on it.
func (e *diskEnv) onPod(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.DeletionTimestamp == nil && !evictedByStatus(pod) {
		return
	}
	e.mu.Lock()
	if e.handled[pod.UID] {
		e.mu.Unlock()
		return
	}
	e.handled[pod.UID] = true
	e.mu.Unlock()
	ev := &diskEvict{first: pod.DeepCopy(), seen: time.Now(), terminal: pod.DeletionTimestamp == nil}
	e.wg.Go(func() { e.terminate(ev) })
}

func (e *diskEnv) terminate(ev *diskEvict) {
	pod := ev.first
	ctx := e.ctx
	if sbs, err := e.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(pod.UID)}}); err != nil {
		e.t.Errorf("kubelet: list sandboxes of %s: %v", pod.Name, err)
	} else {
		for _, sb := range sbs {
			// As the kubelet, which syncs the pod again after a failed
			// stop: evictd stops a hard eviction's containers through
			// the runtime at the same time, and containerd can fail a
			// kill that races it ("ttrpc: closed") while the container
			// goes anyway.
			var err error
			for try := range 5 {
				if err = e.rs.StopPodSandbox(ctx, sb.GetId()); err == nil {
					break
				}
				e.t.Logf("kubelet: stop sandbox of %s (try %d): %v; again", pod.Name, try+1, err)
				time.Sleep(200 * time.Millisecond)
			}
			if err != nil {
				e.t.Errorf("kubelet: stop sandbox of %s: %v", pod.Name, err)
			}
			if err := e.rs.RemovePodSandbox(ctx, sb.GetId()); err != nil {
				e.t.Errorf("kubelet: remove sandbox of %s: %v", pod.Name, err)
			}
		}
	}
	_ = os.RemoveAll(filepath.Join(e.rootDir, "pods", string(pod.UID)))
	_ = os.RemoveAll(filepath.Join(e.logsDir, diskNS+"_"+pod.Name+"_"+string(pod.UID)))
	ev.final = pod
	if ev.terminal {
		// evictd's terminal status: the containers stopped, the kubelet
		// reports so, and evictd deletes the pod.
		if err := reportStopped(ctx, e.dc.admin, pod); err != nil && ctx.Err() == nil {
			e.t.Errorf("kubelet: report the containers of %s stopped: %v", pod.Name, err)
		}
		final, gone := awaitGone(ctx, e.dc.admin, pod, time.Minute)
		ev.final = final
		if !gone && ctx.Err() == nil {
			e.t.Errorf("%s: not deleted within a minute of its containers' reported stop (evictd deletes it)", pod.Name)
		}
		e.mu.Lock()
		e.evicted[pod.Name] = ev
		e.mu.Unlock()
		return
	}
	// evictd sets its DisruptionTarget condition just after the Eviction
	// API call (which sets the API server's own): wait for it, past the
	// 1 s grace period if need be (stopping the sandbox takes a moment),
	// so that the test sees the condition the pod ended with.
	until := pod.DeletionTimestamp.Time
	if bound := ev.seen.Add(15 * time.Second); until.Before(bound) {
		until = bound
	}
	for ctx.Err() == nil && time.Now().Before(until) {
		cur, err := e.dc.admin.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && cur.UID == pod.UID {
			ev.final = cur
			if c := podCondition(cur, v1.DisruptionTarget); c != nil && c.Reason == evictdReason {
				break
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	if ctx.Err() != nil {
		return
	}
	err := e.dc.admin.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		e.t.Errorf("kubelet: remove %s: %v", pod.Name, err)
	}
	e.mu.Lock()
	e.evicted[pod.Name] = ev
	e.mu.Unlock()
}

// terminating lists, sorted, the pods that got a deletionTimestamp.
func (e *diskEnv) terminating() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var names []string
	for name, p := range e.pods {
		if e.handled[p.UID] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// collectGarbage makes containerd collect its garbage at once (deleting
// a lease with --sync does), so that removed snapshots are freed.
func (e *diskEnv) collectGarbage(t *testing.T) {
	t.Helper()
	ctr := func(args ...string) string {
		out, err := exec.Command("ctr", append([]string{"--address", e.rt.Socket(), "--namespace", testruntime.Namespace}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctr %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	id := "evictd-disk-gc-" + randomID(t)
	ctr("leases", "create", "--id", id)
	ctr("leases", "delete", "--sync", id)
}

// passes is evictd_passes_total, over every trigger.
func (e *diskEnv) passes(t *testing.T) float64 {
	t.Helper()
	var n float64
	for k, v := range e.metrics(t) {
		if strings.HasPrefix(k, "evictd_passes_total{") {
			n += v
		}
	}
	return n
}

func (e *diskEnv) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + e.addr + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return testagent.ParseMetrics(t, string(b))
}

type diskStatus struct {
	Pods       int `json:"pods"`
	Thresholds []struct {
		Signal string `json:"signal"`
		Met    bool   `json:"met"`
	} `json:"thresholds"`
}

func (e *diskEnv) status(t *testing.T) (diskStatus, string) {
	t.Helper()
	var st diskStatus
	resp, err := http.Get("http://" + e.addr + "/status")
	if err != nil {
		return st, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Sprintf("%v: %s", err, b)
	}
	return st, string(b)
}

// dedicatedImageFs: containerd's root on its own 256 MiB ext4 (imagefs),
// --root-dir on a 64 MiB one (nodefs). Three images with big extra layers:
// one used by a running pod's container, two unused that take imagefs
// below its threshold. The agent removes the two unused images (not the
// used one, not the pause image) and evicts nobody.
func (dc *diskCluster) dedicatedImageFs(t *testing.T) {
	const (
		used, unused1, unused2 = "evictd.test/used:1", "evictd.test/unused:1", "evictd.test/unused:2"
		thresholdMiB           = 80
	)
	e := dc.newEnv(t, "imagefs-node", false, fmt.Sprintf("imagefs.available<%dMi", thresholdMiB))
	ctx := t.Context()
	if err := e.rt.ImportImage(ctx, used, 20); err != nil {
		t.Fatal(err)
	}
	// The pod runs the used image: its container is the workload of that
	// image (the spec names the same image).
	podAPI := e.runAPIPodImage(t, "user", used)
	for _, ref := range []string{unused1, unused2} {
		if err := e.rt.ImportImage(ctx, ref, 35); err != nil {
			t.Fatal(err)
		}
	}
	availBefore := statfsAvail(t, e.imageFs)
	if availBefore >= thresholdMiB<<20 {
		t.Fatalf("imagefs available %d MiB after the imports, want below the %d MiB threshold", availBefore>>20, thresholdMiB)
	}
	t.Logf("imagefs available before the agent: %.1f MiB (threshold %d MiB)", float64(availBefore)/(1<<20), thresholdMiB)

	e.startAgent(t)
	var m map[string]float64
	diskPoll(t, "the unused images reclaimed", func() (bool, string) {
		images, err := e.rt.Images(ctx)
		if err != nil {
			return false, err.Error()
		}
		m = e.metrics(t)
		ok := !slices.Contains(images, unused1) && !slices.Contains(images, unused2)
		return ok && m[`evictd_reclaim_total{kind="images",result="ok"}`] >= 1, fmt.Sprintf("images %q, metrics %v", images, reclaimMetrics(m))
	})
	took := time.Since(e.agentStart)
	images, err := e.rt.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{used, testruntime.PauseImage} {
		if !slices.Contains(images, want) {
			t.Errorf("image %s was removed (images left: %q); it must stay", want, images)
		}
	}
	freed := m[`evictd_reclaimed_bytes_total{kind="images"}`]
	if freed < 2*35<<20 {
		t.Errorf("evictd_reclaimed_bytes_total{kind=\"images\"} = %.0f, want at least the two 35 MiB layers (%d)", freed, 2*35<<20)
	}
	availAfter := statfsAvail(t, e.imageFs)
	if availAfter < thresholdMiB<<20 {
		t.Errorf("imagefs available %d MiB after reclaim, want above the threshold", availAfter>>20)
	}
	t.Logf("agent start → unused images gone: %s; reclaimed %.1f MiB (metric), imagefs available %.1f → %.1f MiB",
		took.Round(time.Millisecond), freed/(1<<20), float64(availBefore)/(1<<20), float64(availAfter)/(1<<20))
	// A few more passes: the threshold is clear and stays so; nobody is evicted.
	diskPoll(t, "the imagefs threshold clear", func() (bool, string) {
		st, raw := e.status(t)
		for _, th := range st.Thresholds {
			if th.Met {
				return false, raw
			}
		}
		return len(st.Thresholds) > 0 && st.Pods == 1, raw
	})
	time.Sleep(3 * time.Second)
	if got := e.terminating(); len(got) > 0 {
		t.Errorf("pods evicted: %v, want none", got)
	}
	e.checkRunning(t, podAPI)
	if m := e.metrics(t); m[`evictd_reclaim_total{kind="images",result="failed"}`] > 0 {
		t.Errorf("image reclaim failures: %v", reclaimMetrics(m))
	}
}

// runAPIPodImage is runAPIPod with the container running image.
func (e *diskEnv) runAPIPodImage(t *testing.T, name, image string) *diskPod {
	t.Helper()
	pod, err := e.dc.admin.CoreV1().Pods(diskNS).Create(e.ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{
		NodeName: e.node, AutomountServiceAccountToken: ptr.To(false),
		Containers: []v1.Container{{Name: "app", Image: image}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	sb, _ := e.runSandbox(t, string(pod.UID), name, "app", image, nil)
	now := metav1.Now()
	pod.Status.Phase = v1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", Image: image, Ready: true,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}}}}
	if pod, err = e.dc.admin.CoreV1().Pods(diskNS).UpdateStatus(e.ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("report pod %s running: %v", name, err)
	}
	e.mu.Lock()
	e.pods[name] = pod
	e.mu.Unlock()
	return &diskPod{api: pod, sandbox: sb}
}

// checkRunning checks that the pod has no deletionTimestamp and that its
// sandbox is ready and its container running.
func (e *diskEnv) checkRunning(t *testing.T, p *diskPod) {
	t.Helper()
	cur, err := e.dc.admin.CoreV1().Pods(diskNS).Get(e.ctx, p.api.Name, metav1.GetOptions{})
	if err != nil || cur.UID != p.api.UID || cur.DeletionTimestamp != nil {
		t.Errorf("pod %s: %v (deletionTimestamp %v); want it untouched", p.api.Name, err, cur.GetDeletionTimestamp())
	}
	ctrs, err := e.rs.ListContainers(e.ctx, &runtimeapi.ContainerFilter{PodSandboxId: p.sandbox})
	if err != nil || len(ctrs) != 1 || ctrs[0].GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("pod %s: containers %v, %v; want one running", p.api.Name, ctrs, err)
	}
}

// deadContainers: single fs (containerd's root and --root-dir on one
// 256 MiB ext4). Three sandboxes of pods that no longer run (not in the
// API), whose containers wrote 50 MiB each to their writable layers and
// exited, take nodefs below 100Mi before the agent starts; a running API
// pod uses the workload image. The agent removes the dead containers and
// their sandboxes and evicts nobody.
func (e *diskEnv) deadContainers(t *testing.T) {
	const writeMiB, dead = 50, 3
	small := e.runAPIPod(t, "small", []string{"scratch"}, nil)
	var deadIDs []string
	for i := range dead {
		name := fmt.Sprintf("done-%d", i)
		sb, ctr := e.runSandbox(t, "dead-uid-"+randomID(t), name, "app", workloadImage, []string{"write", "--dir", "/data", "--mib", fmt.Sprint(writeMiB)})
		if err := e.rs.StopContainer(t.Context(), ctr, 10); err != nil {
			t.Fatal(err)
		}
		if err := e.rs.StopPodSandbox(t.Context(), sb); err != nil {
			t.Fatal(err)
		}
		deadIDs = append(deadIDs, sb)
	}
	availBefore := statfsAvail(t, e.nodeFs)
	if availBefore >= 100<<20 {
		t.Fatalf("nodefs available %d MiB with the dead containers, want below 100 MiB", availBefore>>20)
	}
	e.startAgent(t)
	var m map[string]float64
	diskPoll(t, "the dead containers' sandboxes removed", func() (bool, string) {
		sbs, err := e.rs.ListPodSandbox(t.Context(), nil)
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, sb := range sbs {
			if slices.Contains(deadIDs, sb.GetId()) {
				left = append(left, sb.GetMetadata().GetName())
			}
		}
		m = e.metrics(t)
		return len(left) == 0 && m[`evictd_reclaim_total{kind="containers",result="ok"}`] >= 1,
			fmt.Sprintf("dead sandboxes left %v, metrics %v", left, reclaimMetrics(m))
	})
	took := time.Since(e.agentStart)
	// containerd frees a removed container's snapshot in its garbage
	// collection, here after every deletion (PromptGC); by containerd's
	// defaults only after 100 mutations, spaced by 50 times the last
	// collection's length, which under load came after evictd's 5 s settle
	// (its metric then counted the logs' 18 KiB alone, and nodefs was
	// still short). A layer may still be freed after evictd measured: the
	// metric counts at least one container's (here 100 or 150 MiB); a
	// synchronous collection gives all of them back.
	freed := m[`evictd_reclaimed_bytes_total{kind="containers"}`]
	if freed < writeMiB<<20 || freed > float64(dead*writeMiB+10)*(1<<20) {
		t.Errorf("evictd_reclaimed_bytes_total{kind=\"containers\"} = %.0f, want at least one container's %d MiB and not above the %d MiB written", freed, writeMiB, dead*writeMiB)
	}
	availReclaimed := statfsAvail(t, e.nodeFs)
	if availReclaimed < 100<<20 {
		t.Errorf("nodefs available %d MiB after reclaim, want above the 100Mi threshold", availReclaimed>>20)
	}
	var availAfter uint64
	diskPoll(t, "the written data back after containerd's garbage collection", func() (bool, string) {
		e.collectGarbage(t)
		availAfter = statfsAvail(t, e.nodeFs)
		return availAfter >= availBefore+dead*writeMiB<<20*95/100,
			fmt.Sprintf("nodefs available %d MiB, %d MiB before reclaim, %d MiB written", availAfter>>20, availBefore>>20, dead*writeMiB)
	})
	t.Logf("nodefs available %.1f MiB after reclaim, %.1f MiB after containerd's garbage collection", float64(availReclaimed)/(1<<20), float64(availAfter)/(1<<20))
	t.Logf("agent start → dead containers gone: %s; reclaimed %.1f MiB (metric), nodefs available %.1f → %.1f MiB",
		took.Round(time.Millisecond), freed/(1<<20), float64(availBefore)/(1<<20), float64(availAfter)/(1<<20))
	images, err := e.rt.Images(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(images, workloadImage) || !slices.Contains(images, testruntime.PauseImage) {
		t.Errorf("images left %q: the workload image (used) and the pause image must stay", images)
	}
	time.Sleep(3 * time.Second)
	if got := e.terminating(); len(got) > 0 {
		t.Errorf("pods evicted: %v, want none", got)
	}
	e.checkRunning(t, small)
}

// emptyDirHog: on the same node, a second pod whose emptyDir the test fills
// with 150 MiB: nothing is left to reclaim (no dead container, every image
// in use), so the agent evicts that pod, and only it, with the kubelet's
// message.
func (e *diskEnv) emptyDirHog(t *testing.T) {
	const fillMiB = 150
	hog := e.runAPIPod(t, "z-hog", []string{"cache"}, nil)
	// The other pod uses a little (it would rank first by name alone).
	writeFile(t, filepath.Join(e.emptyDir(e.podByName("small").api, "scratch"), "data"), 5)
	diskPoll(t, "the agent to list both pods", func() (bool, string) {
		st, raw := e.status(t)
		return st.Pods == 2, raw
	})
	// The hog writes in two steps: first 100 MiB, which meets no
	// threshold; then, once the agent has measured that (emptyDir usage is
	// measured with du at most every --volume-stats-agg-period, 1s here,
	// as the kubelet does: a pod that fills the disk within one period
	// may not rank by what it just wrote), the last 50 MiB that cross it.
	writeFile(t, filepath.Join(e.emptyDir(hog.api, "cache"), "fill-1"), fillMiB-50)
	if avail := statfsAvail(t, e.nodeFs); avail < 100<<20+8<<20 {
		t.Fatalf("nodefs available %.1f MiB after the first step, want some room above the 100Mi threshold", float64(avail)/(1<<20))
	}
	// A pass that starts more than one agg period after the write
	// measures it anew: wait until one such pass has completed (passes run
	// one after the other, each counted as it starts).
	time.Sleep(1500 * time.Millisecond)
	from := e.passes(t)
	diskPoll(t, "two more passes of the agent", func() (bool, string) {
		n := e.passes(t)
		return n >= from+2, fmt.Sprintf("passes %v, from %v", n, from)
	})
	if got := e.terminating(); len(got) > 0 {
		t.Fatalf("pods evicted before the threshold was met: %v", got)
	}
	writeFile(t, filepath.Join(e.emptyDir(hog.api, "cache"), "fill-2"), 50)
	written := time.Now()
	t.Logf("wrote %d MiB to the hog's emptyDir; nodefs available %.1f MiB", fillMiB, float64(statfsAvail(t, e.nodeFs))/(1<<20))
	var ev *diskEvict
	diskPoll(t, "the hog's eviction", func() (bool, string) {
		e.mu.Lock()
		defer e.mu.Unlock()
		ev = e.evicted["z-hog"]
		return ev != nil, "not yet"
	})
	t.Logf("emptyDir filled → eviction seen: %s", ev.seen.Sub(written).Round(time.Millisecond))
	if got := e.terminating(); !slices.Equal(got, []string{"z-hog"}) {
		t.Errorf("pods evicted: %v, want the hog alone", got)
	}
	c := podCondition(ev.final, v1.DisruptionTarget)
	if c == nil || c.Status != v1.ConditionTrue || c.Reason != evictdReason || !strings.HasPrefix(c.Message, lowStorageText+"Threshold quantity: 100Mi, available: ") {
		t.Errorf("hog: DisruptionTarget condition %+v, want True, reason %s, message starting %q", c, evictdReason, lowStorageText+"Threshold quantity: 100Mi")
	} else {
		t.Logf("hog's DisruptionTarget message: %s", c.Message)
	}
	e.checkRunning(t, e.podByName("small"))
	// Pressure is relieved once the kubelet removed the hog's volume.
	diskPoll(t, "the nodefs threshold clear", func() (bool, string) {
		st, raw := e.status(t)
		for _, th := range st.Thresholds {
			if th.Met {
				return false, raw
			}
		}
		return len(st.Thresholds) > 0, raw
	})
	time.Sleep(3 * time.Second)
	if got := e.terminating(); !slices.Equal(got, []string{"z-hog"}) {
		t.Errorf("pods evicted: %v, want the hog alone", got)
	}
}

// overLimits: with no threshold met, a pod over its container's
// ephemeral-storage limit (its emptyDir counts) and a pod over its
// emptyDir's sizeLimit are evicted with the kubelet's messages; the pod
// within its limits stays.
func (e *diskEnv) overLimits(t *testing.T) {
	limited := e.runAPIPod(t, "limited", []string{"cache"}, func(s *v1.PodSpec) {
		s.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Mi")}
	})
	sized := e.runAPIPod(t, "sized", []string{"cache"}, func(s *v1.PodSpec) {
		s.Volumes[0].EmptyDir.SizeLimit = ptr.To(resource.MustParse("5Mi"))
	})
	roomy := e.runAPIPod(t, "roomy", []string{"cache"}, func(s *v1.PodSpec) {
		s.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("50Mi")}
		s.Volumes[0].EmptyDir.SizeLimit = ptr.To(resource.MustParse("30Mi"))
	})
	diskPoll(t, "the agent to list the 4 pods", func() (bool, string) {
		st, raw := e.status(t)
		return st.Pods == 4, raw
	})
	writeFile(t, filepath.Join(e.emptyDir(roomy.api, "cache"), "data"), 20)
	written := time.Now()
	writeFile(t, filepath.Join(e.emptyDir(limited.api, "cache"), "data"), 20)
	writeFile(t, filepath.Join(e.emptyDir(sized.api, "cache"), "data"), 8)
	for _, c := range []struct{ name, msg string }{
		{"limited", "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. "},
		{"sized", `Usage of EmptyDir volume "cache" exceeds the limit "5Mi". `},
	} {
		var ev *diskEvict
		diskPoll(t, "the eviction of "+c.name, func() (bool, string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			ev = e.evicted[c.name]
			return ev != nil, "not yet"
		})
		t.Logf("%s: usage written → eviction seen: %s", c.name, ev.seen.Sub(written).Round(time.Millisecond))
		if g := e.evictedGrace(t, ev); g != 1 {
			t.Errorf("%s: evicted with grace period %d s, want 1", c.name, g)
		}
		if cond := podCondition(ev.final, v1.DisruptionTarget); cond == nil || cond.Status != v1.ConditionTrue || cond.Reason != evictdReason || cond.Message != c.msg {
			t.Errorf("%s: DisruptionTarget condition %+v, want True, reason %s, message %q", c.name, cond, evictdReason, c.msg)
		}
	}
	st, raw := e.status(t)
	for _, th := range st.Thresholds {
		if th.Met {
			t.Errorf("a threshold is met; the limits alone should evict: %s", raw)
		}
	}
	time.Sleep(3 * time.Second)
	if got := e.terminating(); !slices.Equal(got, []string{"limited", "sized", "z-hog"}) {
		t.Errorf("pods evicted over the whole run: %v, want limited, sized and (before) z-hog", got)
	}
	e.checkRunning(t, roomy)
	e.checkRunning(t, e.podByName("small"))
}

func (e *diskEnv) podByName(name string) *diskPod {
	e.mu.Lock()
	p := e.pods[name]
	e.mu.Unlock()
	sbs, err := e.rs.ListPodSandbox(e.ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(p.UID)}})
	if err != nil || len(sbs) != 1 {
		e.t.Fatalf("sandboxes of %s: %v, %v", name, sbs, err)
	}
	return &diskPod{api: p, sandbox: sbs[0].GetId()}
}

func reclaimMetrics(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if strings.HasPrefix(k, "evictd_reclaim") || strings.HasPrefix(k, "evictd_evictions_") {
			out[k] = v
		}
	}
	return out
}

// writeFile writes mib MiB of incompressible data to path and syncs it.
func writeFile(t *testing.T, path string, mib int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	var x uint64 = 0x9e3779b97f4a7c15
	for range mib {
		for i := 0; i+8 <= len(buf); i += 8 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			for k := range 8 {
				buf[i+k] = byte(x >> (8 * k))
			}
		}
		if _, err := f.Write(buf); err != nil {
			f.Close()
			t.Fatal(err)
		}
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

func statfsAvail(t *testing.T, dir string) uint64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Bavail * uint64(st.Bsize)
}

// diskPoll polls cond every 100 ms for at most diskDeadline.
func diskPoll(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(diskDeadline)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("waiting for %s: gave up after %s; last: %s", what, diskDeadline, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroupTree removes rel and every cgroup below it in every v1
// hierarchy.
func removeCgroupTree(t *testing.T, rel string) {
	if err := testnode.RemoveCgroupTree(rel); err != nil {
		t.Error(err)
	}
}

// inodes: single fs on a 64 MiB ext4 (16384 inodes), threshold
// nodefs.inodesFree<4000. A Guaranteed pod holds 10000 files in its
// emptyDir, a BestEffort pod 2000: nothing to reclaim, and the BestEffort
// pod is evicted although the Guaranteed one uses five times its inodes.
func (dc *diskCluster) inodes(t *testing.T) {
	const threshold = 4000
	e := dc.newEnvSized(t, "inode-node", true, 64, fmt.Sprintf("nodefs.inodesFree<%d", threshold))
	g := e.runAPIPod(t, "g-many", []string{"cache"}, func(s *v1.PodSpec) {
		rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")}
		s.Containers[0].Resources = v1.ResourceRequirements{Requests: rl, Limits: rl}
	})
	if g.api.Status.QOSClass != v1.PodQOSGuaranteed {
		t.Fatalf("g-many: QoS class %s, want Guaranteed", g.api.Status.QOSClass)
	}
	be := e.runAPIPod(t, "z-few", []string{"cache"}, nil)
	e.startAgent(t)
	diskPoll(t, "the agent to list both pods", func() (bool, string) {
		st, raw := e.status(t)
		return st.Pods == 2, raw
	})
	free := statfsFiles(t, e.nodeFs)
	t.Logf("nodefs inodes free before the files: %d", free)
	makeFiles(t, e.emptyDir(be.api, "cache"), 2000)
	// The Guaranteed pod's files: all but the last 2500 first, then, once
	// the agent has measured them, the rest, which cross the threshold.
	many := int(free) - 2000 - threshold + 1000
	if many < 8000 {
		t.Fatalf("inodes free %d: too few for the scenario", free)
	}
	makeFiles(t, filepath.Join(e.emptyDir(g.api, "cache"), "a"), many-2500)
	if f := statfsFiles(t, e.nodeFs); f < threshold+1000 {
		t.Fatalf("inodes free %d after the first step, want room above %d", f, threshold)
	}
	time.Sleep(1500 * time.Millisecond)
	from := e.passes(t)
	diskPoll(t, "two more passes of the agent", func() (bool, string) {
		n := e.passes(t)
		return n >= from+2, fmt.Sprintf("passes %v, from %v", n, from)
	})
	if got := e.terminating(); len(got) > 0 {
		t.Fatalf("pods evicted before the threshold was met: %v", got)
	}
	makeFiles(t, filepath.Join(e.emptyDir(g.api, "cache"), "b"), 2500)
	written := time.Now()
	t.Logf("inodes free %d after the files (threshold %d)", statfsFiles(t, e.nodeFs), threshold)
	var ev *diskEvict
	diskPoll(t, "the BestEffort pod's eviction", func() (bool, string) {
		e.mu.Lock()
		defer e.mu.Unlock()
		ev = e.evicted["z-few"]
		return ev != nil, "not yet"
	})
	t.Logf("threshold crossed → eviction seen: %s", ev.seen.Sub(written).Round(time.Millisecond))
	want := "The node was low on resource: inodes. Threshold quantity: 4k, available: "
	if c := podCondition(ev.final, v1.DisruptionTarget); c == nil || c.Status != v1.ConditionTrue || c.Reason != evictdReason || !strings.HasPrefix(c.Message, want) {
		t.Errorf("z-few: DisruptionTarget condition %+v, want True, reason %s, message starting %q", c, evictdReason, want)
	} else {
		t.Logf("z-few's DisruptionTarget message: %s", c.Message)
	}
	diskPoll(t, "the inodes threshold clear", func() (bool, string) {
		st, raw := e.status(t)
		for _, th := range st.Thresholds {
			if th.Met {
				return false, raw
			}
		}
		return len(st.Thresholds) > 0, raw
	})
	time.Sleep(3 * time.Second)
	if got := e.terminating(); !slices.Equal(got, []string{"z-few"}) {
		t.Errorf("pods evicted: %v, want the BestEffort pod alone", got)
	}
	e.checkRunning(t, g)
}

func statfsFiles(t *testing.T, dir string) uint64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ffree
}

// makeFiles creates n empty files in dir (created if missing).
func makeFiles(t *testing.T, dir string, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%06d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	d, err := os.Open(dir)
	if err == nil {
		err = errors.Join(d.Sync(), d.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
}

// evictedGrace is the grace period evictd gave the eviction ev saw: the
// deletion's, or, after its terminal status, its log line's.
func (e *diskEnv) evictedGrace(t *testing.T, ev *diskEvict) int64 {
	t.Helper()
	if !ev.terminal {
		return ptr.Deref(ev.first.DeletionGracePeriodSeconds, -1)
	}
	var got int64 = -1
	diskPoll(t, "evictd's log line of the eviction of "+ev.first.Name, func() (bool, string) {
		got = loggedGrace(e.logs.String(), ev.first.Namespace, ev.first.Name)
		return got >= 0, "no line"
	})
	return got
}
