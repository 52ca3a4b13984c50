// Command benchnode runs the same memory scenario on one real node
// (internal/testing/testnode) with the kubelet's own eviction manager and with evictd
// beside a kubelet whose thresholds are off, at several allocation rates, and
// prints a markdown table of medians (`make bench-node`).
//
// Each run starts one Burstable hog (memory request 64Mi, no limit,
// restartPolicy --restart-policy) that
// allocates a base at once, about --base-below MiB short of the eviction
// threshold (allocatableMemory.available < --threshold-mib, derived from the
// hard memory.available threshold on both sides), and then grows at the
// rate to --overshoot-mib past the kubepods cgroup's hard limit. The harness
// polls the kubepods memory cgroup itself to timestamp the crossing and the
// peak, reads when the eviction was issued from the evictor's own log, when
// the hog had its SIGTERM from its line in its container log (the CRI log's
// stamp, when containerd read the line, and the time the hog says it
// received the signal, by its own clock), and whether the kernel's OOM
// killer fired first from memory.oom_control and the container status.
//
//	benchnode [--scenario memory|local-storage] [--sides kubelet,kubelet-memcg,evictd-10s,evictd] [--rates 50,200,800] [--reps 3] [--restart-policy Always|Never] [--out bench-node.out]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/containerd/cgroups/v3"

	"github.com/evictd/evictd/internal/testing/testnode"
	"github.com/evictd/evictd/internal/testing/testvm"
)

// side is one way of running eviction on the node.
type side struct {
	name string
	what string // for the table's legend
	// kubelet is the kubelet's configuration; evictd's arguments when
	// evictd runs (nil: evictd stopped).
	kubelet testnode.KubeletOptions
	evictd  []string
}

func sides(thresholdMiB int, transition time.Duration) map[string]side {
	hard := fmt.Sprintf("memory.available<%dMi", thresholdMiB)
	kubeletHard := map[string]string{"memory.available": fmt.Sprintf("%dMi", thresholdMiB)}
	period := transition.String()
	// No hourly cap: a long run evicts one hog every ~10 s, and the
	// default cap of 60 would withhold the rest and let the kernel's OOM
	// killer have them.
	evArgs := []string{"--eviction-hard=" + hard, "--eviction-pressure-transition-period=" + period, "--max-evictions-per-hour=0"}
	return map[string]side{
		"kubelet": {
			name: "kubelet", what: "kubelet eviction manager, evictionHard memory.available<" + strconv.Itoa(thresholdMiB) + "Mi, defaults otherwise (10 s housekeeping, kernelMemcgNotification false); evictd stopped",
			kubelet: testnode.KubeletOptions{EvictionHard: kubeletHard, Config: map[string]any{"evictionPressureTransitionPeriod": period}},
		},
		"kubelet-memcg": {
			name: "kubelet-memcg", what: "the same with kernelMemcgNotification: true",
			kubelet: testnode.KubeletOptions{EvictionHard: kubeletHard, Config: map[string]any{"evictionPressureTransitionPeriod": period, "kernelMemcgNotification": true}},
		},
		"evictd": {
			name: "evictd", what: "kubelet thresholds off; evictd " + strings.Join(evArgs, " ") + ", defaults otherwise (10 s housekeeping, memcg notification on, 250 ms fast poll within 10%)",
			kubelet: testnode.KubeletOptions{Config: map[string]any{"evictionPressureTransitionPeriod": period}},
			evictd:  evArgs,
		},
		"evictd-tte": {
			name: "evictd-tte", what: "kubelet thresholds off; evictd as evictd with --eviction-time-to-exhaustion (acts before the threshold when the growth says memory runs out sooner than its measured release time plus 500 ms)",
			kubelet: testnode.KubeletOptions{Config: map[string]any{"evictionPressureTransitionPeriod": period}},
			evictd:  append(append([]string(nil), evArgs...), "--eviction-time-to-exhaustion"),
		},
		"evictd-10s": {
			name: "evictd-10s", what: "kubelet thresholds off; evictd as above with --kernel-memcg-notification=false --fast-poll-interval=0 (10 s housekeeping only, like the kubelet's defaults)",
			kubelet: testnode.KubeletOptions{Config: map[string]any{"evictionPressureTransitionPeriod": period}},
			evictd:  append(append([]string(nil), evArgs...), "--kernel-memcg-notification=false", "--fast-poll-interval=0"),
		},
	}
}

