package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	evictdagent "github.com/evictd/evictd/internal/agent"
	flight "github.com/evictd/evictd/internal/recorder"
	"github.com/evictd/evictd/internal/snapshot"
	"github.com/evictd/evictd/signals"
)

const explainHelp = `Usage: evictd explain [POD] [--last N] [--state-dir DIR | --record FILE...] [-o text|json]

Explain evictd's evictions on this node from its flight records
(docs/SNAPSHOT.md, "Flight records"): which threshold and why then, the
values observed and when, why this pod ranked first (its deciding key
against the next candidates'), what was done and how long each step took.
POD is a pod's name, namespace/name or UID; without it, the last N
decisions. No API server is needed; --record reads records copied from a
node. 'evictd simulate --snapshot RECORD' replays one.
`

// maxBefore is how many of the acting signal's readings before the
// decision the text shows.
const maxBefore = 6

// explanation is what `evictd explain` says of one record.
type explanation struct {
	Record    string    `json:"record"`
	Node      string    `json:"node,omitempty"`
	DryRun    bool      `json:"dryRun,omitempty"`
	Trigger   string    `json:"trigger,omitempty"`
	DecidedAt time.Time `json:"decidedAt"`
	Outcome   string    `json:"outcome"`
	Reason    string    `json:"reason"`
	Pod       string    `json:"pod,omitempty"`
	UID       string    `json:"uid,omitempty"`
	Signal    string    `json:"signal,omitempty"`
	Threshold string    `json:"threshold,omitempty"`
	Hard      bool      `json:"hard,omitempty"`
	// Readings are the acting signal's observations in the record, the
	// decision's last.
	Readings []reading `json:"readings,omitempty"`
	// FirstMet is when the threshold was first seen met.
	FirstMet *time.Time `json:"firstMet,omitempty"`
	// Predicted says time to exhaustion acted before the threshold was
	// met (--eviction-time-to-exhaustion).
	Predicted *snapshot.RecordPrediction `json:"predicted,omitempty"`
	// FallingPerSecond is how fast the signal's available fell over the
	// last ten seconds before the decision, per second; absent when the
	// record cannot tell.
	FallingPerSecond *int64                     `json:"fallingPerSecond,omitempty"`
	GracePeriod      int64                      `json:"gracePeriodSeconds,omitempty"`
	Message          string                     `json:"message,omitempty"`
	Ranking          []snapshot.RecordCandidate `json:"ranking,omitempty"`
	Ranked           int                        `json:"ranked,omitempty"`
	LocalStorage     []snapshot.RecordViolation `json:"localStorage,omitempty"`
	Attempts         []attemptTimes             `json:"attempts,omitempty"`
	Why              string                     `json:"why,omitempty"`
	Relief           *reading                   `json:"relief,omitempty"`
	// Followed is how long after the decision the agent looked for
	// relief; empty while it still looked when the record was copied.
	Followed string `json:"followed,omitempty"`
}

type reading struct {
	At        time.Time `json:"at"`
	Available int64     `json:"available"`
	Capacity  int64     `json:"capacity"`
	// Source is "pass" for a pass's observation, "fast-poll" for a
	// reading of the fast poll between passes; empty for a relief.
	Source string `json:"source,omitempty"`
}

type attemptTimes struct {
	snapshot.RecordAttempt
	// AskedAfter and ReturnedAfter are the times from the decision to
	// the request, and to the Evicter's return (the pod gone, or its
	// wait over).
	AskedAfter    string `json:"askedAfter,omitempty"`
	ReturnedAfter string `json:"returnedAfter,omitempty"`
}

