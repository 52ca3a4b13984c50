package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	evictdagent "github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/snapshot"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

const simulateHelp = `Usage: evictd simulate --snapshot FILE [flags] [-o text|json]

Replay a node snapshot (docs/SNAPSHOT.md) through the decision code the
agent runs and print, step by step, what evictd would do: the observations,
each threshold's state, the pressure conditions, the ranking and the
eviction. The snapshot's own flags come first, so the command line's win;
the other flags are the agent's.
`

// simulate replays a snapshot through the same decision code the agent
// runs and prints, step by step, what evictd would do.
func simulate(args []string, stdout, stderr io.Writer) int {
	var output string
	var kf kubeletFlags
	flags := func(fs *pflag.FlagSet) {
		fs.String("snapshot", "", "JSON node snapshot to replay (format: docs/SNAPSHOT.md); required.")
		fs.StringVarP(&output, "output", "o", "text", "Output format: text or json.")
		kf.register(fs)
	}
	// A first look at the arguments finds the snapshot, whose own flags
	// then come before the command line's, so the command line wins.
	pre := pflag.NewFlagSet("evictd simulate", pflag.ContinueOnError)
	pre.ParseErrorsAllowlist.UnknownFlags = true
	pre.SetOutput(io.Discard)
	pre.Usage = func() {}
	path := pre.String("snapshot", "", "")
	if err := pre.Parse(args); errors.Is(err, pflag.ErrHelp) {
		_, code, _ := loadConfig("evictd simulate", simulateHelp, []string{"--help"}, stdout, stderr, flags)
		return code
	}
	if *path == "" {
		return usageError(stderr, "evictd simulate", errors.New("--snapshot FILE is required"))
	}
	sc, err := snapshot.ReadFile(*path)
	if err != nil {
		// The error may quote a key of the snapshot as written.
		textf(stderr, "evictd simulate: %v\n", err)
		return 1
	}

	cfg, code, ok := loadConfig("evictd simulate", simulateHelp, append(append([]string{}, sc.Args...), args...), stdout, stderr, flags)
	if !ok {
		return code
	}
	if output != "text" && output != "json" {
		return usageError(stderr, "evictd simulate", fmt.Errorf("--output %q: want text or json", output))
	}
	if kf.requested() {
		return simulateKubelet(sc, cfg, output, &kf, stdout, stderr)
	}

	// Each step is written as it is decided: what simulate holds beyond
	// the snapshot does not grow with its steps.
	d := newStepDecider(decide.NewDecider(evictdagent.DeciderConfig(cfg, sc.Layout)), sc)
	var last decide.Decision
	if output == "json" {
		// A flight record's replay is an object: its steps, then the
		// comparison with what the agent decided.
		if sc.Record != nil {
			io.WriteString(stdout, "{\"steps\": ")
		}
		arr := newJSONArray(stdout)
		for _, step := range sc.Steps {
			obs := step.ObservationsFor(cfg.HugepageAwareEviction)
			last = d.decide(step, obs)
			if err := arr.add(newStepResult(step, obs, cfg.HugepageAwareEviction, last, d.Thresholds())); err != nil {
				fmt.Fprintf(stderr, "evictd simulate: %v\n", err)
				return 1
			}
		}
		if err := arr.close(); err != nil {
			fmt.Fprintf(stderr, "evictd simulate: %v\n", err)
			return 1
		}
		if sc.Record != nil {
			io.WriteString(stdout, ", \"record\": ")
			if err := writeJSON(stdout, compareRecord(sc.Record, last)); err != nil {
				fmt.Fprintf(stderr, "evictd simulate: %v\n", err)
				return 1
			}
			io.WriteString(stdout, "}\n")
		}
		return 0
	}
	// The tables write a cell at a time: buffered, and flushed at the
	// end of each step, a step is a few writes instead of one per cell.
	w := bufio.NewWriter(stdout)
	for _, note := range cfg.Notes {
		textf(w, "note: %s\n", note)
	}
	if slices.ContainsFunc(sc.Steps, func(s snapshot.Step) bool { return s.HugePages > 0 }) {
		fmt.Fprintf(w, "note: the snapshot has hugepages; %s\n", cfg.MemoryAvailableSemantics())
	}
	for i, step := range sc.Steps {
		if i > 0 {
			fmt.Fprintln(w)
		}
		obs := step.ObservationsFor(cfg.HugepageAwareEviction)
		last = d.decide(step, obs)
		newStepResult(step, obs, cfg.HugepageAwareEviction, last, d.Thresholds()).write(w)
		if err := w.Flush(); err != nil {
			fmt.Fprintf(stderr, "evictd simulate: %v\n", err)
			return 1
		}
	}
	if sc.Record != nil {
		compareRecord(sc.Record, last).write(w)
		if err := w.Flush(); err != nil {
			fmt.Fprintf(stderr, "evictd simulate: %v\n", err)
			return 1
		}
	}
	return 0
}

