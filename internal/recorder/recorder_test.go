package recorder

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/manager"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/internal/snapshot"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

var t0 = time.Date(2026, 11, 27, 21, 0, 0, 0, time.UTC)

// syncBuffer is a log that the writer's goroutine and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type fixture struct {
	rec  *Recorder
	dir  string
	reg  *prometheus.Registry
	log  *syncBuffer
	stop func()
}

func newFixture(t *testing.T, dir string, edit func(*Config)) *fixture {
	t.Helper()
	reg := prometheus.NewRegistry()
	met := metrics.New(reg)
	log := &syncBuffer{}
	cfg := Config{Dir: dir, MaxRecords: 100, MaxBytes: 1 << 30, Log: slog.New(slog.NewTextHandler(log, nil)), Metrics: met,
		Args: []string{"--eviction-hard=memory.available<500Mi"}}
	if edit != nil {
		edit(&cfg)
	}
	rec, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- rec.Run(ctx) }()
	f := &fixture{rec: rec, dir: dir, reg: reg, log: log}
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(f.stop)
	return f
}

var hardMemory = thresholds.Threshold{Signal: signals.MemoryAvailable, Operator: thresholds.LessThan, Value: thresholds.Value{Quantity: ptr(resource.MustParse("500Mi"))}}

func ptr[T any](v T) *T { return &v }

func memObs(now time.Time, available int64) signals.Observations {
	return signals.Observations{signals.MemoryAvailable: {Signal: signals.MemoryAvailable, Available: available, Capacity: 4 << 30, Time: now}}
}

// evictPass is a pass that evicted pod for memory at now.
func evictPass(now time.Time, pod *signals.Pod, result manager.Result, dryRun bool) manager.PassRecord {
	th := hardMemory
	o := memObs(now, 400<<20)[signals.MemoryAvailable]
	dec := decide.Decision{Time: now, Outcome: decide.OutcomeEvict, Reason: "threshold met", Signal: signals.MemoryAvailable,
		Threshold: &th, Observation: &o, Pod: pod, Hard: true, GracePeriod: 1, Message: "The node was low on resource: memory. ",
		Evaluation: thresholds.Evaluation{Met: []thresholds.Threshold{th}, Actionable: []thresholds.Threshold{th}}}
	p := manager.PassRecord{Time: now, Trigger: metrics.TriggerWake, DryRun: dryRun, Obs: memObs(now, 400<<20), Pods: []signals.Pod{*pod}, Decision: dec}
	if dryRun {
		p.Acted.Why = "dry-run"
	} else {
		p.Acted.Attempts = []manager.Attempt{{Request: dec.Requests()[0], Result: result, Started: now, Ended: now.Add(300 * time.Millisecond)}}
	}
	return p
}

func quietPass(now time.Time, available int64) manager.PassRecord {
	return manager.PassRecord{Time: now, Trigger: metrics.TriggerTick, Obs: memObs(now, available), Decision: decide.Decision{Time: now, Outcome: decide.OutcomeNone}}
}

