package nodestatus

import (
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
)

// pressureState is what the publisher knows of one kind of pressure: the
// latest report and what it needs to pick the condition's transition time.
type pressureState struct {
	Report decide.PressureReport
	// FirstSeen is when Publish first received this kind of pressure.
	FirstSeen time.Time
	// Transitioned is true once Publish has seen Active change since the
	// publisher started.
	Transitioned bool
}

// transition is one change of a pressure's state that deserves an event.
type transition struct {
	Seq      uint64
	Pressure signals.Pressure
	Active   bool
	Message  string
	At       time.Time // the time of the pass that reported it
	// Initial marks the first state this process published for the kind:
	// it gets an event only if the node's condition says otherwise.
	Initial bool
}

// Reason is the condition reason for a kind of pressure being active or
// not: EvictdHasMemoryPressure, EvictdHasNoMemoryPressure, and so on.
func Reason(p signals.Pressure, active bool) string {
	if active {
		return "EvictdHas" + pressureNames[p] + "Pressure"
	}
	return "EvictdHasNo" + pressureNames[p] + "Pressure"
}

// EventReason is the reason of the node event for a transition:
// EvictdMemoryPressure (Warning) when it starts, EvictdNoMemoryPressure
// (Normal) when it ends.
func EventReason(p signals.Pressure, active bool) string {
	if active {
		return "Evictd" + pressureNames[p] + "Pressure"
	}
	return "EvictdNo" + pressureNames[p] + "Pressure"
}

// message is the report's message, or a plain one when it has none.
func message(r decide.PressureReport) string {
	switch {
	case r.Message != "":
		return r.Message
	case r.Active:
		return fmt.Sprintf("evictd has %s pressure", r.Pressure)
	default:
		return fmt.Sprintf("evictd has no %s pressure", r.Pressure)
	}
}

// status is a condition's status for an active or inactive pressure.
func status(active bool) v1.ConditionStatus {
	if active {
		return v1.ConditionTrue
	}
	return v1.ConditionFalse
}

// findCondition returns the condition of type t in conds, or nil.
func findCondition(conds []v1.NodeCondition, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// buildConditions returns evictd's conditions for states, heartbeat now.
// The transition time is the report's Since (the tracker's), else when the
// publisher first saw the kind; but when this process has not seen the
// pressure change and the node already carries the same status since an
// earlier time (evictd restarted), that earlier time stands, as the
// kubelet keeps lastTransitionTime while the status holds.
func buildConditions(cfg Config, states []pressureState, existing []v1.NodeCondition, now time.Time) []v1.NodeCondition {
	conds := make([]v1.NodeCondition, 0, len(states))
	for _, st := range states {
		r := st.Report
		c := v1.NodeCondition{
			Type:              cfg.ConditionTypes[r.Pressure],
			Status:            status(r.Active),
			LastHeartbeatTime: metav1.NewTime(now),
			Reason:            Reason(r.Pressure, r.Active),
			Message:           message(r),
		}
		since := r.Since
		if since.IsZero() {
			since = st.FirstSeen
		}
		if old := findCondition(existing, c.Type); old != nil && !st.Transitioned && old.Status == c.Status &&
			!old.LastTransitionTime.IsZero() && old.LastTransitionTime.Time.Before(since) {
			since = old.LastTransitionTime.Time
		}
		c.LastTransitionTime = metav1.NewTime(since)
		conds = append(conds, c)
	}
	return conds
}

// statusPatch is the strategic-merge patch of nodes/status that sets conds.
// NodeStatus.Conditions merge by type, so the patch leaves every other
// condition (the kubelet's) as it is.
func statusPatch(conds []v1.NodeCondition) ([]byte, error) {
	b, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	if err != nil {
		return nil, fmt.Errorf("encode node status patch: %w", err)
	}
	return b, nil
}

// setTaints returns taints with evictd's taint present for every active
// pressure in states and absent for every inactive one, and whether that
// changed anything. Taints with other keys, and evictd's keys for kinds
// not in states, are kept as they are, in their order. A taint already
// present with the right effect is kept (with its TimeAdded); NoExecute
// taints evictd adds carry TimeAdded = now.
func setTaints(cfg Config, taints []v1.Taint, states []pressureState, now time.Time) ([]v1.Taint, bool) {
	want := map[string]bool{} // evictd's keys in states → should be present
	for _, st := range states {
		want[cfg.TaintKeys[st.Report.Pressure]] = st.Report.Active
	}
	out := make([]v1.Taint, 0, len(taints)+len(states))
	have := map[string]bool{}
	changed := false
	for _, t := range taints {
		w, ours := want[t.Key]
		switch {
		case !ours:
			out = append(out, t)
		case !w, have[t.Key], t.Effect != cfg.TaintEffect:
			changed = true // cleared, duplicate, or the effect changed
		default:
			out = append(out, t)
			have[t.Key] = true
		}
	}
	for _, st := range states {
		k := cfg.TaintKeys[st.Report.Pressure]
		if !st.Report.Active || have[k] {
			continue
		}
		t := v1.Taint{Key: k, Effect: cfg.TaintEffect}
		if cfg.TaintEffect == v1.TaintEffectNoExecute {
			added := metav1.NewTime(now)
			t.TimeAdded = &added
		}
		out = append(out, t)
		have[k] = true
		changed = true
	}
	return out, changed
}

// transitionEvent returns the event for tr: its type, reason and message,
// or ok false when it needs none. An initial state gets an event only if
// the node's condition (existing) says otherwise: a pressure that is
// active and was not, or cleared and was active. late adds when it
// happened, for events emitted after failed writes (the API server away).
func transitionEvent(cfg Config, tr transition, existing []v1.NodeCondition, late bool) (eventType, reason, msg string, ok bool) {
	if tr.Initial {
		old := findCondition(existing, cfg.ConditionTypes[tr.Pressure])
		if old == nil && !tr.Active || old != nil && old.Status == status(tr.Active) {
			return "", "", "", false
		}
	}
	eventType = v1.EventTypeNormal
	if tr.Active {
		eventType = v1.EventTypeWarning
	}
	msg = tr.Message
	if late {
		msg = fmt.Sprintf("%s (at %s; reported late, after failed writes to the API server)", msg, tr.At.UTC().Format(time.RFC3339))
	}
	return eventType, EventReason(tr.Pressure, tr.Active), msg, true
}