// config is the benchmark's command line.
type config struct {
	sides         []string
	rates         []int
	reps          int
	out           string
	podsMiB       int
	thresholdMiB  int   // the first of thresholdsMiB, for the local-storage scenario's legend
	thresholdsMiB []int // the grid's headrooms: one hard threshold after another
	baseBelow     int
	overshoot     int
	poll          time.Duration
	transition    time.Duration
	runTimeout    time.Duration
	jitter        time.Duration
	restart       v1.RestartPolicy
	scenario      string
	from          string
	hogCPU        string
	// guest runs the grid in a cgroup v2 guest (guest.go); inGuest is set
	// there: the directory it shares with this machine. nativeTouch is
	// this machine's testvm.TouchTime, from which the guest's slowdown,
	// scale, follows (1 natively); v2 is the unified hierarchy.
	guest        bool
	guestTimeout time.Duration
	inGuest      string
	nativeTouch  time.Duration
	scale        float64
	v2           bool
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("benchnode", flag.ContinueOnError)
	fs.StringVar(&c.scenario, "scenario", "memory", "memory (the hog against the evictors) or local-storage (a pod over its emptyDir's sizeLimit, the kubelet's localStorageCapacityIsolation on beside evictd)")
	sidesFlag := fs.String("sides", "", "comma-separated sides to run: kubelet, kubelet-memcg, evictd-10s, evictd, evictd-tte for the memory scenario (default all five); evictd, evictd-2s, kubelet for local-storage (default all three)")
	ratesFlag := fs.String("rates", "50,200,800", "comma-separated allocation rates in MiB/s")
	fs.IntVar(&c.reps, "reps", 3, "repetitions per side and rate")
	fs.StringVar(&c.out, "out", "bench-node.out", "file the per-run lines and the table are written to (\"\": none)")
	fs.IntVar(&c.podsMiB, "pods-mib", testnode.DefaultPodsMemory>>20, "limit of the kubepods cgroup in MiB")
	thresholdsFlag := fs.String("threshold-mib", "500", "comma-separated hard memory.available thresholds in MiB (allocatableMemory.available derived from each), run one after another: the headroom from the threshold to the kubepods limit")
	fs.IntVar(&c.baseBelow, "base-below", 300, "MiB short of the threshold the hog's base allocation leaves available")
	fs.IntVar(&c.overshoot, "overshoot-mib", 512, "MiB past the kubepods limit the hog asks for in all")
	fs.DurationVar(&c.poll, "poll", 5*time.Millisecond, "interval of the harness's reads of the kubepods memory cgroup")
	fs.DurationVar(&c.transition, "transition", 5*time.Second, "eviction pressure transition period of both sides")
	fs.DurationVar(&c.jitter, "jitter", 10*time.Second, "each hog starts after a random delay up to this, so the crossing falls at a random phase of both sides' 10 s housekeeping")
	restartFlag := fs.String("restart-policy", "Always", "the hog's restartPolicy: Always (a Deployment's pod; evictd sends its SIGTERM itself) or Never (a Job's; evictd's stop waits for the kubelet's takeover)")
	fs.DurationVar(&c.runTimeout, "run-timeout", 90*time.Second, "longest a run may take once the hog is running")
	fs.BoolVar(&c.guest, "guest", false, "run the memory scenario on cgroup v2: in a qemu guest with a real kubelet, every amount of memory divided by the guest's measured slowdown (as root; hack/install-vm.sh)")
	fs.DurationVar(&c.guestTimeout, "guest-timeout", 3*time.Hour, "longest the --guest run may take, the guest's boot and node included")
	fs.StringVar(&c.hogCPU, "hog-cpu", "", "the hog's CPU request (\"\": none, so its cgroup has the smallest CPU weight, as a pod without a CPU request has)")
	fs.StringVar(&c.from, "from", "", "comma-separated outputs of earlier runs: write the tables and charts again from their run lines for the cells of --sides, --rates and --threshold-mib, without a node (--out: where to; not one of these)")
	fs.StringVar(&c.inGuest, "in-guest", "", "set by --guest for the run in the guest: the directory shared with the host")
	fs.DurationVar(&c.nativeTouch, "native-touch", 0, "set by --guest for the run in the guest: the host's time to touch 256 MiB of new memory")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.guest && c.inGuest != "" {
		return c, errors.New("--guest and --in-guest: the first runs the second in the guest; give only --guest")
	}
	if c.inGuest != "" && c.nativeTouch <= 0 {
		return c, fmt.Errorf("--in-guest needs --native-touch, the host's time to touch %d MiB (got %s)", guestTouchMiB, c.nativeTouch)
	}
	if (c.guest || c.inGuest != "") && c.scenario != "memory" {
		return c, fmt.Errorf("--guest: only the memory scenario runs in the guest, not %q", c.scenario)
	}
	var known []string
	switch c.scenario {
	case "memory":
		known = []string{"kubelet", "kubelet-memcg", "evictd-10s", "evictd", "evictd-tte"}
	case "local-storage":
		known = []string{"evictd", "evictd-2s", "kubelet"}
	default:
		return c, fmt.Errorf("--scenario: %q is neither memory nor local-storage", c.scenario)
	}
	if *sidesFlag == "" {
		c.sides = known
	}
	for s := range strings.SplitSeq(*sidesFlag, ",") {
		if s = strings.TrimSpace(s); *sidesFlag == "" {
			break
		}
		if !slices.Contains(known, s) {
			return c, fmt.Errorf("--sides: %q is not a side of the %s scenario (%s)", s, c.scenario, strings.Join(known, ", "))
		}
		c.sides = append(c.sides, s)
	}
	for r := range strings.SplitSeq(*ratesFlag, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || v <= 0 {
			return c, fmt.Errorf("--rates: %q is not a positive number", r)
		}
		c.rates = append(c.rates, v)
	}
	if c.reps <= 0 {
		return c, errors.New("--reps must be positive")
	}
	if c.hogCPU != "" {
		if q, err := resource.ParseQuantity(c.hogCPU); err != nil || q.Sign() <= 0 {
			return c, fmt.Errorf("--hog-cpu: %q is not a positive CPU quantity", c.hogCPU)
		}
	}
	switch c.restart = v1.RestartPolicy(*restartFlag); c.restart {
	case v1.RestartPolicyAlways, v1.RestartPolicyNever:
	default:
		return c, fmt.Errorf("--restart-policy: %q is neither Always nor Never", *restartFlag)
	}
	for t := range strings.SplitSeq(*thresholdsFlag, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(t))
		if err != nil || v <= 0 {
			return c, fmt.Errorf("--threshold-mib: %q is not a positive number", t)
		}
		c.thresholdsMiB = append(c.thresholdsMiB, v)
	}
	c.thresholdMiB = c.thresholdsMiB[0]
	if c.guest || c.inGuest != "" {
		return c, nil // checked in the guest, scaled
	}
	return c, c.checkHeadroom()
}

