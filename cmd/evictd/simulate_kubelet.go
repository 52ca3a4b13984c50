package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	evictdagent "github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/snapshot"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// kubeletFlags are simulate's --kubelet* flags: the kubelet counterfactual
// (docs/SNAPSHOT.md, "Kubelet counterfactual").
type kubeletFlags struct {
	fs           *pflag.FlagSet
	version      string
	housekeeping time.Duration
	memcg        bool
}

// defaultKubeletHousekeeping is the kubelet's evictionMonitoringPeriod.
const defaultKubeletHousekeeping = 10 * time.Second

func (k *kubeletFlags) register(fs *pflag.FlagSet) {
	k.fs = fs
	fs.StringVar(&k.version, "kubelet", "", "Also replay the snapshot as the kubelet's eviction manager would have handled it, and print it beside evictd's: 1.36 (memory.available with the hugepages left in) or 1.37 (hugepage-aware).")
	fs.DurationVar(&k.housekeeping, "kubelet-housekeeping", defaultKubeletHousekeeping, "With --kubelet: the kubelet's eviction monitoring interval.")
	fs.BoolVar(&k.memcg, "kubelet-memcg-notification", false, "With --kubelet: the kubelet's kernelMemcgNotification (cgroup v1 only): it also synchronizes when memory use crosses a memory threshold.")
}

// requested reports whether any --kubelet* flag was given.
func (k *kubeletFlags) requested() bool {
	if k.fs == nil {
		return false
	}
	return k.fs.Changed("kubelet") || k.fs.Changed("kubelet-housekeeping") || k.fs.Changed("kubelet-memcg-notification")
}

// check validates the flags; the error names the flag and its value.
func (k *kubeletFlags) check() error {
	switch {
	case !k.fs.Changed("kubelet"):
		name := "kubelet-housekeeping"
		if !k.fs.Changed(name) {
			name = "kubelet-memcg-notification"
		}
		return fmt.Errorf("--%s needs --kubelet 1.36 or --kubelet 1.37", name)
	case k.version != "1.36" && k.version != "1.37":
		return fmt.Errorf("--kubelet %q: want 1.36 (memory.available with the hugepages left in) or 1.37 (hugepage-aware)", k.version)
	case k.housekeeping <= 0:
		return fmt.Errorf("--kubelet-housekeeping %s: must be more than 0 (the kubelet's is %s)", k.housekeeping, defaultKubeletHousekeeping)
	}
	return nil
}

// evictdRace is what evictd did in the replay, for the comparison.
type evictdRace struct {
	Noticed     bool
	NoticedAt   time.Duration
	Evicted     bool
	EvictedAt   time.Duration
	Victim      string
	GracePeriod int64
}

