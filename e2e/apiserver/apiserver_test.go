package apiserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/nodestatus"
	"github.com/evictd/evictd/internal/testing/testagent"
	"github.com/evictd/evictd/internal/testing/testalloc"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// The end-to-end test: the real agent (the evictd binary, $EVICTD_BIN)
// against a real kube-apiserver, under deploy/rbac.yaml's
// ServiceAccount, with pod memory in real cgroup v1 pod cgroups that the
// test creates and fills. No kubelet runs: the test plays its part (pods
// reported Running, an evicted pod's containers stopped and the pod
// removed).
const (
	e2eNode        = "e2e-node"
	e2eNS          = "e2e"
	kubepodsLimit  = int64(1) << 30 // the kubepods memory limit: allocatableMemory's capacity
	softThreshold  = "allocatableMemory.available<500Mi"
	hardThreshold  = "allocatableMemory.available<250Mi"
	softGrace      = 3 * time.Second
	maxPodGrace    = 5 // --eviction-max-pod-grace-period
	transition     = 5 * time.Second
	heartbeat      = 2 * time.Second
	memCondition   = v1.NodeConditionType("EvictdMemoryPressure")
	memTaint       = "evictd.io/memory-pressure"
	evictdReason   = "EvictionByEvictd" // decide.DisruptionTargetReason
	soft500Message = "The node was low on resource: memory. Threshold quantity: 500Mi, available: "
	hard250Message = "The node was low on resource: memory. Threshold quantity: 250Mi, available: "
	holdMessage    = "no memory threshold is met; one was last observed met at "
	// deadline bounds every wait for something the agent does: generous,
	// because machines under load are slow; the order and the values are
	// what the test asserts.
	deadline = 40 * time.Second
)

// TestAPIServerE2E runs the whole chain: cgroups → signals → thresholds →
// node condition and taint → ranking → Eviction API → pod gone → condition
// cleared, then an API server outage mid-pressure, all under evictd's own
// identity. The subtests build on each other and run in order.
//
// The test's kubelet stops an evicted pod's containers as soon as the pod
// has a deletionTimestamp (its allocators are killed: the memory is
// released at once), records the grace period evictd asked for, and
// removes the pod with grace period 0 once evictd's DisruptionTarget
// condition is on it, or when the grace period ends: containers that exit
// promptly on SIGTERM, as a real kubelet would report them.
func TestAPIServerE2E(t *testing.T) {
	if why := cgroupV1Available(); why != "" {
		t.Skip(why)
	}
	e := newE2E(t)

	if !t.Run("soft threshold evicts the hog only, after the grace period", e.soft) {
		return
	}
	if !t.Run("PDB refusal skips the covered pod for soft, not for hard", e.pdb) {
		return
	}
	if !t.Run("API server outage mid-pressure", e.outage) {
		return
	}
	t.Run("RBAC: evictd is refused nothing it needs, and no more", e.rbac)

	// Across the whole run: exactly the three pods evictd chose got a
	// deletionTimestamp; critical and static pods never did.
	e.checkUntouched(t, e.pod(t, e2eNS, "static"))
	e.checkUntouched(t, e.pod(t, "kube-system", "critical"))
	got := e.evictedNames()
	want := []string{e2eNS + "/hog", e2eNS + "/hog2", e2eNS + "/over"}
	if !slices.Equal(got, want) {
		t.Errorf("pods that got a deletionTimestamp: %v, want exactly %v", got, want)
	}
}

type e2e struct {
	t          *testing.T // the top-level test: cleanups live as long as it
	c          *testcluster.Cluster
	admin      kubernetes.Interface
	sa         kubernetes.Interface // evictd's ServiceAccount token
	cgroupRoot string
	tiers      map[v1.PodQOSClass]string // QoS class → parent cgroup of its pods
	addr       string                    // the agent's metrics address
	logs       *testagent.Log            // the agent's JSON log
	ctx        context.Context

	wg sync.WaitGroup // the fake kubelet's goroutines

	mu         sync.Mutex
	pods       map[string]*v1.Pod               // ns/name → as created
	allocs     map[types.UID][]*testalloc.Child // pod UID → its allocators
	cgroups    map[types.UID]cgroup1.Cgroup     // pod UID → its cgroup
	handled    map[types.UID]bool               // terminating pods taken care of
	ownDeletes map[types.UID]bool               // pods the test deletes itself
	evicted    map[string]*eviction             // ns/name → what the fake kubelet saw
	nodeHist   []nodeObs                        // every version of the node seen
}

// eviction is what the fake kubelet saw of a pod evictd made terminate.
type eviction struct {
	first    *v1.Pod   // the first version with a deletionTimestamp, or evictd's terminal status
	final    *v1.Pod   // the last version read before it went
	seen     time.Time // when first was seen
	released time.Time // when its allocators were killed (memory uncharged)
	// terminal is true when first is evictd's terminal status (phase
	// Failed, not deleted): evictd deletes the pod once the stand-in
	// kubelet has reported its containers stopped.
	terminal bool
}

// nodeObs is one version of the node as the test's informer saw it, or as
// the test read it.
type nodeObs struct {
	at        time.Time
	status    v1.ConditionStatus // of EvictdMemoryPressure; "" when absent
	reason    string
	message   string
	ltt       time.Time
	heartbeat time.Time
	taint     bool
	effect    v1.TaintEffect
}

