package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/snapshot"
	"github.com/evictd/evictd/ranking"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

const mi = int64(1) << 20

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func hard500Mi() thresholds.Threshold {
	q := resource.MustParse("500Mi")
	return thresholds.Threshold{Signal: signals.MemoryAvailable, Operator: thresholds.LessThan, Value: thresholds.Value{Quantity: &q}}
}

// memSteps are steps with memory.available at the given MiB, capacity 4Gi.
func memSteps(at []time.Duration, availMiB []int64) []snapshot.Step {
	steps := make([]snapshot.Step, len(at))
	for i := range at {
		now := snapshot.Epoch.Add(at[i])
		steps[i] = snapshot.Step{At: at[i], Time: now, Observations: signals.Observations{
			signals.MemoryAvailable: {Signal: signals.MemoryAvailable, Available: availMiB[i] * mi, Capacity: 4096 * mi, Time: now},
		}}
	}
	return steps
}

func TestKubeletTimelineMaths(t *testing.T) {
	for _, tc := range []struct {
		name       string
		at         []time.Duration
		avail      []int64 // MiB
		wantFound  bool
		wantBefore int
		wantCross  time.Duration
		wantGrowth float64 // MiB/s
		wantOut    time.Duration
		wantRuns   bool
	}{
		{"800MiB/s, crossing halfway", []time.Duration{0, ms(100), ms(200)}, []int64{620, 540, 460},
			true, 1, ms(150), 800, ms(200) + 575*time.Millisecond, true},
		{"crossing a quarter in", []time.Duration{0, time.Second}, []int64{600, 200},
			true, 0, ms(250), 400, time.Second + 500*time.Millisecond, true},
		{"exactly at the threshold is not met", []time.Duration{0, ms(100), ms(200)}, []int64{580, 500, 420},
			true, 1, ms(100), 800, ms(200) + 525*time.Millisecond, true},
		{"met from the first step: rate from the first two", []time.Duration{0, time.Second}, []int64{400, 300},
			true, -1, 0, 100, time.Second + 3*time.Second, true},
		{"a later flat step does not change the rate", []time.Duration{0, time.Second, 2 * time.Second}, []int64{600, 450, 450},
			true, 0, ms(666), 150, ms(1000) + 3*time.Second, true},
		{"recovering after the crossing", []time.Duration{0, time.Second}, []int64{400, 600},
			true, -1, 0, -200, 0, false},
		{"never crossed", []time.Duration{0, time.Second}, []int64{900, 800}, false, 0, 0, 0, 0, false},
		// A pass's step 12µs before the reading that met the threshold,
		// 2Mi apart: the growth from the step 100ms before, not 2Mi in
		// 12µs (about 166,000 MiB/s).
		{"readings microseconds apart at the crossing: growth over 10ms at least", []time.Duration{0, ms(100), ms(100) + 12*time.Microsecond}, []int64{600, 501, 499},
			true, 1, ms(100) + 6*time.Microsecond, 101 / 0.100012, ms(594), true}, // 499Mi at 1009.9 MiB/s lasts 494ms
	} {
		t.Run(tc.name, func(t *testing.T) {
			race, ok := findMemoryRace(memSteps(tc.at, tc.avail), []thresholds.Threshold{hard500Mi()}, true)
			if ok != tc.wantFound {
				t.Fatalf("found %v, want %v", ok, tc.wantFound)
			}
			if !ok {
				return
			}
			if race.Before != tc.wantBefore {
				t.Errorf("before step %d, want %d", race.Before, tc.wantBefore)
			}
			if d := race.CrossingAt - tc.wantCross; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("crossing at %s, want %s", race.CrossingAt, tc.wantCross)
			}
			if g := race.Growth / float64(mi); g < tc.wantGrowth-0.01 || g > tc.wantGrowth+0.01 {
				t.Errorf("growth %.2f MiB/s, want %.2f", g, tc.wantGrowth)
			}
			if race.RunsOut != tc.wantRuns {
				t.Fatalf("runs out %v, want %v", race.RunsOut, tc.wantRuns)
			}
			if d := race.RunsOutAt - tc.wantOut; tc.wantRuns && (d < -time.Millisecond || d > time.Millisecond) {
				t.Errorf("runs out at %s, want %s", race.RunsOutAt, tc.wantOut)
			}
		})
	}
}

