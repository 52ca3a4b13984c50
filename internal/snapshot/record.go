package snapshot

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/evictd/evictd/signals"
)

// RecordAPIVersion and RecordKind name a flight record: a snapshot of the
// passes before a decision to evict, with the decision and what became of
// it (docs/SNAPSHOT.md, "Flight records").
const (
	RecordAPIVersion = "evictd.io/v1alpha1"
	RecordKind       = "FlightRecord"
)

// Record is what a flight record adds to its snapshot: the agent's
// decision at the last step, and its outcome.
type Record struct {
	// Node is the node's name; Version is the evictd that wrote it.
	Node    string `json:"node,omitempty"`
	Version string `json:"version,omitempty"`
	// Start is the wall-clock time of the first step: a step's `at` is
	// an offset from it.
	Start time.Time `json:"start"`
	// Trigger is what started the deciding pass (tick, wake, deadline,
	// start).
	Trigger string `json:"trigger,omitempty"`
	// DryRun says the agent ran with --dry-run: it evicted nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// Reads are the fast poll's readings of the memory signals between
	// the first step and the decision, which started no pass: the
	// finer grain of how fast memory went.
	Reads    []RecordRead   `json:"reads,omitempty"`
	Decision RecordDecision `json:"decision"`
	Outcome  RecordOutcome  `json:"outcome"`
}

// RecordRead is one reading of the fast poll.
type RecordRead struct {
	At        string   `json:"at"`
	Signal    string   `json:"signal"`
	Available Quantity `json:"available"`
	Capacity  Quantity `json:"capacity"`
}

// RecordDecision is the deciding pass's decision, at the last step.
type RecordDecision struct {
	// At is the deciding step's offset ("12.5s").
	At      string `json:"at"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason"`
	Signal  string `json:"signal,omitempty"`
	// Threshold is the threshold acted on, as written on the command
	// line ("memory.available<500Mi"); Hard says it is hard.
	Threshold string `json:"threshold,omitempty"`
	Hard      bool   `json:"hard,omitempty"`
	// Observed is when the deciding observation was read, FirstMet when
	// the threshold was first seen met: offsets like At.
	Observed string `json:"observed,omitempty"`
	FirstMet string `json:"firstMet,omitempty"`
	// Pod is the chosen pod (namespace/name), UID its uid.
	Pod         string `json:"pod,omitempty"`
	UID         string `json:"uid,omitempty"`
	GracePeriod int64  `json:"gracePeriodSeconds,omitempty"`
	Message     string `json:"message,omitempty"`
	// Ranking is the head of the ranking, in order, with each pod's
	// deciding key; Ranked is how many pods it had in all.
	Ranking []RecordCandidate `json:"ranking,omitempty"`
	Ranked  int               `json:"ranked,omitempty"`
	// LocalStorage are the pods over their own local-storage limits, in
	// a local-storage pass.
	LocalStorage []RecordViolation `json:"localStorage,omitempty"`
	// Predicted, when set, says the threshold was not met yet: time to
	// exhaustion (--eviction-time-to-exhaustion) acted on it early.
	Predicted *RecordPrediction `json:"predicted,omitempty"`
}

// RecordPrediction is what time to exhaustion found: the signal's
// available amount falling at RatePerSecond runs out in TimeLeft, below
// Release (the release estimate in force) plus Margin. Durations are Go
// durations, to the nanosecond, so that a replay acts with the same
// release estimate.
type RecordPrediction struct {
	Available     Quantity `json:"available"`
	RatePerSecond Quantity `json:"ratePerSecond"`
	TimeLeft      string   `json:"timeLeft"`
	Release       string   `json:"release"`
	Margin        string   `json:"margin"`
	Readings      int      `json:"readings"`
}

// RecordCandidate is one pod of the ranking.
type RecordCandidate struct {
	Pod      string `json:"pod"`
	UID      string `json:"uid"`
	QOS      string `json:"qos"`
	Priority int32  `json:"priority"`
	// Usage and Request are in the starved resource's unit (bytes,
	// inodes or processes); HasStats false means the usage was not read.
	Usage    int64  `json:"usage"`
	Request  int64  `json:"request"`
	HasStats bool   `json:"hasStats"`
	Key      string `json:"key"`
	Skip     string `json:"skip,omitempty"`
}

// RecordViolation is one pod over its own local-storage limit.
type RecordViolation struct {
	Pod    string `json:"pod"`
	UID    string `json:"uid"`
	Signal string `json:"signal"`
	Usage  int64  `json:"usage"`
	Limit  int64  `json:"limit"`
}

