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
// evictd runs with the Environment= settings of systemd/evictd.service
// (GOGC, GOMEMLIMIT), as on a node. With --compare it measures several
// builds side by side on the same node, evictd restarted for each
// measurement and the builds alternating, --rounds times each, and adds a
// table of medians per build; RSS is sampled every second, so a row gives
// the window's median as well as its end and its peak.
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
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/coreos/go-systemd/v22/unit"
	"github.com/evictd/evictd/internal/testing/testnode"
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
	bins     []string // evictd builds to compare; none: the node's own
	rounds   int
	unitFile string
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
	var compare string
	flag.StringVar(&compare, "compare", "", "comma-separated evictd binaries to measure side by side on the same node, alternating (default: $EVICTD_BIN, or one built from the tree)")
	flag.IntVar(&o.rounds, "rounds", 1, "measurements of each binary at each number of pods")
	flag.StringVar(&o.unitFile, "unit", "systemd/evictd.service", "the systemd unit whose Environment= settings evictd runs with (\"\": none)")
	flag.Parse()
	if compare != "" {
		o.bins = strings.Split(compare, ",")
	}
	if o.rounds < 1 {
		fmt.Fprintf(os.Stderr, "costnode: --rounds %d: want at least 1\n", o.rounds)
		os.Exit(2)
	}
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
	env, err := unitEnvironment(o.unitFile)
	if err != nil {
		return err
	}
	// The node's own processes are running: what is set now reaches only
	// the evictd processes started from here on.
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	fmt.Printf("costnode: node ready in %s; evictd runs with its default thresholds and %v\n", n.ReadyIn().Round(time.Second), env)
	bins := o.bins
	if len(bins) == 0 {
		bins = []string{""} // the node's own
	}
	// Standalone from the API server's point of view it is not: it lists
	// pods, reads their stats from the runtime and the cgroups, and would
	// evict; nothing here is under pressure.
	var rows []row
	running := 0
	for _, want := range o.counts {
		t0 := time.Now()
		if err := runPods(ctx, n, running, want, o.parallel); err != nil {
			return err
		}
		fmt.Printf("costnode: %d pods running (%d started in %s)\n", want, want-running, time.Since(t0).Round(time.Second))
		running = want
		for round := 1; round <= o.rounds; round++ {
			for _, bin := range bins {
				r, err := measureBinary(ctx, n, bin, want, o)
				if err != nil {
					return err
				}
				r.round = round
				rows = append(rows, r)
				fmt.Printf("costnode: %s, %d pods, round %d: CPU %.3f%%, VmRSS %.1f MiB (median %.1f)\n", r.bin, want, round, r.cpuPct, mib(r.rss), mib(r.rssMedian))
			}
		}
	}
	printTable(os.Stdout, o, rows)
	if len(bins) > 1 || o.rounds > 1 {
		printMedians(os.Stdout, rows)
	}
	return nil
}

// measureBinary starts evictd from bin ("": the node's own binary) with
// all pods running, lets it settle, measures it and stops it.
func measureBinary(ctx context.Context, n *testnode.Node, bin string, pods int, o options) (row, error) {
	label := "evictd"
	if bin != "" {
		n.SetEvictdBinary(bin)
		label = filepath.Base(bin)
	}
	if err := n.StartEvictd(ctx); err != nil {
		return row{}, err
	}
	fmt.Printf("costnode: %s started beside %d pods; settling %s\n", label, pods, o.settle)
	if err := sleep(ctx, o.settle); err != nil {
		return row{}, errors.Join(err, n.StopEvictd())
	}
	r, err := measure(ctx, n, pods, o.window)
	r.bin = label
	return r, errors.Join(err, n.StopEvictd())
}

