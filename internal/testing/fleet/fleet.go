package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/evictd/evictd/internal/testing/hosttree"
	"github.com/evictd/evictd/internal/testing/testcluster"
	"github.com/evictd/evictd/signals"
)

// EnvEvictdBin names the evictd binary the agents run (`make build`).
const EnvEvictdBin = "EVICTD_BIN"

// Byte sizes.
const (
	mi = int64(1) << 20
	gi = int64(1) << 30
)

// nodesPerNamespace is how many nodes' pods share a namespace.
const nodesPerNamespace = 25

// controllers are the controller manager's: PDB status (disruption), the
// namespaces' default ServiceAccounts, node health from the kubelets'
// Leases, and the garbage collectors. No taint-based eviction: a node
// marked unreachable during the API server's outage keeps its pods.
var controllers = []string{
	"disruption-controller", "serviceaccount-controller", "serviceaccount-token-controller",
	"node-lifecycle-controller", "garbage-collector-controller", "pod-garbage-collector-controller",
}

// Options configures Start.
type Options struct {
	// Nodes is the number of simulated nodes, one agent each.
	Nodes int
	// PodsMin and PodsMax bound the pods bound to each node; default 10
	// and 30.
	PodsMin, PodsMax int
	// EvictdBin is the agent's binary; default $EVICTD_BIN.
	EvictdBin string
	// EvictdArgs are added to every agent's flags (after the harness's own,
	// so they override them).
	EvictdArgs []string
	// Dir holds the fixtures, kubeconfigs, logs and the audit log; default
	// a new temporary directory, removed by Stop unless Keep.
	Dir  string
	Keep bool
	// Kubelet times the emulated kubelets; zero fields take KEP-589's
	// defaults (DefaultKubeletTiming).
	Kubelet KubeletTiming
	// Seed makes the pods' counts, classes and sizes repeatable.
	Seed uint64
	// Logf, when set, is told of each step.
	Logf func(format string, args ...any)
}

// Node is one simulated node.
type Node struct {
	Name  string
	Index int
	// Namespace holds the node's pods.
	Namespace string
	// Tree is its generated /proc and cgroup tree.
	Tree hosttree.Tree
	// Normal and Pressure are the root memory cgroup's usage when the
	// node is fine and when memory.available is below the default hard
	// threshold (100Mi).
	Normal, Pressure hosttree.Memory

	dir        string
	kubeconfig string
	metrics    string // the agent's metrics address
	pods       map[string]hosttree.Pod
	kubelet    *kubelet
}

// Fleet is a running control plane with its nodes, emulated kubelets and
// agents.
type Fleet struct {
	Cluster *testcluster.Cluster
	Nodes   []*Node
	// Started is when Start began; AgentsStarted when the last agent of the
	// first start was started.
	Started time.Time

	opts     Options
	dir      string
	admin    kubernetes.Interface
	byName   map[string]*Node
	cancel   context.CancelFunc
	finisher *finisher

	mu        sync.Mutex
	agents    map[string]*agent
	onEvicted func(*Node, *v1.Pod)
}

// Start brings the fleet up: the control plane with the audit log, the
// objects of deploy/, namespaces, nodes, pods, PDBs, each node's tree,
// token and kubelet; the agents are started by StartAgents. On failure it
// stops what it started.
func Start(ctx context.Context, opts Options) (f *Fleet, err error) {
	if opts.Nodes <= 0 {
		return nil, errors.New("fleet: Options.Nodes must be positive")
	}
	if opts.PodsMin <= 0 {
		opts.PodsMin = 10
	}
	if opts.PodsMax < opts.PodsMin {
		opts.PodsMax = max(30, opts.PodsMin)
	}
	if opts.EvictdBin == "" {
		opts.EvictdBin = os.Getenv(EnvEvictdBin)
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	opts.Kubelet = opts.Kubelet.withDefaults()
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "evictd-fleet-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	f = &Fleet{Started: time.Now(), opts: opts, dir: dir, byName: map[string]*Node{}, cancel: cancel, agents: map[string]*agent{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Stop())
		}
	}()

	tokens := map[string][]string{}
	for i := range opts.Nodes {
		n := &Node{Name: fmt.Sprintf("fleet-node-%04d", i), Index: i}
		n.Namespace = "fleet-" + strconv.Itoa(i/nodesPerNamespace)
		n.dir = filepath.Join(dir, "nodes", n.Name)
		f.Nodes = append(f.Nodes, n)
		f.byName[n.Name] = n
		tokens[kubeletUser(n.Name)] = []string{"system:nodes"}
	}
	opts.Logf("starting the control plane (etcd, kube-apiserver with an audit log, kube-controller-manager)")
	if f.Cluster, err = testcluster.Start(ctx, testcluster.Options{
		Tokens:            tokens,
		ControllerManager: true,
		Controllers:       controllers,
		Audit:             &testcluster.Audit{Policy: AuditPolicy, Path: f.AuditLogPath()},
	}); err != nil {
		return f, err
	}
	admin := f.Cluster.AdminConfig()
	admin.QPS, admin.Burst = 500, 1000
	if f.admin, err = kubernetes.NewForConfig(admin); err != nil {
		return f, err
	}
	if err := f.createObjects(ctx); err != nil {
		return f, err
	}
	if err := f.writeIdentities(ctx); err != nil {
		return f, err
	}
	if f.finisher, err = startFinisher(runCtx, f); err != nil {
		return f, err
	}
	opts.Logf("starting %d emulated kubelets", len(f.Nodes))
	for _, n := range f.Nodes {
		if n.kubelet, err = newKubelet(f.Cluster, n.Name, opts.Kubelet); err != nil {
			return f, err
		}
		go n.kubelet.run(runCtx)
	}
	return f, nil
}

