package manager

import (
	"fmt"
	"slices"
	"time"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
	"github.com/evictd/evictd/signals"
)

// InFlightStatus is an eviction in flight as /status shows it.
type InFlightStatus struct {
	Pod               string    `json:"pod"`
	UID               string    `json:"uid"`
	DeletionTimestamp time.Time `json:"deletionTimestamp"`
	// WaitUntil is when evictd stops waiting for the pod, if it has not
	// gone, before a soft threshold's eviction: DeletionTimestamp plus the
	// cleanup timeout.
	WaitUntil time.Time `json:"waitUntil"`
	// WaitUntilHard is the same before a hard threshold's eviction: no
	// later than the cleanup timeout after the eviction was issued.
	WaitUntilHard time.Time `json:"waitUntilHard"`
	// Overdue is true once WaitUntil has passed: the pod no longer holds
	// back the next eviction.
	Overdue bool `json:"overdue"`
}

// waitUntil is when the wait for f ends before an eviction for a soft
// threshold (hard false): its deletionTimestamp plus the cleanup timeout,
// as the kubelet waits for the grace period and then for the pod's
// cleanup. Before an eviction for a hard threshold it ends no later than
// the cleanup timeout after f's eviction was issued, as the Evicter's own
// wait for a pod does: a soft eviction's grace period, which can be
// minutes, must not hold off a node in danger.
func (m *Manager) waitUntil(f decide.InFlight, hard bool) time.Time {
	soft := f.DeletionTimestamp.Add(m.cfg.CleanupTimeout)
	if !hard {
		return soft
	}
	issued := f.DeletionTimestamp.Add(-f.DeletionGracePeriod)
	return minTime(soft, issued.Add(m.cfg.CleanupTimeout))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// awaited returns, of the evictions in flight that are not overdue at now
// for an eviction for a hard or a soft threshold, the one whose wait ends
// last, and when that is; false when every one is overdue or there is
// none.
func (m *Manager) awaited(inFlight []decide.InFlight, now time.Time, hard bool) (decide.InFlight, time.Time, bool) {
	var last decide.InFlight
	var until time.Time
	for _, f := range inFlight {
		if u := m.waitUntil(f, hard); now.Before(u) && u.After(until) {
			last, until = f, u
		}
	}
	return last, until, !until.IsZero()
}

// withheldInFlight reports whether an eviction by evictd still in flight
// withholds req at now, with the pass's result for it. Like the kubelet,
// which waits for an evicted pod's cleanup before it evicts again, evictd
// evicts no second pod while the first one, which still holds what its
// eviction is to free, terminates: the pressure it sees then is no reason
// to evict. The wait is bounded: a pod still there after its
// deletionTimestamp plus the cleanup timeout is overdue, so that a pod
// stuck terminating cannot keep evictd from acting. Each pod waited for
// is said once at Info, its repeats at Debug, and the first pass that
// acts although it is still there once at Warn.
func (m *Manager) withheldInFlight(req decide.Request, inFlight []decide.InFlight, now time.Time) (string, bool) {
	m.noteOverdue(inFlight, now)
	f, until, ok := m.awaited(inFlight, now, req.Hard)
	if !ok {
		m.waitingFor = ""
		return "", false
	}
	m.deps.Metrics.IncWithheld(metrics.WithheldInFlight)
	untilText := until.UTC().Format(time.RFC3339)
	args := []any{"terminating", f.Ref(), "uid", f.UID, "waitUntil", untilText, "pod", req.Pod.Ref(), "signal", req.Signal}
	if m.waitingFor != f.UID {
		m.waitingFor = f.UID
		m.deps.Log.Info("eviction withheld: a pod evictd evicted is still terminating; waiting until it has gone", args...)
	} else {
		m.deps.Log.Debug("eviction withheld: a pod evictd evicted is still terminating", args...)
	}
	return fmt.Sprintf("withheld %s (eviction of %s in flight; waiting until it has gone, at most until %s)",
		req.Pod.Ref(), f.Ref(), untilText), true
}

// noteOverdue logs, once per pod, an eviction in flight whose wait has
// ended although the pod is still there, and forgets the pods no longer
// in flight.
func (m *Manager) noteOverdue(inFlight []decide.InFlight, now time.Time) {
	for uid := range m.overdueSaid {
		if !slices.ContainsFunc(inFlight, func(f decide.InFlight) bool { return f.UID == uid }) {
			delete(m.overdueSaid, uid)
		}
	}
	for _, f := range inFlight {
		if u := m.waitUntil(f, false); !now.Before(u) && !m.overdueSaid[f.UID] {
			m.overdueSaid[f.UID] = true
			m.deps.Log.Warn("a pod evictd evicted is still terminating past its grace period and the cleanup timeout; no longer waiting for it",
				"terminating", f.Ref(), "uid", f.UID, "deletionTimestamp", f.DeletionTimestamp.UTC().Format(time.RFC3339),
				"cleanupTimeout", m.cfg.CleanupTimeout)
		}
	}
}

// recordGone notes a pod the Evicter saw go (Evict returned nil: not
// found, replaced or finished), so that the passes after it, the first of
// which the eviction wakes, do not wait for it while the pod source's
// cache catches up with its deletion.
func (m *Manager) recordGone(req decide.Request, err error) {
	if err == nil {
		m.seenGone[req.Pod.UID] = m.deps.Clock.Now()
		m.acted[req.Pod.UID] = m.deps.Clock.Now()
	}
}

// seenGoneMemory is how long a pod seen gone is remembered: far longer
// than any cache lags behind, short enough to keep the set small.
const seenGoneMemory = time.Hour

// notGone drops from inFlight the pods the Evicter saw go, and forgets
// those seen gone long ago.
func (m *Manager) notGone(inFlight []decide.InFlight, now time.Time) []decide.InFlight {
	for uid, at := range m.seenGone {
		if now.Sub(at) > seenGoneMemory {
			delete(m.seenGone, uid)
		}
	}
	var out []decide.InFlight
	for _, f := range inFlight {
		if _, gone := m.seenGone[f.UID]; !gone {
			out = append(out, f)
		}
	}
	return out
}

// inFlightStatus reports the evictions in flight at now for /status.
func (m *Manager) inFlightStatus(inFlight []decide.InFlight, now time.Time) []InFlightStatus {
	var out []InFlightStatus
	for _, f := range inFlight {
		u := m.waitUntil(f, false)
		out = append(out, InFlightStatus{Pod: f.Ref(), UID: f.UID, DeletionTimestamp: f.DeletionTimestamp,
			WaitUntil: u, WaitUntilHard: m.waitUntil(f, true), Overdue: !now.Before(u)})
	}
	return out
}

// reportedGoneMemory bounds how long a pod the API server reported gone is
// left out while the pod source's cache still lists it: a cache that has
// not caught up after that long is not trusted to be behind any more, and
// the pod is ranked again (and read again from the API server before any
// eviction).
const reportedGoneMemory = time.Minute

// leaveOutReportedGone drops from pods those the API server reported gone
// less than reportedGoneMemory before now, and forgets those the cache no
// longer lists (it has caught up) or that were reported longer ago.
func (m *Manager) leaveOutReportedGone(pods []signals.Pod, now time.Time) []signals.Pod {
	if len(m.reportedGone) == 0 {
		return pods
	}
	listed := make(map[string]bool, len(pods))
	for _, p := range pods {
		listed[p.UID] = true
	}
	for uid, at := range m.reportedGone {
		if !listed[uid] || now.Sub(at) >= reportedGoneMemory || now.Before(at) {
			delete(m.reportedGone, uid)
		}
	}
	if len(m.reportedGone) == 0 {
		return pods
	}
	out := make([]signals.Pod, 0, len(pods))
	for _, p := range pods {
		if _, gone := m.reportedGone[p.UID]; gone {
			m.deps.Log.Debug("left out: the API server said it is gone, the pod cache still lists it", "pod", p.Ref())
			continue
		}
		out = append(out, p)
	}
	return out
}

// actedMemory is how long a pod evictd acted on is remembered while the
// pod source still lists it.
const actedMemory = time.Hour

// leaveOutActedWithoutStats drops from pods those evictd has stopped
// through the runtime (an eviction owed while the API server was away) or
// seen go, for which stats has none of the figures that rank pods for the
// pass's threshold (kinds, Decider.RankNeeds): their containers and cgroups are
// gone, so evicting them again frees nothing, and without stats they would
// rank first (as pods just started do). After an outage the pod source's
// cache can list such a pod for a minute or more, and a hog growing beside
// it would reach the kernel's OOM killer while evictd stopped the empty
// pod again and again. A pod of theirs that has stats again (its
// containers restarted by the kubelet) is ranked as any other. It forgets
// the pods the cache no longer lists, and those acted on more than
// actedMemory ago.
func (m *Manager) leaveOutActedWithoutStats(pods []signals.Pod, stats map[string]signals.PodStats, kinds signals.PodStatsKinds, now time.Time) []signals.Pod {
	if len(m.acted) == 0 || kinds == 0 {
		return pods
	}
	listed := make(map[string]bool, len(pods))
	for _, p := range pods {
		listed[p.UID] = true
	}
	for uid, at := range m.acted {
		if !listed[uid] || now.Sub(at) >= actedMemory {
			delete(m.acted, uid)
		}
	}
	out := make([]signals.Pod, 0, len(pods))
	for _, p := range pods {
		if _, acted := m.acted[p.UID]; acted {
			if st, ok := stats[p.UID]; !ok || !measured(st, kinds) {
				m.deps.Log.Debug("left out: evictd stopped it or saw it go, and it has no stats (nothing left to stop)", "pod", p.Ref())
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// measured reports whether st has a figure of one of kinds: a pod that has
// none ranks as a pod without stats.
func measured(st signals.PodStats, kinds signals.PodStatsKinds) bool {
	return kinds.Has(signals.PodMemory) && st.MemoryWorkingSet != nil ||
		kinds.Has(signals.PodProcesses) && st.Processes != nil ||
		kinds.Has(signals.PodDisk) && (len(st.Containers) > 0 || len(st.Volumes) > 0)
}