// stepDecider decides a snapshot's steps in order as the agent's passes
// do, time to exhaustion (--eviction-time-to-exhaustion) included: its
// readings are the steps' memory observations and a flight record's
// fast-poll readings, as the agent, within two growth windows of the
// step; its release estimate the one the record's decision was predicted
// with, or decide.DefaultRelease.
type stepDecider struct {
	*decide.Decider
	// recorded are the record's readings; recent the steps' of the
	// last two growth windows.
	recorded, recent []signals.Observation
	release          time.Duration
}

func newStepDecider(d *decide.Decider, sc *snapshot.Scenario) *stepDecider {
	s := &stepDecider{Decider: d, recorded: sc.Reads, release: sc.Release}
	if s.release <= 0 {
		s.release = decide.DefaultRelease
	}
	return s
}

// decide decides step, whose observations are obs.
func (s *stepDecider) decide(step snapshot.Step, obs signals.Observations) decide.Decision {
	ev := s.Evaluate(step.Time, obs)
	if !s.Exhaustion().Enabled {
		return s.DecideEvaluated(step.Time, ev, obs, step.Pods, step.Stats)
	}
	from := step.Time.Add(-2 * decide.DefaultGrowthWindow)
	s.recent = slices.DeleteFunc(s.recent, func(o signals.Observation) bool { return o.Time.Before(from) })
	for _, sig := range []signals.Signal{signals.MemoryAvailable, signals.AllocatableMemoryAvailable} {
		if o, ok := obs[sig]; ok {
			s.recent = append(s.recent, o)
		}
	}
	reads := s.recent
	if len(s.recorded) > 0 {
		reads = slices.Clone(s.recent)
		for _, o := range s.recorded {
			if !o.Time.Before(from) && !o.Time.After(step.Time) {
				reads = append(reads, o)
			}
		}
	}
	p := s.Predict(step.Time, ev, obs, reads, s.release)
	return s.DecidePredicted(step.Time, ev, p, obs, step.Pods, step.Stats)
}

// jsonArray writes a JSON array one element at a time, as writeJSON
// would write the whole slice; with an indent, nested that deep inside an
// object, and without the final newline.
type jsonArray struct {
	w      io.Writer
	indent string
	n      int
}

func newJSONArray(w io.Writer) *jsonArray { return &jsonArray{w: w} }

