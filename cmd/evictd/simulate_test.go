package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// simulated runs `evictd simulate --output json` on a snapshot.
func simulated(t *testing.T, path string, extra ...string) []stepResult {
	t.Helper()
	out, errOut, code := runCmd(append([]string{"simulate", "--snapshot", path, "--output", "json"}, extra...)...)
	if code != 0 {
		t.Fatalf("simulate %s: exit %d: %s", path, code, errOut)
	}
	var steps []stepResult
	if err := json.Unmarshal([]byte(out), &steps); err != nil {
		t.Fatalf("simulate %s: output is not JSON: %v\n%s", path, err, out)
	}
	return steps
}

func TestSimulateLocalStorageExample(t *testing.T) {
	steps := simulated(t, filepath.Join("..", "..", "examples", "local-storage-limits.json"))
	if len(steps) != 1 {
		t.Fatalf("got %d steps, want 1", len(steps))
	}
	type v struct{ pod, signal, message string }
	var got []v
	for _, l := range steps[0].LocalStorage {
		if l.GracePeriod != 1 {
			t.Errorf("%s: grace %d, want 1", l.Pod, l.GracePeriod)
		}
		got = append(got, v{l.Pod, l.Signal, l.Message})
	}
	want := []v{
		{"default/cache-filler", "emptydirfs.limit", `Usage of EmptyDir volume "cache" exceeds the limit "1Gi". `},
		{"default/over-pod-limit", "ephemeralpodfs.limit", "Pod ephemeral local storage usage exceeds the total limit of containers 2Gi. "},
		{"default/chatty-container", "ephemeralcontainerfs.limit", `Container logger exceeded its local ephemeral storage limit "500Mi". `},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("local-storage evictions:\n got %+v\nwant %+v", got, want)
	}
	if steps[0].Victim != "" {
		t.Errorf("threshold victim %q in a local-storage step", steps[0].Victim)
	}
}