// newE2E starts the control plane, applies deploy/rbac.yaml, creates the
// node, the kubepods hierarchy and the test's informers, and starts the
// agent with the ServiceAccount's kubeconfig.
func newE2E(t *testing.T) *e2e {
	c := testcluster.StartForTest(t, testcluster.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	admin := c.AdminClient(t)
	e := &e2e{
		t: t, c: c, admin: admin, ctx: ctx,
		pods:       map[string]*v1.Pod{},
		allocs:     map[types.UID][]*testalloc.Child{},
		cgroups:    map[types.UID]cgroup1.Cgroup{},
		handled:    map[types.UID]bool{},
		ownDeletes: map[types.UID]bool{},
		evicted:    map[string]*eviction{},
	}

	// No controller manager runs: the namespaces' default ServiceAccounts,
	// which pod admission looks up, are the test's to create.
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e2eNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", e2eNS, err)
	}
	for _, ns := range []string{e2eNS, "kube-system"} {
		_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create ServiceAccount %s/default: %v", ns, err)
		}
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: e2eNode}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}

	// evictd's identity, from the manifests operators apply (deploy/): a
	// token bound to the node, under RBAC and the admission policy.
	token, err := c.EvictdNodeToken(ctx, e2eNode)
	if err != nil {
		t.Fatal(err)
	}
	if e.sa, err = kubernetes.NewForConfig(c.TokenConfig(token)); err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, e.sa, authorizationv1.ResourceAttributes{Verb: "impersonate-on:associated-node:create", Resource: "pods", Subresource: "eviction"})
	kubeconfig := filepath.Join(t.TempDir(), "evictd.kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig, token); err != nil {
		t.Fatal(err)
	}

	// The test's eyes and the kubelet's hands: an informer on the node
	// (every version, to see each condition change) and one on the node's
	// pods (terminating pods are stopped and removed).
	nodes := informers.NewSharedInformerFactoryWithOptions(admin, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", e2eNode).String()
	}))
	pods := informers.NewSharedInformerFactoryWithOptions(admin, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", e2eNode).String()
	}))
	if _, err := nodes.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    e.onNode,
		UpdateFunc: func(_, cur any) { e.onNode(cur) },
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    e.onPod,
		UpdateFunc: func(_, cur any) { e.onPod(cur) },
		DeleteFunc: e.onPodDeleted,
	}); err != nil {
		t.Fatal(err)
	}
	nodes.Start(ctx.Done())
	pods.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		nodes.Shutdown()
		pods.Shutdown()
		e.wg.Wait()
	})
	for typ, ok := range nodes.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer for %v never synced", typ)
		}
	}
	for typ, ok := range pods.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer for %v never synced", typ)
		}
	}

	// The kubepods hierarchy under a test parent, with the kubepods
	// memory limit that is allocatableMemory.available's capacity.
	e.cgroupRoot = "/evictd-e2e-" + randomID(t)
	kubepods := e.cgroupRoot + "/kubepods"
	newCgroup(t, t, e.cgroupRoot, 0)
	newCgroup(t, t, kubepods, kubepodsLimit)
	e.tiers = map[v1.PodQOSClass]string{
		v1.PodQOSGuaranteed: kubepods,
		v1.PodQOSBurstable:  kubepods + "/burstable",
		v1.PodQOSBestEffort: kubepods + "/besteffort",
	}
	newCgroup(t, t, e.tiers[v1.PodQOSBurstable], 0)
	newCgroup(t, t, e.tiers[v1.PodQOSBestEffort], 0)

	e.addr = testagent.FreeAddr(t)
	args := []string{
		"--kubeconfig", kubeconfig,
		"--hostname-override", e2eNode,
		"--cgroup-root", e.cgroupRoot,
		"--cgroup-driver", "cgroupfs",
		"--root-dir", t.TempDir(),
		"--housekeeping-interval", "1s",
		"--node-status-update-frequency", heartbeat.String(),
		"--node-status-report-frequency", heartbeat.String(),
		"--eviction-pressure-transition-period", transition.String(),
		"--eviction-hard=" + hardThreshold,
		"--eviction-soft=" + softThreshold,
		"--eviction-soft-grace-period=allocatableMemory.available=" + softGrace.String(),
		fmt.Sprintf("--eviction-max-pod-grace-period=%d", maxPodGrace),
		"--metrics-bind-address", e.addr,
		// No container runtime: nothing of this machine's is touched.
		"--container-runtime-endpoint", "unix://" + filepath.Join(t.TempDir(), "no-runtime.sock"),
		"--log-level", "debug",
		// Every line, client-go's too, one JSON object with no key twice:
		// checked once the agent has stopped (cleanups run last first).
		"--log-format", "json",
	}
	// The same flags, checked first, so a rejected configuration says why.
	if out, errOut, code := testagent.Run(t, append([]string{"check-config"}, args...)...); code != 0 ||
		!strings.Contains(out, "500Mi") || !strings.Contains(out, "250Mi") {
		t.Fatalf("check-config: exit %d\n%s%s", code, out, errOut)
	}
	t.Cleanup(func() { testagent.CheckJSONLogs(t, e.logs.String()) })
	_, e.logs = testagent.Start(t, nil, args...)
	testagent.WaitHTTP(t, "http://"+e.addr+"/readyz")

	// The agent's first write: its condition, False, on the node.
	e.waitNode(t, 0, "the initial EvictdMemoryPressure=False", func(o nodeObs) bool { return o.status == v1.ConditionFalse })
	return e
}

