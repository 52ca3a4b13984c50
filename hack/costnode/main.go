// Command costnode is `make bench-cost`: evictd's own cost on a real node.
// It brings a whole node up on this machine (control plane, containerd, a
// real kubelet with maxPods raised and its eviction thresholds off), starts
// evictd beside it with its default thresholds, and for each pod count
// (110 and 250 by default) runs that many BestEffort "sleep" pods, lets
// evictd settle, then measures it idle over a window: CPU (utime+stime from
// /proc/PID/stat) as a share of one core, RSS (VmRSS, RssAnon, RssFile,
// VmHWM from /proc/PID/status), open fds, goroutines and its own pass
// duration and bytes allocated per pass (from its /metrics). It prints a
// markdown table and stops everything on exit or Ctrl-C.
//
// It needs root, the binaries of `make k8s-bins` and the packages of
// `make runtime`; EVICTD_BIN names the evictd binary (else it is built).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/testnode"
	"github.com/prometheus/procfs"
)

// userHZ is the unit of utime and stime in /proc/PID/stat (USER_HZ, 100 on
// every Linux architecture Go supports).
const userHZ = 100

type options struct {
	counts   []int
	window   time.Duration
	settle   time.Duration
	parallel int
	podsMiB  int
	maxPods  int
}

func main() {
	if code, worker := testnode.Supervise("costnode", "stopping evictd, the kubelet, containerd with the pods, the control plane (up to a minute)",
		"still stopping everything by PID; wait for it"); !worker {
		os.Exit(code)
	}
	var o options
	var counts string
	flag.StringVar(&counts, "pods", "110,250", "comma-separated numbers of running pods to measure at, in increasing order")
	flag.DurationVar(&o.window, "window", 60*time.Second, "how long each measurement lasts")
	flag.DurationVar(&o.settle, "settle", 25*time.Second, "how long evictd runs with all pods up before a measurement starts")
	flag.IntVar(&o.parallel, "parallel", 16, "pods created and waited for at once")
	flag.IntVar(&o.podsMiB, "pods-memory", 4096, "memory limit of the kubepods cgroup, in MiB")
	flag.IntVar(&o.maxPods, "max-pods", 260, "the kubelet's maxPods")
	flag.Parse()
	for _, f := range strings.Split(counts, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 0 || (len(o.counts) > 0 && c < o.counts[len(o.counts)-1]) {
			fmt.Fprintf(os.Stderr, "costnode: --pods %q: want increasing non-negative integers\n", counts)
			os.Exit(2)
		}
		o.counts = append(o.counts, c)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, o)
	switch {
	case err == nil:
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		fmt.Println("costnode: interrupted; everything is stopped")
		os.Exit(130)
	default:
		fmt.Fprintf(os.Stderr, "costnode: FAILED: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) (err error) {
	fmt.Printf("costnode: starting a node (kubepods %d MiB, maxPods %d)\n", o.podsMiB, o.maxPods)
	n, err := testnode.Start(ctx, testnode.Options{
		Name:       "evictd-cost",
		PodsMemory: int64(o.podsMiB) << 20,
		Kubelet:    testnode.KubeletOptions{Config: map[string]any{"maxPods": o.maxPods}},
	})
	if err != nil {
		return err
	}
	defer func() {
		// Hundreds of sandboxes are more than the runtime's teardown
		// stops in its time: let the kubelet take the pods down first.
		fmt.Println("costnode: deleting the pods, then stopping the node")
		if derr := deletePods(n, 3*time.Minute); derr != nil {
			fmt.Printf("costnode: %v; stopping anyway\n", derr)
		}
		err = errors.Join(err, n.Stop())
	}()
	fmt.Printf("costnode: node ready in %s; starting evictd with its default thresholds\n", n.ReadyIn().Round(time.Second))
	// Standalone from the API server's point of view it is not: it lists
	// pods, reads their stats from the runtime and the cgroups, and would
	// evict; nothing here is under pressure.
	if err := n.StartEvictd(ctx); err != nil {
		return err
	}
	var rows []row
	running := 0
	for _, want := range o.counts {
		t0 := time.Now()
		if err := runPods(ctx, n, running, want, o.parallel); err != nil {
			return err
		}
		fmt.Printf("costnode: %d pods running (%d started in %s); settling %s\n", want, want-running, time.Since(t0).Round(time.Second), o.settle)
		running = want
		if err := sleep(ctx, o.settle); err != nil {
			return err
		}
		r, err := measure(ctx, n, want, o.window)
		if err != nil {
			return err
		}
		rows = append(rows, r)
		fmt.Printf("costnode: %d pods: CPU %.3f%%, VmRSS %.1f MiB\n", want, r.cpuPct, mib(r.rss))
	}
	printTable(os.Stdout, o, rows)
	return nil
}

// runPods creates pods cost-from … cost-(to−1) with parallel at a time and
// waits for each to run.
func runPods(ctx context.Context, n *testnode.Node, from, to, parallel int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := from; i < to; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := n.RunPod(ctx, n.Pod(fmt.Sprintf("cost-%03d", i), "sleep"), 5*time.Minute); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel()
			}
		}(i)
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return ctx.Err()
}

