package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/manager"
	"github.com/evictd/evictd/signals"
)

// writeStatus prints an agent's last pass for a person: a line on the
// pass, a table of each signal against its thresholds, then pressure,
// decision, result and evictions. now dates the pass ("3s ago").
func writeStatus(w io.Writer, st *manager.Status, now time.Time) error {
	if st.Time.IsZero() {
		_, err := fmt.Fprintln(w, "no pass has completed yet: the agent is starting")
		return err
	}
	head := fmt.Sprintf("last pass %s (%s ago), trigger %s, %d pods", st.Time.UTC().Format(time.RFC3339), age(now.Sub(st.Time)), st.Trigger, st.Pods)
	if st.DryRun {
		head += ", dry run: nothing is acted on"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SIGNAL\tAVAILABLE\tCAPACITY\tTHRESHOLD\tKIND\tSTATE")
	for _, r := range statusRows(st) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.signal, r.available, r.capacity, r.threshold, r.kind, r.state)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "pressure:\t%s\n", pressures(st.Pressures))
	dec := st.Decision
	fmt.Fprintf(tw, "decision:\t%s: %s\n", dec.Outcome, dec.Reason)
	if dec.Pod != nil {
		kind := "soft"
		if dec.Hard {
			kind = "hard"
		}
		fmt.Fprintf(tw, "\tevict %s for %s (%s, grace period %ds)\n", dec.Pod.Ref(), dec.Signal, kind, dec.GracePeriod)
	}
	for _, v := range dec.LocalStorage {
		ref := "?"
		if v.Pod != nil {
			ref = v.Pod.Ref()
		}
		fmt.Fprintf(tw, "\tevict %s: %s %s used, limit %s\n", ref, v.Signal, human(v.Usage, signals.ResourceEphemeralStorage), human(v.Limit, signals.ResourceEphemeralStorage))
	}
	if st.Result != "" {
		fmt.Fprintf(tw, "result:\t%s\n", st.Result)
	}
	fmt.Fprintf(tw, "evictions:\t%s\n", evictions(st.Limits))
	for i, f := range st.InFlight {
		label := ""
		if i == 0 {
			label = "in flight:"
		}
		state := "terminating since " + f.DeletionTimestamp.UTC().Format(time.RFC3339) + ", holds back the next eviction until " + f.WaitUntil.UTC().Format(time.RFC3339)
		if f.Overdue {
			state = "terminating since " + f.DeletionTimestamp.UTC().Format(time.RFC3339) + ", overdue"
		}
		fmt.Fprintf(tw, "%s\t%s %s\n", label, f.Pod, state)
	}
	return tw.Flush()
}

// statusRow is one line of the signal table.
type statusRow struct {
	signal, available, capacity, threshold, kind, state string
}

// statusRows has a line per threshold, in signal order, and one for each
// observed signal without a threshold; "-" where there is nothing.
func statusRows(st *manager.Status) []statusRow {
	obs := map[signals.Signal]manager.ObservationStatus{}
	for _, o := range st.Observations {
		obs[o.Signal] = o
	}
	ths := map[signals.Signal][]manager.ThresholdStatus{}
	var order []signals.Signal
	for _, s := range signals.All() {
		order = append(order, s)
	}
	known := map[signals.Signal]bool{}
	for _, s := range order {
		known[s] = true
	}
	for _, t := range st.Thresholds {
		s := thresholdSignal(t.Threshold)
		if !known[s] { // from a newer agent
			known[s] = true
			order = append(order, s)
		}
		ths[s] = append(ths[s], t)
	}
	for _, o := range st.Observations {
		if !known[o.Signal] {
			known[o.Signal] = true
			order = append(order, o.Signal)
		}
	}

	var rows []statusRow
	for _, s := range order {
		o, observed := obs[s]
		if !observed && len(ths[s]) == 0 {
			continue
		}
		avail, capacity := "-", "-"
		if observed {
			avail, capacity = amount(s, o.Available), amount(s, o.Capacity)
			if s.Stall() {
				avail, capacity = signals.FormatStall(o.Available)+" stalled", "-"
			}
		}
		if len(ths[s]) == 0 {
			rows = append(rows, statusRow{string(s), avail, capacity, "-", "-", "-"})
			continue
		}
		for _, t := range ths[s] {
			rows = append(rows, statusRow{string(s), avail, capacity, thresholdText(s, t), thresholdKind(t), thresholdState(t, st.Time)})
		}
	}
	return rows
}

