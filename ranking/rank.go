package ranking

import (
	"cmp"
	"slices"
	"strings"

	"github.com/evictd/evictd/signals"
)

// Tier is the first key of the order: a pod of a lower tier is always
// evicted before a pod of a higher tier.
type Tier int

// The tiers, in eviction order.
const (
	// TierA holds, for memory and disk bytes, the non-Guaranteed pods that
	// have no stats or use more than their request; for inodes, the
	// BestEffort pods; for PIDs and priority-only ranking, every
	// non-Guaranteed pod.
	TierA Tier = iota + 1
	// TierB holds, for memory and disk bytes, the non-Guaranteed pods
	// within their request; for inodes, the Burstable pods (and pods of no
	// known class); for PIDs and priority-only ranking, none.
	TierB
	// TierC holds the Guaranteed pods.
	TierC
)

func (t Tier) String() string {
	switch t {
	case TierA:
		return "a"
	case TierB:
		return "b"
	case TierC:
		return "c"
	}
	return "unknown"
}

// Candidate is one pod in eviction order, with what decided its place.
type Candidate struct {
	// Pod points into the pods slice given to Rank.
	Pod *signals.Pod
	// Stats is a shallow copy of the pod's stats (its slices and map are
	// shared with the input), nil when there were none or they carried
	// another pod's UID.
	Stats *signals.PodStats
	// Usage is the pod's usage of the starved resource (bytes, inodes or
	// processes), 0 when unknown.
	Usage int64
	// Request is the pod's request of that resource in bytes (memory or
	// ephemeral-storage); 0 for inodes and PIDs, which have none.
	Request int64
	// HasStats is true when Usage was measured.
	HasStats bool
	// ExceedsRequest is true when Usage > Request for memory and disk bytes.
	ExceedsRequest bool
	Tier           Tier
	// Key says, in words, what put the pod at its place: the key that
	// ordered it before the next pod (after the previous one for the last),
	// preceded by a note when being Guaranteed or a DaemonSet pod moved it
	// back.
	Key string
	// Skip is non-empty when the pod must never be evicted (critical pods).
	Skip string
}

// Rank orders pods for eviction under sig, given the node's filesystem
// layout and the pods' stats keyed by UID. Every pod is returned, critical
// ones too, with Skip set.
//
// The order, first key first (a pod "wins" when it is evicted earlier):
//
//  1. Tier: non-Guaranteed pods before Guaranteed ones. The seeds say a
//     Guaranteed pod "will never be evicted because of another pod's
//     resource consumption" unless only Guaranteed pods remain; the kubelet
//     relies on Guaranteed pods never exceeding their request, evictd makes
//     it a rule. For memory and disk bytes, the non-Guaranteed pods that
//     have no stats or exceed their request come before the others, as the
//     kubelet's first key puts them. For inodes the tiers are the QoS
//     classes, BestEffort, then Burstable, then Guaranteed: seed 001 says
//     the node "will reclaim inodes by evicting pods with the lowest
//     quality of service first".
//  2. DaemonSet pods after the other pods of their tier: their controller
//     recreates them on the same node at once (seed 001), so evicting one
//     frees nothing for long.
//  3. Memory and disk bytes: pods without stats first, nothing says they
//     are small. Inodes and PIDs apply this key after priority (5b).
//  4. Memory and disk bytes: pods whose usage exceeds their request first
//     (this only matters among Guaranteed pods; elsewhere the tier says it).
//  5. Lower priority first.
//     5b. Inodes and PIDs: pods without stats first, among equal
//     priorities. The kubelet ranks PIDs by priority first, and the SPEC
//     puts priority right after the QoS class for inodes; a pod whose
//     count could not be read is no reason to pass over a pod of lower
//     priority.
//  6. Memory and disk bytes: larger usage − request first. Inodes and PIDs:
//     larger usage first. Inodes have no request; the kubelet subtracts the
//     ephemeral-storage request (bytes) from the inode count, which mixes
//     units, so evictd does not.
//  7. Namespace/name, then UID, so that the order never depends on the
//     input order; pods equal on all of these keep their input order.
//
// Critical pods (static, mirror, priority ≥ SystemCriticalPriority) are
// ranked by these same keys, as the kubelet ranks them, and carry Skip so the
// decision log can show them passed over; FirstEvictable never returns them.
//
// imagefs.* in the split layout holds only images, which evicting a pod does
// not free, so it ranks by tier, DaemonSet and priority alone; so does an
// unknown signal or layout.
//
// Bad input never panics: a pod without a UID, stats carrying another UID,
// a nil or negative measurement all count as "no stats"; negative requests
// count as zero.
func Rank(sig signals.Signal, layout signals.FsLayout, pods []signals.Pod, stats map[string]signals.PodStats) []Candidate {
	if len(pods) == 0 {
		return nil
	}
	m := modeFor(sig, layout)
	cands := make([]Candidate, len(pods))
	// One backing array for the stats copies; it never grows, so the
	// pointers into it stay valid.
	copies := make([]signals.PodStats, 0, len(pods))
	for i := range pods {
		p := &pods[i]
		c := &cands[i]
		c.Pod = p
		if st, ok := stats[p.UID]; ok && p.UID != "" && (st.UID == "" || st.UID == p.UID) {
			copies = append(copies, st)
			c.Stats = &copies[len(copies)-1]
		}
		measure(c, m, sig, layout)
		c.Tier = tierOf(c, m)
		c.Skip = skipReason(p)
	}
	// Sort positions rather than the wide candidates; the input position
	// breaks complete ties, which keeps the sort stable.
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		if c := compare(m, &cands[i], &cands[j]); c != 0 {
			return c
		}
		return cmp.Compare(i, j)
	})
	sorted := make([]Candidate, len(cands))
	for k, i := range order {
		sorted[k] = cands[i]
	}
	writeKeys(sorted, m, sig, layout)
	return sorted
}

