package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/internal/testing/testcluster"
	"github.com/evictd/evictd/internal/testing/testnode"
)

// daemonSetFile is the DaemonSet operators apply, with its kubeconfig.
const daemonSetFile = "../../deploy/daemonset.yaml"

// dsImage is the reference the test imports evictd's image under.
const dsImage = "evictd.test/evictd:e2e"

// TestDaemonSetNode runs evictd only as deploy/daemonset.yaml's DaemonSet,
// its image built by hack/image from the binary under test and imported
// into the node's containerd, on a real node: the kubelet runs it with its
// projected token, it evicts a memory hog on a hard threshold (its
// containers stopped through the runtime from inside the pod) and is never
// its own victim; its pod deleted, the DaemonSet's next pod takes over and
// evicts the next hog.
//
// The manifest is the file's own but for what differs on the test node, as
// an operator would set it: the image, the API server's address, the
// kubelet's, pod logs' and containerd's paths, the metrics port, and the
// test node's cgroup root, allocatable settings and threshold.
func TestDaemonSetNode(t *testing.T) {
	n := testnode.StartForTest(t, testnode.Options{Name: "e2e-daemonset"})
	importEvictdImage(t, n)
	ports, err := testcluster.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	cm, ds := daemonSetManifest(t, n, addr,
		"--eviction-hard=memory.available<500Mi",
		"--eviction-pressure-transition-period=5s")
	c := n.Admin()
	ctx := t.Context()
	if _, err := c.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppsV1().DaemonSets(ds.Namespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteDaemonSet(t, n, ds, cm) })

	first := waitEvictdPod(t, n, ds, "")
	// From inside its pod evictd arms what it arms on the host: the
	// memory cgroups' notifications (event_control written through the
	// cgroup mount) and the PSI trigger (through /proc/pressure).
	wakeups := logLinesOf(t, n, first, "wake-up source active")
	t.Logf("evictd's pod %s ready; its wake-up sources: %v", first.Name, wakeups)
	for _, kind := range []string{`"kind":"memcg"`, `"kind":"psi"`} {
		if !slices.ContainsFunc(wakeups, func(l string) bool { return strings.Contains(l, kind) }) {
			t.Errorf("evictd's pod has no wake-up source of %s", kind)
		}
	}
	evictHog(t, n, "hog", first)

	// The pod deleted (a rollout, a drain, a crash): the DaemonSet's next
	// pod takes over.
	if err := c.CoreV1().Pods(first.Namespace).Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := waitEvictdPod(t, n, ds, first.UID)
	t.Logf("evictd's next pod %s ready", second.Name)
	evictHog(t, n, "hog2", second)
	for _, p := range []*v1.Pod{first, second} {
		if k := evictions(t, n, p.Namespace, p.Name); k != 0 {
			t.Errorf("evictd's pod %s: %d Evicted events, want 0", p.Name, k)
		}
	}
	cleanPods(t, n)
}

