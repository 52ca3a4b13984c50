package manager

import (
	"time"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// Status is what `evictd status` and /status show of the last pass.
type Status struct {
	Time         time.Time           `json:"time"`
	Trigger      string              `json:"trigger"`
	DryRun       bool                `json:"dryRun"`
	Pods         int                 `json:"pods"`
	Observations []ObservationStatus `json:"observations"`
	Thresholds   []ThresholdStatus   `json:"thresholds"`
	Pressures    map[string]bool     `json:"pressures"`
	Decision     decide.Decision     `json:"decision"`
	// Result is what acting on the decision gave: evicted, dry-run, or
	// failed with the error; empty when there was nothing to do.
	Result string `json:"result,omitempty"`
	// Limits is where the safety limits stood after the pass.
	Limits LimitsStatus `json:"limits"`
	// InFlight are the pods evictd evicted that were still terminating:
	// while one is not overdue, no other pod is evicted for a threshold.
	InFlight []InFlightStatus `json:"inFlight,omitempty"`
}

// LimitsStatus is the state of the eviction cap.
type LimitsStatus struct {
	// MaxEvictionsPerHour is the cap, 0 when there is none.
	MaxEvictionsPerHour int `json:"maxEvictionsPerHour"`
	// EvictionsInLastHour are the evictions issued in the hour before.
	EvictionsInLastHour int `json:"evictionsInLastHour"`
	// CapReached is true while the cap withholds every eviction, until
	// NextEvictionAllowed.
	CapReached          bool       `json:"capReached"`
	NextEvictionAllowed *time.Time `json:"nextEvictionAllowed,omitempty"`
}

// ObservationStatus is one signal's reading.
type ObservationStatus struct {
	Signal    signals.Signal `json:"signal"`
	Available int64          `json:"available"`
	Capacity  int64          `json:"capacity"`
	Time      time.Time      `json:"time"`
}

// ThresholdStatus is one threshold and where it stands.
type ThresholdStatus struct {
	Threshold   string     `json:"threshold"`
	Kind        string     `json:"kind"`
	GracePeriod string     `json:"gracePeriod,omitempty"`
	Quantity    *int64     `json:"quantity,omitempty"`
	Met         bool       `json:"met"`
	MetSince    *time.Time `json:"metSince,omitempty"`
	Observed    bool       `json:"observed"`
}

func newStatus(now time.Time, trigger string, dryRun bool, obs signals.Observations, ths []thresholds.Threshold, dec decide.Decision, result string, pods int) *Status {
	st := &Status{Time: now, Trigger: trigger, DryRun: dryRun, Pods: pods, Decision: dec, Result: result, Pressures: map[string]bool{}}
	for _, s := range signals.All() {
		if o, ok := obs[s]; ok {
			st.Observations = append(st.Observations, ObservationStatus{Signal: s, Available: o.Available, Capacity: o.Capacity, Time: o.Time})
		}
	}
	ev := dec.Evaluation
	met := map[thresholds.Key]bool{}
	for _, th := range ev.Met {
		met[th.Key()] = true
	}
	for _, th := range ths {
		ts := ThresholdStatus{Threshold: thresholds.Format(th), Kind: th.Kind(), Met: met[th.Key()]}
		if th.GracePeriod > 0 {
			ts.GracePeriod = th.GracePeriod.String()
		}
		if o, ok := obs[th.Signal]; ok {
			q := quantityOf(th, o)
			ts.Quantity, ts.Observed = &q, true
		}
		if since, ok := ev.FirstObservedAt[th.Key()]; ok && ts.Met {
			ts.MetSince = &since
		}
		st.Thresholds = append(st.Thresholds, ts)
	}
	for p, ps := range ev.Pressure {
		st.Pressures[string(p)] = ps.Active
	}
	return st
}

func quantityOf(th thresholds.Threshold, o signals.Observation) int64 {
	return thresholds.Quantity(th.Value, o.Capacity)
}
