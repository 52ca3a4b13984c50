package recorder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/manager"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/snapshot"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// Defaults of the recorder's bounds.
const (
	DefaultMaxRecords = 200
	DefaultMaxBytes   = 64 << 20
	// DefaultWindow is how far back before a decision a record reaches
	// at least.
	DefaultWindow = time.Minute
	// DefaultFollowUp is how long after a decision the recorder looks
	// for the relief the eviction brought.
	DefaultFollowUp = 2 * time.Minute
	// maxRing bounds the passes kept, whatever their rate.
	maxRing = 1000
	// maxReads bounds the fast poll's readings kept: a minute of two
	// signals read every 10 ms (wakeup.ReadsEvery).
	maxReads = 12000
	// maxOpen bounds the records still looking for relief.
	maxOpen = 4
	// maxRanking bounds the candidates a record lists with their keys
	// (its snapshot holds every pod).
	maxRanking = 10
	// repeatWindow is how long a record that repeats the last one of the
	// same pod, signal and result is left out, for the results that do
	// not evict.
	repeatWindow = 5 * time.Minute
	// queue bounds the records waiting for the writer.
	queue = 16
)

// Config is the recorder's.
type Config struct {
	// Dir is the directory records are written to; it is created with
	// mode 0700, and records are 0600.
	Dir string
	// MaxRecords and MaxBytes bound what Dir holds: the oldest records are
	// removed first.
	MaxRecords int
	MaxBytes   int64
	// Window is how far back before a decision its record reaches: at
	// least DefaultWindow, and longer when a soft threshold's grace period
	// needs it (Window).
	Window time.Duration
	// FollowUp is how long after a decision the recorder looks for relief.
	FollowUp time.Duration
	// Args and Layout are the flags and layout a record replays with
	// (Args, snapshot.File).
	Args   []string
	Layout string
	// Node and Version name the node and the agent in every record.
	Node, Version string
	Log           *slog.Logger
	Metrics       *metrics.Metrics
}

// Window is how far back a record must reach for its replay to decide as
// the agent did: DefaultWindow, or the longest soft grace period and two
// housekeeping intervals when that is longer, so that the replay sees a
// soft threshold met from the start of its grace period.
func Window(ths []thresholds.Threshold, housekeeping time.Duration) time.Duration {
	w := DefaultWindow
	for _, th := range ths {
		w = max(w, th.GracePeriod+2*housekeeping)
	}
	return w
}

// Recorder is the flight recorder: the loop gives it every pass (Record),
// and it writes a record of each decision to evict from its own goroutine
// (Run). It keeps the observations of the passes within its window, the
// records still looking for relief, and nothing else: what it has written
// is not held in memory.
type Recorder struct {
	cfg    Config
	writes chan write

	// reads are the fast poll's readings (Read), from its goroutine.
	readsMu sync.Mutex
	reads   []signals.Observation

	// Owned by the loop's goroutine (Record).
	ring []pass
	open []*openRecord
	last map[repeatKey]time.Time
	seq  int
}

type pass struct {
	at  time.Time
	obs signals.Observations
}

type openRecord struct {
	name    string
	file    *snapshot.File
	decided time.Time
	key     thresholds.Key
	sig     signals.Signal
	// predicted, for a decision time to exhaustion took before its
	// threshold was met, is the signal's available amount then: its
	// relief is memory back to it, the threshold's leaving Met saying
	// nothing.
	predicted *int64
}

type repeatKey struct {
	uid    string
	signal signals.Signal
	result manager.Result
}

type write struct {
	name string
	file *snapshot.File
}

// New checks cfg and returns a Recorder; Run writes its records.
func New(cfg Config) (*Recorder, error) {
	switch {
	case cfg.Dir == "":
		return nil, errors.New("flight recorder: no directory")
	case cfg.MaxRecords < 1:
		return nil, fmt.Errorf("flight recorder: at most %d records: want at least 1", cfg.MaxRecords)
	case cfg.MaxBytes < 1<<20:
		return nil, fmt.Errorf("flight recorder: at most %d bytes: want at least 1Mi", cfg.MaxBytes)
	case cfg.Log == nil:
		return nil, errors.New("flight recorder: no logger")
	}
	if cfg.Window < DefaultWindow {
		cfg.Window = DefaultWindow
	}
	if cfg.FollowUp <= 0 {
		cfg.FollowUp = DefaultFollowUp
	}
	return &Recorder{cfg: cfg, writes: make(chan write, queue), last: map[repeatKey]time.Time{}}, nil
}