// soft: a BestEffort hog crosses the soft threshold (not the hard one).
func (e *e2e) soft(t *testing.T) {
	start := e.histLen()
	steady := e.createPod(t, podSpec{name: "a-steady", qos: v1.PodQOSBurstable, requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")}})
	guaranteed := e.createPod(t, podSpec{name: "guaranteed", qos: v1.PodQOSGuaranteed,
		requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi"), v1.ResourceCPU: resource.MustParse("100m")},
		limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi"), v1.ResourceCPU: resource.MustParse("100m")}})
	// A mirror pod as the node's kubelet creates it: the annotations and a
	// controller ownerReference to the Node.
	node, err := e.admin.CoreV1().Nodes().Get(e.ctx, e2eNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	static := e.createPod(t, podSpec{name: "static", qos: v1.PodQOSBestEffort,
		annotations: map[string]string{"kubernetes.io/config.source": "file", "kubernetes.io/config.mirror": "0123abcd"},
		owners:      []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: e2eNode, UID: node.UID, Controller: ptr.To(true)}}})
	critical := e.createPod(t, podSpec{ns: "kube-system", name: "critical", qos: v1.PodQOSBestEffort, priorityClass: "system-node-critical"})
	if p := critical.Spec.Priority; p == nil || *p != 2000001000 {
		t.Fatalf("pod %s/%s has priority %v, want system-node-critical's 2000001000", critical.Namespace, critical.Name, p)
	}
	hog := e.createPod(t, podSpec{name: "hog", qos: v1.PodQOSBestEffort})
	// 48 + 48 + 24 + 24 = 144 MiB: allocatableMemory.available about
	// 880Mi, no threshold met. a-steady sorts first by name: were its
	// stats (or anyone's) missing, it would rank first and be evicted.
	e.allocate(t, steady, 48)
	e.allocate(t, guaranteed, 48)
	e.allocate(t, static, 24)
	e.allocate(t, critical, 24)
	e.waitAgent(t, "the agent to list the 5 pods", func(st *agentStatus) bool { return st.Pods == 5 })
	if st := e.agentStatus(t); st.Pressures["memory"] || st.threshold(softThreshold).Met {
		t.Fatalf("memory pressure before the hog allocated: %+v", st)
	}

	// The hog: 144 + 450 = 594 MiB used, about 430Mi available: under
	// 500Mi, above 250Mi.
	allocStart := time.Now()
	e.allocate(t, hog, 450)
	allocDone := time.Now()
	st := e.waitAgent(t, "the soft threshold met", func(st *agentStatus) bool { return st.threshold(softThreshold).MetSince != nil })
	metSince := *st.threshold(softThreshold).MetSince
	if st.threshold(hardThreshold).Met {
		t.Fatalf("the hard threshold is met too: the hog should cross the soft one only (status %+v)", st)
	}
	t.Logf("hog allocated 450 MiB in %s; the agent saw %s met at +%s",
		allocDone.Sub(allocStart).Round(time.Millisecond), softThreshold, metSince.Sub(allocStart).Round(time.Millisecond))

	// The node says so at once, grace period or not: condition and taint.
	on := e.waitNode(t, start, "EvictdMemoryPressure=True", func(o nodeObs) bool { return o.status == v1.ConditionTrue })
	if on.reason != "EvictdHasMemoryPressure" || !strings.Contains(on.message, "threshold "+softThreshold+" is met: available ") {
		t.Errorf("condition True: reason %q, message %q; want EvictdHasMemoryPressure and a message naming %s", on.reason, on.message, softThreshold)
	}
	taint := e.waitNode(t, start, "the evictd.io/memory-pressure taint", func(o nodeObs) bool { return o.taint })
	if taint.effect != v1.TaintEffectNoSchedule {
		t.Errorf("taint %s has effect %s, want NoSchedule", memTaint, taint.effect)
	}

	// The eviction: the hog, after the grace period, with the soft
	// grace period min(5, its 30).
	ev := e.waitEviction(t, e2eNS, "hog")
	if got := e.evictedNames(); !slices.Equal(got, []string{e2eNS + "/hog"}) {
		t.Fatalf("pods evicted: %v, want the hog alone", got)
	}
	t.Logf("timing: soft threshold first met → eviction seen: %s (grace period %s)", ev.seen.Sub(metSince).Round(time.Millisecond), softGrace)
	if on.at.After(ev.seen) || taint.at.After(ev.seen) {
		t.Errorf("condition True at %s and taint at %s, eviction seen at %s: the node must say it first", on.at, taint.at, ev.seen)
	}
	e.checkGrace(t, ev, maxPodGrace)
	// The eviction's time, in whole seconds (truncated): the terminal
	// status's DisruptionTarget transition, or deletionTimestamp less the
	// grace period. An eviction at or after metSince+3s is at or after
	// the truncated metSince+3s.
	earliest := metSince.Add(softGrace).Truncate(time.Second)
	if at := issuedAt(ev, maxPodGrace); at.Before(earliest) {
		t.Errorf("eviction issued at %s, before the soft grace period ended (met since %s, grace %s)",
			at.Format(time.RFC3339Nano), metSince.Format(time.RFC3339Nano), softGrace)
	}
	msg := e.checkEvicted(t, ev, soft500Message)
	if avail := availableIn(t, msg, soft500Message); avail >= 500<<20 || avail < 250<<20 {
		t.Errorf("evicted with available %s, want below the soft 500Mi and not below the hard 250Mi", resource.NewQuantity(avail, resource.BinarySI))
	}

	// Pressure clears only after the transition period, once.
	off := e.checkClears(t, start, on, ev)
	t.Logf("timing: eviction seen → condition False: %s (transition period %s)", off.at.Sub(ev.seen).Round(time.Millisecond), transition)

	for _, p := range []*v1.Pod{steady, guaranteed, static, critical} {
		e.checkUntouched(t, p)
	}
	e.checkNoAPIErrors(t)
}

// pdb: a PodDisruptionBudget covers the pod that ranks first. Soft: the
// API refuses (429: no controller computes the budget's status), evictd
// evicts the next pod. Hard: the node comes first, the covered pod goes.
func (e *e2e) pdb(t *testing.T) {
	start := e.histLen()
	min := intstr.FromInt32(1)
	if _, err := e.admin.PolicyV1().PodDisruptionBudgets(e2eNS).Create(e.ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "hog2"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &min,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "hog2"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PodDisruptionBudget: %v", err)
	}
	hog2 := e.createPod(t, podSpec{name: "hog2", qos: v1.PodQOSBestEffort, labels: map[string]string{"app": "hog2"}})
	over := e.createPod(t, podSpec{name: "over", qos: v1.PodQOSBurstable, requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}})
	e.waitAgent(t, "the agent to list the 6 pods", func(st *agentStatus) bool { return st.Pods == 6 })
	before := e.metrics(t)

	// 144 + 250 = 394 MiB: no threshold. Then over, 200 MiB against its
	// 32Mi request: 594 MiB, about 430Mi available. hog2 ranks first
	// (250Mi over its request, over 168Mi), and its budget refuses.
	e.allocate(t, hog2, 250)
	e.allocate(t, over, 200)
	ev := e.waitEviction(t, e2eNS, "over")
	if got := e.evictedNames(); !slices.Equal(got, []string{e2eNS + "/hog", e2eNS + "/over"}) {
		t.Fatalf("pods evicted: %v, want the hog and then over; hog2, covered by a PodDisruptionBudget, must stay for a soft threshold", got)
	}
	e.checkGrace(t, ev, maxPodGrace)
	e.checkEvicted(t, ev, soft500Message)
	blocked := `evictd_evictions_not_issued_total{eviction_signal="allocatableMemory.available",reason="pdb-blocked"}`
	evicted := `evictd_evictions_total{eviction_signal="allocatableMemory.available",result="evicted",signal="allocatableMemory.available"}`
	// evictd counts the eviction once it has seen the pod gone (it polls).
	after := e.waitMetric(t, evicted, before[evicted]+1)
	if after[blocked] < before[blocked]+1 {
		t.Errorf("%s went from %v to %v, want at least one refusal counted", blocked, before[blocked], after[blocked])
	}
	t.Logf("soft: hog2 refused by its budget %v time(s), over evicted instead", after[blocked]-before[blocked])

	// Hard: hog2 takes 450 MiB more: 144 + 700 = 844 MiB, about 180Mi
	// available, under 250Mi. The node comes first: evictd marks and
	// deletes hog2 with the hard grace period, 1s, whatever its budget.
	hardStart := time.Now()
	e.allocate(t, hog2, 450)
	ev2 := e.waitEviction(t, e2eNS, "hog2")
	t.Logf("timing: hard threshold crossed → hog2 terminating: %s", ev2.seen.Sub(hardStart).Round(time.Millisecond))
	e.checkGrace(t, ev2, 1)
	msg := e.checkEvicted(t, ev2, hard250Message)
	if avail := availableIn(t, msg, hard250Message); avail >= 250<<20 {
		t.Errorf("hard eviction with available %s, want below 250Mi", resource.NewQuantity(avail, resource.BinarySI))
	}
	if _, err := e.admin.PolicyV1().PodDisruptionBudgets(e2eNS).Get(e.ctx, "hog2", metav1.GetOptions{}); err != nil {
		t.Errorf("the PodDisruptionBudget should still be there: %v", err)
	}
	final := e.waitMetric(t, evicted, after[evicted]+1)
	if final[blocked] != after[blocked] {
		t.Errorf("%s went from %v to %v with the hard threshold: a hard eviction is not blocked", blocked, after[blocked], final[blocked])
	}

	// One pressure episode: True once, False once, after the transition.
	on := e.firstChange(t, start, v1.ConditionTrue)
	e.checkClears(t, start, on, ev2)
	e.checkNoAPIErrors(t)
}

// outage: under pressure that no eviction can relieve (only critical and
// static pods left), kube-apiserver stops; the pressure ends while it is
// away; the node shows it soon after the API server returns.
func (e *e2e) outage(t *testing.T) {
	// The test, as an operator, removes the two evictable pods left.
	for _, name := range []string{"a-steady", "guaranteed"} {
		e.mu.Lock()
		e.ownDeletes[e.pods[e2eNS+"/"+name].UID] = true
		e.mu.Unlock()
		if err := e.admin.CoreV1().Pods(e2eNS).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatalf("delete pod %s: %v", name, err)
		}
	}
	e.waitAgent(t, "the agent to list the 2 critical pods left", func(st *agentStatus) bool { return st.Pods == 2 })
	start := e.histLen()

	// 48 + 600 = 648 MiB, about 376Mi available: soft pressure, nothing
	// evictable.
	critical := e.pod(t, "kube-system", "critical")
	load := e.allocate(t, critical, 600)
	e.waitNode(t, start, "EvictdMemoryPressure=True", func(o nodeObs) bool { return o.status == v1.ConditionTrue })
	e.waitNode(t, start, "the taint", func(o nodeObs) bool { return o.taint })
	e.waitAgent(t, "a decision that no pod may be evicted", func(st *agentStatus) bool {
		return st.Decision.Outcome == "none-evictable"
	})
	e.checkNoAPIErrors(t)

	if err := e.c.StopAPIServer(); err != nil {
		t.Fatalf("stop kube-apiserver: %v", err)
	}
	stopped := time.Now()
	restarted := false
	defer func() {
		if !restarted {
			if err := e.c.StartAPIServer(); err != nil {
				t.Errorf("start kube-apiserver again: %v", err)
			}
		}
	}()
	// The agent keeps passing and stays ready.
	st1 := e.agentStatus(t)
	// lastMet is the latest pass seen with the soft threshold met.
	var lastMet time.Time
	e.waitAgent(t, "two more seconds of passes without the API server", func(st *agentStatus) bool {
		e.checkReady(t)
		if st.threshold(softThreshold).Met {
			lastMet = st.Time
		}
		return st.Time.Sub(st1.Time) >= 2*time.Second && st.Pressures["memory"]
	})
	// The pressure ends while the API server is away.
	load.Kill()
	released := time.Now()
	cleared := e.waitAgent(t, "the agent to see the pressure end", func(st *agentStatus) bool {
		e.checkReady(t)
		if st.threshold(softThreshold).Met {
			lastMet = st.Time
		}
		return !st.Pressures["memory"]
	})
	t.Logf("outage: memory released %s after the stop; the agent cleared the pressure %s later, %s after the last pass it saw a threshold met (transition period %s)",
		released.Sub(stopped).Round(time.Millisecond), cleared.Time.Sub(released).Round(time.Millisecond),
		cleared.Time.Sub(lastMet).Round(time.Millisecond), transition)
	if cleared.Time.Before(lastMet.Add(transition)) {
		t.Errorf("the agent cleared the pressure at %s, before the transition period %s after the last pass that met a threshold (%s)",
			cleared.Time.Format(time.RFC3339Nano), transition, lastMet.Format(time.RFC3339Nano))
	}

	if err := e.c.StartAPIServer(); err != nil {
		t.Fatalf("start kube-apiserver again: %v", err)
	}
	restarted = true
	back := time.Now()
	// The node catches up: read it directly, not through the informer,
	// whose own reconnection is not what is measured.
	var caughtUp time.Time
	poll(t, deadline, "the node to show EvictdMemoryPressure=False and no taint after the API server returned", func() (bool, error) {
		n, err := e.admin.CoreV1().Nodes().Get(e.ctx, e2eNode, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		o := observe(n)
		e.record(o)
		if o.status == v1.ConditionFalse && !o.taint {
			caughtUp = time.Now()
			return true, nil
		}
		return false, nil
	})
	t.Logf("timing: API server back (ready after %s down) → node condition False and taint removed: %s",
		back.Sub(stopped).Round(time.Millisecond), caughtUp.Sub(back).Round(time.Millisecond))
	// The retries back off with jitter (so that a fleet does not write
	// all at once when its API server returns): at most twice the cap
	// between two attempts.
	if lag, most := caughtUp.Sub(back), 2*nodestatus.DefaultRetry.Cap+heartbeat; lag > most {
		t.Errorf("the node caught up %s after the API server returned, want within the longest retry delay and a heartbeat (%s)", lag, most)
	}

	// One True → False (the versions the informer saw before the outage
	// and the ones read since), and the transition event, emitted late,
	// says when it happened.
	if got := e.changes(start); !equalChanges(got, v1.ConditionTrue, v1.ConditionFalse) {
		t.Errorf("condition changes during the outage scenario: %s, want True then False", showChanges(got))
	}
	poll(t, deadline, "a late EvictdNoMemoryPressure node event", func() (bool, error) {
		for _, ev := range e.nodeEvents(t) {
			if ev.Reason == "EvictdNoMemoryPressure" && ev.Type == v1.EventTypeNormal && strings.Contains(ev.Message, "reported late") {
				return true, nil
			}
		}
		return false, nil
	})
}

// rbac: evictd's API errors happened only while the API server was away,
// its transitions all got their node events, and its token is not an
// admin's.
func (e *e2e) rbac(t *testing.T) {
	errs := e.apiErrors(t)
	t.Logf("API errors counted during the outage, by verb: %v", errs)
	for verb := range errs {
		if !strings.HasPrefix(verb, "node_") && verb != string(metrics.APILeaseRenew) {
			t.Errorf("API error on %q: only the node status writer and the Lease had anything to write during the outage", verb)
		}
	}
	// Two more heartbeats after the catch-up: no new error.
	n, err := e.admin.CoreV1().Nodes().Get(e.ctx, e2eNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hb := observe(n).heartbeat
	poll(t, deadline, "two more heartbeats", func() (bool, error) {
		n, err := e.admin.CoreV1().Nodes().Get(e.ctx, e2eNode, metav1.GetOptions{})
		return err == nil && observe(n).heartbeat.Sub(hb) >= 2*heartbeat, nil
	})
	if now := e.apiErrors(t); !mapsEqual(now, errs) {
		t.Errorf("API errors after the API server returned: %v, were %v", now, errs)
	}
	m := e.metrics(t)
	if f := m[`evictd_evictions_not_issued_total{eviction_signal="allocatableMemory.available",reason="failed"}`]; f != 0 {
		t.Errorf("%v failed evictions", f)
	}

	// Every pressure transition got its node event: three episodes.
	poll(t, deadline, "three Warning and three Normal node events", func() (bool, error) {
		var warn, normal int32
		for _, ev := range e.nodeEvents(t) {
			switch {
			case ev.Reason == "EvictdMemoryPressure" && ev.Type == v1.EventTypeWarning:
				warn += max(ev.Count, 1)
			case ev.Reason == "EvictdNoMemoryPressure" && ev.Type == v1.EventTypeNormal:
				normal += max(ev.Count, 1)
			}
		}
		if warn > 3 || normal > 3 {
			return false, fmt.Errorf("%d Warning and %d Normal transition events for three pressure episodes", warn, normal)
		}
		return warn == 3 && normal == 3, nil
	})

	// Not an admin: no secrets, no writing of pods' specs.
	_, err = e.sa.CoreV1().Secrets("kube-system").List(e.ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("evictd's ServiceAccount listing secrets: got %v, want 403 Forbidden", err)
	}
	_, err = e.sa.CoreV1().Pods(e2eNS).Create(e.ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "intruder"},
		Spec:       v1.PodSpec{NodeName: e2eNode, Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("evictd's ServiceAccount creating a pod: got %v, want 403 Forbidden", err)
	}
}

// ---- pods, cgroups, allocators ----

type podSpec struct {
	ns, name            string
	qos                 v1.PodQOSClass // what the API server must compute
	labels, annotations map[string]string
	owners              []metav1.OwnerReference
	requests, limits    v1.ResourceList
	priorityClass       string
}

// createPod creates a pod bound to the node (no kubelet: the test reports
// it Running and Ready), checks the QoS class the API server gave it, and
// creates its pod cgroup where the kubelet's cgroupfs driver would.
func (e *e2e) createPod(t *testing.T, s podSpec) *v1.Pod {
	t.Helper()
	if s.ns == "" {
		s.ns = e2eNS
	}
	pod, err := e.admin.CoreV1().Pods(s.ns).Create(e.ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Labels: s.labels, Annotations: s.annotations, OwnerReferences: s.owners},
		Spec: v1.PodSpec{
			NodeName:                     e2eNode,
			AutomountServiceAccountToken: ptr.To(false),
			PriorityClassName:            s.priorityClass,
			Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: s.requests, Limits: s.limits}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", s.ns, s.name, err)
	}
	if pod.Status.QOSClass != s.qos {
		t.Fatalf("pod %s/%s: the API server gave QoS class %q, want %q", s.ns, s.name, pod.Status.QOSClass, s.qos)
	}
	now := metav1.Now()
	pod.Status.Phase = v1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: now},
	}
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", Image: "registry.k8s.io/pause:3.10", Ready: true,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}}}}
	if pod, err = e.admin.CoreV1().Pods(s.ns).UpdateStatus(e.ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("report pod %s/%s running: %v", s.ns, s.name, err)
	}
	cg := newCgroup(t, e.t, e.tiers[pod.Status.QOSClass]+"/pod"+string(pod.UID), 0)
	e.mu.Lock()
	e.pods[s.ns+"/"+s.name] = pod
	e.cgroups[pod.UID] = cg
	e.mu.Unlock()
	return pod
}

