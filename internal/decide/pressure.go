package decide

import (
	"fmt"
	"time"

	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// PressureReport is what evictd's node condition for one kind of pressure
// says after a pass.
type PressureReport struct {
	Pressure signals.Pressure
	Active   bool
	// Since is when Active last changed (the condition's
	// lastTransitionTime); zero if the pressure was never active.
	Since time.Time
	// Changed is true on the pass where Active changed.
	Changed bool
	// Message names the threshold and the observed value behind the state.
	Message string
}

// PressureReports turns a pass's evaluation into the three reports.
func PressureReports(ev thresholds.Evaluation, obs signals.Observations) []PressureReport {
	var reports []PressureReport
	for _, p := range signals.Pressures() {
		ps := ev.Pressure[p]
		r := PressureReport{Pressure: p, Active: ps.Active, Since: ps.Since, Changed: ps.Changed}
		r.Message = fmt.Sprintf("no %s threshold is met", p)
		for _, th := range ev.Met {
			if th.Signal.Pressure() != p {
				continue
			}
			o := obs[th.Signal]
			r.Message = fmt.Sprintf("threshold %s is met: %s", thresholds.Format(th), observed(o))
			break
		}
		if ps.Active && r.Message == fmt.Sprintf("no %s threshold is met", p) {
			// What was observed, not more: the last pass that saw a
			// threshold met, which may lie well before the pressure
			// ended (no pass observes while an eviction waits, or while
			// the node's pods cannot be listed).
			r.Message = fmt.Sprintf("no %s threshold is met; one was last observed met at %s; the condition holds for the transition period",
				p, ps.LastObservedAt.UTC().Format(time.RFC3339))
		}
		reports = append(reports, r)
	}
	return reports
}