// Record takes one pass (manager.Recorder). It never blocks: a record the
// writer has no room for is dropped and counted.
func (r *Recorder) Record(p manager.PassRecord) {
	r.keep(p)
	r.follow(p)
	if rec := r.decision(p); rec != nil {
		r.send(rec.name, rec.file)
		r.open = append(r.open, rec)
		if len(r.open) > maxOpen {
			r.close(r.open[0], p.Time)
			r.open = r.open[1:]
		}
	}
}

// Read keeps a reading of the fast poll (wakeup.MemoryConfig.Reads),
// within the window; it never blocks on the loop.
func (r *Recorder) Read(o signals.Observation) {
	r.readsMu.Lock()
	defer r.readsMu.Unlock()
	r.reads = append(r.reads, o)
	cut := 0
	for cut < len(r.reads) && (o.Time.Sub(r.reads[cut].Time) > r.cfg.Window || len(r.reads)-cut > maxReads) {
		cut++
	}
	if cut > 0 {
		r.reads = append(r.reads[:0], r.reads[cut:]...)
	}
}

// readsBetween are the fast poll's readings from start to end, as a
// record writes them.
func (r *Recorder) readsBetween(start, end time.Time) []snapshot.RecordRead {
	r.readsMu.Lock()
	defer r.readsMu.Unlock()
	var out []snapshot.RecordRead
	for _, o := range r.reads {
		if o.Time.Before(start) || o.Time.After(end) {
			continue
		}
		out = append(out, snapshot.RecordRead{At: stepAt(start, o.Time), Signal: string(o.Signal),
			Available: snapshot.NewQuantity(o.Available), Capacity: snapshot.NewQuantity(o.Capacity)})
	}
	return out
}

// keep adds p's observations to the ring and drops those past the window.
func (r *Recorder) keep(p manager.PassRecord) {
	r.ring = append(r.ring, pass{at: p.Time, obs: p.Obs})
	cut := 0
	for cut < len(r.ring) && (p.Time.Sub(r.ring[cut].at) > r.cfg.Window || len(r.ring)-cut > maxRing) {
		cut++
	}
	if cut > 0 {
		r.ring = append(r.ring[:0], r.ring[cut:]...)
	}
}

// follow looks, in each open record, for the relief this pass shows: the
// threshold acted on no longer met. A record that finds it, or whose
// follow-up is over, is written again with its outcome and closed.
func (r *Recorder) follow(p manager.PassRecord) {
	kept := r.open[:0]
	for _, rec := range r.open {
		switch {
		case !stillMet(p.Decision.Evaluation, rec.key) && p.Time.After(rec.decided) && backTo(p.Obs, rec):
			r.close(rec, p.Time)
			if o, ok := p.Obs[rec.sig]; ok {
				rec.file.Record.Outcome.Relief = &snapshot.RecordRelief{
					At:        snapshot.Offset(rec.file.Record.Start, p.Time),
					Available: snapshot.NewQuantity(o.Available), Capacity: snapshot.NewQuantity(o.Capacity),
				}
			}
			r.send(rec.name, rec.file)
		case p.Time.Sub(rec.decided) >= r.cfg.FollowUp:
			r.close(rec, p.Time)
			r.send(rec.name, rec.file)
		default:
			kept = append(kept, rec)
		}
	}
	clear(r.open[len(kept):])
	r.open = kept
}

// backTo reports whether obs show rec's signal back to where a predicted
// decision found it; true for any other decision.
func backTo(obs signals.Observations, rec *openRecord) bool {
	if rec.predicted == nil {
		return true
	}
	o, ok := obs[rec.sig]
	return ok && o.Available >= *rec.predicted
}

// close ends rec's follow-up at now.
func (r *Recorder) close(rec *openRecord, now time.Time) {
	rec.file.Record.Outcome.Followed = now.Sub(rec.decided).Truncate(time.Millisecond).String()
}

// stillMet reports whether the threshold of key is still met in ev:
// Waiting, Stale and Actionable are parts of Met, and a prediction
// (decide.Prediction) leaves Met as observed.
func stillMet(ev thresholds.Evaluation, key thresholds.Key) bool { return ev.IsMet(key) }

// send hands a record to the writer, or drops it when the writer is
// behind.
func (r *Recorder) send(name string, f *snapshot.File) {
	// The writer encodes f while the loop may change its outcome: it gets
	// a copy of the record part, which is all the loop changes.
	cp := *f
	rec := *f.Record
	cp.Record = &rec
	select {
	case r.writes <- write{name: name, file: &cp}:
	default:
		r.cfg.Metrics.CountFlightRecord(metrics.RecordDropped)
		r.cfg.Log.Warn("flight recorder: the writer is behind; a record was dropped", "record", name)
	}
}