func explain(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("evictd explain", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, stdout, explainHelp)
	stateDir := fs.String("state-dir", "/var/lib/evictd", "The agent's --state-dir, whose records/ are read.")
	files := fs.StringSlice("record", nil, "Read these record files instead of --state-dir's (repeat or comma-separate). (default none)")
	last := fs.Int("last", 0, "Explain at most the last N matching decisions; 0 means every one for a POD, the last one without. (default 0)")
	output := fs.StringP("output", "o", "text", "Output format: text or json.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return usageError(stderr, "evictd explain", err)
	}
	switch {
	case *output != "text" && *output != "json":
		return usageError(stderr, "evictd explain", fmt.Errorf("--output %q: want text or json", *output))
	case *last < 0:
		return usageError(stderr, "evictd explain", fmt.Errorf("--last %d: want 0 or more", *last))
	case fs.NArg() > 1:
		return usageError(stderr, "evictd explain", fmt.Errorf("want at most one POD, got %q", fs.Args()))
	}
	pod := fs.Arg(0)

	paths := *files
	explicit := len(paths) > 0
	if !explicit {
		dir := evictdagent.RecordsDir(*stateDir)
		entries, err := os.ReadDir(dir)
		if err != nil {
			textf(stderr, "evictd explain: %v\n", err)
			return 1
		}
		for _, e := range entries {
			if e.Type().IsRegular() && flight.IsRecordName(e.Name()) {
				paths = append(paths, filepath.Join(dir, e.Name()))
			}
		}
	}
	var out []explanation
	code := 0
	for _, path := range paths {
		sc, err := snapshot.ReadFile(path)
		if err == nil && sc.Record == nil {
			err = fmt.Errorf("%s: not a flight record (no kind %s)", path, snapshot.RecordKind)
		}
		if err != nil {
			// A record copied by hand is the operator's to fix; one of
			// many on the node is skipped and said.
			textf(stderr, "evictd explain: %v\n", err)
			if explicit {
				return 1
			}
			code = 1
			continue
		}
		ex, err := explainRecord(path, sc)
		if err != nil {
			textf(stderr, "evictd explain: %s: %v\n", path, err)
			code = 1
			continue
		}
		if pod == "" || ex.concerns(pod) {
			out = append(out, ex)
		}
	}
	slices.SortStableFunc(out, func(a, b explanation) int { return a.DecidedAt.Compare(b.DecidedAt) })
	n := *last
	if n == 0 && pod == "" {
		n = 1
	}
	if n > 0 && len(out) > n {
		out = out[len(out)-n:]
	}
	if len(out) == 0 {
		what := "no flight records"
		if pod != "" {
			what = "no flight record names " + pod
		}
		textf(stderr, "evictd explain: %s in %s\n", what, strings.Join(sourcesOf(paths, *stateDir, explicit), ", "))
		return 1
	}
	if *output == "json" {
		if err := writeJSON(stdout, out); err != nil {
			fmt.Fprintf(stderr, "evictd explain: %v\n", err)
			return 1
		}
		return code
	}
	for i, ex := range out {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		ex.write(stdout)
	}
	return code
}

func sourcesOf(paths []string, stateDir string, explicit bool) []string {
	if explicit {
		return paths
	}
	return []string{evictdagent.RecordsDir(stateDir)}
}

// concerns reports whether the record is about pod: a name, a
// namespace/name or a UID.
func (ex explanation) concerns(pod string) bool {
	match := func(ref, uid string) bool {
		if uid == pod || ref == pod {
			return true
		}
		_, name, _ := strings.Cut(ref, "/")
		return !strings.Contains(pod, "/") && name == pod
	}
	if match(ex.Pod, ex.UID) {
		return true
	}
	for _, v := range ex.LocalStorage {
		if match(v.Pod, v.UID) {
			return true
		}
	}
	for _, a := range ex.Attempts {
		if match(a.Pod, a.UID) {
			return true
		}
	}
	return false
}