// The rate that counts is the one between the steps bracketing the
// crossing, not a later one.
func TestKubeletGrowthBracketsTheCrossing(t *testing.T) {
	steps := memSteps([]time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second}, []int64{900, 700, 300, 290})
	race, ok := findMemoryRace(steps, []thresholds.Threshold{hard500Mi()}, true)
	if !ok || race.Before != 1 || race.After != 2 {
		t.Fatalf("race %+v, want between steps 1 and 2", race)
	}
	if g := race.Growth / float64(mi); g != 400 {
		t.Errorf("growth %v MiB/s, want 400", g)
	}
	if want := 2*time.Second + 750*time.Millisecond; race.RunsOutAt != want {
		t.Errorf("runs out at %s, want %s", race.RunsOutAt, want)
	}
}

// hogSteps is a 4Gi node losing 80Mi every 100ms with one pod.
func hogSteps(n int) []snapshot.Step {
	at := make([]time.Duration, n)
	avail := make([]int64, n)
	for i := range n {
		at[i], avail[i] = ms(100*i), 1340-80*int64(i)
	}
	steps := memSteps(at, avail)
	for i := range steps {
		ws := (506 + 80*int64(i)) * mi
		steps[i].Pods = []signals.Pod{{Namespace: "default", Name: "hog", UID: "hog", QOS: signals.Burstable, MemoryRequest: 64 * mi}}
		steps[i].Stats = map[string]signals.PodStats{"hog": {UID: "hog", MemoryWorkingSet: &ws}}
	}
	return steps
}

func TestKubeletDetection(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		every                  time.Duration
		memcg                  bool
		wantEarliest, wantLast time.Duration
		wantBy                 kubeletTrigger
	}{
		// First step met: +1.1s (460Mi). Earliest: a tick on it; latest:
		// the tick just before it, then one interval later.
		{"10s housekeeping", 10 * time.Second, false, ms(1100), ms(1100) + 10*time.Second, triggerTick},
		{"1s housekeeping", time.Second, false, ms(1100), ms(2100), triggerTick},
		// Crossing at +1.05s, + 11ms: before any tick in both phases.
		{"memcg notification", 10 * time.Second, true, ms(1061), ms(1061), triggerMemcg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := kubeletModel{Steps: hogSteps(17), Thresholds: []thresholds.Threshold{hard500Mi()}, HugepageAware: true,
				TransitionPeriod: 5 * time.Minute, Housekeeping: tc.every, Memcg: tc.memcg}
			w := m.run()
			if w.FirstMet != 11 {
				t.Errorf("first met at step %d, want 11", w.FirstMet)
			}
			near := func(got, want time.Duration) bool { return got-want < time.Millisecond && want-got < time.Millisecond }
			for _, p := range []struct {
				which string
				o     kubeletOutcome
				want  time.Duration
			}{{"earliest", w.Earliest, tc.wantEarliest}, {"latest", w.Latest, tc.wantLast}} {
				if !p.o.Evicted || !near(p.o.NoticedAt, p.want) || !near(p.o.EvictedAt, p.want) || p.o.EvictedBy != tc.wantBy {
					t.Errorf("%s: %+v, want noticed and evicted at %s by %s", p.which, p.o, p.want, tc.wantBy)
				}
				if p.o.Victim != "default/hog" || p.o.GracePeriod != 1 {
					t.Errorf("%s: evicts %s grace %d, want default/hog grace 1", p.which, p.o.Victim, p.o.GracePeriod)
				}
			}
		})
	}
}

// A step read by two ticks acts once: the kubelet drops a threshold whose
// observation has not advanced since its previous sync.
func TestKubeletStaleObservation(t *testing.T) {
	steps := hogSteps(12)[10:] // +1s (540Mi, not met), +1.1s (460Mi, met)
	m := kubeletModel{Steps: steps, Thresholds: []thresholds.Threshold{hard500Mi()}, Housekeeping: 10 * time.Millisecond}
	// Ticks every 10ms from +1.1s read the +1.1s step again and again.
	syncs := ticks(steps, ms(1100), 10*time.Millisecond)
	tr := thresholds.NewTracker(0, 0)
	var acted int
	for _, s := range syncs {
		if ev := tr.Evaluate(snapshot.Epoch.Add(s.At), m.Thresholds, steps[s.Step].Observations); len(ev.Actionable) > 0 {
			acted++
		}
	}
	if acted != 1 {
		t.Errorf("acted at %d syncs, want 1", acted)
	}
}