// evictHog starts a BestEffort pod that allocates past the hard threshold
// and checks that evictd's pod evicts it with the hard grace period,
// stopping its containers itself, without a kernel OOM kill, and stays.
func evictHog(t *testing.T, n *testnode.Node, name string, evictd *v1.Pod) {
	t.Helper()
	before := oomKills(t, n)
	deleted := watchDeletion(t, n, "default", name)
	// 2300 MiB at 200 MiB/s, as the allocatable scenario.
	hog := labelled(n.Pod(name, "alloc", "--mib", "2300", "--rate", "200"))
	if _, err := n.Admin().CoreV1().Pods("default").Create(t.Context(), hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var d deletion
	select {
	case d = <-deleted:
	case <-time.After(90 * time.Second):
		t.Fatalf("%s not evicted within 90 s; %d OOM kills in kubepods; evictd's log:\n%s", name, oomKills(t, n)-before, podLog(t, n, evictd))
	}
	if g := evictedGrace(t, d, "default", name, func() string { return podLog(t, n, evictd) }); g != 1 {
		t.Errorf("%s: deletion grace %d s, want the hard threshold's 1", name, g)
	}
	poll(t, name+" to go", 30*time.Second, func() (bool, string) { return gone(t, n, "default", name) })
	evs := evictedEvents(t, n, "default", name)
	if len(evs) == 0 || evs[0].Source.Component != "evictd" || evs[0].Source.Host != n.Name() {
		t.Errorf("%s: Evicted events %+v, want one from evictd on %s", name, evs, n.Name())
	}
	if line := localStop("default/"+name, func() string { return podLog(t, n, evictd) }); line == "" {
		t.Errorf("evictd's pod did not stop %s's containers itself:\n%s", name, podLog(t, n, evictd))
	} else {
		t.Logf("%s: evictd's local stop: %s", name, line)
	}
	if k := oomKills(t, n) - before; k != 0 {
		t.Errorf("the kernel OOM-killed %d processes in kubepods before evictd's eviction took effect", k)
	}
	alive(t, n, evictd.Namespace, evictd.Name)
	if errs := logLinesOf(t, n, evictd, `"level":"ERROR"`); len(errs) != 0 {
		t.Errorf("evictd's pod %s logged errors: %v", evictd.Name, errs)
	}
}

// importEvictdImage builds evictd's image for this machine's architecture
// from the binary under test with hack/image, as `make image` does, and
// imports it into the node's containerd as dsImage.
func importEvictdImage(t *testing.T, n *testnode.Node) {
	t.Helper()
	bin := os.Getenv(testnode.EnvEvictdBin)
	if bin == "" {
		t.Fatalf("%s is not set: the image is built from the binary under test (make e2e sets it)", testnode.EnvEvictdBin)
	}
	dist := t.TempDir()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dist, "evictd-e2e-linux-"+runtime.GOARCH), data, 0o755); err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(dsImage, ":")
	cmd := exec.Command("go", "run", "../../hack/image", "-version", tag, "-repo", repo, "-dist", dist, "-arch", runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/image: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := n.Runtime().ImportArchive(ctx, filepath.Join(dist, "evictd-image-"+tag+".oci.tar"), dsImage); err != nil {
		t.Fatal(err)
	}
}

// daemonSetManifest reads deploy/daemonset.yaml and sets what differs on
// the test node; args are added to evictd's.
func daemonSetManifest(t *testing.T, n *testnode.Node, addr string, args ...string) (*v1.ConfigMap, *appsv1.DaemonSet) {
	t.Helper()
	var (
		cm *v1.ConfigMap
		ds *appsv1.DaemonSet
	)
	data, err := os.ReadFile(daemonSetFile)
	if err != nil {
		t.Fatal(err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", daemonSetFile, err)
		}
		var probe map[string]any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			t.Fatalf("%s: %v", daemonSetFile, err)
		}
		if len(probe) == 0 { // comments alone
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", daemonSetFile, err)
		}
		switch o := obj.(type) {
		case *v1.ConfigMap:
			cm = o
		case *appsv1.DaemonSet:
			ds = o
		default:
			t.Fatalf("%s: unexpected %T", daemonSetFile, obj)
		}
	}
	if cm == nil || ds == nil {
		t.Fatalf("%s: want a ConfigMap and a DaemonSet", daemonSetFile)
	}

	// The kubeconfig: the test API server's address.
	kc := cm.Data["kubeconfig"]
	if !strings.Contains(kc, "server: https://kubernetes.default.svc\n") {
		t.Fatalf("%s: the kubeconfig's server line is not the one the test replaces:\n%s", daemonSetFile, kc)
	}
	cm.Data["kubeconfig"] = strings.Replace(kc, "https://kubernetes.default.svc", n.Cluster().URL(), 1)

	spec := &ds.Spec.Template.Spec
	ctr := &spec.Containers[0]
	ctr.Image = dsImage
	ctr.ImagePullPolicy = v1.PullNever
	hostPaths := map[string]string{
		"kubelet-root":   n.RootDir(),
		"pod-logs":       n.PodLogsDir(),
		"runtime-socket": filepath.Dir(n.Runtime().Socket()),
		"runtime-root":   n.Runtime().RootDir(),
	}
	for i := range spec.Volumes {
		vol := &spec.Volumes[i]
		p, ok := hostPaths[vol.Name]
		if !ok {
			continue
		}
		if vol.HostPath == nil {
			t.Fatalf("%s: volume %s is not a hostPath", daemonSetFile, vol.Name)
		}
		vol.HostPath.Path = p
		delete(hostPaths, vol.Name)
		for j := range ctr.VolumeMounts {
			if ctr.VolumeMounts[j].Name == vol.Name {
				ctr.VolumeMounts[j].MountPath = p
			}
		}
	}
	if len(hostPaths) != 0 {
		t.Fatalf("%s: volumes %v not found", daemonSetFile, hostPaths)
	}

	// evictd's flags: the node's paths and allocatable settings, as
	// EvictdFlags gives them, and the metrics port; the kubeconfig, node
	// name and host roots stay the manifest's.
	set := map[string]string{"--metrics-bind-address": addr}
	var extra []string
	for _, f := range n.EvictdFlags() {
		name, _, _ := strings.Cut(f, "=")
		switch name {
		case "--kubeconfig", "--hostname-override":
		case "--root-dir", "--pod-logs-dir", "--container-runtime-endpoint":
			set[name] = f[len(name)+1:]
		default:
			extra = append(extra, f)
		}
	}
	for i, a := range ctr.Args {
		name, _, _ := strings.Cut(a, "=")
		if v, ok := set[name]; ok {
			ctr.Args[i] = name + "=" + v
			delete(set, name)
		}
	}
	if len(set) != 0 {
		t.Fatalf("%s: flags %v not found among evictd's args %v", daemonSetFile, set, ctr.Args)
	}
	ctr.Args = append(append(ctr.Args, extra...), args...)
	// --kubeconfig-in-cluster: the kubelet's KUBERNETES_SERVICE_* name
	// the kubernetes Service's ClusterIP, which nothing routes on the
	// test node; the container's own variables take precedence.
	if slices.Contains(ctr.Args, "--kubeconfig-in-cluster") {
		u, err := url.Parse(n.Cluster().URL())
		if err != nil {
			t.Fatal(err)
		}
		ctr.Env = append(ctr.Env, v1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: u.Hostname()}, v1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: u.Port()})
	}
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	for _, probe := range []*v1.Probe{ctr.LivenessProbe, ctr.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			t.Fatalf("%s: want HTTP liveness and readiness probes", daemonSetFile)
		}
		probe.HTTPGet.Port.IntVal = int32(p)
	}
	return cm, ds
}