func TestSimulateExamples(t *testing.T) {
	type want struct {
		outcome, victim string
		grace           int64
		pressure        bool
	}
	none := want{outcome: "none"}
	waiting := want{outcome: "none", pressure: true}
	for _, tc := range []struct {
		file  string
		extra []string
		steps []want
	}{
		// Seed: a 10Gi node, 2Gi system-reserved, hard <.5Gi, soft <1Gi for
		// 30s. The soft threshold waits its grace period, then the biggest
		// BestEffort consumer goes with min(max-pod-grace 60, its own 30);
		// the hard threshold then evicts the Burstable pod over its request
		// at once; the static etcd pod and the Guaranteed db are never chosen.
		{"seed-10gi-system-reserved.json", nil, []want{
			none, waiting, waiting,
			{outcome: "evict", victim: "default/batch", grace: 30, pressure: true},
			{outcome: "evict", victim: "default/web", grace: 1, pressure: true},
		}},
		// Seed: soft threshold with a 30s grace period; a dip above the
		// threshold resets the timer, the condition is held through it.
		{"seed-soft-grace-30s.json", nil, []want{
			waiting, {outcome: "none", pressure: true}, waiting, waiting,
			{outcome: "evict", victim: "default/reporter", grace: 1, pressure: true},
		}},
		{"besteffort-biggest-first.json", nil, []want{{outcome: "evict", victim: "default/largest", grace: 1, pressure: true}}},
		{"burstable-relative-to-request.json", nil, []want{{outcome: "evict", victim: "default/small-over-request", grace: 1, pressure: true}}},
		{"only-guaranteed-left.json", nil, []want{{outcome: "evict", victim: "default/reports", grace: 1, pressure: true}}},
		{"disk-dedicated-imagefs.json", nil, []want{{outcome: "evict", victim: "default/scratch-writer", grace: 1, pressure: true}}},
		{"pid-pressure.json", nil, []want{{outcome: "evict", victim: "default/fork-bomb", grace: 1, pressure: true}}},
		// Seed 001: inodes go from the lowest QoS class first, so the small
		// BestEffort pod before the big Burstable one.
		{"inode-pressure-lowest-qos-first.json", nil, []want{{outcome: "evict", victim: "default/thumbnails", grace: 1, pressure: true}}},
		// PIDs rank by priority first: the high-priority pod whose task
		// count cannot be read is not chosen before the fork bomb.
		{"pid-pressure-priority-first.json", nil, []want{{outcome: "evict", victim: "default/fork-bomb", grace: 1, pressure: true}}},
		// Memory pressure stall with memory.available still plentiful: the
		// soft some.avg60>10% sets memory pressure and waits its grace
		// period; the hard full.avg10>20% evicts the pod furthest over its
		// request, as memory.available would, not the biggest one.
		{"psi.json", nil, []want{none, waiting, {outcome: "evict", victim: "default/thrasher", grace: 1, pressure: true}}},
		// Pod-level resources: the pod furthest over its pod-level request
		// goes first, then the one over its "1G" pod-level request.
		{"pod-level-resources.json", nil, []want{
			{outcome: "evict", victim: "default/web", grace: 1, pressure: true},
			{outcome: "evict", victim: "default/reports", grace: 1, pressure: true},
		}},
		// Pods over their own local-storage limits go with no threshold met;
		// the pod without stats and the static pod stay.
		{"local-storage-limits.json", nil, []want{{outcome: "local-storage"}}},
		// The command line overrides the snapshot's flags.
		{"besteffort-biggest-first.json", []string{"--eviction-hard=memory.available<100Mi"}, []want{none}},
		// Kubelet 1.37 (HugepageAwareEviction, the default): 9Gi of
		// hugepages come off memory.available and its capacity, so the
		// soft 10% (of 55Gi) is met and waits, then evicts the BestEffort
		// pod; then the hard <1Gi evicts the pod over its request.
		{"hugepages-kubelet-1.37.json", nil, []want{
			waiting,
			{outcome: "evict", victim: "default/batch-cache", grace: 1, pressure: true},
			{outcome: "evict", victim: "default/web", grace: 1, pressure: true},
		}},
		// Kubelet 1.36's memory.available, the hugepages left in: 14Gi,
		// 13.5Gi and 8.5Gi of 64Gi meet neither threshold.
		{"hugepages-kubelet-1.37.json", []string{"--feature-gates=HugepageAwareEviction=false"}, []want{none, none, none}},
	} {
		t.Run(tc.file+strings.Join(tc.extra, " "), func(t *testing.T) {
			steps := simulated(t, filepath.Join("..", "..", "examples", tc.file), tc.extra...)
			if len(steps) != len(tc.steps) {
				t.Fatalf("steps: got %d, want %d", len(steps), len(tc.steps))
			}
			for i, w := range tc.steps {
				s := steps[i]
				if s.Outcome != w.outcome || s.Victim != w.victim || s.GracePeriod != w.grace {
					t.Errorf("step %d (%s): got %s %q grace %d, want %s %q grace %d (reason %q)",
						i, s.At, s.Outcome, s.Victim, s.GracePeriod, w.outcome, w.victim, w.grace, s.Reason)
				}
				if got := len(s.Pressures) > 0; got != w.pressure {
					t.Errorf("step %d (%s): pressure %v, want %v", i, s.At, s.Pressures, w.pressure)
				}
				if s.Victim != "" && !strings.HasPrefix(s.Message, "The node was low on resource: ") {
					t.Errorf("step %d: message %q is not in the kubelet's form", i, s.Message)
				}
			}
		})
	}
}

// TestSimulatePodLevelMessage: a pod with pod-level resources (KEP-2837)
// gets the kubelet's message: its own line, the pod's working set against
// its pod-level memory request as Kubernetes prints it ("1G" stays "1G"),
// before the container lines, each container against its own request; and
// the offending_pod annotations.
func TestSimulatePodLevelMessage(t *testing.T) {
	steps := simulated(t, filepath.Join("..", "..", "examples", "pod-level-resources.json"))
	if len(steps) != 2 {
		t.Fatalf("got %d steps, want 2", len(steps))
	}
	for i, w := range []struct {
		message     string
		annotations map[string]string
	}{
		{"The node was low on resource: memory. Threshold quantity: 500Mi, available: 300Mi. " +
			"Pod web was using 600Mi, request is 250Mi, has larger consumption of memory. " +
			"Container regular1 was using 250Mi, request is 0, has larger consumption of memory. " +
			"Container regular2 was using 350Mi, request is 0, has larger consumption of memory. ",
			map[string]string{
				"offending_pod": "web", "offending_pod_usage": "600Mi",
				"offending_containers": "regular1,regular2", "offending_containers_usage": "250Mi,350Mi",
				"starved_resource": "memory",
			}},
		{"The node was low on resource: memory. Threshold quantity: 500Mi, available: 350Mi. " +
			"Pod reports was using 1500Mi, request is 1G, has larger consumption of memory. " +
			"Container app was using 1500Mi, request is 256Mi, has larger consumption of memory. ",
			map[string]string{
				"offending_pod": "reports", "offending_pod_usage": "1500Mi",
				"offending_containers": "app", "offending_containers_usage": "1500Mi",
				"starved_resource": "memory",
			}},
	} {
		if got := steps[i].Message; got != w.message {
			t.Errorf("step %d message:\n got %q\nwant %q", i, got, w.message)
		}
		if got := steps[i].Annotations; !reflect.DeepEqual(got, w.annotations) {
			t.Errorf("step %d annotations:\n got %v\nwant %v", i, got, w.annotations)
		}
	}
}