func records(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// count is evictd_flight_records_total{result} in f's registry.
func count(t *testing.T, f *fixture, result metrics.FlightRecord) float64 {
	t.Helper()
	v, ok := counted(t, f, result)
	if !ok {
		t.Fatalf("no evictd_flight_records_total{result=%q}", result)
	}
	return v
}

// counted is evictd_flight_records_total{result} in f's registry; false
// when the series does not exist (nothing counted with that result).
func counted(t *testing.T, f *fixture, result metrics.FlightRecord) (float64, bool) {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "evictd_flight_records_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "result" && lp.GetValue() == string(result) {
					return m.GetCounter().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

func TestRecordHoldsTheMinuteBeforeAndTheRelief(t *testing.T) {
	f := newFixture(t, t.TempDir(), nil)
	pod := &signals.Pod{Namespace: "default", Name: "hog", UID: "u-hog", QOS: signals.BestEffort}
	// 90 s of passes every 10 s: the record reaches back a minute.
	for i := range 9 {
		f.rec.Record(quietPass(t0.Add(time.Duration(i)*10*time.Second), int64(3-i/4)<<30))
	}
	decided := t0.Add(90 * time.Second)
	f.rec.Record(evictPass(decided, pod, manager.ResultEvicted, false))
	f.rec.Record(quietPass(decided.Add(1500*time.Millisecond), 2<<30)) // relief
	f.stop()

	names := records(t, f.dir)
	if len(names) != 1 {
		t.Fatalf("records %v, want one", names)
	}
	sc, err := snapshot.ReadFile(filepath.Join(f.dir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(sc.Steps), 7; got != want { // +30s … +90s
		t.Errorf("%d steps, want %d (the minute before and the deciding pass)", got, want)
	}
	last := sc.Steps[len(sc.Steps)-1]
	if len(last.Pods) != 1 || last.Pods[0].Ref() != "default/hog" {
		t.Errorf("last step's pods %v, want default/hog", last.Pods)
	}
	r := sc.Record
	if !r.Start.Equal(t0.Add(30*time.Second)) || r.Decision.At != "1m0s" || r.Decision.Pod != "default/hog" || r.Decision.Threshold != "memory.available<500Mi" {
		t.Errorf("record start %s, decision %+v", r.Start, r.Decision)
	}
	if len(r.Outcome.Attempts) != 1 || r.Outcome.Attempts[0].Result != "evicted" || r.Outcome.Attempts[0].Ended != "1m0.3s" {
		t.Errorf("attempts %+v", r.Outcome.Attempts)
	}
	if r.Outcome.Relief == nil || r.Outcome.Relief.At != "1m1.5s" || r.Outcome.Relief.Available.Value != 2<<30 || r.Outcome.Followed != "1.5s" {
		t.Errorf("relief %+v, followed %q", r.Outcome.Relief, r.Outcome.Followed)
	}
	// Written after the act, then again with the relief.
	if got := count(t, f, metrics.RecordWritten); got != 2 {
		t.Errorf("written %v, want 2", got)
	}
	if info, err := os.Stat(f.dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v (%v), want 0700", info.Mode().Perm(), err)
	}
}

func TestRecordBounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(*Config)
		evict    int
		wantKept int
	}{
		{"count", func(c *Config) { c.MaxRecords = 3 }, 8, 3},
		// Each record is about 2 KiB: 1 MiB holds them all, and
		// MaxBytes at its least is what bounds a large node's.
		{"bytes", func(c *Config) { c.MaxBytes = 1 << 20 }, 8, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, t.TempDir(), tc.edit)
			for i := range tc.evict {
				pod := &signals.Pod{Namespace: "default", Name: "hog", UID: "u" + string(rune('a'+i)), QOS: signals.BestEffort}
				f.rec.Record(evictPass(t0.Add(time.Duration(i)*time.Minute), pod, manager.ResultEvicted, false))
			}
			f.stop()
			if got := records(t, f.dir); len(got) != tc.wantKept {
				t.Errorf("kept %d records %v, want %d", len(got), got, tc.wantKept)
			}
		})
	}
	// A large node: records of 3,000 pods, 1 MiB for all of them.
	f := newFixture(t, t.TempDir(), func(c *Config) { c.MaxBytes = 1 << 20 })
	var pods []signals.Pod
	for i := range 3000 {
		pods = append(pods, signals.Pod{Namespace: "tenant", Name: "pod-" + strings.Repeat("x", 20) + string(rune('a'+i%26)) + itoa(i), UID: "uid-" + itoa(i), QOS: signals.Burstable, MemoryRequest: 1 << 20})
	}
	for i := range 6 {
		p := evictPass(t0.Add(time.Duration(i)*time.Minute), &pods[i], manager.ResultEvicted, false)
		p.Pods = pods
		f.rec.Record(p)
	}
	f.stop()
	var total int64
	names := records(t, f.dir)
	for _, n := range names {
		info, err := os.Stat(filepath.Join(f.dir, n))
		if err != nil {
			t.Fatal(err)
		}
		total += info.Size()
	}
	t.Logf("records of 3,000 pods: %d kept, %d bytes in all", len(names), total)
	if len(names) == 0 || len(names) == 6 || total > 1<<20 {
		t.Errorf("kept %d records of %d bytes in all, want fewer than 6 within 1 MiB", len(names), total)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestRecordRepeatsLeftOut(t *testing.T) {
	f := newFixture(t, t.TempDir(), nil)
	pod := &signals.Pod{Namespace: "default", Name: "hog", UID: "u-hog", QOS: signals.BestEffort}
	// A dry run under steady pressure: one record per 5 minutes.
	for i := range 31 {
		f.rec.Record(evictPass(t0.Add(time.Duration(i)*20*time.Second), pod, "", true))
	}
	// Evictions carried out are each recorded.
	for i := range 3 {
		f.rec.Record(evictPass(t0.Add(time.Hour+time.Duration(i)*time.Second), pod, manager.ResultEvicted, false))
	}
	f.stop()
	if got := len(records(t, f.dir)); got != 3+3 { // +0, +5m, +10m; and the three
		t.Errorf("%d records, want 6", got)
	}
	if got := count(t, f, metrics.RecordRepeat); got != 28 {
		t.Errorf("repeats %v, want 28", got)
	}
}

// TestRecordFullDisk fills a small tmpfs: the records that do not fit
// are counted as failed and said once, the recorder goes on, and once
// there is room again, records are written again.
func TestRecordFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	// A file that leaves the tmpfs about 16k.
	if err := os.WriteFile(filepath.Join(dir, "ballast"), make([]byte, 48<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, filepath.Join(dir, "records"), nil)
	var pods []signals.Pod
	for i := range 200 {
		pods = append(pods, signals.Pod{Namespace: "tenant", Name: "pod-" + itoa(i), UID: "uid-" + itoa(i), QOS: signals.Burstable})
	}
	for i := range 10 {
		p := evictPass(t0.Add(time.Duration(i)*time.Minute), &pods[i], manager.ResultEvicted, false)
		p.Pods = pods
		f.rec.Record(p)
		time.Sleep(20 * time.Millisecond) // the writer's turn: a queue of 16 holds them all anyway
	}
	f.stop()
	failed := count(t, f, metrics.RecordFailed)
	if failed == 0 {
		t.Fatalf("no failed record on a full disk; records %v", records(t, filepath.Join(dir, "records")))
	}
	if n := strings.Count(f.log.String(), "a record could not be written"); n != 1 {
		t.Errorf("said %d times, want once:\n%s", n, f.log.String())
	}
	for _, n := range records(t, filepath.Join(dir, "records")) {
		if strings.HasPrefix(n, ".") {
			t.Errorf("temporary file %s left behind", n)
		}
	}
	// Room again: the next record is written and the end of the failure
	// said.
	if err := os.Remove(filepath.Join(dir, "ballast")); err != nil {
		t.Fatal(err)
	}
	g := newFixture(t, filepath.Join(dir, "records"), nil)
	g.rec.Record(evictPass(t0.Add(time.Hour), &pods[0], manager.ResultEvicted, false))
	g.stop()
	if got := count(t, g, metrics.RecordWritten); got != 1 {
		t.Errorf("written after room was made: %v, want 1", got)
	}
}

// TestRecordUnusableDirectory: a state directory that cannot be made is
// an error logged once; the loop's passes are still taken and never
// blocked.
func TestRecordUnusableDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, filepath.Join(file, "records"), nil)
	pod := &signals.Pod{Namespace: "default", Name: "hog", UID: "u-hog"}
	for i := range 40 { // more than the writer's queue
		f.rec.Record(evictPass(t0.Add(time.Duration(i)*time.Minute), pod, manager.ResultEvicted, false))
	}
	f.stop()
	if n := strings.Count(f.log.String(), "cannot use its directory"); n != 1 {
		t.Errorf("said %d times, want once:\n%s", n, f.log.String())
	}
	// Whether the writer's queue overflowed depends on how fast it
	// failed: either series may not exist.
	failed, _ := counted(t, f, metrics.RecordFailed)
	dropped, _ := counted(t, f, metrics.RecordDropped)
	if got := failed + dropped; got < 40 {
		t.Errorf("failed and dropped %v, want every record (40) and the directory", got)
	}
}