// explainRecord reads what sc's record says, with its times made wall
// clock again.
func explainRecord(path string, sc *snapshot.Scenario) (explanation, error) {
	rec := sc.Record
	d := rec.Decision
	at := func(field, offset string) (time.Time, error) {
		if offset == "" {
			return time.Time{}, nil
		}
		off, err := time.ParseDuration(offset)
		if err != nil {
			return time.Time{}, fmt.Errorf("record.%s: %w", field, err)
		}
		return rec.Start.Add(off), nil
	}
	decided, err := at("decision.at", d.At)
	if err != nil {
		return explanation{}, err
	}
	ex := explanation{
		Record: path, Node: rec.Node, DryRun: rec.DryRun, Trigger: rec.Trigger, DecidedAt: decided,
		Outcome: d.Outcome, Reason: d.Reason, Pod: d.Pod, UID: d.UID, Signal: d.Signal, Threshold: d.Threshold, Hard: d.Hard,
		GracePeriod: d.GracePeriod, Message: d.Message, Ranking: d.Ranking, Ranked: d.Ranked, LocalStorage: d.LocalStorage,
		Why: rec.Outcome.Why, Followed: rec.Outcome.Followed, Predicted: d.Predicted,
	}
	if first, err := at("decision.firstMet", d.FirstMet); err != nil {
		return ex, err
	} else if !first.IsZero() {
		ex.FirstMet = &first
	}
	sig := signals.Signal(d.Signal)
	for _, step := range sc.Steps {
		if o, ok := step.Observations[sig]; ok {
			ex.Readings = append(ex.Readings, reading{At: rec.Start.Add(o.Time.Sub(snapshot.Epoch)), Available: o.Available, Capacity: o.Capacity, Source: "pass"})
		}
	}
	for i, rd := range rec.Reads {
		if rd.Signal != d.Signal {
			continue
		}
		t, err := at(fmt.Sprintf("reads[%d].at", i), rd.At)
		if err != nil {
			return ex, err
		}
		ex.Readings = append(ex.Readings, reading{At: t, Available: rd.Available.Value, Capacity: rd.Capacity.Value, Source: "fast-poll"})
	}
	slices.SortStableFunc(ex.Readings, func(a, b reading) int { return a.At.Compare(b.At) })
	ex.FallingPerSecond = falling(ex.Readings)
	for i, a := range rec.Outcome.Attempts {
		at := attemptTimes{RecordAttempt: a}
		started, err := sinceDecision(rec.Start, decided, a.Started)
		if err != nil {
			return ex, fmt.Errorf("record.outcome.attempts[%d].started: %w", i, err)
		}
		ended, err := sinceDecision(rec.Start, decided, a.Ended)
		if err != nil {
			return ex, fmt.Errorf("record.outcome.attempts[%d].ended: %w", i, err)
		}
		at.AskedAfter, at.ReturnedAfter = started, ended
		ex.Attempts = append(ex.Attempts, at)
	}
	if r := rec.Outcome.Relief; r != nil {
		t, err := at("outcome.relief.at", r.At)
		if err != nil {
			return ex, err
		}
		ex.Relief = &reading{At: t, Available: r.Available.Value, Capacity: r.Capacity.Value}
	}
	return ex, nil
}

// sinceDecision is the time from the decision to an attempt's offset.
func sinceDecision(start, decided time.Time, offset string) (string, error) {
	if offset == "" {
		return "", nil
	}
	off, err := time.ParseDuration(offset)
	if err != nil {
		return "", err
	}
	return start.Add(off).Sub(decided).String(), nil
}

// falling is how fast available fell, per second, over the last ten
// seconds of readings before the last one; nil with fewer than two.
func falling(rs []reading) *int64 {
	if len(rs) < 2 {
		return nil
	}
	end := rs[len(rs)-1]
	from := rs[len(rs)-2]
	for i := len(rs) - 2; i >= 0 && end.At.Sub(rs[i].At) <= 10*time.Second; i-- {
		from = rs[i]
	}
	dt := end.At.Sub(from.At).Seconds()
	if dt <= 0 {
		return nil
	}
	v := int64(float64(from.Available-end.Available) / dt)
	return &v
}