// unitEnvironment returns the Environment= settings of the [Service]
// section of a systemd unit file, in order ("" path: none).
func unitEnvironment(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--unit: %w", err)
	}
	defer f.Close()
	opts, err := unit.DeserializeOptions(f)
	if err != nil {
		return nil, fmt.Errorf("--unit %s: %w", path, err)
	}
	var env []string
	for _, op := range opts {
		if op.Section != "Service" || op.Name != "Environment" {
			continue
		}
		for _, kv := range strings.Fields(op.Value) {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return nil, fmt.Errorf("--unit %s: Environment=%s: want KEY=VALUE", path, op.Value)
			}
			env = append(env, kv)
		}
	}
	return env, nil
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
	bin        string // the binary measured
	round      int
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
	nextGC     float64 // the Go heap's target at the end (go_memstats_next_gc_bytes)

	// Medians of the window's samples, one a second: the Go heap's
	// collections make RSS a sawtooth, which one sample catches anywhere.
	rssMedian, anonMedian, fileMedian int64
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
	var rss, anon, file []int64
	for time.Now().Before(deadline) {
		if err := sleep(ctx, min(time.Second, time.Until(deadline))); err != nil {
			return r, err
		}
		st, err := procStatus(pid)
		if err != nil {
			return r, err
		}
		r.rssPeak = max(r.rssPeak, st["VmRSS"])
		rss, anon, file = append(rss, st["VmRSS"]), append(anon, st["RssAnon"]), append(file, st["RssFile"])
	}
	r.rssMedian, r.anonMedian, r.fileMedian = median(rss), median(anon), median(file)
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
	r.nextGC = m1["go_memstats_next_gc_bytes"]
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
	fmt.Fprintf(w, "\nevictd idle beside a real kubelet, default thresholds, %s window per row (VmRSS, RssAnon, RssFile: the window's median, then its end and peak):\n\n", o.window)
	fmt.Fprintln(w, "| binary | round | pods (evictd saw) | CPU (of one core) | VmRSS median (end, peak) | RssAnon median (end) | RssFile median (end) | VmHWM | heap target | fds | goroutines | passes | mean pass | alloc/pass |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %d (%d) | %.3f%% | %.1f MiB (%.1f, %.1f) | %.1f MiB (%.1f) | %.1f MiB (%.1f) | %.1f MiB | %.1f MiB | %d | %.0f | %.0f | %s | %.0f KiB |\n",
			r.bin, r.round, r.pods, r.seenPods, r.cpuPct, mib(r.rssMedian), mib(r.rss), mib(r.rssPeak), mib(r.anonMedian), mib(r.anon),
			mib(r.fileMedian), mib(r.file), mib(r.hwm), r.nextGC/(1<<20), r.fds, r.goroutines, r.passes, r.passMean.Round(10*time.Microsecond), r.allocPass/1024)
	}
}

// printMedians prints, per binary and number of pods, the medians over the
// rounds of each measurement's figures.
func printMedians(w *os.File, rows []row) {
	type key struct {
		bin  string
		pods int
	}
	var keys []key
	groups := map[key][]row{}
	for _, r := range rows {
		k := key{r.bin, r.pods}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	sort.SliceStable(keys, func(i, j int) bool { return keys[i].pods < keys[j].pods })
	fmt.Fprintln(w, "\nMedians over the rounds:")
	fmt.Fprintln(w, "\n| binary | pods | rounds | CPU (of one core) | VmRSS median | VmRSS end | VmRSS peak | RssAnon median | RssFile median |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, k := range keys {
		g := groups[k]
		col := func(f func(row) int64) float64 {
			v := make([]int64, len(g))
			for i, r := range g {
				v[i] = f(r)
			}
			return mib(median(v))
		}
		cpu := make([]int64, len(g))
		for i, r := range g {
			cpu[i] = int64(r.cpuPct * 1000)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.3f%% | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB |\n",
			k.bin, k.pods, len(g), float64(median(cpu))/1000,
			col(func(r row) int64 { return r.rssMedian }), col(func(r row) int64 { return r.rss }), col(func(r row) int64 { return r.rssPeak }),
			col(func(r row) int64 { return r.anonMedian }), col(func(r row) int64 { return r.fileMedian }))
	}
}

// median returns the median of v (the mean of the middle two for an even
// count; 0 for none), leaving v as it is.
func median(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
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