// thresholdSignal is the signal a threshold as Format writes it is on:
// what comes before its operator.
func thresholdSignal(th string) signals.Signal {
	if i := strings.IndexAny(th, "<>"); i >= 0 {
		return signals.Signal(th[:i])
	}
	return signals.Signal(th)
}

// thresholdText is the operator and value as the agent enforces them, in
// the unit of the signal's AVAILABLE column: "<100Mi", "<1.50Gi", "<1000",
// ">20%" for a stall; a percentage of capacity as written, followed by
// what it comes to on this node: "<10% (25.20Gi)".
func thresholdText(s signals.Signal, t manager.ThresholdStatus) string {
	text := strings.TrimPrefix(t.Threshold, string(s))
	op, value := text[:min(1, len(text))], text[min(1, len(text)):]
	switch {
	case s.Stall():
	case strings.HasSuffix(value, "%"):
		if t.Quantity != nil {
			text += " (" + amount(s, *t.Quantity) + ")"
		}
	default:
		// The agent writes quantities in canonical form (1.5Gi as
		// 1536Mi, 1000 as 1k).
		if q, err := resource.ParseQuantity(value); err == nil {
			text = op + amount(s, q.Value())
		}
	}
	return text
}

// thresholdKind is hard, or soft with its grace period.
func thresholdKind(t manager.ThresholdStatus) string {
	if t.GracePeriod != "" {
		return t.Kind + ", grace " + t.GracePeriod
	}
	return t.Kind
}

func thresholdState(t manager.ThresholdStatus, at time.Time) string {
	switch {
	case !t.Observed:
		return "not observed"
	case t.Met && t.MetSince != nil:
		return "met for " + age(at.Sub(*t.MetSince))
	case t.Met:
		return "met"
	}
	return "not met"
}

// amount is v in the signal's unit: bytes in Ki, Mi, Gi…, inodes and PIDs
// as counts.
func amount(s signals.Signal, v int64) string {
	return human(v, s.Resource())
}

// age is d to the second: 3s, 2m5s, 1h30m0s.
func age(d time.Duration) string {
	return max(d, 0).Round(time.Second).String()
}

func pressures(p map[string]bool) string {
	var on []string
	for name, active := range p {
		if active {
			on = append(on, name)
		}
	}
	if len(on) == 0 {
		return "none"
	}
	sort.Strings(on)
	return strings.Join(on, ", ")
}

func evictions(l manager.LimitsStatus) string {
	s := fmt.Sprintf("%d in the last hour", l.EvictionsInLastHour)
	switch {
	case l.CapReached && l.NextEvictionAllowed != nil:
		s += fmt.Sprintf(", cap of %d reached: none until %s", l.MaxEvictionsPerHour, l.NextEvictionAllowed.UTC().Format(time.RFC3339))
	case l.MaxEvictionsPerHour > 0:
		s += fmt.Sprintf(" (cap %d)", l.MaxEvictionsPerHour)
	default:
		s += " (no cap)"
	}
	return s
}

// unescapeHTML turns encoding/json's \u003c, \u003e and \u0026 in the
// strings of valid JSON back into <, > and &, as an encoder with
// SetEscapeHTML(false) writes them; every other byte, and every other
// escape, stays as it is.
func unescapeHTML(data []byte) []byte {
	out := make([]byte, 0, len(data))
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(data):
			if data[i+1] == 'u' && i+6 <= len(data) {
				switch strings.ToLower(string(data[i+2 : i+6])) {
				case "003c":
					out, i = append(out, '<'), i+5
					continue
				case "003e":
					out, i = append(out, '>'), i+5
					continue
				case "0026":
					out, i = append(out, '&'), i+5
					continue
				}
			}
			// Any other escape, \\ and \" among them, is copied whole.
			out, i = append(out, c, data[i+1]), i+1
			continue
		}
		out = append(out, c)
	}
	return out
}