// simulateKubelet is `evictd simulate` with --kubelet: evictd's replay,
// step by step as without it, then the kubelet's counterfactual beside it.
func simulateKubelet(sc *snapshot.Scenario, cfg *config.Config, output string, kf *kubeletFlags, stdout, stderr io.Writer) int {
	if err := kf.check(); err != nil {
		return usageError(stderr, "evictd simulate", err)
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "evictd simulate: %v\n", err)
		return 1
	}
	w := bufio.NewWriter(stdout)
	var steps *jsonArray
	if output == "json" {
		fmt.Fprint(w, "{\n  \"steps\": ")
		steps = &jsonArray{w: w, indent: "  "}
	} else {
		for _, note := range cfg.Notes {
			textf(w, "note: %s\n", note)
		}
		if slices.ContainsFunc(sc.Steps, func(s snapshot.Step) bool { return s.HugePages > 0 }) {
			fmt.Fprintf(w, "note: the snapshot has hugepages; %s\n", cfg.MemoryAvailableSemantics())
		}
	}
	var ev evictdRace
	d := newStepDecider(decide.NewDecider(evictdagent.DeciderConfig(cfg, sc.Layout)), sc)
	for i, step := range sc.Steps {
		obs := step.ObservationsFor(cfg.HugepageAwareEviction)
		dec := d.decide(step, obs)
		if (len(dec.Evaluation.Met) > 0 || dec.Predicted != nil) && !ev.Noticed {
			ev.Noticed, ev.NoticedAt = true, step.At
		}
		if dec.Outcome == decide.OutcomeEvict && !ev.Evicted {
			ev.Evicted, ev.EvictedAt, ev.Victim, ev.GracePeriod = true, step.At, dec.Pod.Ref(), dec.GracePeriod
		}
		r := newStepResult(step, obs, cfg.HugepageAwareEviction, dec, d.Thresholds())
		if steps != nil {
			if err := steps.add(r); err != nil {
				return fail(err)
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		r.write(w)
		if err := w.Flush(); err != nil {
			return fail(err)
		}
	}

	m := kubeletModel{
		Steps:            sc.Steps,
		Thresholds:       kubeletThresholds(cfg.Thresholds, sc.Layout),
		HugepageAware:    kf.version == "1.37",
		Layout:           sc.Layout,
		TransitionPeriod: cfg.PressureTransitionPeriod,
		MaxPodGrace:      int64(cfg.MaxPodGracePeriodSeconds),
		Housekeeping:     kf.housekeeping,
		Memcg:            kf.memcg,
	}
	if sc.Record != nil {
		for _, rd := range sc.Record.Reads {
			at, err := time.ParseDuration(rd.At)
			if err != nil {
				textf(stderr, "evictd simulate: record.reads: at %q: %v\n", rd.At, err)
				return 1
			}
			m.Reads = append(m.Reads, availRead{sig: signals.Signal(rd.Signal), at: at, avail: rd.Available.Value, capacity: rd.Capacity.Value})
		}
	}
	res := newKubeletResult(m, kf.version, ev, cfg.HugepageAwareEviction)
	if sc.Record != nil {
		res.Recorded = recordedOf(sc.Record)
	}
	if steps != nil {
		if err := steps.close(); err != nil {
			return fail(err)
		}
		b, err := json.MarshalIndent(res, "  ", "  ")
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(w, ",\n  \"counterfactual\": %s\n}\n", b)
	} else {
		fmt.Fprintln(w)
		res.write(w)
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	return 0
}

// kubeletResult is the counterfactual as `-o json` writes it, under
// "counterfactual" beside "steps". Times are offsets from the first step
// ("+1.2s"), as the steps' "at".
type kubeletResult struct {
	Kubelet kubeletSide `json:"kubelet"`
	Evictd  evictdSide  `json:"evictd"`
	// Recorded is what the agent did, for a flight record: its decision,
	// the request's times and the relief.
	Recorded *recordedSide `json:"recorded,omitempty"`
	// Memory is the race with the kernel, absent when no memory threshold
	// of the kubelet's is crossed.
	Memory *memoryResult `json:"memory,omitempty"`
}

type kubeletSide struct {
	Version             string `json:"version"`
	HousekeepingSeconds int64  `json:"housekeepingSeconds"`
	MemcgNotification   bool   `json:"memcgNotification"`
	// MemcgLatencyMs and StopMs are the measured latencies the model adds
	// (docs/BENCHMARKS.md): crossing → decision with memcg notification,
	// decision → the pod's SIGTERM.
	MemcgLatencyMs int64 `json:"memcgLatencyMs,omitempty"`
	StopMs         int64 `json:"stopMs"`
	// Earliest and Latest are its ticks' two extreme phases.
	Earliest kubeletPhase `json:"earliest"`
	Latest   kubeletPhase `json:"latest"`
	// InTimeShare is, when the kubelet is in time at the earliest phase
	// and too late at the latest, both by a housekeeping tick that acts
	// as it notices, the share of its ticks' phases that are in time:
	// those that fall in the window from the first step showing the
	// threshold met to memory running out less its stop time.
	InTimeShare *float64 `json:"inTimeShare,omitempty"`
}

// inTimeShare is kubeletSide.InTimeShare.
func inTimeShare(w kubeletWindow, every time.Duration, race *memoryResult) *float64 {
	e, l := w.Earliest, w.Latest
	if race == nil || race.runsOut == nil || !e.Evicted || !l.Evicted ||
		e.EvictedBy != triggerTick || l.EvictedBy != triggerTick || e.EvictedAt != e.NoticedAt || l.EvictedAt != l.NoticedAt {
		return nil
	}
	window := *race.runsOut - kubeletStopTime - e.EvictedAt
	if window < 0 || l.EvictedAt+kubeletStopTime <= *race.runsOut {
		return nil
	}
	share := float64(int64(window.Seconds()/every.Seconds()*1000+0.5)) / 1000
	return &share
}

type kubeletPhase struct {
	NoticedAt string `json:"noticedAt,omitempty"`
	NoticedBy string `json:"noticedBy,omitempty"`
	EvictedAt string `json:"evictedAt,omitempty"`
	EvictedBy string `json:"evictedBy,omitempty"`
	// Step is the snapshot step the deciding sync read: as stale as the
	// kubelet's stats.
	Step        string `json:"step,omitempty"`
	Threshold   string `json:"threshold,omitempty"`
	Victim      string `json:"victim,omitempty"`
	GracePeriod int64  `json:"gracePeriodSeconds,omitempty"`
	Message     string `json:"message,omitempty"`
	// Reason says why nothing was evicted.
	Reason string `json:"reason,omitempty"`
	// InTime is whether the pod's SIGTERM comes before memory runs out;
	// absent when there is no eviction or no memory race.
	InTime *bool `json:"inTime,omitempty"`
}

type evictdSide struct {
	NoticedAt   string `json:"noticedAt,omitempty"`
	EvictedAt   string `json:"evictedAt,omitempty"`
	Victim      string `json:"victim,omitempty"`
	GracePeriod int64  `json:"gracePeriodSeconds,omitempty"`
	StopMs      int64  `json:"stopMs"`
	InTime      *bool  `json:"inTime,omitempty"`
}

// recordedSide is a flight record's outcome, in offsets like the rest.
type recordedSide struct {
	DecidedAt   string `json:"decidedAt"`
	Pod         string `json:"pod,omitempty"`
	Result      string `json:"result,omitempty"`
	RequestedAt string `json:"requestedAt,omitempty"`
	ReturnedAt  string `json:"returnedAt,omitempty"`
	ReliefAt    string `json:"reliefAt,omitempty"`
}

// recordedOf is rec's outcome as the counterfactual shows it beside the
// replays.
func recordedOf(rec *snapshot.Record) *recordedSide {
	plus := func(s string) string {
		if s == "" {
			return ""
		}
		return "+" + s
	}
	r := &recordedSide{DecidedAt: plus(rec.Decision.At), Pod: rec.Decision.Pod}
	if a := rec.Outcome.Attempts; len(a) > 0 {
		r.Result, r.RequestedAt, r.ReturnedAt = a[0].Result, plus(a[0].Started), plus(a[0].Ended)
	}
	if rel := rec.Outcome.Relief; rel != nil {
		r.ReliefAt = plus(rel.At)
	}
	return r
}

type memoryResult struct {
	Threshold  string `json:"threshold"`
	CrossingAt string `json:"crossingAt"`
	// Between are the steps bracketing the crossing.
	Between            []string `json:"between"`
	GrowthMiBPerSecond float64  `json:"growthMiBPerSecond"`
	// RunsOutAt is when memory.available less the hugepages would reach
	// 0 at that growth; absent when memory use is not growing.
	RunsOutAt string `json:"runsOutAt,omitempty"`
	// runsOut is RunsOutAt, for the text.
	runsOut *time.Duration
}

func offset(d time.Duration) string { return "+" + d.Round(time.Millisecond).String() }

// inTime says whether a decision at at, stopping the pod stop later, beats
// memory running out; nil when memory does not run out.
func inTime(at, stop time.Duration, race *memoryResult) *bool {
	if race == nil || race.runsOut == nil {
		return nil
	}
	ok := at+stop <= *race.runsOut
	return &ok
}

func newKubeletResult(m kubeletModel, version string, ev evictdRace, evictdAware bool) kubeletResult {
	var r kubeletResult
	if race, ok := findMemoryRace(m.Steps, m.Thresholds, m.HugepageAware, m.Reads...); ok {
		r.Memory = memoryResultOf(m.Steps, race)
	} else if race, ok := findMemoryRace(m.Steps, m.Thresholds, evictdAware, m.Reads...); ok {
		// The kubelet's reading never crosses (1.36 with hugepages): the
		// race is told from evictd's.
		r.Memory = memoryResultOf(m.Steps, race)
	}
	w := m.run()
	r.Kubelet = kubeletSide{
		Version: version, HousekeepingSeconds: int64(m.Housekeeping / time.Second), MemcgNotification: m.Memcg,
		StopMs:   kubeletStopTime.Milliseconds(),
		Earliest: phaseOf(m.Steps, w.Earliest, r.Memory), Latest: phaseOf(m.Steps, w.Latest, r.Memory),
	}
	if m.Memcg {
		r.Kubelet.MemcgLatencyMs = kubeletMemcgLatency.Milliseconds()
	}
	r.Kubelet.InTimeShare = inTimeShare(w, m.Housekeeping, r.Memory)
	r.Evictd = evictdSide{StopMs: evictdStopTime.Milliseconds()}
	if ev.Noticed {
		r.Evictd.NoticedAt = offset(ev.NoticedAt)
	}
	if ev.Evicted {
		r.Evictd.EvictedAt, r.Evictd.Victim, r.Evictd.GracePeriod = offset(ev.EvictedAt), ev.Victim, ev.GracePeriod
		r.Evictd.InTime = inTime(ev.EvictedAt, evictdStopTime, r.Memory)
	}
	return r
}

func memoryResultOf(steps []snapshot.Step, race memoryRace) *memoryResult {
	mr := &memoryResult{
		Threshold:          thresholds.Format(race.Threshold),
		CrossingAt:         offset(race.CrossingAt),
		GrowthMiBPerSecond: float64(int64(race.Growth/(1<<20)*10+0.5)) / 10,
	}
	if race.Before >= 0 {
		mr.Between = []string{offset(race.BeforeAt), offset(race.AfterAt)}
	} else {
		mr.Between = []string{offset(race.AfterAt)}
	}
	if race.RunsOut {
		mr.RunsOutAt = offset(race.RunsOutAt)
		mr.runsOut = &race.RunsOutAt
	}
	return mr
}

func phaseOf(steps []snapshot.Step, o kubeletOutcome, race *memoryResult) kubeletPhase {
	p := kubeletPhase{Reason: o.Reason}
	if o.Noticed {
		p.NoticedAt, p.NoticedBy = offset(o.NoticedAt), string(o.NoticedBy)
	}
	if o.Evicted {
		p.EvictedAt, p.EvictedBy, p.Step = offset(o.EvictedAt), string(o.EvictedBy), offset(steps[o.Step].At)
		p.Threshold, p.Victim, p.GracePeriod, p.Message = thresholds.Format(o.Threshold), o.Victim, o.GracePeriod, o.Message
		p.InTime = inTime(o.EvictedAt, kubeletStopTime, race)
	}
	return p
}

// write prints the counterfactual after the steps.
func (r kubeletResult) write(w io.Writer) {
	k := r.Kubelet
	how := fmt.Sprintf("%ds housekeeping", k.HousekeepingSeconds)
	if k.MemcgNotification {
		how += " + memcg notification"
	}
	reading := "memory.available less the hugepages"
	if k.Version == "1.36" {
		reading = "memory.available with the hugepages left in"
	}
	textf(w, "== kubelet %s counterfactual (%s; %s)\n", k.Version, how, reading)
	if mr := r.Memory; mr != nil {
		between := "from the first step"
		if len(mr.Between) == 2 {
			between = "between the readings at " + mr.Between[0] + " and " + mr.Between[1]
		}
		textf(w, "memory: %s crossed at %s (%s), memory use growing %.1fMiB/s", mr.Threshold, mr.CrossingAt, between, mr.GrowthMiBPerSecond)
		if mr.runsOut != nil {
			textf(w, "; memory runs out at %s", mr.RunsOutAt)
		} else {
			fmt.Fprint(w, "; memory is not running out")
		}
		fmt.Fprintln(w)
	}
	e := r.Evictd
	switch {
	case e.EvictedAt != "":
		textf(w, "evictd: noticed at %s, evicted %s at %s with a grace period of %ds; SIGTERM ~%dms later%s\n",
			e.NoticedAt, e.Victim, e.EvictedAt, e.GracePeriod, e.StopMs, verdict(e.InTime))
	case e.NoticedAt != "":
		textf(w, "evictd: noticed at %s, evicted nothing\n", e.NoticedAt)
	default:
		fmt.Fprintln(w, "evictd: noticed nothing")
	}
	if rc := r.Recorded; rc != nil {
		textf(w, "evictd, as recorded: decided at %s", rc.DecidedAt)
		if rc.Result != "" {
			textf(w, ", %s %s: asked at %s, returned at %s", rc.Result, rc.Pod, rc.RequestedAt, rc.ReturnedAt)
		}
		if rc.ReliefAt != "" {
			textf(w, "; relief at %s", rc.ReliefAt)
		}
		fmt.Fprintln(w)
	}
	name := "kubelet " + k.Version
	if k.Earliest.NoticedAt == "" {
		textf(w, "%s: would notice nothing: %s\n", name, k.Earliest.Reason)
	} else {
		textf(w, "%s: would notice %s\n", name, noticeWindow(k))
		k.Earliest.write(w, "earliest", k.StopMs)
		k.Latest.write(w, "latest", k.StopMs)
		if k.InTimeShare != nil {
			textf(w, "  in time only when a tick falls within the first %.1f%% of its interval after %s\n", *k.InTimeShare*100, k.Earliest.NoticedAt)
		}
	}
	textf(w, "summary: %s\n", r.summary())
}

func (p kubeletPhase) write(w io.Writer, which string, stopMs int64) {
	textf(w, "  %s: noticed at %s (%s)", which, p.NoticedAt, p.NoticedBy)
	if p.EvictedAt == "" {
		textf(w, "; would evict nothing: %s\n", p.Reason)
		return
	}
	textf(w, "; at %s (%s, reading the step at %s) would evict %s for %s with a grace period of %ds; SIGTERM ~%dms later%s\n",
		p.EvictedAt, p.EvictedBy, p.Step, p.Victim, p.Threshold, p.GracePeriod, stopMs, verdict(p.InTime))
	fmt.Fprintf(w, "    event: Warning Evicted %q\n", p.Message)
}

// verdict words an in-time answer for the text.
func verdict(ok *bool) string {
	switch {
	case ok == nil:
		return ""
	case *ok:
		return ": in time"
	}
	return ": too late, the kernel's OOM killer would have acted first"
}

// summary is the one line that puts the two side by side.
func (r kubeletResult) summary() string {
	var b strings.Builder
	e := r.Evictd
	switch {
	case e.EvictedAt != "":
		fmt.Fprintf(&b, "evictd: noticed at %s, evicted %s grace %ds", e.NoticedAt, e.Victim, e.GracePeriod)
	case e.NoticedAt != "":
		fmt.Fprintf(&b, "evictd: noticed at %s, evicted nothing", e.NoticedAt)
	default:
		b.WriteString("evictd: noticed nothing")
	}
	k := r.Kubelet
	how := fmt.Sprintf("%ds housekeeping", k.HousekeepingSeconds)
	if k.MemcgNotification {
		how += " + memcg"
	}
	fmt.Fprintf(&b, " | kubelet %s (%s): ", k.Version, how)
	switch {
	case k.Earliest.NoticedAt == "":
		b.WriteString("would notice nothing")
	case k.Earliest.EvictedAt == "" && k.Latest.EvictedAt == "":
		fmt.Fprintf(&b, "would notice %s, would evict nothing", noticeWindow(k))
	default:
		fmt.Fprintf(&b, "would notice %s, would evict %s", noticeWindow(k), victims(k.Earliest, k.Latest))
	}
	if mr := r.Memory; mr != nil && mr.runsOut != nil {
		fmt.Fprintf(&b, "; memory runs out at %s (growth %.1fMiB/s): evictd %s, kubelet %s",
			mr.RunsOutAt, mr.GrowthMiBPerSecond, short(e.InTime, e.EvictedAt != ""), kubeletShort(k))
	}
	return b.String()
}

// noticeWindow says when the kubelet would notice, at its two phases.
func noticeWindow(k kubeletSide) string {
	if k.Earliest.NoticedAt == k.Latest.NoticedAt {
		return "at " + k.Earliest.NoticedAt + ", wherever its ticks fall"
	}
	return "between " + k.Earliest.NoticedAt + " and " + k.Latest.NoticedAt + ", depending on where its ticks fall"
}

func victims(a, b kubeletPhase) string {
	one := func(p kubeletPhase) string {
		if p.EvictedAt == "" {
			return "nothing"
		}
		return fmt.Sprintf("%s grace %ds", p.Victim, p.GracePeriod)
	}
	if one(a) == one(b) {
		return one(a)
	}
	return one(a) + " (earliest) or " + one(b) + " (latest)"
}

func short(ok *bool, evicted bool) string {
	switch {
	case !evicted:
		return "too late (no eviction)"
	case ok != nil && *ok:
		return "in time"
	}
	return "too late"
}

func kubeletShort(k kubeletSide) string {
	a := short(k.Earliest.InTime, k.Earliest.EvictedAt != "")
	b := short(k.Latest.InTime, k.Latest.EvictedAt != "")
	if a == b {
		return a
	}
	return a + " at the earliest, " + b + " at the latest"
}