func (e *e2e) pod(t *testing.T, ns, name string) *v1.Pod {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.pods[ns+"/"+name]
	if p == nil {
		t.Fatalf("no pod %s/%s", ns, name)
	}
	return p
}

// allocate starts an allocator of mib MiB in the pod's cgroup and returns
// once the memory is charged.
func (e *e2e) allocate(t *testing.T, pod *v1.Pod, mib int) *testalloc.Child {
	t.Helper()
	e.mu.Lock()
	cg := e.cgroups[pod.UID]
	e.mu.Unlock()
	// Recorded before it allocates: evictd may evict the pod the moment
	// the memory is charged, and the stand-in kubelet must find it then.
	a := testalloc.Start(t, e.t, allocEnv, mib)
	if err := cg.AddProc(uint64(a.PID())); err != nil {
		t.Fatalf("move allocator %d into the cgroup of %s: %v", a.PID(), pod.Name, err)
	}
	e.mu.Lock()
	e.allocs[pod.UID] = append(e.allocs[pod.UID], a)
	e.mu.Unlock()
	a.Allocate(t)
	return a
}

// stopContainers kills the pod's allocators: its memory is uncharged when
// this returns.
func (e *e2e) stopContainers(uid types.UID) {
	e.mu.Lock()
	as := e.allocs[uid]
	delete(e.allocs, uid)
	e.mu.Unlock()
	for _, a := range as {
		a.Kill()
	}
}

