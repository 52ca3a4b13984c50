package host

import (
	"fmt"
	"time"

	"github.com/evictd/evictd/signals"
)

// Stall is not shortage. PSI counts a task stalled on any memory reclaim,
// that of its own cgroup at memory.high or memory.max included, so the node's
// /proc/pressure/memory rises when one container is held at its own limit on
// a node with plenty free. What tells the node's shortage from that is
// whether the kernel reclaimed for the node, or the pods' parent cgroup
// reached its own limit:
//
//   - /proc/vmstat's pgscan_kswapd and pgscan_direct count the pages scanned
//     by reclaim for the node as a whole only: mm/vmscan.c
//     (shrink_inactive_list, and scan_folios for the multi-gen LRU) adds to
//     them under `if (!cgroup_reclaim(sc))`, and reclaim at a cgroup's
//     memory.high or memory.max has sc->target_mem_cgroup set;
//   - kubepods' memory.events.local (cgroup v2) counts high and max events
//     of kubepods itself, not of the cgroups below it (memcg_memory_event
//     adds to memory_events_local of the cgroup whose limit was reached
//     only); kubepods' memory.failcnt (cgroup v1) counts the charges that
//     failed at kubepods' own limit (page_counter_try_charge counts the
//     failure on the counter that failed).
//
// A stall is the node's (corroborated) when one of these counts rose over
// the stall's averaging window; otherwise it is local.

// reclaimCounts is one reading of the counts that corroborate a stall.
type reclaimCounts struct {
	at time.Time
	// nodeScan is /proc/vmstat's pgscan_kswapd + pgscan_direct.
	nodeScan int64
	// limit is kubepods' memory.events.local high + max (v2) or its
	// memory.failcnt (v1); known is false while kubepods does not exist.
	limit int64
	known bool
}

// maxStallWindow is the longest window of the stall signals: how far back
// the history reaches.
var maxStallWindow = func() time.Duration {
	var w time.Duration
	for _, s := range signals.All() {
		w = max(w, s.StallWindow())
	}
	return w
}()

// maxReadings bounds the history whatever the pace of the passes (one every
// 50 ms for five minutes).
const maxReadings = 6000

// stallHistory keeps the readings of the last maxStallWindow, and the one
// before, to compare each new reading with the one that opens a window.
type stallHistory struct {
	readings []reclaimCounts // oldest first
}

// local says, for a stall averaged over w and read at cur, whether it is
// local, and why in a few words. It compares cur with base, the newest
// earlier reading taken at or before cur.at−w, or, while the history is
// younger than w, the oldest: a window no shorter than w (longer by less
// than the interval between two readings) when the history reaches back
// that far. With no earlier reading nothing is known to have risen, and the
// stall is local.
func (h *stallHistory) local(w time.Duration, cur reclaimCounts) (bool, string) {
	base, ok := h.base(cur.at, w)
	if !ok {
		return true, "no earlier reading of the reclaim counts to compare with"
	}
	node := cur.nodeScan > base.nodeScan
	// kubepods' count restarts from 0 when kubepods is made again (it was
	// missing at base, or its count went down): what it counts now came
	// within the window.
	limit := cur.known && cur.limit > 0 && (!base.known || cur.limit != base.limit)
	switch {
	case node:
		return false, "the node reclaimed memory for itself"
	case limit:
		return false, "kubepods reached its own limit"
	}
	return true, ""
}

// base is the reading that opens a window of w ending at now; readings
// after now (before a step back of the clock) are never one.
func (h *stallHistory) base(now time.Time, w time.Duration) (reclaimCounts, bool) {
	from := now.Add(-w)
	var base reclaimCounts
	found := false
	for _, r := range h.readings {
		if r.at.After(now) || found && r.at.After(from) {
			break
		}
		base, found = r, true
	}
	return base, found
}

// add records cur: it forgets readings taken after it (the clock stepped
// back: they cannot be ordered with it), and those older than the reading
// that opens the longest window.
func (h *stallHistory) add(cur reclaimCounts) {
	keep := h.readings[:0]
	for _, r := range h.readings {
		if !r.at.After(cur.at) {
			keep = append(keep, r)
		}
	}
	h.readings = append(keep, cur)
	from := cur.at.Add(-maxStallWindow)
	drop := 0
	for drop+1 < len(h.readings) && !h.readings[drop+1].at.After(from) {
		drop++
	}
	if n := len(h.readings) - drop; n > maxReadings {
		drop = len(h.readings) - maxReadings
	}
	h.readings = append(h.readings[:0], h.readings[drop:]...)
}

// parseVMStatScan returns pgscan_kswapd + pgscan_direct from b, the content
// of /proc/vmstat read from file; a missing, repeated or garbled line is an
// error naming the file and the value.
func parseVMStatScan(file string, b []byte) (int64, error) {
	v, err := parseKeyed(file, b, "pgscan_kswapd", "pgscan_direct")
	if err != nil {
		return 0, err
	}
	s, err := add(v["pgscan_kswapd"], v["pgscan_direct"])
	if err != nil {
		return 0, fmt.Errorf("%s: pgscan_kswapd + pgscan_direct: %w", file, err)
	}
	return s, nil
}

// parseEventsLocal returns high + max from b, the content of a cgroup v2
// memory.events.local read from file.
func parseEventsLocal(file string, b []byte) (int64, error) {
	v, err := parseKeyed(file, b, "high", "max")
	if err != nil {
		return 0, err
	}
	s, err := add(v["high"], v["max"])
	if err != nil {
		return 0, fmt.Errorf("%s: high + max: %w", file, err)
	}
	return s, nil
}
