package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/snapshot"
)

// replayed is what `evictd simulate` says of a flight record: what the
// agent decided at its last step, what the replay decided there with the
// flags given, and where they differ.
type replayed struct {
	Recorded    decisionSummary `json:"recorded"`
	Replayed    decisionSummary `json:"replayed"`
	Differences []string        `json:"differences"`
}

// decisionSummary is what a decision to evict comes to.
type decisionSummary struct {
	Outcome      string   `json:"outcome"`
	Signal       string   `json:"signal,omitempty"`
	Pod          string   `json:"pod,omitempty"`
	GracePeriod  int64    `json:"gracePeriodSeconds,omitempty"`
	Message      string   `json:"message,omitempty"`
	LocalStorage []string `json:"localStorage,omitempty"`
	// Predicted says the decision was taken before its threshold was met
	// (time to exhaustion).
	Predicted bool `json:"predicted,omitempty"`
}

// compareRecord compares rec's decision with dec, the replay's decision
// at the record's last step.
func compareRecord(rec *snapshot.Record, dec decide.Decision) replayed {
	r := replayed{Differences: []string{}}
	d := rec.Decision
	r.Recorded = decisionSummary{Outcome: d.Outcome, Signal: d.Signal, Pod: d.Pod, GracePeriod: d.GracePeriod, Message: d.Message, Predicted: d.Predicted != nil}
	for _, v := range d.LocalStorage {
		r.Recorded.LocalStorage = append(r.Recorded.LocalStorage, v.Pod)
	}
	r.Replayed = decisionSummary{Outcome: string(dec.Outcome), Signal: string(dec.Signal), GracePeriod: dec.GracePeriod, Message: dec.Message, Predicted: dec.Predicted != nil}
	if dec.Pod != nil {
		r.Replayed.Pod = dec.Pod.Ref()
	}
	for _, v := range dec.LocalStorage {
		r.Replayed.LocalStorage = append(r.Replayed.LocalStorage, v.Pod.Ref())
	}
	a, b := r.Recorded, r.Replayed
	differ := func(what, was, now string) {
		if was != now {
			r.Differences = append(r.Differences, fmt.Sprintf("%s: recorded %q, replayed %q", what, was, now))
		}
	}
	differ("outcome", a.Outcome, b.Outcome)
	differ("signal", a.Signal, b.Signal)
	differ("pod", a.Pod, b.Pod)
	differ("grace period", fmt.Sprint(a.GracePeriod), fmt.Sprint(b.GracePeriod))
	differ("message", a.Message, b.Message)
	differ("predicted", fmt.Sprint(a.Predicted), fmt.Sprint(b.Predicted))
	if !slices.Equal(a.LocalStorage, b.LocalStorage) {
		differ("pods over their local-storage limits", strings.Join(a.LocalStorage, ", "), strings.Join(b.LocalStorage, ", "))
	}
	return r
}

func (r replayed) write(w io.Writer) {
	fmt.Fprintln(w)
	textf(w, "== flight record: the agent's decision at the last step, and this replay's\n")
	say := func(who string, s decisionSummary) {
		switch {
		case s.Pod != "":
			textf(w, "%s: %s %s for %s with a grace period of %ds\n", who, s.Outcome, s.Pod, s.Signal, s.GracePeriod)
		case len(s.LocalStorage) > 0:
			textf(w, "%s: %s %s\n", who, s.Outcome, strings.Join(s.LocalStorage, ", "))
		default:
			textf(w, "%s: %s\n", who, s.Outcome)
		}
	}
	say("recorded", r.Recorded)
	say("replayed", r.Replayed)
	if len(r.Differences) == 0 {
		fmt.Fprintln(w, "same decision, grace period and message")
		return
	}
	for _, d := range r.Differences {
		textf(w, "differs: %s\n", d)
	}
}
