package signals

import "fmt"

// HugepageAware returns o, a memory.available observation as kubelet 1.36
// computes it (available: capacity minus the root cgroup's working set), as
// kubelet 1.37 computes it with its HugepageAwareEviction feature gate on
// (beta and on by default in 1.37). hugePages is the node's hugepage
// capacity in bytes, every page size together: what the node's capacity
// lists as hugepages-<size>, the pages the kernel keeps for hugetlb, which
// the memory cgroup's working set does not count.
//
// The rule is the kubelet's adjustForHugePages
// (pkg/kubelet/server/stats/summary.go): available less hugePages when it
// is more than hugePages, else 0. The capacity that percentage thresholds
// apply to is then that available plus the working set, as the kubelet's
// makeMemoryAvailableSignalObservation derives it from the adjusted stats
// (pkg/kubelet/eviction/helpers_others.go): capacity less hugePages while
// available stays above 0, the working set alone once it is 0. With no
// hugepages the observation is returned as it is.
//
// It is an error when o is not a valid memory.available observation, when
// hugePages is negative, or when the result would have no capacity (no
// working set and hugepages covering all of available), which no real
// node shows.
func HugepageAware(o Observation, hugePages int64) (Observation, error) {
	switch {
	case o.Signal != MemoryAvailable:
		return Observation{}, fmt.Errorf("hugepages are subtracted from %s only, not from %s", MemoryAvailable, o.Signal)
	case hugePages < 0:
		return Observation{}, fmt.Errorf("%s: hugepage capacity %d is negative", o.Signal, hugePages)
	case o.Available < 0 || o.Available > o.Capacity:
		return Observation{}, fmt.Errorf("%s: available %d is not within capacity %d", o.Signal, o.Available, o.Capacity)
	case hugePages == 0:
		return o, nil
	}
	available, workingSet := o.Available, o.Capacity-o.Available
	if o.Available > hugePages {
		o.Available -= hugePages
	} else {
		o.Available = 0
	}
	o.Capacity = o.Available + workingSet
	if o.Capacity <= 0 {
		return Observation{}, fmt.Errorf("%s: hugepage capacity %d covers all of available %d, with no working set: no capacity is left", o.Signal, hugePages, available)
	}
	return o, nil
}