func TestNewRejects(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{MaxRecords: 1, MaxBytes: 1 << 20, Log: log}, "no directory"},
		{Config{Dir: "/x", MaxRecords: 0, MaxBytes: 1 << 20, Log: log}, "at most 0 records"},
		{Config{Dir: "/x", MaxRecords: 1, MaxBytes: 1000, Log: log}, "at most 1000 bytes"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

func TestWindow(t *testing.T) {
	soft := thresholds.Threshold{Signal: signals.MemoryAvailable, Soft: true, GracePeriod: 90 * time.Second}
	for _, tc := range []struct {
		ths  []thresholds.Threshold
		want time.Duration
	}{
		{nil, time.Minute},
		{[]thresholds.Threshold{hardMemory}, time.Minute},
		{[]thresholds.Threshold{hardMemory, soft}, 110 * time.Second},
	} {
		if got := Window(tc.ths, 10*time.Second); got != tc.want {
			t.Errorf("Window(%v): got %s, want %s", tc.ths, got, tc.want)
		}
	}
}

// TestRecordKeepsFastPollReads: the fast poll's readings, from its own
// goroutine, between the record's first step and the decision are in the
// record; older ones are not kept.
func TestRecordKeepsFastPollReads(t *testing.T) {
	f := newFixture(t, t.TempDir(), nil)
	pod := &signals.Pod{Namespace: "default", Name: "hog", UID: "u-hog", QOS: signals.BestEffort}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Three minutes of readings every 10 ms, the last one at +3m.
		for i := range 18001 {
			at := t0.Add(time.Duration(i) * 10 * time.Millisecond)
			f.rec.Read(signals.Observation{Signal: signals.MemoryAvailable, Available: int64(4<<30) - int64(i)<<16, Capacity: 4 << 30, Time: at})
		}
	}()
	for i := range 18 {
		f.rec.Record(quietPass(t0.Add(time.Duration(i)*10*time.Second), 3<<30))
	}
	<-done
	f.rec.Record(evictPass(t0.Add(3*time.Minute), pod, manager.ResultEvicted, false))
	f.stop()
	names := records(t, f.dir)
	if len(names) != 1 {
		t.Fatalf("records %v", names)
	}
	sc, err := snapshot.ReadFile(filepath.Join(f.dir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	reads := sc.Record.Reads
	// From the record's first step (+2m, a minute before) to the
	// decision (+3m).
	if len(reads) != 6001 || reads[0].At != "0s" || reads[len(reads)-1].At != "1m0s" {
		t.Fatalf("%d reads from %s to %s, want 6001 from 0s to 1m0s", len(reads), reads[0].At, reads[len(reads)-1].At)
	}
	if f.rec.readCount() > 6001 {
		t.Errorf("%d reads kept, want the window's alone", f.rec.readCount())
	}
}

// TestRecordLocalStorageRepeatsLeftOut: pods over their limits that a
// limit keeps from eviction pass after pass are recorded once per window;
// each pass that evicts one is recorded.
func TestRecordLocalStorageRepeatsLeftOut(t *testing.T) {
	f := newFixture(t, t.TempDir(), nil)
	pod := &signals.Pod{Namespace: "default", Name: "filler", UID: "u-filler"}
	pass := func(at time.Time, result manager.Result) manager.PassRecord {
		v := decide.Violation{Signal: "emptydirfs.limit", Pod: pod, Usage: 2 << 30, Limit: 1 << 30, Message: "over"}
		dec := decide.Decision{Time: at, Outcome: decide.OutcomeLocalStorage, LocalStorage: []decide.Violation{v}}
		return manager.PassRecord{Time: at, Obs: memObs(at, 3<<30), Pods: []signals.Pod{*pod}, Decision: dec,
			Acted: manager.Acted{Attempts: []manager.Attempt{{Request: v.Request(), Result: result}}}}
	}
	for i := range 12 { // two minutes, every 10 s, rate-limited
		f.rec.Record(pass(t0.Add(time.Duration(i)*10*time.Second), manager.ResultWithheld))
	}
	f.rec.Record(pass(t0.Add(2*time.Minute), manager.ResultEvicted))
	f.stop()
	if got := len(records(t, f.dir)); got != 2 {
		t.Errorf("%d records, want 2 (the first withheld, the eviction)", got)
	}
}

// TestRecordNoDirectoryUntilARecord: an agent that never decides to evict
// makes no state directory.
func TestRecordNoDirectoryUntilARecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "records")
	f := newFixture(t, dir, nil)
	for i := range 10 {
		f.rec.Record(quietPass(t0.Add(time.Duration(i)*10*time.Second), 3<<30))
	}
	f.stop()
	if _, err := os.Stat(filepath.Dir(dir)); !os.IsNotExist(err) {
		t.Errorf("%s: %v, want none made", filepath.Dir(dir), err)
	}
}