// decision builds the record of p's decision to evict, or returns nil
// when p decided none or repeats a recent record.
func (r *Recorder) decision(p manager.PassRecord) *openRecord {
	dec := p.Decision
	if dec.Outcome != decide.OutcomeEvict && dec.Outcome != decide.OutcomeLocalStorage {
		return nil
	}
	if r.repeats(p) {
		r.cfg.Metrics.CountFlightRecord(metrics.RecordRepeat)
		return nil
	}
	start := p.Time
	if len(r.ring) > 0 {
		start = r.ring[0].at
	}
	f := &snapshot.File{
		APIVersion: snapshot.RecordAPIVersion, Kind: snapshot.RecordKind,
		Args: WithLocalStorage(r.cfg.Args, p.LocalStorageByKubelet), Layout: r.cfg.Layout,
		Record: &snapshot.Record{Node: r.cfg.Node, Version: r.cfg.Version, Start: start.UTC(), Trigger: string(p.Trigger), DryRun: p.DryRun},
	}
	for _, ps := range r.ring {
		if ps.at.Equal(p.Time) {
			continue
		}
		f.Steps = append(f.Steps, snapshot.StepJSON{At: stepAt(start, ps.at), Observations: snapshot.ObservationsJSON(ps.at, ps.obs)})
	}
	f.Steps = append(f.Steps, snapshot.StepJSON{
		At: stepAt(start, p.Time), Observations: snapshot.ObservationsJSON(p.Time, p.Obs),
		Pods: snapshot.PodsJSON(p.Pods, p.Stats),
	})
	if f.Steps[len(f.Steps)-1].Pods == nil {
		f.Steps[len(f.Steps)-1].Pods = []snapshot.PodJSON{}
	}
	f.Record.Reads = r.readsBetween(start, p.Time)
	f.Record.Decision = decisionJSON(start, dec)
	f.Record.Outcome = outcomeJSON(start, p.Acted)
	r.seq++
	rec := &openRecord{
		name:    fmt.Sprintf("%s-%06d.json", p.Time.UTC().Format("20060102T150405.000Z"), r.seq%1000000),
		file:    f,
		decided: p.Time,
		sig:     dec.Signal,
	}
	if dec.Threshold != nil {
		rec.key = dec.Threshold.Key()
	}
	if dec.Predicted != nil {
		rec.predicted = &dec.Predicted.Available
	}
	if dec.Outcome == decide.OutcomeLocalStorage {
		// A local-storage eviction answers no threshold: nothing to
		// follow.
		rec.file.Record.Outcome.Followed = "0s"
		r.send(rec.name, rec.file)
		return nil
	}
	return rec
}

// stepAt is t's offset from start as a step's at. Steps must be strictly
// increasing; passes are at least a nanosecond apart, and a record keeps
// the nanoseconds so that two passes within a millisecond stay apart.
func stepAt(start, t time.Time) string { return t.Sub(start).String() }

// repeats reports whether p's outcome repeats, for a result that evicted
// nothing, the last record of the same pod, signal and result within
// repeatWindow; it remembers p's otherwise.
func (r *Recorder) repeats(p manager.PassRecord) bool {
	dec := p.Decision
	var who string
	switch {
	case dec.Outcome == decide.OutcomeEvict && dec.Pod != nil:
		who = dec.Pod.UID
	case dec.Outcome == decide.OutcomeLocalStorage:
		// The same pods over their limits, none evicted (a dry run, the
		// rate limit or the cap): one record per window.
		uids := make([]string, 0, len(dec.LocalStorage))
		for _, v := range dec.LocalStorage {
			uids = append(uids, v.Pod.UID)
		}
		slices.Sort(uids)
		who = strings.Join(uids, ",")
	default:
		return false
	}
	result := manager.Result("none")
	switch {
	case len(p.Acted.Attempts) > 0:
		a := p.Acted.Attempts[len(p.Acted.Attempts)-1]
		if a.Issued() {
			return false
		}
		result = a.Result
	case p.DryRun:
		result = manager.ResultDryRun
	}
	for _, a := range p.Acted.Attempts {
		if a.Issued() {
			return false
		}
	}
	k := repeatKey{uid: who, signal: dec.Signal, result: result}
	if at, ok := r.last[k]; ok && p.Time.Sub(at) < repeatWindow && !p.Time.Before(at) {
		return true
	}
	for old, at := range r.last {
		if p.Time.Sub(at) >= repeatWindow {
			delete(r.last, old)
		}
	}
	r.last[k] = p.Time
	return false
}

