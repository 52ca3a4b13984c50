package node

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/recorder"
	"github.com/evictd/evictd/internal/snapshot"
	"github.com/evictd/evictd/internal/testing/testnode"
)

// checkFlightRecord finds the flight record of evictd's eviction of pod
// (namespace/name, of uid: an earlier scenario on the node may have
// evicted a pod of the same name) on n, and checks it against what the API server
// showed (the Evicted event's message, the deletion's grace period), then
// replays it with `evictd simulate` (the same pod, grace period and
// message) and explains it with `evictd explain` from the node's state
// directory alone.
func checkFlightRecord(t *testing.T, n *testnode.Node, pod, uid, message string, grace int64) {
	t.Helper()
	dir := filepath.Join(n.StateDir(), "records")
	var path string
	var rec *snapshot.Scenario
	// Written after the act, and again with its relief: wait for the
	// relief, which the hog's going brings.
	poll(t, "the flight record of "+pod, 30*time.Second, func() (bool, string) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return false, err.Error()
		}
		for _, e := range entries {
			// The writer's temporary file (.name.tmp) is renamed away
			// the moment it is whole: read the records alone.
			if !recorder.IsRecordName(e.Name()) {
				continue
			}
			sc, err := snapshot.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return false, err.Error()
			}
			if sc.Record.Decision.Pod == pod && sc.Record.Decision.UID == uid && sc.Record.Outcome.Relief != nil {
				path, rec = filepath.Join(dir, e.Name()), sc
				return true, ""
			}
		}
		return false, "no record of " + pod + " (uid " + uid + ") with its relief among " + lines(entries)
	})
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		if info, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		} else if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, info.Mode().Perm(), want)
		}
	}
	d := rec.Record.Decision
	if d.Message != message || d.GracePeriod != grace {
		t.Errorf("record: message %q, grace %d; the API server showed %q, grace %d", d.Message, d.GracePeriod, message, grace)
	}
	if len(rec.Record.Outcome.Attempts) != 1 || rec.Record.Outcome.Attempts[0].Result != "evicted" {
		t.Errorf("record's attempts %+v, want one, evicted", rec.Record.Outcome.Attempts)
	}
	last := rec.Steps[len(rec.Steps)-1]
	if len(last.Pods) < 3 || len(rec.Steps) < 2 {
		t.Errorf("record: %d steps, %d pods in the last, want the passes before and the node's pods", len(rec.Steps), len(last.Pods))
	}

	out, err := exec.Command(n.EvictdBinary(), "simulate", "--snapshot", path, "-o", "json").Output()
	if err != nil {
		t.Fatalf("simulate %s: %v", path, err)
	}
	var replay struct {
		Record struct {
			Replayed struct {
				Pod         string `json:"pod"`
				GracePeriod int64  `json:"gracePeriodSeconds"`
				Message     string `json:"message"`
			} `json:"replayed"`
			Differences []string `json:"differences"`
		} `json:"record"`
	}
	if err := json.Unmarshal(out, &replay); err != nil {
		t.Fatalf("simulate %s: %v", path, err)
	}
	r := replay.Record
	if len(r.Differences) > 0 || r.Replayed.Pod != pod || r.Replayed.GracePeriod != grace || r.Replayed.Message != message {
		t.Errorf("replay: %+v, differences %v; want %s, grace %d, the event's message", r.Replayed, r.Differences, pod, grace)
	}
	_, name, _ := strings.Cut(pod, "/")
	text, err := exec.Command(n.EvictdBinary(), "explain", name, "--state-dir", n.StateDir()).Output()
	if err != nil {
		t.Fatalf("explain %s: %v", name, err)
	}
	for _, want := range []string{pod, "why now: the ", "why this pod: the ranking", "done: evicted " + pod, "relief: "} {
		if !strings.Contains(string(text), want) {
			t.Errorf("explain lacks %q:\n%s", want, text)
		}
	}
	t.Logf("evictd explain %s:\n%s", name, text)
}

// findRecord waits for a flight record of evictd's eviction of pod on n
// decided after since (an earlier scenario on the node may have evicted a
// pod of the same name) and returns its path.
func findRecord(t *testing.T, n *testnode.Node, pod string, since time.Time) string {
	t.Helper()
	dir := filepath.Join(n.StateDir(), "records")
	var path string
	poll(t, "the flight record of "+pod, 30*time.Second, func() (bool, string) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return false, err.Error()
		}
		for _, e := range entries {
			// The writer's temporary file (.name.tmp) is renamed away
			// the moment it is whole: read the records alone.
			if !recorder.IsRecordName(e.Name()) {
				continue
			}
			sc, err := snapshot.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return false, err.Error()
			}
			at, err := time.ParseDuration(sc.Record.Decision.At)
			if err != nil {
				return false, err.Error()
			}
			if sc.Record.Start.Add(at).Before(since) {
				continue
			}
			if sc.Record.Decision.Pod == pod && len(sc.Record.Outcome.Attempts) > 0 && sc.Record.Outcome.Attempts[0].Result == "evicted" {
				path = filepath.Join(dir, e.Name())
				return true, ""
			}
		}
		return false, "no record of " + pod + " among " + lines(entries)
	})
	return path
}

// replayRaceAsKubelet replays the record of a hard memory eviction that
// beat the kernel as kubelet 1.37 with its 10 s housekeeping: evictd in
// time, the kubelet too late at its latest tick, when memory ran out in
// less than a housekeeping interval after the crossing.
func replayRaceAsKubelet(t *testing.T, n *testnode.Node, pod string, since time.Time) {
	t.Helper()
	path := findRecord(t, n, pod, since)
	out, err := exec.Command(n.EvictdBinary(), "simulate", "--snapshot", path, "--kubelet", "1.37", "-o", "json").Output()
	if err != nil {
		t.Fatalf("simulate --kubelet 1.37 %s: %v", path, err)
	}
	var got struct {
		Counterfactual struct {
			Kubelet struct {
				Latest struct {
					InTime *bool `json:"inTime"`
				} `json:"latest"`
			} `json:"kubelet"`
			Evictd struct {
				InTime *bool `json:"inTime"`
			} `json:"evictd"`
			Memory *struct {
				CrossingAt         string  `json:"crossingAt"`
				GrowthMiBPerSecond float64 `json:"growthMiBPerSecond"`
				RunsOutAt          string  `json:"runsOutAt"`
			} `json:"memory"`
		} `json:"counterfactual"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("simulate --kubelet: %v", err)
	}
	c := got.Counterfactual
	if c.Memory == nil || c.Memory.RunsOutAt == "" || c.Evictd.InTime == nil || c.Kubelet.Latest.InTime == nil {
		t.Fatalf("the replay has no race: %s", out)
	}
	t.Logf("recorded race replayed as kubelet 1.37: crossing at %s, growth %.1f MiB/s, memory out at %s; evictd in time %v, kubelet at its latest tick in time %v",
		c.Memory.CrossingAt, c.Memory.GrowthMiBPerSecond, c.Memory.RunsOutAt, *c.Evictd.InTime, *c.Kubelet.Latest.InTime)
	if !*c.Evictd.InTime || *c.Kubelet.Latest.InTime {
		t.Errorf("want evictd in time and the kubelet's 10 s poll too late at its latest tick:\n%s", out)
	}
}

func lines(entries []os.DirEntry) string {
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, ", ")
}