// The whole order simulate prints for inode and PID pressure is the one the
// rules give. Inodes: the lowest QoS class first (BestEffort, Burstable,
// Guaranteed), DaemonSet pods after the others of their class, then
// priority, then inode count. PIDs: priority first, then pods without
// stats, then task count.
func TestSimulateInodeAndPIDOrder(t *testing.T) {
	for _, tc := range []struct {
		file, signal string
		want         []string
	}{
		{"inode-pressure-lowest-qos-first.json", "nodefs.inodesFree",
			[]string{"default/thumbnails", "default/batch", "default/log-shipper", "default/mail-spool", "default/index"}},
		{"pid-pressure-priority-first.json", "pid.available",
			[]string{"default/fork-bomb", "default/web", "default/metrics-agent", "default/important"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			steps := simulated(t, filepath.Join("..", "..", "examples", tc.file))
			if len(steps) != 1 {
				t.Fatalf("got %d steps, want 1", len(steps))
			}
			if steps[0].Signal != tc.signal {
				t.Errorf("signal: got %q, want %q", steps[0].Signal, tc.signal)
			}
			var got []string
			for _, c := range steps[0].Ranking {
				got = append(got, c.Pod)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ranking: got %v, want %v", got, tc.want)
			}
		})
	}
}

// Without a threshold on them the stall signals only inform: the psi.json
// steps with its stall thresholds taken out evict nothing.
func TestSimulateStallWithoutThresholdInforms(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "psi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	f["args"] = []string{"--eviction-hard=memory.available<500Mi"}
	b, err = json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "psi-no-thresholds.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	steps := simulated(t, path)
	if len(steps) != 3 {
		t.Fatalf("got %d steps, want 3", len(steps))
	}
	for i, s := range steps {
		if s.Outcome != "none" || len(s.Pressures) > 0 {
			t.Errorf("step %d: got %s, pressures %v, want none", i, s.Outcome, s.Pressures)
		}
	}
	var stalls []string
	for _, o := range steps[2].Observations {
		if o.Stall != "" {
			stalls = append(stalls, o.Signal+"="+o.Stall)
		}
	}
	want := "memory.pressure.some.avg10=61.3%,memory.pressure.some.avg60=20.05%,memory.pressure.full.avg10=35.5%,memory.pressure.full.avg60=9.1%"
	if got := strings.Join(stalls, ","); got != want {
		t.Errorf("stall observations: got %s, want %s", got, want)
	}
}

func TestSimulateSoftGraceUsesPodsOwnWhenMaxIsNegative(t *testing.T) {
	steps := simulated(t, filepath.Join("..", "..", "examples", "seed-10gi-system-reserved.json"), "--eviction-max-pod-grace-period=-1")
	if got := steps[3].GracePeriod; got != 30 {
		t.Errorf("negative max-pod-grace: got grace %d, want the pod's own 30", got)
	}
}