// ---- the kubelet's part ----

// onPod plays the kubelet for a pod that has got a deletionTimestamp: its
// containers stop at once (the allocators are killed, so the memory is
// released), and the pod is removed with grace period 0 as soon as
// evictd's DisruptionTarget condition is on it, or when its grace period
// ends, whichever comes first. Waiting for the condition stands for the
// time a real kubelet takes to stop containers and report it; the grace
// period evictd asked for is recorded from the first terminating version.
func (e *e2e) onPod(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.DeletionTimestamp == nil && !evictedByStatus(pod) {
		return
	}
	e.mu.Lock()
	if e.handled[pod.UID] || e.ownDeletes[pod.UID] {
		e.mu.Unlock()
		return
	}
	e.handled[pod.UID] = true
	e.mu.Unlock()
	ev := &eviction{first: pod.DeepCopy(), seen: time.Now(), terminal: pod.DeletionTimestamp == nil}
	e.wg.Go(func() { e.terminate(ev) })
}

func (e *e2e) terminate(ev *eviction) {
	pod := ev.first
	ref := pod.Namespace + "/" + pod.Name
	e.stopContainers(pod.UID)
	ev.released = time.Now()
	ev.final = pod
	if ev.terminal {
		// evictd's terminal status: the containers stopped, the kubelet
		// reports so, and evictd deletes the pod.
		if err := reportStopped(e.ctx, e.admin, pod); err != nil && e.ctx.Err() == nil {
			e.t.Errorf("fake kubelet: report the containers of %s stopped: %v", ref, err)
		}
		final, gone := awaitGone(e.ctx, e.admin, pod, time.Minute)
		ev.final = final
		if !gone && e.ctx.Err() == nil {
			e.t.Errorf("%s: not deleted within a minute of its containers' reported stop (evictd deletes it)", ref)
		}
		e.mu.Lock()
		e.evicted[ref] = ev
		e.mu.Unlock()
		return
	}
	until := pod.DeletionTimestamp.Time
	for e.ctx.Err() == nil && time.Now().Before(until) {
		cur, err := e.admin.CoreV1().Pods(pod.Namespace).Get(e.ctx, pod.Name, metav1.GetOptions{})
		if err == nil && cur.UID == pod.UID {
			ev.final = cur
			if c := podCondition(cur, v1.DisruptionTarget); c != nil && c.Reason == evictdReason {
				break
			}
		}
		select { // poll interval
		case <-e.ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	if e.ctx.Err() != nil {
		return
	}
	err := e.admin.CoreV1().Pods(pod.Namespace).Delete(e.ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && e.ctx.Err() == nil {
		e.t.Errorf("fake kubelet: remove %s: %v", ref, err)
	}
	e.mu.Lock()
	e.evicted[ref] = ev
	e.mu.Unlock()
}

// onPodDeleted stops the containers of a pod removed without a grace
// period (the test's own deletions).
func (e *e2e) onPodDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if pod, ok := obj.(*v1.Pod); ok {
		e.stopContainers(pod.UID)
	}
}

// waitEviction waits until the fake kubelet has removed the pod evictd
// made terminate.
func (e *e2e) waitEviction(t *testing.T, ns, name string) *eviction {
	t.Helper()
	var ev *eviction
	poll(t, deadline, "the eviction of "+ns+"/"+name, func() (bool, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		ev = e.evicted[ns+"/"+name]
		return ev != nil, nil
	})
	return ev
}

// evictedNames lists, sorted, the pods that got a deletionTimestamp.
func (e *e2e) evictedNames() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var names []string
	for uid := range e.handled {
		for ref, p := range e.pods {
			if p.UID == uid {
				names = append(names, ref)
			}
		}
	}
	sort.Strings(names)
	return names
}

// checkGrace checks the grace period evictd asked for.
func (e *e2e) checkGrace(t *testing.T, ev *eviction, want int64) {
	t.Helper()
	if ev.terminal {
		// The grace period of evictd's stop: its log line of the eviction.
		var got int64 = -1
		poll(t, deadline, "evictd's log line of the eviction of "+ev.first.Name, func() (bool, error) {
			got = loggedGrace(e.logs.String(), ev.first.Namespace, ev.first.Name)
			return got >= 0, nil
		})
		if got != want {
			t.Errorf("pod %s/%s: evicted with grace period %d s, want %d", ev.first.Namespace, ev.first.Name, got, want)
		}
		return
	}
	if got := ev.first.DeletionGracePeriodSeconds; got == nil || *got != want {
		t.Errorf("pod %s/%s: deletionGracePeriodSeconds %v, want %d", ev.first.Namespace, ev.first.Name, ptr.Deref(got, -1), want)
	}
}

// checkEvicted checks the pod's DisruptionTarget condition and its Warning
// Evicted event, and returns the message they share.
func (e *e2e) checkEvicted(t *testing.T, ev *eviction, prefix string) string {
	t.Helper()
	pod := ev.final
	ref := pod.Namespace + "/" + pod.Name
	c := podCondition(pod, v1.DisruptionTarget)
	if c == nil || c.Status != v1.ConditionTrue || c.Reason != evictdReason || !strings.HasPrefix(c.Message, prefix) {
		t.Errorf("pod %s: DisruptionTarget condition %+v, want True, reason %s, message starting %q", ref, c, evictdReason, prefix)
	}
	var msg string
	if c != nil {
		msg = c.Message
	}
	sel := fields.Set{"involvedObject.uid": string(pod.UID), "reason": "Evicted"}.AsSelector().String()
	var events []v1.Event
	poll(t, deadline, "the Evicted event of "+ref, func() (bool, error) {
		l, err := e.admin.CoreV1().Events(pod.Namespace).List(e.ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false, nil
		}
		events = l.Items
		return len(events) > 0, nil
	})
	if len(events) != 1 {
		t.Errorf("pod %s: %d Evicted events, want 1: %+v", ref, len(events), events)
	}
	got := events[0]
	if got.Type != v1.EventTypeWarning || got.Source.Component != "evictd" || got.Source.Host != e2eNode || got.Message != msg {
		t.Errorf("pod %s: Evicted event type %s, source %+v, message %q; want Warning from evictd on %s with the condition's message %q",
			ref, got.Type, got.Source, got.Message, e2eNode, msg)
	}
	// No container stats come from bare pod cgroups, so no container is
	// named; the annotations are there all the same.
	for k, want := range map[string]string{"offending_containers": "", "offending_containers_usage": "", "starved_resource": "memory"} {
		if v, ok := got.Annotations[k]; !ok || v != want {
			t.Errorf("pod %s: Evicted event annotation %s = %q (present %v), want %q", ref, k, v, ok, want)
		}
	}
	return msg
}

// checkUntouched checks the pod is still there and not terminating.
func (e *e2e) checkUntouched(t *testing.T, p *v1.Pod) {
	t.Helper()
	cur, err := e.admin.CoreV1().Pods(p.Namespace).Get(e.ctx, p.Name, metav1.GetOptions{})
	switch {
	case err != nil:
		t.Errorf("pod %s/%s should be untouched: %v", p.Namespace, p.Name, err)
	case cur.UID != p.UID || cur.DeletionTimestamp != nil:
		t.Errorf("pod %s/%s should be untouched: UID %s (was %s), deletionTimestamp %v", p.Namespace, p.Name, cur.UID, p.UID, cur.DeletionTimestamp)
	}
}

// ---- the node ----

func (e *e2e) onNode(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok || n.Name != e2eNode {
		return
	}
	e.record(observe(n))
}

// record adds a version of the node to the history: the informer's, or
// one the test read itself.
func (e *e2e) record(o nodeObs) {
	e.mu.Lock()
	e.nodeHist = append(e.nodeHist, o)
	e.mu.Unlock()
}

func (o nodeObs) String() string {
	taint := ""
	if o.taint {
		taint = ", tainted " + string(o.effect)
	}
	return fmt.Sprintf("%s %s (%s: %q, heartbeat %s%s)", o.at.Format("15:04:05.000"), o.status, o.reason, o.message,
		o.heartbeat.Format("15:04:05"), taint)
}

func observe(n *v1.Node) nodeObs {
	o := nodeObs{at: time.Now()}
	for _, c := range n.Status.Conditions {
		if c.Type == memCondition {
			o.status, o.reason, o.message = c.Status, c.Reason, c.Message
			o.ltt, o.heartbeat = c.LastTransitionTime.Time, c.LastHeartbeatTime.Time
		}
	}
	for _, tn := range n.Spec.Taints {
		if tn.Key == memTaint {
			o.taint, o.effect = true, tn.Effect
		}
	}
	return o
}

func (e *e2e) histLen() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.nodeHist)
}

