// Command soak is `make soak`: evictd over a long run on a real node, to
// show that its memory, goroutines and open files stay flat while pods come
// and go and memory pressure rises and falls many times.
//
// It brings a whole node up on this machine (control plane, containerd, a
// real kubelet with its own eviction thresholds off, its kubepods cgroup
// limited by systemReserved) and starts evictd beside it with its default
// thresholds (only the pressure transition period is shortened, so that the
// condition and taint clear between cycles). For --duration it then runs,
// at once:
//
//   - churn: a ReplicaSet of small Burstable pods scaled to a random size
//     between --replicas-min and --replicas-max every --scale-every, and
//     BestEffort single pods created every --pod-every, the oldest deleted
//     when more than --singles exist;
//   - pressure cycles: a BestEffort hog pod (workload alloc) sized from
//     evictd's own allocatableMemory.available and threshold to go
//     --overshoot MiB past the threshold, which evictd must evict; then a
//     --quiet period, and again;
//   - a sample every --interval of evictd's VmRSS, RssAnon, RssFile, VmHWM,
//     threads (/proc/PID/status), open fds (/proc/PID/fd), goroutines and
//     heap in use (its /metrics, from the Go collector), passes and
//     evictions so far, written to samples.csv under --out.
//
// At the end it writes summary.md under --out (medians of the first and
// last --window, least-squares slopes per hour after --warmup) and exits 1
// when a slope exceeds its bound, evictd died or was restarted, a hog was
// not evicted, or the kernel OOM-killed anything in the node's kubepods
// cgroup. It stops everything on exit or Ctrl-C.
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

// options are the soak's flags.
type options struct {
	duration    time.Duration
	interval    time.Duration
	window      time.Duration
	warmup      time.Duration
	out         string
	podsMiB     int
	transition  time.Duration
	replicasMin int
	replicasMax int
	scaleEvery  time.Duration
	podEvery    time.Duration
	singles     int
	quiet       time.Duration
	overshoot   int
	hogRate     int
	hogTimeout  time.Duration
	hogStall    time.Duration
	maxRSSPct   float64
	maxGorout   float64
	maxFds      float64
}

func main() {
	if code, worker := testnode.Supervise("soak", "stopping: the churn, the hog, evictd, the kubelet, containerd with the pods, the control plane (up to two minutes); the summary covers the samples so far",
		"still stopping everything by PID; wait for it"); !worker {
		os.Exit(code)
	}
	var o options
	flag.DurationVar(&o.duration, "duration", time.Hour, "how long the soak runs once evictd is up")
	flag.DurationVar(&o.interval, "interval", 10*time.Second, "time between two samples of evictd")
	flag.DurationVar(&o.window, "window", 10*time.Minute, "length of the first and last windows whose medians are compared (at most a third of --duration)")
	flag.DurationVar(&o.warmup, "warmup", 10*time.Minute, "samples before this are left out of the slopes: informer caches and the Go heap settle (at most a third of --duration)")
	flag.StringVar(&o.out, "out", "soak-out", "directory for samples.csv, summary.md and evictd.log")
	flag.IntVar(&o.podsMiB, "pods-memory", 1024, "memory limit of the kubepods cgroup, in MiB (the kubelet's systemReserved is MemTotal minus this)")
	flag.DurationVar(&o.transition, "transition", 30*time.Second, "evictd's --eviction-pressure-transition-period (default there 5m, longer than a quiet period)")
	flag.IntVar(&o.replicasMin, "replicas-min", 3, "fewest replicas of the churn ReplicaSet")
	flag.IntVar(&o.replicasMax, "replicas-max", 25, "most replicas of the churn ReplicaSet")
	flag.DurationVar(&o.scaleEvery, "scale-every", 20*time.Second, "time between two scalings of the churn ReplicaSet")
	flag.DurationVar(&o.podEvery, "pod-every", 4*time.Second, "time between two single pods created")
	flag.IntVar(&o.singles, "singles", 6, "single pods kept; the oldest is deleted when one more exists")
	flag.DurationVar(&o.quiet, "quiet", 60*time.Second, "quiet time between the end of one pressure cycle and the next hog")
	flag.IntVar(&o.overshoot, "overshoot", 50, "MiB the hog takes past evictd's allocatableMemory.available threshold")
	flag.IntVar(&o.hogRate, "hog-rate", 30, "allocation rate of the hog, in MiB/s")
	flag.DurationVar(&o.hogTimeout, "hog-timeout", 2*time.Minute, "how long a hog may live once the kubepods cgroup crossed the threshold before the cycle counts as missed (a failure)")
	flag.DurationVar(&o.hogStall, "hog-stall", 6*time.Minute, "how long a hog may take to reach the threshold before it is deleted and the cycle counts as stalled (the machine too busy; not a failure)")
	flag.Float64Var(&o.maxRSSPct, "max-rss-slope", 10, "bound on the slope of RssAnon, in percent of its first-window median per hour")
	flag.Float64Var(&o.maxGorout, "max-goroutine-slope", 10, "bound on the slope of goroutines, per hour")
	flag.Float64Var(&o.maxFds, "max-fd-slope", 10, "bound on the slope of open fds, per hour")
	flag.Parse()
	if err := o.check(); err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, o)
	switch {
	case err == nil:
		fmt.Println("soak: OK")
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		fmt.Println("soak: interrupted; everything is stopped")
		os.Exit(130)
	default:
		fmt.Fprintf(os.Stderr, "soak: FAILED: %v\n", err)
		os.Exit(1)
	}
}

func (o *options) check() error {
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	positive := map[string]time.Duration{"--duration": o.duration, "--interval": o.interval, "--window": o.window,
		"--scale-every": o.scaleEvery, "--pod-every": o.podEvery, "--quiet": o.quiet, "--hog-timeout": o.hogTimeout, "--hog-stall": o.hogStall, "--transition": o.transition}
	for name, d := range positive {
		if d <= 0 {
			return fmt.Errorf("%s %s: want a positive duration", name, d)
		}
	}
	if o.warmup < 0 {
		return fmt.Errorf("--warmup %s: want zero or more", o.warmup)
	}
	if o.interval*10 > o.duration {
		return fmt.Errorf("--interval %s: want at least 10 samples in --duration %s", o.interval, o.duration)
	}
	if o.replicasMin < 0 || o.replicasMax < o.replicasMin {
		return fmt.Errorf("--replicas-min %d, --replicas-max %d: want 0 <= min <= max", o.replicasMin, o.replicasMax)
	}
	if o.singles < 1 {
		return fmt.Errorf("--singles %d: want at least 1", o.singles)
	}
	if o.overshoot < 1 || o.hogRate < 1 {
		return fmt.Errorf("--overshoot %d, --hog-rate %d: want positive MiB and MiB/s", o.overshoot, o.hogRate)
	}
	if o.out == "" {
		return errors.New("--out: want a directory")
	}
	o.window = min(o.window, o.duration/3)
	o.warmup = min(o.warmup, o.duration/3)
	return nil
}
