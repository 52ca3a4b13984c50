package manager

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
)

// EventOOMKillNotPrevented is the reason of the Warning event posted on
// the node when the kernel's OOM killer killed processes since the last
// reading of its counts.
const EventOOMKillNotPrevented = "OOMKillNotPrevented"

// oomState is what the loop keeps of the OOM kill counts between passes.
type oomState struct {
	// last is the last count read of each scope; a scope is absent until
	// its first reading, its baseline.
	last map[signals.OOMScope]int64
	// at is when the last reading with a count was made.
	at      time.Time
	lastErr string
}

// countsOOMKills says whether a pass started by trigger reads the OOM
// kill counts: the first pass and the housekeeping ticks, so a burst of
// wake-ups under pressure reads them no more often.
func countsOOMKills(trigger metrics.Trigger) bool {
	return trigger == metrics.TriggerStart || trigger == metrics.TriggerTick
}

// countOOMKills reads the kernel's OOM kill counts and counts what rose
// since the last reading: in evictd_oom_kills_total, and in one Warn line
// and one Warning event on the node for all the scopes of the pass, so a
// burst of kills is one event per housekeeping interval. The first count
// of a scope is its baseline: kills from before evictd ran, or before its
// count could first be read, are not counted. A count that went down
// started again from 0 (kubepods made again): all of it is new. A scope
// that cannot be read keeps its last count, and what rose meanwhile is
// counted at its next reading. Nothing here affects eviction.
func (m *Manager) countOOMKills(ctx context.Context, now time.Time) {
	if m.deps.OOMKills == nil {
		return
	}
	if m.oom.last == nil {
		m.oom.last = map[signals.OOMScope]int64{}
	}
	read, err := m.deps.OOMKills.OOMKills(ctx, now)
	m.warnOnChange(&m.oom.lastErr, err, "some OOM kill counts could not be read; their kills are counted at the next reading")
	since := m.oom.at
	rose := map[signals.OOMScope]int64{}
	for _, s := range signals.OOMScopes() {
		n, ok := read.Counts[s]
		if !ok {
			continue
		}
		prev, known := m.oom.last[s]
		m.oom.last[s] = n
		m.oom.at = read.Time
		if !known {
			m.deps.Metrics.AddOOMKills(s, 0)
			continue
		}
		d := n - prev
		if d < 0 {
			d = n
		}
		if d > 0 {
			m.deps.Metrics.AddOOMKills(s, d)
			rose[s] = d
		}
	}
	if len(rose) == 0 {
		return
	}
	msg := oomKillMessage(rose, since, read.Time)
	args := []any{"since", since}
	for _, s := range signals.OOMScopes() {
		if d, ok := rose[s]; ok {
			args = append(args, string(s), d)
		}
	}
	m.deps.Log.Warn("the kernel's OOM killer killed processes that evictd did not save", args...)
	if m.deps.Events != nil {
		m.deps.Events.Warn(EventOOMKillNotPrevented, msg)
	}
}

// oomKillMessage is the event's message for the kills of each scope
// between two readings.
func oomKillMessage(rose map[signals.OOMScope]int64, since, at time.Time) string {
	var b strings.Builder
	b.WriteString("The kernel's OOM killer killed ")
	node, hasNode := rose[signals.OOMScopeNode]
	pods, hasPods := rose[signals.OOMScopeKubepods]
	switch {
	case hasNode && hasPods:
		fmt.Fprintf(&b, "%s on this node, %d of them in pods,", processes(node), pods)
	case hasNode:
		fmt.Fprintf(&b, "%s on this node", processes(node))
	default:
		fmt.Fprintf(&b, "%s in pods", processes(pods))
	}
	fmt.Fprintf(&b, " between %s and %s (evictd_oom_kills_total). A kill at a container's own memory limit is the container's; any other is a shortage evictd did not prevent: see the pods' OOMKilled containers and the kernel log.",
		since.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))
	return b.String()
}

func processes(n int64) string {
	if n == 1 {
		return "1 process"
	}
	return fmt.Sprintf("%d processes", n)
}
