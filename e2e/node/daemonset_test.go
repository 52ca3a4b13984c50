package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/testing/testcluster"
	"github.com/evictd/evictd/internal/testing/testnode"
)

// chartDir is evictd's Helm chart, the source of deploy/*.yaml.
const chartDir = "../../deploy/chart/evictd"

// dsImage is the reference the test imports evictd's image under.
const dsImage = "evictd.test/evictd:e2e"

// dsNamespace and dsAccount are where the chart installs evictd in this
// test: not kube-system/evictd, so that the namespace and the account
// name are seen to reach every object, the admission policy's included.
const (
	dsNamespace = "evictd-e2e"
	dsAccount   = "node-evictd"
)

// TestDaemonSetNode runs evictd only as the DaemonSet of its Helm chart,
// rendered by the real helm into namespace evictd-e2e with ServiceAccount
// node-evictd and applied server-side with every other object of the chart
// (RBAC, admission policy, FlowSchema), its image built by hack/image from
// the binary under test and imported into the node's containerd, on a real
// node: the kubelet runs it with its projected token, it evicts a memory
// hog on a hard threshold (its containers stopped through the runtime from
// inside the pod) and is never its own victim; whoever holds every
// connection of its metrics port for longer than the liveness probe's
// failureThreshold × periodSeconds neither restarts it nor makes it
// unready, the probes asking a port of their own; its pod deleted, the
// DaemonSet's next pod takes over and evicts the next hog. With default
// values the chart renders deploy/*.yaml (deploy's TestManifestsCurrent).
//
// The values are the chart's but for what differs on the test node, as an
// operator would set them: the image, the API server's address, the
// kubelet's, pod logs' and containerd's paths, the metrics and probes'
// ports, and, in the values' config (evictd's configuration file, the
// ConfigMap evictd-config), the test node's cgroup root, allocatable
// settings and threshold.
func TestDaemonSetNode(t *testing.T) {
	n := testnode.StartForTest(t, testnode.Options{Name: "e2e-daemonset"})
	importEvictdImage(t, n, "")
	evictdDaemonSet(t, n, n.Cluster().AdminConfig(), n.Cluster().URL(), nativeScale)
}