func TestSimulateRejectsBadSnapshots(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"not json", `{`, "decode"},
		{"unknown field", `{"observations": {}, "podz": []}`, `unknown field "podz"`},
		{"unknown signal", `{"observations": {"memory.free": {"available": "1Gi", "capacity": "2Gi"}}}`, "unsupported eviction signal memory.free"},
		{"negative quantity", `{"observations": {"memory.available": {"available": "-1Gi", "capacity": "2Gi"}}}`, `quantity "-1Gi" is negative`},
		{"available above capacity", `{"observations": {"memory.available": {"available": "3Gi", "capacity": "2Gi"}}}`, "more than capacity"},
		{"zero capacity", `{"observations": {"pid.available": {"available": 0, "capacity": 0}}}`, "capacity 0 is not positive"},
		{"garbage quantity", `{"observations": {"memory.available": {"available": "lots", "capacity": "2Gi"}}}`, `quantity "lots"`},
		{"bad qos", `{"observations": {}, "pods": [{"name": "a", "qos": "Premium"}]}`, `"Premium" is not Guaranteed, Burstable or BestEffort`},
		{"pod without name", `{"observations": {}, "pods": [{"qos": "BestEffort"}]}`, "pods[0].name is required"},
		{"duplicate pod", `{"observations": {}, "pods": [{"name": "a"}, {"name": "a"}]}`, "appears twice"},
		{"steps out of order", `{"steps": [{"at": "10s", "observations": {}}, {"at": "5s", "observations": {}}]}`, "is not after"},
		{"bad layout", `{"layout": "zfs", "observations": {}}`, `layout "zfs"`},
		{"bad flag in args", `{"args": ["--eviction-hard=memory.available<1Gb"], "observations": {}}`, "--eviction-hard"},
		{"stall with available", `{"observations": {"memory.pressure.full.avg10": {"available": 10, "capacity": 100}}}`, "a stall signal takes stall"},
		{"stall on memory.available", `{"observations": {"memory.available": {"stall": 10, "available": "1Gi", "capacity": "2Gi"}}}`, "stall is for the memory.pressure.* signals only"},
		{"stall above 100", `{"observations": {"memory.pressure.full.avg10": {"stall": 100.5}}}`, "stall 100.5: want a percentage of time from 0 to 100"},
		{"negative stall", `{"observations": {"memory.pressure.full.avg10": {"stall": -1}}}`, "stall -1: want a percentage"},
		{"NaN stall", `{"observations": {"memory.pressure.full.avg10": {"stall": "NaN"}}}`, `stall "NaN": want a percentage`},
		{"stall with less-than", `{"args": ["--eviction-hard=memory.pressure.full.avg10<20"], "observations": {}}`, `memory.pressure.full.avg10<20: a memory pressure stall signal takes ">"`},
		{"greater-than on memory.available", `{"args": ["--eviction-hard=memory.available>1Gi"], "observations": {}}`, `only the memory.pressure.* stall signals take ">"`},
		{"unknown resource", `{"observations": {}, "pods": [{"name": "a", "requests": {"gpu": "1"}}]}`, `unknown resource "gpu"`},
		{"pod-level ephemeral-storage", `{"observations": {}, "pods": [{"name": "a", "resources": {"requests": {"ephemeral-storage": "1Gi"}}}]}`,
			`pods[0].resources.requests: "ephemeral-storage" is not a pod-level resource (want memory or cpu)`},
		{"pod-level request above limit", `{"observations": {}, "pods": [{"name": "a", "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1G"}}}]}`,
			`pods[0].resources.requests.memory: 2Gi is above limits.memory 1G`},
		{"pod-level garbage quantity", `{"observations": {}, "pods": [{"name": "a", "resources": {"requests": {"memory": "1Gb"}}}]}`, `quantity "1Gb"`},
		{"hugepages without their page size", `{"observations": {}, "hugepages": {"1Gi": "2Gi"}}`, `hugepages["1Gi"]: want hugepages-<page size>`},
		{"hugepages in part pages", `{"observations": {}, "hugepages": {"hugepages-1Gi": "1.5Gi"}}`, `hugepages["hugepages-1Gi"]: 1536Mi is not a whole number of 1Gi pages`},
		{"hugepages leaving no capacity", `{"observations": {"memory.available": {"available": "2Gi", "capacity": "2Gi"}}, "hugepages": {"hugepages-2Mi": "2Gi"}}`,
			"hugepage capacity 2147483648 covers all of available 2147483648, with no working set"},
		{"bad feature gate in args", `{"args": ["--feature-gates=HugepageAwareEviction=maybe"], "observations": {}}`, `invalid value of HugepageAwareEviction: "maybe" is not true or false`},
		{"mis-cased feature gate", `{"args": ["--feature-gates=hugepageAwareEviction=false"], "observations": {}}`, `unrecognized feature gate "hugepageAwareEviction"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := runCmd("simulate", "--snapshot", path)
			if code == 0 {
				t.Fatalf("exit 0, want an error; stdout:\n%s", out)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr: got %q, want it to contain %q", errOut, tc.want)
			}
			if strings.Contains(out, "evict:") {
				t.Errorf("bad input led to an eviction decision:\n%s", out)
			}
		})
	}
}

// TestSimulateLocalStall replays examples/psi-local-stall.json: a stall
// above its threshold that the node's own reclaim does not corroborate
// evicts nothing and sets no pressure; once it is the node's, it acts.
func TestSimulateLocalStall(t *testing.T) {
	steps := simulated(t, filepath.Join("..", "..", "examples", "psi-local-stall.json"))
	if len(steps) != 3 {
		t.Fatalf("got %d steps, want 3", len(steps))
	}
	for i, st := range steps[:2] {
		if st.Outcome != "none" || len(st.Pressures) != 0 || !strings.Contains(st.Reason, "but local") {
			t.Errorf("step %d: outcome %q, pressures %v, reason %q; want none, no pressure, a local stall named", i, st.Outcome, st.Pressures, st.Reason)
		}
	}
	if last := steps[2]; last.Outcome != "evict" || last.Signal != "memory.pressure.some.avg10" || last.Victim == "" {
		t.Errorf("step 2: outcome %q for %q, victim %q; want an eviction for memory.pressure.some.avg10", last.Outcome, last.Signal, last.Victim)
	}
}

// TestSimulateTimeToExhaustion: examples/time-to-exhaustion.json, memory
// noisy about 2000Mi and then falling at 800Mi/s, replayed with
// --eviction-time-to-exhaustion: nothing on the noise, nothing while
// memory runs out in 1.5s or more (the default release estimate, 1s, plus
// the margin, 500ms), then the hard threshold's eviction, predicted, at
// 1120Mi, long before memory.available<500Mi is met. Without the flag,
// nothing at all.
func TestSimulateTimeToExhaustion(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "time-to-exhaustion.json")
	steps := simulated(t, path)
	if len(steps) != 18 {
		t.Fatalf("got %d steps, want 18", len(steps))
	}
	const words = "memory.available predicted to run out in 1.4s at 800Mi/s; threshold memory.available<500Mi not met yet"
	for i, st := range steps {
		want := i >= 16
		if got := st.Outcome == "evict"; got != want || (st.Predicted != "") != want {
			t.Errorf("step %s: outcome %s, predicted %q (%s); want evict and predicted: %v", st.At, st.Outcome, st.Predicted, st.Reason, want)
		}
	}
	st := steps[16]
	if st.At != "+1.6s" || st.Victim != "default/hog" || st.GracePeriod != 1 || st.Predicted != words ||
		!strings.HasSuffix(st.Message, words+".") || !strings.Contains(st.Reason, "time to exhaustion: "+words) {
		t.Errorf("at %s: evict %s with %ds, predicted %q, message %q, reason %q", st.At, st.Victim, st.GracePeriod, st.Predicted, st.Message, st.Reason)
	}
	for _, th := range st.Thresholds {
		if th.Threshold == "memory.available<500Mi" && th.State != "not met, predicted to run out in 1.4s: acting" {
			t.Errorf("threshold state: got %q", th.State)
		}
	}
	if len(st.Pressures) != 0 {
		t.Errorf("pressures %v: a prediction sets none", st.Pressures)
	}
	for _, st := range simulated(t, path, "--eviction-time-to-exhaustion=false") {
		if st.Outcome != "none" || st.Predicted != "" {
			t.Errorf("without the flag, step %s: %s (%s), want none", st.At, st.Outcome, st.Reason)
		}
	}
	// The 800 MiB/s race: at +400ms with the flag, where the threshold
	// is met at +1.1s.
	race := filepath.Join("..", "..", "examples", "race-800mibs.json")
	out, errOut, code := runCmd("simulate", "--snapshot", race, "--kubelet", "1.37", "--eviction-time-to-exhaustion")
	if want := "summary: evictd: noticed at +400ms, evicted default/hog grace 1s"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("race with the flag: exit %d %s, want %q in:\n%s", code, errOut, want, out)
	}
}