// waitEvictdPod waits until the DaemonSet's pod, other than the one of UID
// old, is ready on n, and returns it.
func waitEvictdPod(t *testing.T, n *testnode.Node, ds *appsv1.DaemonSet, old types.UID) *v1.Pod {
	t.Helper()
	var ready *v1.Pod
	sel := metav1.FormatLabelSelector(ds.Spec.Selector)
	poll(t, "evictd's DaemonSet pod to be ready", 120*time.Second, func() (bool, string) {
		pods, err := n.Admin().CoreV1().Pods(ds.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for i := range pods.Items {
			p := &pods.Items[i]
			seen = append(seen, podSummary(p))
			if p.UID == old || p.DeletionTimestamp != nil || p.Spec.NodeName != n.Name() {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
					ready = p
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("pods: %v", seen)
	})
	return ready
}

// deleteDaemonSet removes the DaemonSet and its ConfigMap and waits until
// its pods are gone (they are not labelled e2e=yes, which cleanPods
// removes).
func deleteDaemonSet(t *testing.T, n *testnode.Node, ds *appsv1.DaemonSet, cm *v1.ConfigMap) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := n.Admin()
	if t.Failed() {
		pods, _ := c.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
		for i := range pods.Items {
			t.Logf("evictd's pod %s, its log:\n%s", podSummary(&pods.Items[i]), podLog(t, n, &pods.Items[i]))
		}
	}
	zero := int64(0)
	if err := c.AppsV1().DaemonSets(ds.Namespace).Delete(ctx, ds.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete DaemonSet %s: %v", ds.Name, err)
	}
	_ = c.CoreV1().Pods(ds.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
		metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
	if err := c.CoreV1().ConfigMaps(cm.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete ConfigMap %s: %v", cm.Name, err)
	}
	for {
		pods, err := c.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
		if err == nil && len(pods.Items) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("evictd's DaemonSet pods still there after 90 s: %v", err)
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// podLog is the log of the pod's first container, read from the kubelet's
// pod log directory.
func podLog(t *testing.T, n *testnode.Node, p *v1.Pod) string {
	t.Helper()
	dir := filepath.Join(n.PodLogsDir(), p.Namespace+"_"+p.Name+"_"+string(p.UID), p.Spec.Containers[0].Name)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	var b strings.Builder
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			fmt.Fprintf(&b, "(%s: %v)\n", e.Name(), err)
			continue
		}
		b.Write(data)
	}
	return b.String()
}

// logLinesOf returns the message and source of each line of the pod's log
// that holds s.
func logLinesOf(t *testing.T, n *testnode.Node, p *v1.Pod, s string) []string {
	var out []string
	for _, l := range strings.Split(podLog(t, n, p), "\n") {
		if strings.Contains(l, s) {
			if i := strings.Index(l, `"source":`); i >= 0 {
				l = l[i:]
			}
			out = append(out, l)
		}
	}
	return out
}
