// Command demo is `make demo`: it brings a whole node up on this machine
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd
// and a real kubelet whose kubepods cgroup is limited by systemReserved, with
// the kubelet's own eviction thresholds off), runs evictd beside the kubelet
// under its ServiceAccount, starts a few well-behaved pods and one BestEffort
// pod that allocates memory steadily, and prints what happens as it happens:
// allocatableMemory.available from evictd's /metrics, evictd's node condition
// and taint, the Evicted event on the hungry pod, the pod going away, the
// others still running, and the condition clearing after the transition
// period. It stops everything on exit or Ctrl-C.
//
// It exits 1 when the story did not happen (nothing evicted in time, the
// wrong pod evicted, the kernel OOM killer first, the condition never set
// or never cleared), so it doubles as a smoke test. With --hold the node
// stays up afterwards until Ctrl-C, with an admin kubeconfig to explore it.
//
// It needs root, the binaries of `make k8s-bins` and the packages of
// `make runtime`; EVICTD_BIN names the evictd binary (else it is built).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/evictd/evictd/internal/testing/testnode"
)

func main() {
	if code, worker := testnode.Supervise("demo", "stopping: evictd, the kubelet, containerd with the pods, the control plane (up to a minute)",
		"still stopping everything by PID; wait for it, or nothing may be cleaned up"); !worker {
		os.Exit(code)
	}
	opts := options{}
	flag.BoolVar(&opts.hold, "hold", false, "keep the node up after the story until Ctrl-C, to explore it with the printed kubeconfig")
	flag.IntVar(&opts.podsMiB, "pods-memory", 1024, "memory limit of the kubepods cgroup, in MiB (the kubelet's systemReserved is MemTotal minus this)")
	flag.IntVar(&opts.thresholdMiB, "threshold", 300, "evictd's hard threshold memory.available<N Mi, from which allocatableMemory.available<N Mi is derived")
	flag.IntVar(&opts.rate, "rate", 40, "allocation rate of the memory-hungry pod, in MiB/s")
	flag.DurationVar(&opts.transition, "transition", 20*time.Second, "evictd's --eviction-pressure-transition-period")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "demo: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, opts)
	switch {
	case err == nil:
		return
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		fmt.Println("demo: interrupted; everything is stopped")
		os.Exit(130)
	default:
		fmt.Fprintf(os.Stderr, "demo: FAILED: %v\n", err)
		os.Exit(1)
	}
}
