package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	evictdagent "github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/manager"
	flight "github.com/evictd/evictd/internal/recorder"
	"github.com/evictd/evictd/internal/snapshot"
)

// recordExample decides every step of an example snapshot as the agent
// would, with the agent's flight recorder beside the decider, as if each
// eviction had been carried out, and returns the records' paths.
func recordExample(t *testing.T, path string, extra ...string) []string {
	t.Helper()
	sc, err := snapshot.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, ok := loadConfig("evictd", "", append(append([]string{}, sc.Args...), extra...), io.Discard, io.Discard, nil)
	if !ok {
		t.Fatalf("%s: its args do not load", path)
	}
	dc := evictdagent.DeciderConfig(cfg, sc.Layout)
	dir := t.TempDir()
	rec, err := flight.New(flight.Config{
		Dir: dir, MaxRecords: 100, MaxBytes: 1 << 30,
		Window: flight.Window(dc.Thresholds, cfg.HousekeepingInterval),
		Args:   flight.Args(dc, cfg.HousekeepingInterval, cfg.HugepageAwareEviction),
		Layout: sc.Layout.String(), Node: "node-a", Version: "test",
		Log: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- rec.Run(ctx) }()
	// Decided as simulate replays, time to exhaustion included.
	d := newStepDecider(decide.NewDecider(dc), sc)
	for _, step := range sc.Steps {
		obs := step.ObservationsFor(cfg.HugepageAwareEviction)
		dec := d.decide(step, obs)
		var acted manager.Acted
		reqs := dec.Requests()
		if dec.Outcome == decide.OutcomeLocalStorage {
			reqs = dec.LocalStorageRequests()
		}
		for _, req := range reqs {
			acted.Attempts = append(acted.Attempts, manager.Attempt{Request: req, Result: manager.ResultEvicted,
				Started: step.Time.Add(time.Millisecond), Ended: step.Time.Add(400 * time.Millisecond)})
			if dec.Outcome == decide.OutcomeEvict {
				break
			}
		}
		rec.Record(manager.PassRecord{Time: step.Time, Trigger: "tick", Obs: obs, Pods: step.Pods, Stats: step.Stats, Decision: dec, Acted: acted})
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range entries {
		if !flight.IsRecordName(e.Name()) {
			t.Errorf("%s left in the records' directory", e.Name())
			continue
		}
		info, _ := e.Info()
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", e.Name(), info.Mode().Perm())
		}
		paths = append(paths, filepath.Join(dir, e.Name()))
	}
	return paths
}

// TestRecordReplaysAsDecided records every eviction of every example
// with the agent's flight recorder and replays each record through
// simulate: the replay must decide the same pod, grace period and
// message at the record's last step.
func TestRecordReplaysAsDecided(t *testing.T) {
	examples, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.json"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	total := 0
	for _, ex := range examples {
		t.Run(filepath.Base(ex), func(t *testing.T) {
			for _, path := range recordExample(t, ex) {
				total++
				out, errOut, code := runCmd("simulate", "--snapshot", path, "-o", "json")
				if code != 0 {
					t.Fatalf("simulate %s: exit %d: %s", path, code, errOut)
				}
				var got struct {
					Steps  []stepResult `json:"steps"`
					Record replayed     `json:"record"`
				}
				if err := json.Unmarshal([]byte(out), &got); err != nil {
					t.Fatalf("simulate %s: %v\n%s", path, err, out)
				}
				if len(got.Record.Differences) > 0 || got.Record.Recorded.Outcome == "" {
					t.Errorf("%s: replay differs: %v", filepath.Base(path), got.Record.Differences)
				}
				if !reflect.DeepEqual(got.Record.Recorded, got.Record.Replayed) {
					t.Errorf("%s: recorded %+v, replayed %+v", filepath.Base(path), got.Record.Recorded, got.Record.Replayed)
				}
			}
		})
	}
	if total < 8 {
		t.Errorf("%d records from the examples, want at least 8", total)
	}
}

func TestExplainRecord(t *testing.T) {
	paths := recordExample(t, filepath.Join("..", "..", "examples", "besteffort-biggest-first.json"))
	if len(paths) == 0 {
		t.Fatal("no record")
	}
	out, errOut, code := runCmd("explain", "--record", paths[0])
	if code != 0 {
		t.Fatalf("explain: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"on node-a", "record: " + paths[0], "why now: the hard threshold memory.available<",
		"available (0s before the decision)", "why this pod: the ranking for memory.available",
		"    1. ", "done: evicted ", "asked 1ms after the decision, returned 400ms after", "event: Warning Evicted",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	// JSON: the same, with its field names stable.
	out, _, code = runCmd("explain", "--record", paths[0], "-o", "json")
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got) != 1 {
		t.Fatalf("explain -o json: exit %d, %v:\n%s", code, err, out)
	}
	for _, field := range []string{"record", "node", "decidedAt", "outcome", "pod", "uid", "signal", "threshold", "hard", "readings", "gracePeriodSeconds", "message", "ranking", "ranked", "attempts"} {
		if _, ok := got[0][field]; !ok {
			t.Errorf("explain -o json lacks %q: %v", field, got[0])
		}
	}
	pod, _ := got[0]["pod"].(string)
	// By pod: its name, namespace/name and UID find it; another does not.
	uid, _ := got[0]["uid"].(string)
	_, name, _ := strings.Cut(pod, "/")
	for _, q := range []string{name, pod, uid} {
		if _, errOut, code := runCmd("explain", q, "--record", paths[0]); code != 0 {
			t.Errorf("explain %s: exit %d: %s", q, code, errOut)
		}
	}
	if _, errOut, code := runCmd("explain", "nobody", "--record", paths[0]); code != 1 || !strings.Contains(errOut, "no flight record names nobody") {
		t.Errorf("explain nobody: exit %d: %s", code, errOut)
	}
}

func TestExplainStateDir(t *testing.T) {
	paths := recordExample(t, filepath.Join("..", "..", "examples", "seed-10gi-system-reserved.json"))
	if len(paths) < 2 {
		t.Fatalf("%d records, want several", len(paths))
	}
	state := t.TempDir()
	dir := evictdagent.RecordsDir(state)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, _, code := runCmd("explain", "--state-dir", state, "-o", "json")
	var one []explanation
	if err := json.Unmarshal([]byte(out), &one); code != 0 || err != nil || len(one) != 1 {
		t.Fatalf("explain: exit %d, %v, %d explanations, want the last one", code, err, len(one))
	}
	out, _, _ = runCmd("explain", "--state-dir", state, "--last", "100", "-o", "json")
	var all []explanation
	if err := json.Unmarshal([]byte(out), &all); err != nil || len(all) != len(paths) {
		t.Fatalf("--last 100: %v, %d explanations, want %d", err, len(all), len(paths))
	}
	if !all[len(all)-1].DecidedAt.Equal(one[0].DecidedAt) {
		t.Errorf("the last one is %s, want %s", one[0].DecidedAt, all[len(all)-1].DecidedAt)
	}

	// A corrupted record is named with the reason; the others are still
	// explained, and the exit code says one was not.
	bad := filepath.Join(dir, "20990101T000000.000Z-000001.json")
	if err := os.WriteFile(bad, []byte(`{"apiVersion": "evictd.io/v1alpha1", "kind": "FlightRecord", "steps": [{"at": "0s", "observations": {"memory.available": {"available": "1Gi"`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCmd("explain", "--state-dir", state)
	if code != 1 || !strings.Contains(errOut, bad) || !strings.Contains(errOut, "unexpected EOF") || !strings.Contains(out, "why this pod") {
		t.Errorf("with a corrupted record: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	// Given alone, it is an error.
	if _, errOut, code := runCmd("explain", "--record", bad); code != 1 || !strings.Contains(errOut, bad) {
		t.Errorf("--record of a corrupted file: exit %d: %s", code, errOut)
	}
	// A plain snapshot is not a record.
	plain := filepath.Join("..", "..", "examples", "psi.json")
	if _, errOut, code := runCmd("explain", "--record", plain); code != 1 || !strings.Contains(errOut, "not a flight record") {
		t.Errorf("--record of a snapshot: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCmd("explain", "--state-dir", filepath.Join(state, "missing")); code != 1 || !strings.Contains(errOut, "missing") {
		t.Errorf("a missing state directory: exit %d: %s", code, errOut)
	}
	if _, _, code := runCmd("explain", "--last", "-1"); code != 2 {
		t.Errorf("--last -1: exit %d, want 2", code)
	}
}

// TestRecordedRaceInKubeletMode records the 800 MiB/s race as the agent
// would and replays the record as kubelet 1.37 with its 10 s
// housekeeping: too late at its latest tick, where evictd was in time.
func TestRecordedRaceInKubeletMode(t *testing.T) {
	paths := recordExample(t, filepath.Join("..", "..", "examples", "race-800mibs.json"))
	if len(paths) == 0 {
		t.Fatal("no record of the race")
	}
	// The first, at the crossing (its later steps evict again).
	out, errOut, code := runCmd("simulate", "--snapshot", paths[0], "--kubelet", "1.37")
	if code != 0 {
		t.Fatalf("simulate --kubelet: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"evictd in time", "too late at the latest", "evictd, as recorded: decided at +1.1s, evicted default/hog: asked at +1.101s, returned at +1.5s"} {
		if !strings.Contains(out, want) {
			t.Errorf("the replay lacks %q:\n%s", want, out)
		}
	}
	// Another threshold, replayed: the record says where it differs.
	out, _, _ = runCmd("simulate", "--snapshot", paths[0], "--eviction-hard=memory.available<100Mi")
	if !strings.Contains(out, "differs: outcome") {
		t.Errorf("a replay at another threshold shows no difference:\n%s", out)
	}
}

// TestKubeletModeTimesTheRaceByFastPollReads: a record whose passes are
// far apart but whose fast poll read memory between them times the
// crossing by the reads.
func TestKubeletModeTimesTheRaceByFastPollReads(t *testing.T) {
	paths := recordExample(t, filepath.Join("..", "..", "examples", "race-800mibs.json"))
	if len(paths) == 0 {
		t.Fatal("no record of the race")
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	var f snapshot.File
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	// Keep the first step and the deciding one; what was read between
	// them becomes the fast poll's.
	first, last := f.Steps[0], f.Steps[len(f.Steps)-1]
	for _, s := range f.Steps[1 : len(f.Steps)-1] {
		o := s.Observations["memory.available"]
		f.Record.Reads = append(f.Record.Reads, snapshot.RecordRead{At: s.At, Signal: "memory.available", Available: o.Available, Capacity: o.Capacity})
	}
	if first.Pods == nil {
		first.Pods = last.Pods
	}
	f.Steps = []snapshot.StepJSON{first, last}
	sparse := filepath.Join(t.TempDir(), "sparse.json")
	b, err = json.Marshal(&f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sparse, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCmd("simulate", "--snapshot", sparse, "--kubelet", "1.37")
	if code != 0 {
		t.Fatalf("simulate --kubelet: exit %d: %s", code, errOut)
	}
	if want := "crossed at +1.05s (between the readings at +1s and +1.1s), memory use growing 800.0MiB/s"; !strings.Contains(out, want) {
		t.Errorf("the replay lacks %q:\n%s", want, out)
	}
	// The same record without its reads: timed by its two passes.
	f.Record.Reads = nil
	b, _ = json.Marshal(&f)
	if err := os.WriteFile(sparse, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, _ = runCmd("simulate", "--snapshot", sparse, "--kubelet", "1.37")
	if strings.Contains(out, "between the readings at +1s and +1.1s") {
		t.Errorf("without reads, the crossing is still timed by them:\n%s", out)
	}
}

// TestRecordPredictedReplays: the record of a decision time to exhaustion
// took says so, with the release estimate it acted with, and replays as
// decided: from its passes, and from the fast poll's readings alone when
// only the first and the deciding pass are left. Replayed without the
// flag, it says where it differs.
func TestRecordPredictedReplays(t *testing.T) {
	paths := recordExample(t, filepath.Join("..", "..", "examples", "time-to-exhaustion.json"))
	if len(paths) == 0 {
		t.Fatal("no record of the predicted eviction")
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	var f snapshot.File
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	p := f.Record.Decision.Predicted
	if p == nil || p.Release != "1s" || p.Margin != "500ms" || p.TimeLeft != "1.4s" || p.Readings < 5 {
		t.Fatalf("record's prediction: got %+v, want 1.4s left, release 1s, margin 500ms", p)
	}
	if !strings.Contains(strings.Join(f.Args, " "), "--eviction-time-to-exhaustion=true --eviction-time-to-exhaustion-margin=500ms") {
		t.Errorf("record's args %v lack time to exhaustion", f.Args)
	}
	replay := func(path string, extra ...string) replayed {
		t.Helper()
		out, errOut, code := runCmd(append([]string{"simulate", "--snapshot", path, "-o", "json"}, extra...)...)
		if code != 0 {
			t.Fatalf("simulate: exit %d: %s", code, errOut)
		}
		var got struct {
			Record replayed `json:"record"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("simulate: %v\n%s", err, out)
		}
		return got.Record
	}
	if r := replay(paths[0]); len(r.Differences) > 0 || !r.Recorded.Predicted || !r.Replayed.Predicted {
		t.Errorf("replay: got %+v", r)
	}
	out, errOut, code := runCmd("explain", "--record", paths[0])
	if want := "why now: the hard threshold memory.available<500Mi was not met yet, but memory.available was predicted to run out in 1.4s at 800Mi a second (11 readings), below the release estimate 1s plus the margin 500ms"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("explain: exit %d %s, want %q in:\n%s", code, errOut, want, out)
	}
	// Memory still below where it was decided on, at the last step: no
	// relief (the threshold, never met, says nothing of it).
	if want := "relief: not yet seen when the record was written"; !strings.Contains(out, want) {
		t.Errorf("explain: want %q in:\n%s", want, out)
	}

	first, last := f.Steps[0], f.Steps[len(f.Steps)-1]
	for _, s := range f.Steps[1 : len(f.Steps)-1] {
		o := s.Observations["memory.available"]
		f.Record.Reads = append(f.Record.Reads, snapshot.RecordRead{At: s.At, Signal: "memory.available", Available: o.Available, Capacity: o.Capacity})
	}
	f.Steps = []snapshot.StepJSON{first, last}
	sparse := filepath.Join(t.TempDir(), "sparse.json")
	if b, err = json.Marshal(&f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sparse, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := replay(sparse); len(r.Differences) > 0 || !r.Replayed.Predicted {
		t.Errorf("replay from the fast poll's readings: got %+v", r)
	}
	if r := replay(paths[0], "--eviction-time-to-exhaustion=false"); !slices.Contains(r.Differences, `predicted: recorded "true", replayed "false"`) {
		t.Errorf("replay without the flag: differences %q, want the prediction's", r.Differences)
	}
}