// AuditLogPath is where kube-apiserver writes the audit log.
func (f *Fleet) AuditLogPath() string { return filepath.Join(f.dir, "audit.log") }

// Dir is the fleet's working directory.
func (f *Fleet) Dir() string { return f.dir }

// Node returns the node named name, or nil.
func (f *Fleet) Node(name string) *Node { return f.byName[name] }

// OnEvicted sets what is called when an emulated kubelet sees one of its
// pods terminating, before it removes the pod's cgroup and the pod: the
// harness's cue to take the node off pressure.
func (f *Fleet) OnEvicted(fn func(*Node, *v1.Pod)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onEvicted = fn
}

func (f *Fleet) evicted(n *Node, p *v1.Pod) {
	f.mu.Lock()
	fn := f.onEvicted
	f.mu.Unlock()
	if fn != nil {
		fn(n, p)
	}
}

// Stop stops every agent, the emulated kubelets and the control plane, by
// PID, and removes the directory unless Options.Keep. Calling it again does
// nothing more.
func (f *Fleet) Stop() error {
	var errs []error
	errs = append(errs, f.StopAgents())
	f.cancel()
	if f.finisher != nil {
		f.finisher.stop()
	}
	if f.Cluster != nil {
		errs = append(errs, f.Cluster.Stop())
	}
	if !f.opts.Keep && f.opts.Dir == "" {
		errs = append(errs, os.RemoveAll(f.dir))
	}
	return errors.Join(errs...)
}

// createObjects creates the namespaces, nodes, pods and PDBs, and writes
// each node's tree with its pods' cgroups.
func (f *Fleet) createObjects(ctx context.Context) error {
	namespaces := map[string]bool{}
	for _, n := range f.Nodes {
		namespaces[n.Namespace] = true
	}
	for ns := range namespaces {
		if _, err := f.admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
		// The controller creates it too; pod admission must not wait.
		_, err := f.admin.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ServiceAccount %s/default: %w", ns, err)
		}
	}
	f.opts.Logf("creating %d nodes (about 15 KB each) with %d–%d pods each", len(f.Nodes), f.opts.PodsMin, f.opts.PodsMax)
	var (
		mu   sync.Mutex
		pods int
	)
	err := parallel(ctx, f.Nodes, 8, func(ctx context.Context, n *Node) error {
		c, err := f.createNode(ctx, n)
		mu.Lock()
		pods += c
		mu.Unlock()
		return err
	})
	if err != nil {
		return err
	}
	size := 0
	if n, err := f.admin.CoreV1().Nodes().Get(ctx, f.Nodes[0].Name, metav1.GetOptions{}); err == nil {
		if b, err := json.Marshal(n); err == nil {
			size = len(b)
		}
	}
	f.opts.Logf("created %d nodes (%d bytes of JSON each, managedFields included) and %d pods", len(f.Nodes), size, pods)
	return nil
}