func (e *e2e) hist() []nodeObs {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.nodeHist)
}

// waitNode waits for a version of the node, from index from of the
// history on, that satisfies ok, and returns the first such.
func (e *e2e) waitNode(t *testing.T, from int, what string, ok func(nodeObs) bool) nodeObs {
	t.Helper()
	var found nodeObs
	poll(t, deadline, what+" on the node", func() (bool, error) {
		h := e.hist()
		for i := from; i < len(h); i++ {
			if ok(h[i]) {
				found = h[i]
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// changes returns the versions, from index from on, where the condition's
// status differs from the version before (the one before from included).
func (e *e2e) changes(from int) []nodeObs {
	h := e.hist()
	var prev v1.ConditionStatus
	if from > 0 {
		prev = h[from-1].status
	}
	var out []nodeObs
	for _, o := range h[from:] {
		if o.status != prev {
			out = append(out, o)
			prev = o.status
		}
	}
	return out
}

func (e *e2e) firstChange(t *testing.T, from int, status v1.ConditionStatus) nodeObs {
	t.Helper()
	for _, o := range e.changes(from) {
		if o.status == status {
			return o
		}
	}
	t.Fatalf("the condition never became %s", status)
	return nodeObs{}
}

// lastDecision is the pass time (observedAt) of the agent's latest
// logged decision to evict a pod, among the passes before the time
// before; zero when none.
func (e *e2e) lastDecision(t *testing.T, before time.Time) time.Time {
	t.Helper()
	var last time.Time
	for _, l := range strings.Split(e.logs.String(), "\n") {
		if !strings.Contains(l, `"msg":"decision"`) || !strings.Contains(l, `"observedAt"`) {
			continue
		}
		var rec struct {
			Msg        string    `json:"msg"`
			Outcome    string    `json:"outcome"`
			Pod        string    `json:"pod"`
			ObservedAt time.Time `json:"observedAt"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("agent log line %q: %v", l, err)
		}
		if rec.Msg == "decision" && rec.Outcome == "evict" && rec.Pod != "" &&
			rec.ObservedAt.Before(before) && rec.ObservedAt.After(last) {
			last = rec.ObservedAt
		}
	}
	return last
}

func equalChanges(got []nodeObs, want ...v1.ConditionStatus) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].status != want[i] {
			return false
		}
	}
	return true
}

func showChanges(ch []nodeObs) string {
	var parts []string
	for _, o := range ch {
		parts = append(parts, fmt.Sprintf("%s at %s", o.status, o.at.Format("15:04:05.000")))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// checkClears checks the end of a pressure episode that began with on
// (EvictdMemoryPressure=True) and whose last eviction was ev: while the
// transition period runs, the condition stays True and says since when no
// threshold is met; then it goes False, at least the transition period
// after that time, and the taint goes; the episode is exactly one True →
// False; a heartbeat later it is still False.
func (e *e2e) checkClears(t *testing.T, start int, on nodeObs, ev *eviction) nodeObs {
	t.Helper()
	off := e.waitNode(t, start, "EvictdMemoryPressure=False after the pressure", func(o nodeObs) bool {
		return o.status == v1.ConditionFalse && o.at.After(on.at)
	})
	if off.reason != "EvictdHasNoMemoryPressure" {
		t.Errorf("condition False with reason %q, want EvictdHasNoMemoryPressure", off.reason)
	}
	// The hold: True through the transition period after the last time a
	// threshold was met. evictd writes its condition on a transition (and
	// at a report), not when only the message changes, so the node need
	// not show the hold's "… last observed met at T" message;
	// when it does, T is the last time met. Otherwise bound it: a threshold
	// was met when the condition turned True and when the eviction was
	// issued (its deletionTimestamp less its grace period, in whole
	// seconds), and no longer once the evicted pod's memory was released.
	var lastMet time.Time
	for _, o := range e.hist()[start:] {
		if o.status == v1.ConditionTrue && strings.HasPrefix(o.message, holdMessage) && !o.at.After(off.at) {
			ts, _, _ := strings.Cut(strings.TrimPrefix(o.message, holdMessage), ";")
			at, err := time.Parse(time.RFC3339, ts)
			if err != nil {
				t.Fatalf("hold message %q: %v", o.message, err)
			}
			lastMet = at
		}
	}
	// A threshold was also met at every pass that decided an eviction: its
	// decision log line gives the pass's time (observedAt), which is
	// before the eviction is issued (by the pod's re-read and the API
	// calls, a second or more on a loaded machine).
	metAtLeast := on.ltt
	if !lastMet.IsZero() && lastMet.After(metAtLeast) {
		metAtLeast = lastMet
	}
	deciding := e.lastDecision(t, off.at)
	if deciding.After(metAtLeast) {
		metAtLeast = deciding
	}
	if ev != nil && deciding.IsZero() {
		t.Errorf("no decision to evict logged before the condition cleared at %s, though %s was evicted", off.at, ev.first.Name)
	}
	// ltt is in whole seconds (truncated), so is compared with metAtLeast
	// truncated; the real transition time is at or after both.
	if off.at.Before(metAtLeast.Add(transition)) || off.ltt.Before(metAtLeast.Truncate(time.Second).Add(transition)) {
		t.Errorf("condition False seen at %s (transition time %s), before the transition period %s after a threshold was last known met (%s); versions: %v",
			off.at.Format(time.RFC3339Nano), off.ltt.Format(time.RFC3339), transition, metAtLeast.Format(time.RFC3339Nano), e.hist()[start:])
	}
	if !lastMet.IsZero() {
		if late := off.at.Sub(lastMet); late > transition+10*time.Second {
			t.Errorf("condition False only %s after the last time a threshold was met, transition period %s", late, transition)
		}
		if ev != nil && lastMet.After(ev.released) {
			t.Errorf("a threshold was last met at %s, after the evicted pod's memory was released at %s", lastMet, ev.released)
		}
	}
	if ev != nil {
		if late := off.at.Sub(ev.released); late > transition+10*time.Second {
			t.Errorf("condition False only %s after the evicted pod's memory was released, transition period %s", late, transition)
		}
	}
	e.waitNode(t, start, "the taint removed", func(o nodeObs) bool { return !o.taint && !o.at.Before(off.at) })
	if got := e.changes(start); !equalChanges(got, v1.ConditionTrue, v1.ConditionFalse) {
		t.Errorf("condition changes: %s, want exactly True then False", showChanges(got))
	}
	// Taint on while True (after the condition), off after False: one
	// episode of the taint too.
	var taintChanges []bool
	prev := false
	if start > 0 {
		prev = e.hist()[start-1].taint
	}
	for _, o := range e.hist()[start:] {
		if o.taint != prev {
			taintChanges = append(taintChanges, o.taint)
			prev = o.taint
		}
	}
	if !slices.Equal(taintChanges, []bool{true, false}) {
		t.Errorf("taint changes %v, want added once then removed once", taintChanges)
	}
	// Still False a heartbeat later: no flapping back.
	after := e.waitNode(t, start, "a heartbeat after the clear", func(o nodeObs) bool {
		return o.heartbeat.After(off.heartbeat) && o.at.After(off.at)
	})
	if after.status != v1.ConditionFalse || after.taint {
		t.Errorf("a heartbeat after clearing: status %s, taint %v", after.status, after.taint)
	}
	return off
}

func (e *e2e) nodeEvents(t *testing.T) []v1.Event {
	t.Helper()
	sel := fields.Set{"involvedObject.kind": "Node", "involvedObject.name": e2eNode}.AsSelector().String()
	l, err := e.admin.CoreV1().Events(metav1.NamespaceDefault).List(e.ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil
	}
	return l.Items
}

// ---- the agent ----

// agentStatus is what the agent's /status says of its last pass.
type agentStatus struct {
	Time       time.Time         `json:"time"`
	Pods       int               `json:"pods"`
	Pressures  map[string]bool   `json:"pressures"`
	Thresholds []thresholdStatus `json:"thresholds"`
	Decision   struct {
		Outcome string `json:"outcome"`
		Reason  string `json:"reason"`
	} `json:"decision"`
	Result string `json:"result"`
}

type thresholdStatus struct {
	Threshold string     `json:"threshold"`
	Kind      string     `json:"kind"`
	Met       bool       `json:"met"`
	MetSince  *time.Time `json:"metSince"`
}

func (s *agentStatus) threshold(name string) thresholdStatus {
	for _, th := range s.Thresholds {
		if th.Threshold == name {
			return th
		}
	}
	return thresholdStatus{}
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

func (e *e2e) get(path string) (string, error) {
	resp, err := httpClient.Get("http://" + e.addr + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	return string(body), nil
}

func (e *e2e) agentStatus(t *testing.T) *agentStatus {
	t.Helper()
	body, err := e.get("/status")
	if err != nil {
		t.Fatalf("agent status: %v", err)
	}
	var st agentStatus
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("agent status: %v\n%s", err, body)
	}
	return &st
}

// waitAgent polls the agent's /status until ok, and returns that status.
func (e *e2e) waitAgent(t *testing.T, what string, ok func(*agentStatus) bool) *agentStatus {
	t.Helper()
	var st *agentStatus
	poll(t, deadline, what, func() (bool, error) {
		st = e.agentStatus(t)
		return ok(st), nil
	})
	return st
}

func (e *e2e) checkReady(t *testing.T) {
	t.Helper()
	if _, err := e.get("/readyz"); err != nil {
		t.Errorf("agent not ready: %v", err)
	}
}

func (e *e2e) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	body, err := e.get("/metrics")
	if err != nil {
		t.Fatalf("agent metrics: %v", err)
	}
	return testagent.ParseMetrics(t, body)
}

// waitMetric waits until the series reaches want, fails if it goes past
// it, and returns all the metrics then.
func (e *e2e) waitMetric(t *testing.T, series string, want float64) map[string]float64 {
	t.Helper()
	var m map[string]float64
	poll(t, deadline, fmt.Sprintf("%s to reach %v", series, want), func() (bool, error) {
		m = e.metrics(t)
		if m[series] > want {
			return false, fmt.Errorf("%s is %v, past %v", series, m[series], want)
		}
		return m[series] == want, nil
	})
	return m
}

// apiErrors returns evictd_api_errors_total by verb, leaving out zeros.
func (e *e2e) apiErrors(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for series, v := range e.metrics(t) {
		verb, ok := strings.CutPrefix(series, `evictd_api_errors_total{verb="`)
		if ok && v != 0 {
			out[strings.TrimSuffix(verb, `"}`)] = v
		}
	}
	return out
}

func (e *e2e) checkNoAPIErrors(t *testing.T) {
	t.Helper()
	if errs := e.apiErrors(t); len(errs) > 0 {
		t.Errorf("evictd_api_errors_total with the API server up: %v; deploy/rbac.yaml may lack a verb (see the agent log)", errs)
	}
}

// ---- helpers ----

// poll calls f every 50ms until it returns true or an error, or until
// timeout; it fails t naming what it waited for.
func poll(t *testing.T, timeout time.Duration, what string, f func() (bool, error)) {
	t.Helper()
	end := time.Now().Add(timeout)
	for {
		done, err := f()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if done {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("waited %s for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// availableIn parses the quantity after prefix in an eviction message.
func availableIn(t *testing.T, msg, prefix string) int64 {
	t.Helper()
	rest, ok := strings.CutPrefix(msg, prefix)
	q, _, _ := strings.Cut(rest, ". ")
	v, err := resource.ParseQuantity(strings.TrimSuffix(q, "."))
	if !ok || err != nil {
		t.Errorf("eviction message %q: no available quantity after %q: %v", msg, prefix, err)
		return -1
	}
	return v.Value()
}

func podCondition(pod *v1.Pod, ct v1.PodConditionType) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == ct {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func mapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func randomID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", b)
}

// waitAllowed waits until RBAC, which learns of new bindings through its
// informers, allows client the access.
func waitAllowed(t *testing.T, client kubernetes.Interface, attr authorizationv1.ResourceAttributes) {
	t.Helper()
	poll(t, 10*time.Second, fmt.Sprintf("evictd's identity to be allowed to %s %s/%s", attr.Verb, attr.Resource, attr.Subresource), func() (bool, error) {
		r, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(),
			&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attr}}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed, nil
	})
}

// issuedAt is when the eviction ev saw was issued, in whole seconds
// (truncated): its terminal status's DisruptionTarget transition, or its
// deletionTimestamp less grace.
func issuedAt(ev *eviction, grace int64) time.Time {
	if ev.terminal {
		if c := podCondition(ev.first, v1.DisruptionTarget); c != nil {
			return c.LastTransitionTime.Time
		}
		return time.Time{}
	}
	return ev.first.DeletionTimestamp.Add(-time.Duration(grace) * time.Second)
}