// RecordOutcome is what became of the decision.
type RecordOutcome struct {
	// Attempts are the eviction requests, in order.
	Attempts []RecordAttempt `json:"attempts,omitempty"`
	// Why says why nothing was attempted.
	Why string `json:"why,omitempty"`
	// Relief is the first later pass that found the threshold no longer
	// met; nil when none did within the record's follow-up (Followed).
	Relief *RecordRelief `json:"relief,omitempty"`
	// Followed is how long after the decision the agent looked for
	// relief ("2m0s"); empty while it still looks, or when it stopped
	// first.
	Followed string `json:"followed,omitempty"`
}

// RecordAttempt is one eviction request and what became of it. Started
// and Ended are offsets like RecordDecision.At: when the request was
// made, and when the Evicter returned (the pod gone, or its wait over).
type RecordAttempt struct {
	Pod         string `json:"pod"`
	UID         string `json:"uid"`
	Result      string `json:"result"`
	GracePeriod int64  `json:"gracePeriodSeconds"`
	Error       string `json:"error,omitempty"`
	Why         string `json:"why,omitempty"`
	Started     string `json:"started,omitempty"`
	Ended       string `json:"ended,omitempty"`
}

// RecordRelief is the observation that ended the pressure the decision
// answered.
type RecordRelief struct {
	At        string   `json:"at"`
	Available Quantity `json:"available"`
	Capacity  Quantity `json:"capacity"`
}

// Offset is t as a record writes times: the offset from start, to the
// millisecond ("12.345s"); "" for the zero time.
func Offset(start, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Sub(start).Truncate(time.Millisecond).String()
}

// ObservationsJSON writes obs as a step taken at now writes them: each
// observation's age is now less its time.
func ObservationsJSON(now time.Time, obs signals.Observations) map[string]ObservationJSON {
	out := make(map[string]ObservationJSON, len(obs))
	for sig, o := range obs {
		oj := ObservationJSON{}
		if sig.Stall() {
			oj.Stall = &Stall{Value: o.Available}
			oj.Local = o.Local
		} else {
			oj.Available, oj.Capacity = NewQuantity(o.Available), NewQuantity(o.Capacity)
		}
		if age := now.Sub(o.Time); age > 0 && !o.Time.IsZero() {
			oj.Age = age.Truncate(time.Millisecond).String()
		}
		out[string(sig)] = oj
	}
	return out
}

// PodsJSON writes pods and their stats as a snapshot's pods, so that
// reading them back gives the same ranking, grace periods and messages:
// the class, requests and pod-level memory request are written as the
// agent computed them, not left to be computed again.
func PodsJSON(pods []signals.Pod, stats map[string]signals.PodStats) []PodJSON {
	out := make([]PodJSON, 0, len(pods))
	for _, p := range pods {
		pj := PodJSON{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, QOS: string(p.QOS), Priority: p.Priority,
			Static: p.Static, Mirror: p.Mirror, DaemonSet: p.DaemonSet, Spared: p.Spared,
			TerminationGracePeriodSeconds: p.TerminationGracePeriodSeconds,
			LocalVolumes:                  p.LocalVolumes,
			Requests: map[string]Quantity{
				resMemory:           NewQuantity(p.MemoryRequest),
				resEphemeralStorage: NewQuantity(p.EphemeralStorageRequest),
			},
		}
		if r := p.PodLevelMemoryRequest; r != nil {
			q, err := ParseQuantity(r.Text)
			if err != nil {
				q = NewQuantity(r.Bytes)
			}
			pj.Resources = &ResourcesJSON{Requests: map[string]Quantity{resMemory: q}}
		}
		for _, name := range slices.Sorted(maps.Keys(p.EmptyDirLimits)) {
			if pj.EmptyDirSizeLimits == nil {
				pj.EmptyDirSizeLimits = map[string]Quantity{}
			}
			pj.EmptyDirSizeLimits[name] = NewQuantity(p.EmptyDirLimits[name])
		}
		st, hasStats := stats[p.UID]
		for _, c := range p.Containers {
			cj := ContainerJSON{Name: c.Name}
			if c.MemoryRequest > 0 || c.EphemeralStorageRequest > 0 {
				cj.Requests = map[string]Quantity{}
				if c.MemoryRequest > 0 {
					cj.Requests[resMemory] = NewQuantity(c.MemoryRequest)
				}
				if c.EphemeralStorageRequest > 0 {
					cj.Requests[resEphemeralStorage] = NewQuantity(c.EphemeralStorageRequest)
				}
			}
			if c.EphemeralStorageLimit > 0 {
				cj.Limits = map[string]Quantity{resEphemeralStorage: NewQuantity(c.EphemeralStorageLimit)}
			}
			if hasStats {
				cj.Usage = containerUsage(st.Containers, c.Name)
			}
			pj.Containers = append(pj.Containers, cj)
		}
		if hasStats {
			u := &PodUsageJSON{}
			if st.MemoryWorkingSet != nil {
				m := NewQuantity(*st.MemoryWorkingSet)
				u.Memory = &m
			}
			u.Processes = st.Processes
			for _, name := range slices.Sorted(maps.Keys(st.Volumes)) {
				if u.Volumes == nil {
					u.Volumes = map[string]FsUsageJSON{}
				}
				v := st.Volumes[name]
				u.Volumes[name] = FsUsageJSON{Bytes: NewQuantity(v.Bytes), Inodes: NewQuantity(v.Inodes)}
			}
			pj.Usage = u
		}
		out = append(out, pj)
	}
	return out
}

