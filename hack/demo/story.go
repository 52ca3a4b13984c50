package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/testing/testcluster"
	"github.com/evictd/evictd/internal/testing/testnode"
)

// options are the demo's flags.
type options struct {
	hold         bool
	podsMiB      int
	thresholdMiB int
	rate         int
	transition   time.Duration
}

const (
	conditionType = "EvictdMemoryPressure"
	taintKey      = "evictd.io/memory-pressure"
	hogName       = "memory-hog"
)

// clock prints lines with the wall time and the time since the start.
type clock struct{ start time.Time }

func (c clock) say(format string, args ...any) {
	now := time.Now()
	fmt.Printf("%s %7s  %s\n", now.Format("15:04:05"), fmt.Sprintf("+%.1fs", now.Sub(c.start).Seconds()), fmt.Sprintf(format, args...))
}

// wellBehaved is a pod that should survive: where it lives and what it is.
type wellBehaved struct {
	pod  *v1.Pod
	what string
}

func run(ctx context.Context, o options) error {
	c := clock{start: time.Now()}
	c.say("demo: starting a node on this machine at %s: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,", c.start.Format(time.RFC1123))
	c.say("      containerd with a pod network, and a real kubelet whose kubepods cgroup is limited to %d MiB (systemReserved),", o.podsMiB)
	c.say("      with the kubelet's own eviction thresholds off (10-60 s)")
	n, err := testnode.Start(ctx, testnode.Options{Name: "evictd-demo", PodsMemory: int64(o.podsMiB) << 20})
	if err != nil {
		return fmt.Errorf("start the node: %w", err)
	}
	defer func() {
		c.say("demo: stopping evictd, the kubelet, containerd and its pods, and the control plane")
		if err := n.Stop(); err != nil {
			c.say("demo: stop: %v", err)
		} else {
			c.say("demo: everything stopped and removed")
		}
	}()
	c.say("node %s Ready in %s (%s)", n.Name(), n.ReadyIn().Round(100*time.Millisecond), strings.Join(n.Phases(), ", "))
	kubeconfig := filepath.Join(n.Dir(), "admin.kubeconfig")
	if err := n.Cluster().WriteKubeconfig(kubeconfig, n.Cluster().Token(testcluster.AdminUser)); err != nil {
		return err
	}
	c.say("admin kubeconfig: %s", kubeconfig)

	args := []string{
		fmt.Sprintf("--eviction-hard=memory.available<%dMi", o.thresholdMiB),
		"--eviction-pressure-transition-period=" + o.transition.String(),
	}
	if err := printThresholds(ctx, n, args); err != nil {
		return err
	}
	c.say("starting evictd beside the kubelet, as the evictd ServiceAccount (deploy/rbac.yaml): %s", strings.Join(args, " "))
	if err := n.StartEvictd(ctx, args...); err != nil {
		return err
	}
	c.say("evictd metrics: http://%s/metrics   (also /status, /healthz, /readyz)", n.MetricsAddr())
	c.say("evictd log:     %s", n.LogPath("evictd"))

	good := []wellBehaved{
		{testnode.Resources(n.Pod("guaranteed", "alloc", "--mib", "64"), "128Mi", "128Mi", "100m"), "Guaranteed, 64 MiB of its 128Mi"},
		{testnode.Resources(n.Pod("burstable", "alloc", "--mib", "64"), "128Mi", "384Mi", "50m"), "Burstable, 64 MiB, under its 128Mi request"},
		{criticalPod(n), "BestEffort but system-node-critical, in kube-system: never evicted"},
	}
	for _, g := range good {
		p, err := runPod(ctx, n, g.pod)
		if err != nil {
			return err
		}
		c.say("pod %s/%s Running (%s)", p.Namespace, p.Name, g.what)
	}

	hogMiB := o.podsMiB - o.thresholdMiB + 100
	hog := n.Pod(hogName, "alloc", "--mib", fmt.Sprint(hogMiB), "--rate", fmt.Sprint(o.rate))
	c.say("pod default/%s: BestEffort, allocates %d MiB at %d MiB/s and holds it: past the %d Mi threshold after about %ds",
		hogName, hogMiB, o.rate, o.thresholdMiB, (o.podsMiB-o.thresholdMiB-130)/o.rate)
	hogStart := time.Now()
	if _, err := n.Admin().CoreV1().Pods(hog.Namespace).Create(ctx, hog, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s: %w", hogName, err)
	}
	c.say("timeline: allocatableMemory.available is evictd's last observation from /metrics (one per pass: every")
	c.say("          --housekeeping-interval, faster near a threshold); the kubepods usage beside it is the kernel's, now")
	w := &watcher{n: n, c: c, o: o, since: hogStart.Add(-time.Second), good: good, seenEvents: map[string]bool{}}
	if err := w.watch(ctx, time.Duration(hogMiB/o.rate)*time.Second+90*time.Second); err != nil {
		return err
	}
	c.say("demo: OK: evictd set %s and its taint, evicted %s with the kubelet's message, spared the others, and cleared the condition after %s",
		conditionType, hogName, o.transition)
	if o.hold {
		c.say("demo: --hold: the node stays up until Ctrl-C; for example:")
		fmt.Printf("    kubectl --kubeconfig %s get nodes,pods -A -o wide\n", kubeconfig)
		fmt.Printf("    kubectl --kubeconfig %s get events -A --sort-by=.lastTimestamp\n", kubeconfig)
		fmt.Printf("    kubectl --kubeconfig %s describe node %s\n", kubeconfig, n.Name())
		fmt.Printf("    curl -s http://%s/metrics | grep ^evictd_\n", n.MetricsAddr())
		fmt.Printf("    tail -f %s\n", n.LogPath("evictd"))
		<-ctx.Done()
	}
	return nil
}

// printThresholds runs `evictd check-config` with the flags evictd gets.
func printThresholds(ctx context.Context, n *testnode.Node, args []string) error {
	bin := os.Getenv(testnode.EnvEvictdBin)
	if bin == "" {
		bin = filepath.Join(n.Dir(), "evictd") // where testnode built it
	}
	cmdArgs := append(append([]string{"check-config"}, n.EvictdFlags()...), args...)
	out, err := exec.CommandContext(ctx, bin, cmdArgs...).CombinedOutput()
	fmt.Println("\n  evictd check-config (the node's flags and the demo's thresholds):")
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Println("    " + line)
	}
	fmt.Println()
	if err != nil {
		return fmt.Errorf("evictd check-config: %w", err)
	}
	return nil
}

func criticalPod(n *testnode.Node) *v1.Pod {
	p := n.Pod("critical", "sleep")
	p.Namespace = metav1.NamespaceSystem
	p.Spec.PriorityClassName = "system-node-critical"
	return p
}

// runPod runs a pod, retrying its creation while the namespace's default
// ServiceAccount does not exist yet (kube-system, just after start).
func runPod(ctx context.Context, n *testnode.Node, pod *v1.Pod) (*v1.Pod, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := n.RunPod(ctx, pod.DeepCopy(), 90*time.Second)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) || !strings.Contains(err.Error(), "create pod") {
			return p, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// isNotFound reports whether err says the object does not exist.
func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