// deletePods deletes every pod of the default namespace with a 1 s grace
// period and waits until the API server has none left.
func deletePods(n *testnode.Node, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pods := n.Admin().CoreV1().Pods(metav1.NamespaceDefault)
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete pods: %w", err)
	}
	return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := pods.List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, nil
	})
}

// row is one measurement.
type row struct {
	pods       int
	seenPods   int // pods in evictd's last pass
	window     time.Duration
	cpuPct     float64
	rss        int64 // VmRSS at the end, bytes
	rssPeak    int64 // highest VmRSS sampled in the window
	anon, file int64 // RssAnon, RssFile at the end
	hwm        int64 // VmHWM: peak RSS since evictd started
	fds        int
	goroutines float64
	passes     float64
	passMean   time.Duration
	allocPass  float64 // bytes allocated per pass (incl. the two /metrics scrapes)
}

func measure(ctx context.Context, n *testnode.Node, pods int, window time.Duration) (row, error) {
	pid := n.EvictdPID()
	if pid == 0 {
		return row{}, errors.New("evictd is not running")
	}
	r := row{pods: pods, window: window}
	m0, err := scrape(ctx, n)
	if err != nil {
		return r, err
	}
	c0, err := cpuTicks(pid)
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	deadline := t0.Add(window)
	for time.Now().Before(deadline) {
		if err := sleep(ctx, min(time.Second, time.Until(deadline))); err != nil {
			return r, err
		}
		st, err := procStatus(pid)
		if err != nil {
			return r, err
		}
		r.rssPeak = max(r.rssPeak, st["VmRSS"])
	}
	c1, err := cpuTicks(pid)
	if err != nil {
		return r, err
	}
	wall := time.Since(t0)
	m1, err := scrape(ctx, n)
	if err != nil {
		return r, err
	}
	st, err := procStatus(pid)
	if err != nil {
		return r, err
	}
	r.cpuPct = 100 * float64(c1-c0) / userHZ / wall.Seconds()
	r.rss, r.anon, r.file, r.hwm = st["VmRSS"], st["RssAnon"], st["RssFile"], st["VmHWM"]
	r.rssPeak = max(r.rssPeak, r.rss)
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		r.fds = len(ents)
	}
	r.goroutines = m1["go_goroutines"]
	r.passes = m1["evictd_pass_duration_seconds_count"] - m0["evictd_pass_duration_seconds_count"]
	if r.passes > 0 {
		sum := m1["evictd_pass_duration_seconds_sum"] - m0["evictd_pass_duration_seconds_sum"]
		r.passMean = time.Duration(sum / r.passes * float64(time.Second))
		r.allocPass = (m1["go_memstats_alloc_bytes_total"] - m0["go_memstats_alloc_bytes_total"]) / r.passes
	}
	if s, err := n.EvictdGet(ctx, "/status"); err == nil {
		var v struct {
			Pods int `json:"pods"`
		}
		if json.Unmarshal([]byte(s), &v) == nil {
			r.seenPods = v.Pods
		}
	}
	return r, nil
}

// scrape returns the unlabelled samples of evictd's /metrics by name.
func scrape(ctx context.Context, n *testnode.Node) (map[string]float64, error) {
	body, err := n.EvictdGet(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	return out, nil
}

// cpuTicks returns utime+stime of pid in USER_HZ ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return u + st, nil
}

// procStatus returns evictd's VmRSS, RssAnon, RssFile and VmHWM from
// /proc/PID/status, in bytes.
func procStatus(pid int) (map[string]int64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return nil, err
	}
	st, err := p.NewStatus()
	if err != nil {
		return nil, err
	}
	return map[string]int64{"VmRSS": int64(st.VmRSS), "RssAnon": int64(st.RssAnon), "RssFile": int64(st.RssFile), "VmHWM": int64(st.VmHWM)}, nil
}

func printTable(w *os.File, o options, rows []row) {
	sort.Slice(rows, func(i, j int) bool { return rows[i].pods < rows[j].pods })
	fmt.Fprintf(w, "\nevictd idle beside a real kubelet, default thresholds, %s window per row:\n\n", o.window)
	fmt.Fprintln(w, "| pods (evictd saw) | CPU (of one core) | VmRSS (peak in window) | RssAnon | RssFile | VmHWM | fds | goroutines | passes | mean pass | alloc/pass |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %d (%d) | %.3f%% | %.1f MiB (%.1f) | %.1f MiB | %.1f MiB | %.1f MiB | %d | %.0f | %.0f | %s | %.0f KiB |\n",
			r.pods, r.seenPods, r.cpuPct, mib(r.rss), mib(r.rssPeak), mib(r.anon), mib(r.file), mib(r.hwm),
			r.fds, r.goroutines, r.passes, r.passMean.Round(10*time.Microsecond), r.allocPass/1024)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