func containerUsage(cs []signals.ContainerStats, name string) *ContainerUsageJSON {
	for _, c := range cs {
		if c.Name != name {
			continue
		}
		u := &ContainerUsageJSON{}
		if c.MemoryWorkingSet != nil {
			m := NewQuantity(*c.MemoryWorkingSet)
			u.Memory = &m
		}
		if c.Rootfs != nil {
			u.Rootfs = &FsUsageJSON{Bytes: NewQuantity(c.Rootfs.Bytes), Inodes: NewQuantity(c.Rootfs.Inodes)}
		}
		if c.Logs != nil {
			u.Logs = &FsUsageJSON{Bytes: NewQuantity(c.Logs.Bytes), Inodes: NewQuantity(c.Logs.Inodes)}
		}
		return u
	}
	return nil
}

// NewQuantity is v bytes or items, as read from JSON.
func NewQuantity(v int64) Quantity { return Quantity{Value: v, Set: true} }

// IsZero reports whether q was not given, so that a record leaves it out.
func (q Quantity) IsZero() bool { return !q.Set }

// ParseQuantity reads s as a snapshot reads a quantity.
func ParseQuantity(s string) (Quantity, error) {
	var q Quantity
	b, err := json.Marshal(s)
	if err != nil {
		return q, err
	}
	err = q.UnmarshalJSON(b)
	return q, err
}

// MarshalJSON writes q as written when it was read from JSON, else as a
// plain number.
func (q Quantity) MarshalJSON() ([]byte, error) {
	if !q.exact.IsZero() {
		return json.Marshal(q.exact.String())
	}
	return strconv.AppendInt(nil, q.Value, 10), nil
}

// MarshalJSON writes st as a percentage with two decimals ("35.50").
func (st Stall) MarshalJSON() ([]byte, error) {
	if st.Value < 0 || st.Value > signals.StallScale {
		return nil, fmt.Errorf("stall %d is outside 0..%d", st.Value, signals.StallScale)
	}
	return json.Marshal(fmt.Sprintf("%d.%02d", st.Value/100, st.Value%100))
}

// recordReads checks rec's fast-poll readings and its predicted release
// estimate, and returns them: the readings at their times from Epoch, as
// the steps'.
func recordReads(rec *Record) ([]signals.Observation, time.Duration, error) {
	var reads []signals.Observation
	for i, r := range rec.Reads {
		field := fmt.Sprintf("record.reads[%d]", i)
		at, err := parseDuration(field+".at", r.At)
		if err != nil {
			return nil, 0, err
		}
		sig := signals.Signal(r.Signal)
		if sig != signals.MemoryAvailable && sig != signals.AllocatableMemoryAvailable {
			return nil, 0, fmt.Errorf("%s.signal %q: want %s or %s, the signals the fast poll reads", field, r.Signal, signals.MemoryAvailable, signals.AllocatableMemoryAvailable)
		}
		if !r.Available.Set || !r.Capacity.Set || r.Available.Value < 0 || r.Capacity.Value < 0 {
			return nil, 0, fmt.Errorf("%s: want available and capacity, neither negative", field)
		}
		reads = append(reads, signals.Observation{Signal: sig, Available: r.Available.Value, Capacity: r.Capacity.Value, Time: Epoch.Add(at)})
	}
	var release time.Duration
	if p := rec.Decision.Predicted; p != nil {
		var err error
		if release, err = parseDuration("record.decision.predicted.release", p.Release); err != nil {
			return nil, 0, err
		}
	}
	return reads, release, nil
}