func (ex explanation) write(w io.Writer) {
	res := signals.Signal(ex.Signal).Resource()
	stamp := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
	who := ex.Pod
	if who == "" {
		who = "local-storage limits"
	}
	textf(w, "%s", who)
	if ex.UID != "" {
		textf(w, " (uid %s)", ex.UID)
	}
	if ex.Node != "" {
		textf(w, " on %s", ex.Node)
	}
	textf(w, "\n  record: %s\n", ex.Record)
	dry := ""
	if ex.DryRun {
		dry = " (dry run: nothing was done)"
	}
	textf(w, "  decided: %s, a pass started by %s: %s%s\n", stamp(ex.DecidedAt), ex.Trigger, ex.Outcome, dry)
	if ex.Threshold != "" {
		kind := "soft"
		if ex.Hard {
			kind = "hard"
		}
		if p := ex.Predicted; p != nil {
			textf(w, "  why now: the %s threshold %s was not met yet, but %s was predicted to run out in %s at %s a second (%d readings), below the release estimate %s plus the margin %s",
				kind, ex.Threshold, ex.Signal, p.TimeLeft, showValue(p.RatePerSecond.Value, res, ex.Signal), p.Readings, p.Release, p.Margin)
		} else {
			textf(w, "  why now: the %s threshold %s was met", kind, ex.Threshold)
		}
		if ex.FirstMet != nil {
			textf(w, " (first at %s, %s before)", stamp(*ex.FirstMet), ex.DecidedAt.Sub(*ex.FirstMet).Truncate(time.Millisecond))
		}
		fmt.Fprintln(w)
		// The passes' readings, and of the fast poll's the last one
		// before the decision and how many there were.
		var rs []reading
		polls := 0
		var lastPoll *reading
		for i, r := range ex.Readings {
			if r.Source == "fast-poll" {
				polls++
				lastPoll = &ex.Readings[i]
				continue
			}
			rs = append(rs, r)
		}
		if len(rs) > maxBefore {
			rs = rs[len(rs)-maxBefore:]
		}
		for _, r := range rs {
			textf(w, "    %s  %s of %s available (%s before the decision)\n", stamp(r.At), showValue(r.Available, res, ex.Signal), showValue(r.Capacity, res, ex.Signal), ex.DecidedAt.Sub(r.At).Truncate(time.Millisecond))
		}
		if lastPoll != nil {
			textf(w, "    fast poll: %d readings between the passes, the last at %s: %s available (%s before the decision)\n", polls, stamp(lastPoll.At),
				showValue(lastPoll.Available, res, ex.Signal), ex.DecidedAt.Sub(lastPoll.At).Truncate(time.Millisecond))
		}
		if f := ex.FallingPerSecond; f != nil && *f > 0 {
			textf(w, "    falling by %s a second over the last readings\n", showValue(*f, res, ex.Signal))
		}
	} else {
		textf(w, "  why now: %s\n", ex.Reason)
	}
	for _, v := range ex.LocalStorage {
		textf(w, "  over its own limit: %s, %s: %s used, limit %s\n", v.Pod, v.Signal,
			human(v.Usage, signals.ResourceEphemeralStorage), human(v.Limit, signals.ResourceEphemeralStorage))
	}
	if len(ex.Ranking) > 0 {
		textf(w, "  why this pod: the ranking for %s, %d pods:\n", ex.Signal, ex.Ranked)
		for i, c := range ex.Ranking {
			usage := "no stats"
			if c.HasStats {
				usage = human(c.Usage, res)
			}
			key := c.Key
			if c.Skip != "" {
				key += " — skipped: " + c.Skip
			}
			textf(w, "    %d. %s  %s  priority %d  usage %s  request %s: %s\n", i+1, c.Pod, c.QOS, c.Priority, usage, human(c.Request, res), key)
		}
	}
	for _, a := range ex.Attempts {
		textf(w, "  done: %s %s, grace period %ds", a.Result, a.Pod, a.GracePeriod)
		if a.AskedAfter != "" {
			textf(w, "; asked %s after the decision, returned %s after", a.AskedAfter, a.ReturnedAfter)
		}
		fmt.Fprintln(w)
		if a.Error != "" {
			textf(w, "    error: %s\n", a.Error)
		}
		if a.Why != "" {
			textf(w, "    %s\n", a.Why)
		}
	}
	if ex.Why != "" {
		textf(w, "  done: nothing (%s)\n", ex.Why)
	}
	switch {
	case ex.Relief != nil:
		textf(w, "  relief: %s back to %s of %s at %s, %s after the decision\n", ex.Signal, showValue(ex.Relief.Available, res, ex.Signal),
			showValue(ex.Relief.Capacity, res, ex.Signal), stamp(ex.Relief.At), ex.Relief.At.Sub(ex.DecidedAt).Truncate(time.Millisecond))
	case ex.Followed != "" && ex.Signal != "" && ex.Threshold != "":
		textf(w, "  relief: none seen in the %s the agent looked\n", ex.Followed)
	case ex.Threshold != "":
		textf(w, "  relief: not yet seen when the record was written\n")
	}
	if ex.Message != "" {
		fmt.Fprintf(w, "  event: Warning Evicted %q\n", ex.Message)
	}
}

// showValue is v as the signal's unit reads: bytes, a count, or a
// stall's percentage of time.
func showValue(v int64, res signals.Resource, sig string) string {
	if signals.Signal(sig).Stall() {
		return signals.FormatStall(v)
	}
	return human(v, res)
}