// FirstEvictable returns the first candidate that may be evicted (Skip
// empty), and false when there is none.
func FirstEvictable(cands []Candidate) (Candidate, bool) {
	for _, c := range cands {
		if c.Skip == "" {
			return c, true
		}
	}
	return Candidate{}, false
}

// tierOf places c in its tier (rule 1).
func tierOf(c *Candidate, m mode) Tier {
	switch {
	case c.Pod.QOS == signals.Guaranteed:
		return TierC
	case m == byInodes && c.Pod.QOS == signals.BestEffort:
		return TierA
	case m == byInodes:
		// Burstable, or a class no one set: not the lowest class, and
		// not Guaranteed.
		return TierB
	case !m.hasRequest() || !c.HasStats || c.ExceedsRequest:
		return TierA
	}
	return TierB
}

// skipReason says why p must never be evicted, or "" when it may be.
func skipReason(p *signals.Pod) string {
	if !p.Critical() {
		return ""
	}
	var why []string
	if p.Static {
		why = append(why, "static")
	}
	if p.Mirror {
		why = append(why, "mirror")
	}
	if p.Priority >= signals.SystemCriticalPriority {
		why = append(why, "priority "+itoa(int64(p.Priority)))
	}
	if p.Spared != "" {
		why = append(why, p.Spared)
	}
	return "critical pod (" + strings.Join(why, ", ") + ")"
}

// key names one comparison of the order, for the Key text.
type key int

const (
	keyNone key = iota
	keyTier
	keyDaemonSet
	keyStats
	keyExceeds
	keyPriority
	keyUsage
	keyName
)

// compare orders a before b (negative) when a is to be evicted first.
func compare(m mode, a, b *Candidate) int {
	_, c := decide(m, a, b)
	return c
}

// decide returns the first key on which a and b differ and its comparison.
func decide(m mode, a, b *Candidate) (key, int) {
	if c := cmp.Compare(a.Tier, b.Tier); c != 0 {
		return keyTier, c
	}
	if c := falseFirst(a.Pod.DaemonSet, b.Pod.DaemonSet); c != 0 {
		return keyDaemonSet, c
	}
	return decideRest(m, a, b)
}

// decideRest is the order without the tier and DaemonSet rules (for
// memory, disk bytes and PIDs the kubelet's own order; for inodes the order
// within a QoS class), used within a tier and to tell whether those rules
// moved a pod back.
func decideRest(m mode, a, b *Candidate) (key, int) {
	if m.statsBeforePriority() {
		if c := falseFirst(a.HasStats, b.HasStats); c != 0 {
			return keyStats, c
		}
	}
	if m.hasRequest() {
		if c := falseFirst(!a.ExceedsRequest, !b.ExceedsRequest); c != 0 {
			return keyExceeds, c
		}
	}
	if c := cmp.Compare(a.Pod.Priority, b.Pod.Priority); c != 0 {
		return keyPriority, c
	}
	if m != byPriority && !m.statsBeforePriority() {
		if c := falseFirst(a.HasStats, b.HasStats); c != 0 {
			return keyStats, c
		}
	}
	// Usage is compared only between measured pods; two pods without
	// stats are equal here, as in the kubelet.
	if m != byPriority && a.HasStats && b.HasStats {
		// Usage and Request are non-negative, so the differences cannot
		// overflow.
		if c := cmp.Compare(b.Usage-b.Request, a.Usage-a.Request); c != 0 {
			return keyUsage, c
		}
	}
	if c := cmp.Compare(a.Pod.Namespace, b.Pod.Namespace); c != 0 {
		return keyName, c
	}
	if c := cmp.Compare(a.Pod.Name, b.Pod.Name); c != 0 {
		return keyName, c
	}
	if c := cmp.Compare(a.Pod.UID, b.Pod.UID); c != 0 {
		return keyName, c
	}
	return keyNone, 0
}

// falseFirst orders false before true.
func falseFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