// TestRecordPredictedRelief: a decision time to exhaustion took before
// its threshold was met records the prediction, and its relief is memory
// back to where it was decided on, not the threshold (never met) found
// not met.
func TestRecordPredictedRelief(t *testing.T) {
	f := newFixture(t, t.TempDir(), nil)
	pod := &signals.Pod{Namespace: "default", Name: "hog", UID: "u-hog", QOS: signals.BestEffort}
	decided := t0.Add(10 * time.Second)
	f.rec.Record(quietPass(t0, 3<<30))
	p := evictPass(decided, pod, manager.ResultEvicted, false)
	p.Obs = memObs(decided, 1<<30)
	p.Decision.Evaluation = thresholds.Evaluation{}
	p.Decision.Predicted = &decide.Prediction{Threshold: hardMemory, Available: 1 << 30, Rate: 800 << 20, TimeLeft: 1280 * time.Millisecond,
		Release: 1234567 * time.Nanosecond, Margin: 500 * time.Millisecond, Readings: 11}
	f.rec.Record(p)
	f.rec.Record(quietPass(decided.Add(100*time.Millisecond), 900<<20))  // still below: no relief
	f.rec.Record(quietPass(decided.Add(300*time.Millisecond), 1100<<20)) // back above
	f.stop()

	names := records(t, f.dir)
	if len(names) != 1 {
		t.Fatalf("records %v, want one", names)
	}
	sc, err := snapshot.ReadFile(filepath.Join(f.dir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	r := sc.Record
	want := snapshot.RecordPrediction{Available: snapshot.NewQuantity(1 << 30), RatePerSecond: snapshot.NewQuantity(800 << 20),
		TimeLeft: "1.28s", Release: "1.234567ms", Margin: "500ms", Readings: 11}
	if got := r.Decision.Predicted; got == nil || got.Available.Value != want.Available.Value || got.RatePerSecond.Value != want.RatePerSecond.Value ||
		got.TimeLeft != want.TimeLeft || got.Release != want.Release || got.Margin != want.Margin || got.Readings != want.Readings {
		t.Errorf("prediction %+v, want %+v", got, want)
	}
	if sc.Release != 1234567*time.Nanosecond {
		t.Errorf("release read back: %s, want 1.234567ms", sc.Release)
	}
	if r.Outcome.Relief == nil || r.Outcome.Relief.At != "10.3s" || r.Outcome.Relief.Available.Value != 1100<<20 {
		t.Errorf("relief %+v, want at 10.3s with 1100Mi", r.Outcome.Relief)
	}
}