// createNode creates n's Node object with its status, its pods and PDB,
// and writes its tree. It returns the number of pods.
func (f *Fleet) createNode(ctx context.Context, n *Node) (int, error) {
	if _, err := f.admin.CoreV1().Nodes().Create(ctx, nodeObject(n.Name, n.Index), metav1.CreateOptions{}); err != nil {
		return 0, fmt.Errorf("create node %s: %w", n.Name, err)
	}
	// The controllers annotate and taint a new node: retry on conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := f.admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		obj.Status = nodeStatus(n.Name, n.Index, time.Now())
		_, err = f.admin.CoreV1().Nodes().UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("node %s status: %w", n.Name, err)
	}

	rnd := rand.New(rand.NewPCG(f.opts.Seed, uint64(n.Index)))
	count := f.opts.PodsMin + rnd.IntN(f.opts.PodsMax-f.opts.PodsMin+1)
	tiers := []signals.QOSClass{signals.Guaranteed, signals.Burstable, signals.BestEffort}
	// Every fifth node has a PDB over three of its pods.
	pdb := ""
	if n.Index%5 == 0 {
		pdb = "pdb-" + n.Name
		if _, err := f.admin.PolicyV1().PodDisruptionBudgets(n.Namespace).Create(ctx, pdbObject(n.Namespace, pdb), metav1.CreateOptions{}); err != nil {
			return 0, fmt.Errorf("create PDB %s: %w", pdb, err)
		}
	}
	node := hosttree.Node{
		MemTotal:      16 * gi,
		KubepodsLimit: 15 * gi,
		NoPSI:         true,
	}
	n.pods = map[string]hosttree.Pod{}
	var podsWS int64
	for k := range count {
		plan := podPlan{
			name: fmt.Sprintf("%s-pod-%02d", n.Name, k),
			qos:  tiers[rnd.IntN(len(tiers))],
			ws:   int64(16+rnd.IntN(480)) * mi,
		}
		if pdb != "" && k < 3 {
			plan.pdb = pdb
		}
		p, err := f.admin.CoreV1().Pods(n.Namespace).Create(ctx, podObject(n.Namespace, n.Name, plan), metav1.CreateOptions{})
		if err != nil {
			return k, fmt.Errorf("create pod %s: %w", plan.name, err)
		}
		hp := hosttree.Pod{UID: string(p.UID), QOS: plan.qos, Memory: hosttree.Memory{Usage: plan.ws + 8*mi, InactiveFile: 8 * mi}, Tasks: 1 + rnd.IntN(40)}
		node.Pods = append(node.Pods, hp)
		n.pods[hp.UID] = hp
		podsWS += plan.ws
	}
	node.Kubepods = hosttree.Memory{Usage: podsWS + 256*mi, InactiveFile: 128 * mi}
	// The system and the pods use half of the memory; under pressure,
	// memory.available is 50Mi (the default hard threshold is 100Mi).
	n.Normal = hosttree.Memory{Usage: 8*gi + gi, InactiveFile: gi}
	n.Pressure = hosttree.Memory{Usage: 16*gi - 50*mi + gi, InactiveFile: gi}
	node.Root = n.Normal
	n.Tree, err = hosttree.Write(filepath.Join(n.dir, "host"), node)
	if err != nil {
		return count, fmt.Errorf("node %s tree: %w", n.Name, err)
	}
	for _, d := range []string{"root", "imagefs"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return count, err
		}
	}
	return count, nil
}

// writeIdentities applies deploy/ (through the first node's token) and
// writes each node's kubeconfig with a token of kube-system/evictd bound to
// that node.
func (f *Fleet) writeIdentities(ctx context.Context) error {
	f.opts.Logf("applying deploy/rbac.yaml and deploy/policy.yaml; a node-bound token per node")
	first, err := f.Cluster.EvictdNodeToken(ctx, f.Nodes[0].Name)
	if err != nil {
		return err
	}
	return parallel(ctx, f.Nodes, 8, func(ctx context.Context, n *Node) error {
		token := first
		if n.Index != 0 {
			var err error
			if token, err = testcluster.NodeBoundToken(ctx, f.admin, "kube-system", "evictd", n.Name); err != nil {
				return err
			}
		}
		n.kubeconfig = filepath.Join(n.dir, "kubeconfig")
		return f.Cluster.WriteKubeconfig(n.kubeconfig, token)
	})
}

// SetPressure rewrites n's root memory cgroup (and meminfo): under the
// default hard memory.available threshold when on, back to normal when
// off.
func (n *Node) SetPressure(on bool) error {
	if on {
		return n.Tree.SetRoot(n.Pressure)
	}
	return n.Tree.SetRoot(n.Normal)
}

// parallel runs fn for each node, at most workers at a time, and returns
// the first error.
func parallel(ctx context.Context, nodes []*Node, workers int, fn func(context.Context, *Node) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan *Node)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for n := range work {
				if err := fn(ctx, n); err != nil {
					cancel(err)
				}
			}
		})
	}
	for _, n := range nodes {
		select {
		case work <- n:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return context.Cause(ctx)
}

// PodCount is the number of pods created on n.
func (n *Node) PodCount() int { return len(n.pods) }
