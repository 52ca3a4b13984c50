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
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// envWorker marks the re-executed process that does the work; see main.
const envWorker = "EVICTD_DEMO_WORKER"

func main() {
	if os.Getenv(envWorker) == "" {
		os.Exit(supervise())
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

// supervise runs this program again as the worker in a process group of
// its own, and turns Ctrl-C into a SIGTERM for it. The node's components
// are the worker's children and so are in its group: a Ctrl-C on the
// terminal reaches only this process, and the worker stops them in order
// rather than every one of them catching the SIGINT at once.
func supervise() int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		return 1
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), envWorker+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		return 1
	}
	done := make(chan struct{})
	go func() {
		for n := 0; ; n++ {
			select {
			case <-done:
				return
			case <-sigs:
			}
			if n == 0 {
				fmt.Println("\ndemo: stopping: evictd, the kubelet, containerd with the pods, the control plane (up to a minute)")
			} else {
				fmt.Println("\ndemo: still stopping everything by PID; wait for it, or nothing may be cleaned up")
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	}()
	err = cmd.Wait()
	close(done)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if exit.ExitCode() < 0 {
			return 1
		}
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		return 1
	}
	return 0
}