// evictdDaemonSet is TestDaemonSetNode on n, whose evictd image is imported,
// with admin the API server's admin, apiServer its address from the
// node's host network (evictd's pod's), and the hogs sized by sc.
func evictdDaemonSet(t *testing.T, n *testnode.Node, admin *rest.Config, apiServer string, sc memoryScale) {
	ports, err := testcluster.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	objs := renderChart(t, n, ports[0], ports[1], map[string]any{
		"evictionHard":                     map[string]any{"memory.available": sc.quantity(500)},
		"evictionPressureTransitionPeriod": "5s",
	})
	var (
		cms []*v1.ConfigMap
		ds  *appsv1.DaemonSet
	)
	for _, o := range objs {
		switch o.GetKind() {
		case "ConfigMap":
			cm := &v1.ConfigMap{}
			if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(o.Object, cm); err != nil {
				t.Fatal(err)
			}
			cms = append(cms, cm)
		case "DaemonSet":
			ds = &appsv1.DaemonSet{}
			if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ds); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(cms) != 2 || ds == nil || ds.Namespace != dsNamespace || ds.Spec.Template.Spec.ServiceAccountName != dsAccount {
		t.Fatalf("the chart rendered no ConfigMaps (the kubeconfig, evictd's configuration) and DaemonSet of %s/%s", dsNamespace, dsAccount)
	}
	var configFile string
	for _, cm := range cms {
		if cm.Name == "evictd-config" {
			configFile = cm.Data["config.yaml"]
		}
	}
	// Nothing routes the kubernetes Service's ClusterIP on the test node
	// (no kube-proxy): the container's own KUBERNETES_SERVICE_HOST and
	// _PORT, which take the place of those the kubelet sets, name the
	// test API server, as the Service's would on a cluster.
	u, err := url.Parse(apiServer)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		ctrs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		ctr := ctrs[0].(map[string]any)
		env, _ := ctr["env"].([]any)
		ctr["env"] = append(env,
			map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": u.Hostname()},
			map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": u.Port()})
		if err := unstructured.SetNestedSlice(o.Object, ctrs, "spec", "template", "spec", "containers"); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(configFile, "\nkubeconfigInCluster: true\n") || !slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--config=/etc/evictd/config.yaml") {
		t.Errorf("the chart's DaemonSet runs evictd with args %v, configuration file:\n%s\nwant --config naming it, with kubeconfigInCluster: true",
			ds.Spec.Template.Spec.Containers[0].Args, configFile)
	}
	applyAll(t, n, admin, objs)
	t.Cleanup(func() { deleteDaemonSet(t, n, ds, cms) })

	first := waitEvictdPod(t, n, ds, "")
	// From inside its pod evictd arms what it arms on the host: the
	// memory cgroups' notifications (event_control written through the
	// cgroup mount) and the PSI trigger (through /proc/pressure).
	wakeups := logLinesOf(t, n, first, "wake-up source active")
	t.Logf("evictd's pod %s ready; its wake-up sources: %v", first.Name, wakeups)
	// On cgroup v2 its memory wake-up is kubepods' memory.events, and its
	// PSI trigger where the kernel keeps PSI.
	kinds := []string{`"kind":"memcg"`, `"kind":"psi"`}
	if !onCgroupV1(n) {
		kinds = []string{`"kind":"memory-events"`}
		if _, err := os.Stat("/proc/pressure/memory"); err == nil {
			kinds = append(kinds, `"kind":"psi"`)
		}
	}
	for _, kind := range kinds {
		if !slices.ContainsFunc(wakeups, func(l string) bool { return strings.Contains(l, kind) }) {
			t.Errorf("evictd's pod has no wake-up source of %s", kind)
		}
	}
	evictHog(t, n, "hog", first, sc)
	c, ctx := n.Admin(), t.Context()
	// Its Lease in its own namespace, which the chart's RBAC lets it
	// renew there and nowhere else.
	// It writes it first after its first pass that found the API server
	// (a quarter of --lease-duration at most, with jitter).
	poll(t, "evictd's Lease in "+dsNamespace, 60*time.Second, func() (bool, string) {
		_, err := c.CoordinationV1().Leases(dsNamespace).Get(ctx, "evictd-"+n.Name(), metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	holdMetricsSlots(t, n, ds, first, ports[0])

	// The pod deleted (a rollout, a drain, a crash): the DaemonSet's next
	// pod takes over.
	if err := c.CoreV1().Pods(first.Namespace).Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := waitEvictdPod(t, n, ds, first.UID)
	t.Logf("evictd's next pod %s ready", second.Name)
	evictHog(t, n, "hog2", second, sc)
	for _, p := range []*v1.Pod{first, second} {
		if k := evictions(t, n, p.Namespace, p.Name); k != 0 {
			t.Errorf("evictd's pod %s: %d Evicted events, want 0", p.Name, k)
		}
	}
	cleanPods(t, n)
}

// metricsSlots is how many connections evictd serves at once on its
// metrics address (internal/server's maxConns); more wait in the backlog.
const metricsSlots = 64

// holdMetricsSlots holds every connection slot of evictd's metrics address
// with idle clients, and as many more in its backlog, for two liveness
// periods longer than the kubelet takes to restart a container whose
// liveness probe fails (failureThreshold × periodSeconds), and checks
// meanwhile that evictd's pod stays Ready and its container is never
// restarted, and that the kubelet saw no probe fail: its probes ask the
// probes' own port (--healthz-bind-address). That the slots are held is
// checked too: a probe of the metrics address misses the kubelet's
// timeout.
func holdMetricsSlots(t *testing.T, n *testnode.Node, ds *appsv1.DaemonSet, pod *v1.Pod, metricsPort int) {
	t.Helper()
	metricsAddr := "127.0.0.1:" + strconv.Itoa(metricsPort)
	live := ds.Spec.Template.Spec.Containers[0].LivenessProbe
	if live == nil || live.HTTPGet == nil {
		t.Fatal("the chart's DaemonSet has no httpGet liveness probe")
	}
	if p := live.HTTPGet.Port.IntValue(); p == metricsPort {
		t.Errorf("the liveness probe asks the metrics port %d", p)
	}
	// The kubelet's defaults where the chart sets none.
	period, threshold := live.PeriodSeconds, live.FailureThreshold
	if period == 0 {
		period = 10
	}
	if threshold == 0 {
		threshold = 3
	}
	holdFor := time.Duration(period*(threshold+2)) * time.Second
	unhealthyBefore := unhealthy(t, n, pod)

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 2 * metricsSlots {
		wg.Go(func() { holdIdle(ctx, metricsAddr) })
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	heldSince := time.Now()
	t.Logf("holding %d connections to evictd's metrics address %s for %s (liveness: every %d s, %d failures)",
		2*metricsSlots, metricsAddr, holdFor, period, threshold)

	probed := false
	for time.Since(heldSince) < holdFor {
		if !probed && time.Since(heldSince) > 2*time.Second {
			probed = true
			c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			if resp, err := c.Get("http://" + metricsAddr + "/healthz"); err == nil {
				resp.Body.Close()
				t.Errorf("/healthz on the metrics address answered %d with its slots held: the slots were not held, nothing was tested", resp.StatusCode)
			}
		}
		p, err := n.Admin().CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("evictd's pod %s: %v", pod.Name, err)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount != 0 {
				t.Fatalf("after %s with the metrics slots held: evictd's container %s restarted %d times (%s)", time.Since(heldSince).Round(time.Second), cs.Name, cs.RestartCount, podSummary(p))
			}
		}
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || c.Type == v1.PodReady && c.Status == v1.ConditionTrue
		}
		if !ready {
			t.Fatalf("after %s with the metrics slots held: evictd's pod is not Ready (%s)", time.Since(heldSince).Round(time.Second), podSummary(p))
		}
		time.Sleep(time.Second)
	}
	if k := unhealthy(t, n, pod); k > unhealthyBefore {
		for _, e := range events(t, n, pod.Namespace, "Pod", pod.Name, "Unhealthy") {
			t.Logf("Unhealthy: %s (count %d, last %s)", e.Message, e.Count, e.LastTimestamp)
		}
		t.Errorf("the kubelet's probes of evictd's pod failed while the metrics slots were held: %d Unhealthy events, %d before", k, unhealthyBefore)
	}
}

// unhealthy counts the kubelet's Unhealthy events on the pod (a probe
// failed), their Count added up.
func unhealthy(t *testing.T, n *testnode.Node, pod *v1.Pod) int {
	total := 0
	for _, e := range events(t, n, pod.Namespace, "Pod", pod.Name, "Unhealthy") {
		total += max(int(e.Count), 1)
	}
	return total
}

// holdIdle keeps a connection to addr open and idle until ctx ends: when
// the server closes it (after its 5 s for a request), it dials again.
func holdIdle(ctx context.Context, addr string) {
	var d net.Dialer
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		_, _ = io.Copy(io.Discard, c)
		stop()
		c.Close()
	}
}

// evictHog starts a BestEffort pod that allocates past the hard threshold
// and checks that evictd's pod evicts it with the hard grace period,
// stopping its containers itself, without a kernel OOM kill, and stays.
func evictHog(t *testing.T, n *testnode.Node, name string, evictd *v1.Pod, sc memoryScale) {
	t.Helper()
	oomKilled := watchOOMKills(t, n)
	deleted := watchDeletion(t, n, "default", name)
	// 2300 MiB at 200 MiB/s, as the allocatable scenario.
	hog := labelled(n.Pod(name, "alloc", "--mib", sc.mibArg(2300), "--rate", sc.rateArg(200)))
	if _, err := n.Admin().CoreV1().Pods("default").Create(t.Context(), hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var d deletion
	select {
	case d = <-deleted:
	case <-time.After(sc.wait(90 * time.Second)):
		t.Fatalf("%s not evicted within %s; %d OOM kills in kubepods; evictd's log:\n%s", name, sc.wait(90*time.Second), oomKilled(), podLog(t, n, evictd))
	}
	if g := evictedGrace(t, d, "default", name, func() string { return podLog(t, n, evictd) }); g != 1 {
		t.Errorf("%s: deletion grace %d s, want the hard threshold's 1", name, g)
	}
	poll(t, name+" to go", sc.wait(30*time.Second), func() (bool, string) { return gone(t, n, "default", name) })
	evs := evictedEvents(t, n, "default", name)
	if len(evs) == 0 || evs[0].Source.Component != "evictd" || evs[0].Source.Host != n.Name() {
		t.Errorf("%s: Evicted events %+v, want one from evictd on %s", name, evs, n.Name())
	}
	if line := localStop("default/"+name, func() string { return podLog(t, n, evictd) }); line == "" {
		t.Errorf("evictd's pod did not stop %s's containers itself:\n%s", name, podLog(t, n, evictd))
	} else {
		t.Logf("%s: evictd's local stop: %s", name, line)
	}
	if k := oomKilled(); k != 0 {
		t.Errorf("the kernel OOM-killed %d processes in kubepods before evictd's eviction took effect", k)
	}
	alive(t, n, evictd.Namespace, evictd.Name)
	if errs := logLinesOf(t, n, evictd, `"level":"ERROR"`); len(errs) != 0 {
		t.Errorf("evictd's pod %s logged errors: %v", evictd.Name, errs)
	}
}

// importEvictdImage imports evictd's image into the node's containerd as
// dsImage: from archive, an OCI archive buildEvictdImage wrote, or else
// built here.
func importEvictdImage(t *testing.T, n *testnode.Node, archive string) {
	t.Helper()
	if archive == "" {
		archive = buildEvictdImage(t, t.TempDir())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := n.Runtime().ImportArchive(ctx, archive, dsImage); err != nil {
		t.Fatal(err)
	}
}

// buildEvictdImage builds evictd's image for this machine's architecture
// from the binary under test with hack/image, as `make image` does, in
// dist, and returns the OCI archive's path.
func buildEvictdImage(t *testing.T, dist string) string {
	t.Helper()
	bin := os.Getenv(testnode.EnvEvictdBin)
	if bin == "" {
		t.Fatalf("%s is not set: the image is built from the binary under test (make e2e sets it)", testnode.EnvEvictdBin)
	}
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
	return filepath.Join(dist, "evictd-image-"+tag+".oci.tar")
}

// renderChart renders evictd's chart with the real helm for node n: in
// dsNamespace as dsAccount, the test's image, the node's paths, the
// metrics on loopback at port and the probes' own at healthPort, and in
// the values' config evictd's settings of the test node
// (testnode.EvictdFlags) but those the chart sets, then settings. It
// returns the objects rendered.
func renderChart(t *testing.T, n *testnode.Node, port, healthPort int, settings map[string]any) []*unstructured.Unstructured {
	t.Helper()
	helm, err := testcluster.Binary("helm")
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{}
	for _, f := range n.EvictdFlags() {
		flag, value, _ := strings.Cut(f, "=")
		switch flag {
		case "--kubeconfig", "--hostname-override", "--root-dir", "--pod-logs-dir", "--container-runtime-endpoint", "--state-dir":
			continue
		}
		name, ok := config.FileField(strings.TrimPrefix(flag, "--"))
		if !ok {
			t.Fatalf("the test node's %s has no field in evictd's configuration file", flag)
		}
		switch flag {
		case "--enforce-node-allocatable":
			cfg[name] = strings.Split(value, ",")
		case "--system-reserved":
			m := map[string]any{}
			for _, pair := range strings.Split(value, ",") {
				k, v, _ := strings.Cut(pair, "=")
				m[k] = v
			}
			cfg[name] = m
		default:
			cfg[name] = value
		}
	}
	maps.Copy(cfg, settings)
	repo, tag, _ := strings.Cut(dsImage, ":")
	values := map[string]any{
		"namespace":       dsNamespace,
		"createNamespace": true,
		"serviceAccount":  map[string]any{"name": dsAccount},
		"image":           map[string]any{"repository": repo, "tag": tag, "pullPolicy": "Never"},
		// Not used: evictd reaches the API server at the kubernetes
		// Service's address from the environment (apiServerInCluster,
		// the chart's default), which TestDaemonSetNode gives it.
		"apiServer":      "https://kubeconfig-server-unused.invalid",
		"kubeletRootDir": n.RootDir(),
		"podLogsDir":     n.PodLogsDir(),
		// The node's state directory, mounted from the host at the same
		// path: the flight records land where the host's agent's would.
		"stateDir": n.StateDir(),
		"runtime": map[string]any{
			"endpoint": n.Runtime().Endpoint(),
			"dirs": []map[string]any{
				{"name": "runtime-socket", "path": filepath.Dir(n.Runtime().Socket()), "type": "Directory", "readOnly": false},
				{"name": "runtime-root", "path": n.Runtime().RootDir(), "type": "DirectoryOrCreate", "readOnly": true},
			},
		},
		"metrics": map[string]any{"host": "127.0.0.1", "port": port},
		"health":  map[string]any{"port": healthPort},
		"config":  cfg,
	}
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	// Not in t.TempDir(): its name is the test's, which may hold a comma,
	// where helm's --values splits a list of files.
	f, err := os.CreateTemp("", "evictd-e2e-values-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := f.Name()
	t.Cleanup(func() { os.Remove(file) })
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	version, err := n.Admin().Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(helm, "template", "evictd", chartDir, "--kube-version", version.GitVersion, "--values", file).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("helm template: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("helm template: %v", err)
	}
	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helm template's output: %v", err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("helm template's output: %v", err)
		}
		if len(u.Object) == 0 { // comments alone
			continue
		}
		objs = append(objs, u)
	}
	return objs
}

// applyAll applies objs to n's API server server-side, in their order,
// as the admin (the chart's RBAC and policy replace the ones the test
// cluster applied from deploy/ where they share a name).
func applyAll(t *testing.T, n *testnode.Node, admin *rest.Config, objs []*unstructured.Unstructured) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(n.Admin().Discovery()))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk.Kind, o.GetName(), err)
		}
		body, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if ns := o.GetNamespace(); ns != "" {
			r = dyn.Resource(m.Resource).Namespace(ns)
		}
		force := true
		if _, err := r.Patch(t.Context(), o.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "evictd-e2e", Force: &force, FieldValidation: "Strict"}); err != nil {
			t.Fatalf("server-side apply of %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
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

// deleteDaemonSet removes the DaemonSet and its ConfigMaps and waits until
// its pods are gone (they are not labelled e2e=yes, which cleanPods
// removes).
func deleteDaemonSet(t *testing.T, n *testnode.Node, ds *appsv1.DaemonSet, cms []*v1.ConfigMap) {
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
	for _, cm := range cms {
		if err := c.CoreV1().ConfigMaps(cm.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete ConfigMap %s: %v", cm.Name, err)
		}
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
