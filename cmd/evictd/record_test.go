package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
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
	d := decide.NewDecider(dc)
	for _, step := range sc.Steps {
		obs := step.ObservationsFor(cfg.HugepageAwareEviction)
		dec := d.Decide(step.Time, obs, step.Pods, step.Stats)
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