func decisionJSON(start time.Time, dec decide.Decision) snapshot.RecordDecision {
	d := snapshot.RecordDecision{
		At: snapshot.Offset(start, dec.Time), Outcome: string(dec.Outcome), Reason: dec.Reason,
		Signal: string(dec.Signal), Hard: dec.Hard, GracePeriod: dec.GracePeriod, Message: dec.Message,
	}
	if dec.Threshold != nil {
		d.Threshold = thresholds.Format(*dec.Threshold)
		if first, ok := dec.Evaluation.FirstObservedAt[dec.Threshold.Key()]; ok {
			d.FirstMet = snapshot.Offset(start, first)
		}
	}
	if dec.Observation != nil {
		d.Observed = snapshot.Offset(start, dec.Observation.Time)
	}
	if dec.Pod != nil {
		d.Pod, d.UID = dec.Pod.Ref(), dec.Pod.UID
	}
	if p := dec.Predicted; p != nil {
		d.Predicted = &snapshot.RecordPrediction{
			Available: snapshot.NewQuantity(p.Available), RatePerSecond: snapshot.NewQuantity(p.RateBytes()),
			TimeLeft: p.TimeLeft.String(), Release: p.Release.String(), Margin: p.Margin.String(), Readings: p.Readings,
		}
	}
	d.Ranked = len(dec.Candidates)
	for i, c := range dec.Candidates {
		if i == maxRanking {
			break
		}
		d.Ranking = append(d.Ranking, snapshot.RecordCandidate{
			Pod: c.Pod.Ref(), UID: c.Pod.UID, QOS: string(c.Pod.QOS), Priority: c.Pod.Priority,
			Usage: c.Usage, Request: c.Request, HasStats: c.HasStats, Key: c.Key, Skip: c.Skip,
		})
	}
	for _, v := range dec.LocalStorage {
		d.LocalStorage = append(d.LocalStorage, snapshot.RecordViolation{
			Pod: v.Pod.Ref(), UID: v.Pod.UID, Signal: string(v.Signal), Usage: v.Usage, Limit: v.Limit,
		})
	}
	return d
}

func outcomeJSON(start time.Time, acted manager.Acted) snapshot.RecordOutcome {
	o := snapshot.RecordOutcome{Why: acted.Why}
	for _, a := range acted.Attempts {
		ra := snapshot.RecordAttempt{
			Pod: a.Request.Pod.Ref(), UID: a.Request.Pod.UID, Result: string(a.Result), GracePeriod: a.Request.GracePeriod,
			Why: a.Why, Started: snapshot.Offset(start, a.Started), Ended: snapshot.Offset(start, a.Ended),
		}
		if a.Err != nil {
			ra.Error = a.Err.Error()
		}
		o.Attempts = append(o.Attempts, ra)
	}
	return o
}

// Run writes the records the loop hands over until ctx is done, then
// those already handed over. The directory is made and opened at the
// first record, so an agent that never evicts writes nothing, and again
// at the next one after a failure: a directory that cannot be used costs
// the records, counted and said once, never the agent.
func (r *Recorder) Run(ctx context.Context) error {
	var w *writer
	var said string
	defer func() {
		if w != nil {
			w.close()
		}
	}()
	write := func(wr write) {
		if w == nil {
			var err error
			if w, err = newWriter(r.cfg); err != nil {
				r.cfg.Metrics.CountFlightRecord(metrics.RecordFailed)
				if kind := failure(err); kind != said {
					r.cfg.Log.Error("flight recorder: cannot use its directory; records are not kept until it can", "dir", r.cfg.Dir, "err", err)
					said = kind
				}
				return
			}
		}
		w.write(wr.name, wr.file)
	}
	for {
		select {
		case <-ctx.Done():
			for {
				select {
				case wr := <-r.writes:
					write(wr)
				default:
					return nil
				}
			}
		case wr := <-r.writes:
			write(wr)
		}
	}
}

// Snapshot is p as a plain snapshot (no record) of one moment, for
// `evictd status --snapshot`: args and layout as a record's.
func Snapshot(args []string, layout string, p manager.PassRecord) *snapshot.File {
	pods := snapshot.PodsJSON(p.Pods, p.Stats)
	if pods == nil {
		pods = []snapshot.PodJSON{}
	}
	return &snapshot.File{Args: WithLocalStorage(args, p.LocalStorageByKubelet), Layout: layout, Observations: snapshot.ObservationsJSON(p.Time, p.Obs), Pods: pods}
}

// readCount is how many fast-poll readings are kept.
func (r *Recorder) readCount() int {
	r.readsMu.Lock()
	defer r.readsMu.Unlock()
	return len(r.reads)
}