// Ticks read the step at or before them: a tick between steps sees the
// older one, and the last tick is the first after the last step.
func TestKubeletTicks(t *testing.T) {
	steps := memSteps([]time.Duration{time.Second, 3 * time.Second, 8 * time.Second}, []int64{900, 800, 700})
	got := ticks(steps, 500*time.Millisecond, 2*time.Second)
	want := []kubeletSync{{At: ms(2500), Step: 0}, {At: ms(4500), Step: 1}, {At: ms(6500), Step: 1}, {At: ms(8500), Step: 2}}
	if len(got) != len(want) {
		t.Fatalf("ticks %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].At != want[i].At || got[i].Step != want[i].Step {
			t.Errorf("tick %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// The kubelet never evicts a critical pod: the threshold is noticed, no
// pod goes.
func TestKubeletCriticalPodOnly(t *testing.T) {
	steps := memSteps([]time.Duration{0, 30 * time.Second}, []int64{400, 400})
	m := kubeletModel{Steps: steps, Thresholds: []thresholds.Threshold{hard500Mi()}, Housekeeping: 10 * time.Second}
	steps[0].Pods = []signals.Pod{{Namespace: "default", Name: "p", UID: "p", Static: true}}
	o := m.replay(ticks(steps, 0, 10*time.Second))
	if o.Evicted || !o.Noticed || !strings.Contains(o.Reason, "critical") {
		t.Errorf("outcome %+v, want noticed, no eviction: the only pod is critical", o)
	}
}

func TestKubeletRankIgnoresEvictdsRules(t *testing.T) {
	ws := func(v int64) *int64 { v *= mi; return &v }
	pods := []signals.Pod{
		// evictd puts a Guaranteed pod last and a DaemonSet pod after its
		// tier; the kubelet has neither rule.
		{Namespace: "default", Name: "guaranteed", UID: "g", QOS: signals.Guaranteed, MemoryRequest: 100 * mi},
		{Namespace: "kube-system", Name: "ds", UID: "ds", QOS: signals.BestEffort, DaemonSet: true},
		{Namespace: "default", Name: "small", UID: "s", QOS: signals.BestEffort},
	}
	stats := map[string]signals.PodStats{
		"g": {UID: "g", MemoryWorkingSet: ws(900)}, "ds": {UID: "ds", MemoryWorkingSet: ws(500)}, "s": {UID: "s", MemoryWorkingSet: ws(10)},
	}
	var got []string
	for _, c := range kubeletRank(signals.MemoryAvailable, signals.SingleFs, pods, stats) {
		got = append(got, c.Pod.Name)
	}
	if want := "guaranteed ds small"; strings.Join(got, " ") != want {
		t.Errorf("kubelet order %v, want %s", got, want)
	}
	var evictd []string
	for _, c := range ranking.Rank(signals.MemoryAvailable, signals.SingleFs, pods, stats) {
		evictd = append(evictd, c.Pod.Name)
	}
	if want := "small ds guaranteed"; strings.Join(evictd, " ") != want {
		t.Errorf("evictd order %v, want %s (the test's premise)", evictd, want)
	}
}

func TestKubeletGracePeriod(t *testing.T) {
	soft := hard500Mi()
	soft.GracePeriod, soft.Soft = time.Minute, true
	own := int64(45)
	for _, tc := range []struct {
		th       thresholds.Threshold
		own      *int64
		maxGrace int64
		want     int64
	}{
		{hard500Mi(), &own, 0, 1},
		{soft, &own, 0, 1},   // the pod worker's floor
		{soft, &own, -1, 1},  // the kubelet passes -1; the floor again
		{soft, &own, 20, 20}, // min(max, own)
		{soft, &own, 90, 45},
		{soft, nil, 90, 30}, // the API server's default
	} {
		if got := kubeletGracePeriod(tc.th, &signals.Pod{TerminationGracePeriodSeconds: tc.own}, tc.maxGrace); got != tc.want {
			t.Errorf("%s, max %d: grace %d, want %d", tc.th.Kind(), tc.maxGrace, got, tc.want)
		}
	}
}

// examples/race-800mibs.json: the kubelet's 10 s poll is too late unless
// its tick happens to land in the first 5.6% of its interval after the
// crossing; with memcg notification, and evictd, in time.
func TestSimulateKubeletRace800(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "race-800mibs.json")
	type out struct {
		Steps          []stepResult  `json:"steps"`
		Counterfactual kubeletResult `json:"counterfactual"`
	}
	run := func(t *testing.T, extra ...string) (out, map[string]any) {
		t.Helper()
		stdout, stderr, code := runCmd(append([]string{"simulate", "--snapshot", path, "-o", "json"}, extra...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var o out
		var raw map[string]any
		if err := json.Unmarshal([]byte(stdout), &o); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, stdout)
		}
		_ = json.Unmarshal([]byte(stdout), &raw)
		return o, raw
	}
	o, raw := run(t, "--kubelet", "1.37")
	if len(o.Steps) != 17 {
		t.Errorf("%d steps, want 17", len(o.Steps))
	}
	cf := raw["counterfactual"].(map[string]any)
	mem := cf["memory"].(map[string]any)
	for k, want := range map[string]any{"crossingAt": "+1.05s", "runsOutAt": "+1.675s", "growthMiBPerSecond": 800.0, "threshold": "memory.available<500Mi"} {
		if mem[k] != want {
			t.Errorf("memory.%s = %v, want %v", k, mem[k], want)
		}
	}
	k := cf["kubelet"].(map[string]any)
	e, l := k["earliest"].(map[string]any), k["latest"].(map[string]any)
	for _, c := range []struct {
		got, want any
		what      string
	}{
		{e["evictedAt"], "+1.1s", "earliest.evictedAt"}, {e["inTime"], true, "earliest.inTime"},
		{l["evictedAt"], "+11.1s", "latest.evictedAt"}, {l["inTime"], false, "latest.inTime"},
		{l["step"], "+1.6s", "latest.step"}, {l["victim"], "default/hog", "latest.victim"},
		{l["gracePeriodSeconds"], 1.0, "latest.gracePeriodSeconds"}, {k["inTimeShare"], 0.056, "inTimeShare"},
		{cf["evictd"].(map[string]any)["inTime"], true, "evictd.inTime"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if msg, _ := e["message"].(string); !strings.HasPrefix(msg, "The node was low on resource: memory. Threshold quantity: 500Mi, available: 460Mi. Container alloc was using 1386Mi") {
		t.Errorf("earliest message %q", msg)
	}

	memcg, _ := run(t, "--kubelet", "1.37", "--kubelet-memcg-notification")
	for _, p := range []kubeletPhase{memcg.Counterfactual.Kubelet.Earliest, memcg.Counterfactual.Kubelet.Latest} {
		if p.EvictedAt != "+1.061s" || p.EvictedBy != string(triggerMemcg) || p.InTime == nil || !*p.InTime {
			t.Errorf("memcg: %+v, want evicted at +1.061s by memcg notification, in time", p)
		}
	}

	stdout, stderr, code := runCmd("simulate", "--snapshot", path, "--kubelet", "1.37")
	if code != 0 {
		t.Fatalf("text: exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"== kubelet 1.37 counterfactual (10s housekeeping; memory.available less the hugepages)",
		"memory: memory.available<500Mi crossed at +1.05s (between the readings at +1s and +1.1s), memory use growing 800.0MiB/s; memory runs out at +1.675s",
		"summary: evictd: noticed at +1.1s, evicted default/hog grace 1s | kubelet 1.37 (10s housekeeping): would notice between +1.1s and +11.1s",
		"evictd in time, kubelet in time at the earliest, too late at the latest",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text output lacks %q:\n%s", want, stdout)
		}
	}
}

// Without --kubelet the JSON output stays an array of steps.
func TestSimulateWithoutKubeletUnchanged(t *testing.T) {
	steps := simulated(t, filepath.Join("..", "..", "examples", "race-800mibs.json"))
	if len(steps) != 17 || steps[11].Victim != "default/hog" {
		t.Errorf("%d steps, step 11 victim %q", len(steps), steps[11].Victim)
	}
}

func TestSimulateKubeletBadFlags(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "race-800mibs.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kubelet", "1.35"}, `--kubelet "1.35": want 1.36`},
		{[]string{"--kubelet", "1.37", "--kubelet-housekeeping", "-5s"}, "--kubelet-housekeeping -5s: must be more than 0"},
		{[]string{"--kubelet", "1.37", "--kubelet-housekeeping=0s"}, "--kubelet-housekeeping 0s: must be more than 0"},
		{[]string{"--kubelet-memcg-notification"}, "--kubelet-memcg-notification needs --kubelet"},
		{[]string{"--kubelet-housekeeping=5s"}, "--kubelet-housekeeping needs --kubelet"},
	} {
		_, stderr, code := runCmd(append([]string{"simulate", "--snapshot", path}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
