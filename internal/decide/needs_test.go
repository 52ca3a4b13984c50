package decide

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/evictd/evictd/ranking"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// onlyKinds is what a reader asked for kinds gives of stats: the figures
// of those kinds, and the pods that have any of them.
func onlyKinds(stats map[string]signals.PodStats, kinds signals.PodStatsKinds) map[string]signals.PodStats {
	out := map[string]signals.PodStats{}
	for uid, st := range stats {
		kept := signals.PodStats{UID: st.UID, Time: st.Time}
		if kinds.Has(signals.PodMemory) {
			kept.MemoryWorkingSet = st.MemoryWorkingSet
		}
		if kinds.Has(signals.PodProcesses) {
			kept.Processes = st.Processes
		}
		if kinds.Has(signals.PodDisk) {
			kept.Containers, kept.Volumes = st.Containers, st.Volumes
		}
		if kept.MemoryWorkingSet != nil || kept.Processes != nil || kept.Containers != nil || kept.Volumes != nil {
			out[uid] = kept
		}
	}
	return out
}

// needsNode is a node whose pods differ in every kind of usage, so that a
// ranking read from the wrong kind would pick another pod: by memory
// "mem" leads, by task count "tasks", by disk "disk"; "quiet" is
// unmeasured for memory and tasks, "limited" is over its
// ephemeral-storage limit only when local-storage is on.
func needsNode(limited bool) ([]signals.Pod, map[string]signals.PodStats) {
	app := []signals.Container{{Name: "app", MemoryRequest: 64 * mi}}
	pod := func(name string, prio int32) signals.Pod {
		return signals.Pod{Namespace: "default", Name: name, UID: name, QOS: signals.Burstable, Priority: prio,
			MemoryRequest: 64 * mi, Containers: app, LocalVolumes: []string{"cache"}}
	}
	pods := []signals.Pod{pod("mem", 0), pod("tasks", 0), pod("disk", 0), pod("quiet", 10)}
	if limited {
		pods[3].EphemeralStorageLimit = 10 * mi
	}
	disk := func(uid string, bytes int64, ws int64) signals.PodStats {
		return signals.PodStats{UID: uid, Time: t0,
			Containers: []signals.ContainerStats{{Name: "app", MemoryWorkingSet: i64(ws),
				Rootfs: &signals.FsUsage{Bytes: bytes, Inodes: bytes / mi}, Logs: &signals.FsUsage{Bytes: 1, Inodes: 1}}},
			Volumes: map[string]signals.FsUsage{"cache": {Bytes: bytes / 2, Inodes: 3}}}
	}
	with := func(st signals.PodStats, ws, procs int64) signals.PodStats {
		st.MemoryWorkingSet, st.Processes = i64(ws), i64(procs)
		return st
	}
	stats := map[string]signals.PodStats{
		"mem":   with(disk("mem", 5*mi, 900*mi), 900*mi, 3),
		"tasks": with(disk("tasks", 7*mi, 100*mi), 100*mi, 4000),
		"disk":  with(disk("disk", 9000*mi, 80*mi), 80*mi, 5),
		"quiet": disk("quiet", 20*mi, 0),
	}
	return pods, stats
}

// TestNeedsDecidesAsAll: for every signal, threshold kind and layout, a
// decision given only the stats Needs names is the decision given every
// stat: the same outcome, pod, reason, message, annotations, fallbacks
// and ranking; and a pass with nothing actionable needs disk usage alone.
func TestNeedsDecidesAsAll(t *testing.T) {
	layouts := []signals.FsLayout{signals.SingleFs, signals.DedicatedImageFs, signals.SplitImageFs}
	for _, sig := range signals.All() {
		for _, soft := range []bool{false, true} {
			for _, layout := range layouts {
				for _, limited := range []bool{false, true} {
					for _, byKubelet := range []bool{false, true} {
						name := fmt.Sprintf("%s/soft=%t/%s/local-storage=%t/by-kubelet=%t", sig, soft, layout, limited, byKubelet)
						t.Run(name, func(t *testing.T) {
							checkNeeds(t, sig, soft, layout, limited, byKubelet)
						})
					}
				}
			}
		}
	}
}

// checkNeeds: with the local-storage limits left to the kubelet
// (byKubelet), no pass reads disk usage for them and none decides on them.
func checkNeeds(t *testing.T, sig signals.Signal, soft bool, layout signals.FsLayout, limited, byKubelet bool) {
	value, obs := "50%", signals.Observation{Signal: sig, Available: 10 * mi, Capacity: 100 * mi}
	if sig.Stall() {
		value, obs = ">20", signals.Observation{Signal: sig, Available: signals.StallScale / 2, Capacity: signals.StallScale}
	}
	s := thresholds.Settings{Hard: map[string]string{string(sig): value}}
	if soft {
		s = thresholds.Settings{Hard: map[string]string{}, Soft: map[string]string{string(sig): value},
			SoftGracePeriod: map[string]string{string(sig): "30s"}}
	}
	p, err := thresholds.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	pods, stats := needsNode(limited)
	cfg := DeciderConfig{Thresholds: p.Thresholds, TransitionPeriod: time.Minute, Layout: layout, LocalStorageByKubelet: byKubelet}
	all, some := NewDecider(cfg), NewDecider(cfg)
	// Passes 10 s apart: a soft threshold waits its 30 s grace period,
	// then both rank; one pass with the signal clear ends it.
	for i := range 6 {
		now := t0.Add(time.Duration(i) * 10 * time.Second)
		o := obs
		if i == 5 {
			o.Available = o.Capacity
			if sig.Stall() {
				o.Available = 0
			}
		}
		o.Time = now
		observed := signals.Observations{sig: o}
		want := all.Decide(now, observed, pods, stats)
		ev := some.Evaluate(now, observed)
		kinds := some.Needs(ev)
		got := some.DecideEvaluated(now, ev, observed, pods, onlyKinds(stats, kinds))
		wantIdle := signals.PodDisk
		if byKubelet {
			wantIdle = 0
		}
		if len(ev.Actionable) == 0 && kinds != wantIdle {
			t.Errorf("pass %d: nothing actionable (%s), needs %s, want %s", i, want.Reason, kinds, wantIdle)
		}
		if byKubelet && (want.Outcome == OutcomeLocalStorage || got.Outcome == OutcomeLocalStorage) {
			t.Errorf("pass %d: a local-storage decision (%s) with the limits left to the kubelet", i, want.Reason)
		}
		if !byKubelet && limited && i == 0 && want.Outcome != OutcomeLocalStorage {
			t.Errorf("pass %d: pods over their limits, outcome %s, want %s", i, want.Outcome, OutcomeLocalStorage)
		}
		compareDecisions(t, i, got, want)
	}
}

// compareDecisions compares two decisions field by field, the candidates
// without their stats copies, which hold only what was read.
func compareDecisions(t *testing.T, pass int, got, want Decision) {
	t.Helper()
	strip := func(d Decision) Decision {
		d.Candidates = append([]ranking.Candidate(nil), d.Candidates...)
		for i := range d.Candidates {
			d.Candidates[i].Stats = nil
		}
		d.Evaluation = thresholds.Evaluation{}
		return d
	}
	g, w := strip(got), strip(want)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("pass %d: decision with the stats needed differs from the one with all stats:\ngot  %s %q pod %v\nwant %s %q pod %v",
			pass, g.Outcome, g.Reason, g.Pod, w.Outcome, w.Reason, w.Pod)
	}
	if !reflect.DeepEqual(got.Evaluation, want.Evaluation) {
		t.Errorf("pass %d: evaluations differ", pass)
	}
}