func (a *jsonArray) add(v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(a.indent+"  ", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	sep := ",\n" + a.indent + "  "
	if a.n == 0 {
		sep = "[\n" + a.indent + "  "
	}
	a.n++
	_, err := io.WriteString(a.w, sep+strings.TrimSuffix(b.String(), "\n"))
	return err
}

func (a *jsonArray) close() error {
	end := "\n" + a.indent + "]"
	if a.n == 0 {
		end = "[]"
	}
	if a.indent == "" {
		end += "\n"
	}
	_, err := io.WriteString(a.w, end)
	return err
}

// stepResult is what simulate reports of one step.
type stepResult struct {
	At           string            `json:"at"`
	Observations []obsResult       `json:"observations"`
	Thresholds   []thResult        `json:"thresholds"`
	Pressures    []string          `json:"pressures"`
	Signal       string            `json:"signal,omitempty"`
	Ranking      []candResult      `json:"ranking,omitempty"`
	Outcome      string            `json:"outcome"`
	Reason       string            `json:"reason"`
	Victim       string            `json:"victim,omitempty"`
	GracePeriod  int64             `json:"gracePeriodSeconds,omitempty"`
	Message      string            `json:"message,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	// HugePages is the node's hugepage capacity in the step, in bytes.
	HugePages int64 `json:"hugePages,omitempty"`
	// LocalStorage lists the pods evicted for exceeding their own
	// local-storage limits, before any threshold.
	LocalStorage []localStorageResult `json:"localStorage,omitempty"`
	// Predicted says time to exhaustion acted before the threshold was
	// met, and why.
	Predicted string `json:"predicted,omitempty"`
}

type localStorageResult struct {
	Pod         string `json:"pod"`
	Signal      string `json:"signal"`
	Usage       string `json:"usage"`
	Limit       string `json:"limit"`
	GracePeriod int64  `json:"gracePeriodSeconds"`
	Message     string `json:"message"`
}

type obsResult struct {
	Signal    string `json:"signal"`
	Available int64  `json:"available"`
	Capacity  int64  `json:"capacity"`
	// Stall is a stall signal's reading as a percentage ("35.5%"); its
	// Available and Capacity are then in 1/10000 of the time.
	Stall string `json:"stall,omitempty"`
	// HugePagesSubtracted is what memory.available's Available and
	// Capacity had taken off for the node's hugepages (kubelet 1.37's
	// HugepageAwareEviction): the step's hugepages, or 0 when they are
	// left in (kubelet 1.36's).
	HugePagesSubtracted int64 `json:"hugePagesSubtracted,omitempty"`
}

type thResult struct {
	Threshold string `json:"threshold"`
	Kind      string `json:"kind"`
	State     string `json:"state"`
}

type candResult struct {
	Pod      string `json:"pod"`
	QOS      string `json:"qos"`
	Priority int32  `json:"priority"`
	Usage    string `json:"usage"`
	Request  string `json:"request"`
	Key      string `json:"key"`
	Skip     string `json:"skip,omitempty"`
}

// newStepResult reports step, decided (dec) on obs: the step's
// observations with memory.available as the semantics in force make it,
// hugepage-aware (kubelet 1.37's) or not.
func newStepResult(step snapshot.Step, obs signals.Observations, hugepageAware bool, dec decide.Decision, ths []thresholds.Threshold) stepResult {
	r := stepResult{At: "+" + step.At.String(), Outcome: string(dec.Outcome), Reason: dec.Reason, Signal: string(dec.Signal), HugePages: step.HugePages}
	for _, s := range signals.All() {
		if o, ok := obs[s]; ok {
			or := obsResult{Signal: string(s), Available: o.Available, Capacity: o.Capacity}
			if s.Stall() {
				or.Stall = signals.FormatStall(o.Available)
			}
			if s == signals.MemoryAvailable && hugepageAware {
				or.HugePagesSubtracted = step.HugePages
			}
			r.Observations = append(r.Observations, or)
		}
	}
	ev := dec.Evaluation
	state := map[thresholds.Key]string{}
	for _, th := range ev.Met {
		state[th.Key()] = "met"
	}
	for _, th := range ev.Waiting {
		state[th.Key()] = fmt.Sprintf("met since +%s, grace %s not over", ev.FirstObservedAt[th.Key()].Sub(snapshot.Epoch), th.GracePeriod)
	}
	for _, th := range ev.Stale {
		state[th.Key()] = "met, observation stale"
	}
	for _, th := range ev.Actionable {
		state[th.Key()] = "met, acting"
	}
	for _, th := range ev.Missing {
		state[th.Key()] = "no observation"
	}
	if p := dec.Predicted; p != nil {
		r.Predicted = p.Words()
		state[p.Threshold.Key()] = fmt.Sprintf("not met, predicted to run out in %s: acting", p.TimeLeft.Round(time.Millisecond))
	}
	for _, th := range ths {
		st := state[th.Key()]
		if st == "" {
			st = "not met"
		}
		r.Thresholds = append(r.Thresholds, thResult{Threshold: thresholds.Format(th), Kind: th.Kind(), State: st})
	}
	for p, ps := range ev.Pressure {
		if ps.Active {
			r.Pressures = append(r.Pressures, string(p))
		}
	}
	sort.Strings(r.Pressures)
	res := dec.Signal.Resource()
	for _, c := range dec.Candidates {
		usage := "no stats"
		if c.HasStats {
			usage = human(c.Usage, res)
		}
		r.Ranking = append(r.Ranking, candResult{
			Pod: c.Pod.Ref(), QOS: string(c.Pod.QOS), Priority: c.Pod.Priority,
			Usage: usage, Request: human(c.Request, res), Key: c.Key, Skip: c.Skip,
		})
	}
	for _, req := range dec.LocalStorageRequests() {
		v := dec.LocalStorage[len(r.LocalStorage)]
		r.LocalStorage = append(r.LocalStorage, localStorageResult{
			Pod: req.Pod.Ref(), Signal: string(req.Signal), Usage: human(v.Usage, signals.ResourceEphemeralStorage),
			Limit: human(v.Limit, signals.ResourceEphemeralStorage), GracePeriod: req.GracePeriod, Message: req.Message,
		})
	}
	if dec.Pod != nil {
		r.Victim, r.GracePeriod, r.Message, r.Annotations = dec.Pod.Ref(), dec.GracePeriod, dec.Message, dec.Annotations
	}
	return r
}

func (r stepResult) write(w io.Writer) {
	textf(w, "== at %s\n", r.At)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "observations:")
	for _, o := range r.Observations {
		if o.Stall != "" {
			textf(tw, "  %s\t%s of the time stalled\n", o.Signal, o.Stall)
			continue
		}
		res := signals.Signal(o.Signal).Resource()
		var huge string
		switch {
		case o.HugePagesSubtracted > 0:
			huge = fmt.Sprintf(" (less %s of hugepages, as kubelet 1.37)", human(o.HugePagesSubtracted, res))
		case o.Signal == string(signals.MemoryAvailable) && r.HugePages > 0:
			huge = fmt.Sprintf(" (%s of hugepages left in, as kubelet 1.36)", human(r.HugePages, res))
		}
		textf(tw, "  %s\t%s of %s%s\n", o.Signal, human(o.Available, res), human(o.Capacity, res), huge)
	}
	fmt.Fprintln(tw, "thresholds:")
	for _, t := range r.Thresholds {
		textf(tw, "  %s\t%s\t%s\n", t.Threshold, t.Kind, t.State)
	}
	_ = tw.Flush()
	if len(r.Pressures) == 0 {
		fmt.Fprintln(w, "pressure: none")
	} else {
		textf(w, "pressure: %s\n", strings.Join(r.Pressures, ", "))
	}
	if len(r.Ranking) > 0 {
		textf(w, "ranking for %s:\n", r.Signal)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tpod\tqos\tpriority\tusage\trequest\tdeciding key")
		for i, c := range r.Ranking {
			key := c.Key
			if c.Skip != "" {
				key += " — skipped: " + c.Skip
			}
			textf(tw, "  %d\t%s\t%s\t%d\t%s\t%s\t%s\n", i+1, c.Pod, c.QOS, c.Priority, c.Usage, c.Request, key)
		}
		_ = tw.Flush()
	}
	textf(w, "decision: %s — %s\n", r.Outcome, r.Reason)
	if r.Predicted != "" {
		textf(w, "predicted: %s\n", r.Predicted)
	}
	for _, l := range r.LocalStorage {
		textf(w, "evict: %s for %s (%s used, limit %s) with a grace period of %ds\n", l.Pod, l.Signal, l.Usage, l.Limit, l.GracePeriod)
		fmt.Fprintf(w, "event: Warning Evicted %q\n", l.Message) // %q escapes what is not printable
	}
	if r.Victim != "" {
		textf(w, "evict: %s with a grace period of %ds\n", r.Victim, r.GracePeriod)
		fmt.Fprintf(w, "event: Warning Evicted %q\n", r.Message)
	}
}
