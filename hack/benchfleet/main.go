// Command benchfleet measures what a fleet of evictd agents costs one
// shared API server (`make bench-fleet`): N simulated nodes on a real
// control plane (internal/testing/fleet), one evictd process per node
// reading a generated /proc and cgroup tree under its node-bound token, and
// a kubelet emulated beside each (its Lease every 10 s, its status every
// 5 min ±50%) as the baseline. Every request is counted from the API
// server's audit log, per scenario: idle; memory pressure on a share of the
// nodes, one eviction each, then relief; the API server stopped and
// started again; every agent restarted at once. It prints markdown tables
// and checks the budgets (PASS/FAIL; the exit code does not depend on
// them).
//
//	benchfleet [--nodes 100] [--scenarios idle,pressure,outage,restart] [--idle 10m] [--out bench-fleet.out]
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
	"strings"
	"syscall"
	"time"

	"github.com/evictd/evictd/internal/testing/fleet"
)

// scenarioNames are the scenarios, in the order they run.
var scenarioNames = []string{"idle", "pressure", "outage", "restart"}

// config is the benchmark's command line.
type config struct {
	nodes          int
	podsMin        int
	podsMax        int
	scenarios      []string
	settle         time.Duration
	idle           time.Duration
	pressure       time.Duration
	pressureShare  float64
	transition     time.Duration
	outage         time.Duration
	after          time.Duration
	readyTimeout   time.Duration
	out            string
	dir            string
	evictdArgs     []string
	seed           uint64
	sampleInterval time.Duration
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("benchfleet", flag.ContinueOnError)
	fs.IntVar(&c.nodes, "nodes", 100, "simulated nodes, one evictd each")
	fs.IntVar(&c.podsMin, "pods-min", 10, "fewest pods bound to a node")
	fs.IntVar(&c.podsMax, "pods-max", 30, "most pods bound to a node")
	scen := fs.String("scenarios", strings.Join(scenarioNames, ","), "comma-separated scenarios to run, in this order: "+strings.Join(scenarioNames, ", "))
	fs.DurationVar(&c.settle, "settle", 30*time.Second, "wait after the agents are ready, before the first scenario")
	fs.DurationVar(&c.idle, "idle", 10*time.Minute, "length of the idle scenario")
	fs.DurationVar(&c.pressure, "pressure", 3*time.Minute, "length of the pressure scenario (pressure, eviction, relief, the condition's transition period)")
	fs.Float64Var(&c.pressureShare, "pressure-share", 0.2, "share of the nodes put under memory pressure")
	fs.DurationVar(&c.transition, "transition", 30*time.Second, "the agents' --eviction-pressure-transition-period")
	fs.DurationVar(&c.outage, "outage", 60*time.Second, "how long the API server is stopped")
	fs.DurationVar(&c.after, "after", 2*time.Minute, "how long the fleet is watched after the API server is back and after the agents' restart")
	fs.DurationVar(&c.readyTimeout, "ready-timeout", 5*time.Minute, "longest wait for every agent's /readyz")
	fs.StringVar(&c.out, "out", "bench-fleet.out", "file the progress and the tables are written to (\"\": none)")
	fs.StringVar(&c.dir, "dir", "", "working directory kept after the run: fixtures, kubeconfigs, every agent's log and the audit log (default: a temporary one, removed)")
	args2 := fs.String("evictd-args", "", "extra flags for every agent, space-separated")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the pods' counts, classes and sizes")
	fs.DurationVar(&c.sampleInterval, "sample", time.Second, "interval of the CPU and memory samples of the API server and the agents")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	for s := range strings.SplitSeq(*scen, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(scenarioNames, s) {
			return c, fmt.Errorf("--scenarios: unknown scenario %q", s)
		}
		c.scenarios = append(c.scenarios, s)
	}
	c.evictdArgs = append([]string{"--eviction-pressure-transition-period=" + c.transition.String()}, strings.Fields(*args2)...)
	switch {
	case c.nodes <= 0:
		return c, errors.New("--nodes must be positive")
	case c.podsMin <= 0 || c.podsMax < c.podsMin:
		return c, errors.New("--pods-min must be positive and at most --pods-max")
	case c.pressureShare <= 0 || c.pressureShare > 1:
		return c, errors.New("--pressure-share must be in (0, 1]")
	}
	return c, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "benchfleet:", err)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "benchfleet:", err)
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
	f, err := fleet.Start(ctx, fleet.Options{
		Nodes: cfg.nodes, PodsMin: cfg.podsMin, PodsMax: cfg.podsMax,
		EvictdArgs: cfg.evictdArgs, Dir: cfg.dir, Keep: cfg.dir != "", Seed: cfg.seed, Logf: logf,
	})
	if err != nil {
		return err
	}
	// Every process is stopped by PID on the way out: an error, Ctrl-C
	// (ctx) or the end.
	defer func() {
		logf("stopping the agents and the control plane")
		if stopErr := f.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stop: %w", stopErr))
		}
	}()
	b := newBench(cfg, f, logf)
	go b.sampler.run(ctx)
	logf("starting %d agents", cfg.nodes)
	begin := time.Now()
	if err := f.StartAgents(ctx, cfg.readyTimeout); err != nil {
		return err
	}
	logf("all %d agents ready in %s; settling %s", cfg.nodes, time.Since(begin).Round(100*time.Millisecond), cfg.settle)
	if err := sleep(ctx, cfg.settle); err != nil {
		return err
	}
	agentsStart := b.sampler.agents()
	for _, name := range cfg.scenarios {
		if err := b.runScenario(ctx, name); err != nil {
			return fmt.Errorf("scenario %s: %w", name, err)
		}
	}
	if exited := f.ExitedAgents(); len(exited) > 0 {
		logf("agents that exited on their own: %v", exited)
	}
	logf("reading the audit log %s", f.AuditLogPath())
	reqs, err := fleet.ReadAudit(f.AuditLogPath())
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	writeReport(out, cfg, b, reqs, agentsStart)
	return nil
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