// checkHeadroom checks that every threshold with the base's distance to it
// fits below the kubepods limit, in the guest scaled.
func (c config) checkHeadroom() error {
	for _, v := range c.thresholdsMiB {
		if c.scaled(v)+c.scaled(c.baseBelow) >= c.podsMiB {
			return fmt.Errorf("--threshold-mib %d + --base-below %d (scaled to the guest: %d + %d MiB) must stay below --pods-mib %d",
				v, c.baseBelow, c.scaled(v), c.scaled(c.baseBelow), c.podsMiB)
		}
	}
	return nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "benchnode:", err)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	switch {
	case cfg.from != "":
		err = fromRuns(cfg, strings.Split(cfg.from, ","))
	case cfg.guest:
		err = runGuest(ctx, cfg, os.Args[1:])
	default:
		err = run(ctx, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchnode:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config) (err error) {
	var out io.Writer = os.Stdout
	if cfg.out != "" {
		f, err := os.Create(cfg.out)
		if err != nil {
			return err
		}
		defer f.Close()
		out = io.MultiWriter(os.Stdout, f)
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(out, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}
	cfg.v2 = cgroups.Mode() == cgroups.Unified
	if cfg.v2 && slices.Contains(cfg.sides, "kubelet-memcg") {
		return errors.New("--sides kubelet-memcg: the kubelet's kernelMemcgNotification works only on cgroup v1, and this is v2")
	}
	opts := testnode.Options{Name: "bench-node", PodsMemory: int64(cfg.podsMiB) << 20}
	if cfg.inGuest != "" {
		touch := testvm.TouchTime(guestTouchMiB)
		cfg.scale = float64(touch) / float64(cfg.nativeTouch)
		logf("the guest touches %d MiB of new memory in %s, the host in %s: slowdown s = %.1f; every amount of memory below is divided by it, the tables keep the native ones",
			guestTouchMiB, touch.Round(time.Millisecond), cfg.nativeTouch.Round(time.Millisecond), cfg.scale)
		if err := cfg.checkHeadroom(); err != nil {
			return err
		}
		opts = guestNodeOptions(cfg, opts.Kubelet)
	}
	known := sides(cfg.scaled(cfg.thresholdMiB), cfg.transition)
	// The local-storage scenario's kubelet: thresholds off,
	// localStorageCapacityIsolation at its default, on.
	if cfg.scenario == "memory" {
		opts.Kubelet = known[cfg.sides[0]].kubelet
	}
	logf("starting the node (kubepods limit %d MiB, cgroup v2 %t)", cfg.podsMiB, cfg.v2)
	n, err := testnode.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := n.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stop node: %w", stopErr))
		}
	}()
	logf("node ready in %s (%s)", n.ReadyIn().Round(time.Second), strings.Join(n.Phases(), ", "))

	if cfg.scenario == "local-storage" {
		err := runLocalStorage(ctx, cfg, n, logf, out)
		keepLogs(cfg, n)
		return err
	}
	b := &bench{cfg: cfg, n: n, logf: logf}
	var results []result
	first := true
	for _, threshold := range cfg.thresholdsMiB {
		b.threshold = threshold
		known := sides(cfg.scaled(threshold), cfg.transition)
		for _, name := range cfg.sides {
			s := known[name]
			if err := b.setSide(ctx, s, first); err != nil {
				return fmt.Errorf("side %s: %w", name, err)
			}
			first = false
			for _, rate := range cfg.rates {
				for rep := 1; rep <= cfg.reps; rep++ {
					r, err := b.runOnce(ctx, s, rate, rep)
					if err != nil {
						return fmt.Errorf("side %s threshold %d MiB rate %d rep %d: %w", name, threshold, rate, rep, err)
					}
					logf("%s", r.line())
					results = append(results, r)
				}
			}
		}
	}
	if err := n.StopEvictd(); err != nil {
		return err
	}
	keepLogs(cfg, n)
	fmt.Fprintln(out)
	writeTable(out, cfg, known, results)
	if cfg.out != "" {
		for _, name := range cfg.sides {
			path := cfg.out + "." + name + ".svg"
			if err := os.WriteFile(path, gridSVG(cfg, name, results), 0o644); err != nil {
				return err
			}
			logf("chart of side %s: %s", name, path)
		}
	}
	return nil
}

// keepLogs copies the evictors' logs beside --out: the node's go with it.
func keepLogs(cfg config, n *testnode.Node) {
	if cfg.out == "" {
		return
	}
	for _, c := range []string{"kubelet", "evictd"} {
		if data, err := os.ReadFile(n.LogPath(c)); err == nil {
			_ = os.WriteFile(cfg.out+"."+c+".log", data, 0o644)
		}
	}
}
