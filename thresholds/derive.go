package thresholds

import (
	"fmt"

	"github.com/evictd/evictd/signals"
)

// The values --enforce-node-allocatable accepts, as in the kubelet.
const (
	enforcePods                     = "pods"
	enforceSystemReserved           = "system-reserved"
	enforceSystemReservedCompress   = "system-reserved-compressible"
	enforceKubeReserved             = "kube-reserved"
	enforceKubeReservedCompressible = "kube-reserved-compressible"
	enforceNone                     = "none"
)

// validateEnforceNodeAllocatable checks --enforce-node-allocatable as the
// kubelet's configuration validation does, with its texts: known values
// only, no duplicates, "none" alone, and not both the plain and the
// -compressible form of a reservation. The kubelet's checks on the reserved
// cgroups are not evictd's business and are left out. The first error in
// the kubelet's order is returned.
func validateEnforceNodeAllocatable(vals []string) error {
	if enforces(vals, enforceSystemReserved) && enforces(vals, enforceSystemReservedCompress) {
		return fmt.Errorf("invalid configuration: both %q and %q cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)", enforceSystemReserved, enforceSystemReservedCompress)
	}
	if enforces(vals, enforceKubeReserved) && enforces(vals, enforceKubeReservedCompressible) {
		return fmt.Errorf("invalid configuration: both %q and %q cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)", enforceKubeReserved, enforceKubeReservedCompressible)
	}
	seen := make(map[string]bool, len(vals))
	for _, v := range vals {
		if seen[v] {
			return fmt.Errorf("invalid configuration: duplicated enforcements %q in enforceNodeAllocatable (--enforce-node-allocatable)", v)
		}
		seen[v] = true
		switch v {
		case enforcePods, enforceSystemReserved, enforceSystemReservedCompress, enforceKubeReserved, enforceKubeReservedCompressible:
		case enforceNone:
			if len(vals) > 1 {
				return fmt.Errorf("invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when %q is specified", enforceNone)
			}
		default:
			return fmt.Errorf("invalid configuration: option %q specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are %q, %q, %q, %q, %q or %q",
				v, enforcePods, enforceSystemReserved, enforceSystemReservedCompress, enforceKubeReserved, enforceKubeReservedCompressible, enforceNone)
		}
	}
	return nil
}

func enforces(vals []string, want string) bool {
	for _, v := range vals {
		if v == want {
			return true
		}
	}
	return false
}

// SourceAllocatable is the Source of allocatableMemory.available thresholds
// derived from memory.available.
const SourceAllocatable = "derived from memory.available (enforce-node-allocatable=pods)"

// addAllocatable adds, for each memory.available threshold that acts as a
// hard one (Hard(): grace period 0, as the kubelet's isHardEvictionThreshold),
// an allocatableMemory.available threshold with the same value and minimum
// reclaim (reference §2.4). Where the operator set allocatableMemory.available
// with the same Key, that one is kept and nothing is derived: the kubelet
// would evaluate both, and the operator's is the one they meant.
func (p *Parsed) addAllocatable(ths []Threshold) []Threshold {
	out := ths
	for _, t := range ths {
		if t.Signal != signals.MemoryAvailable || !t.Hard() {
			continue
		}
		d := t
		d.Signal, d.Source = signals.AllocatableMemoryAvailable, SourceAllocatable
		d.Value = t.Value.clone()
		if t.MinReclaim != nil {
			mr := t.MinReclaim.clone()
			d.MinReclaim = &mr
		}
		if i := indexOfKey(out, d.Key()); i >= 0 {
			p.note("%s from %s is kept; %s is not derived from %s for enforce-node-allocatable=pods", out[i], out[i].Source, d, t)
			continue
		}
		out = append(out, d)
	}
	return out
}

func indexOfKey(ths []Threshold, k Key) int {
	for i, t := range ths {
		if t.Key() == k {
			return i
		}
	}
	return -1
}

// DeriveContainerFs returns ths with the containerfs thresholds the kubelet
// derives once it knows the filesystem layout (reference §2.4,
// UpdateContainerFsThresholds): every containerfs.* threshold in ths is
// dropped (Parse has already said so in a Note), and each nodefs.available /
// nodefs.inodesFree threshold, hard and soft, is copied to
// containerfs.available / containerfs.inodesFree — from imagefs.* instead
// when the layout is DedicatedImageFs, where the writable layers live on the
// image filesystem. Unlike the kubelet, nothing is added for a source that
// has no threshold. ths is not modified; the result is in SortByPriority
// order.
func DeriveContainerFs(ths []Threshold, layout signals.FsLayout) []Threshold {
	from := map[signals.Signal]signals.Signal{
		signals.NodeFsAvailable:  signals.ContainerFsAvailable,
		signals.NodeFsInodesFree: signals.ContainerFsInodesFree,
	}
	if layout == signals.DedicatedImageFs {
		from = map[signals.Signal]signals.Signal{
			signals.ImageFsAvailable:  signals.ContainerFsAvailable,
			signals.ImageFsInodesFree: signals.ContainerFsInodesFree,
		}
	}
	out := make([]Threshold, 0, len(ths)+2)
	for _, t := range ths {
		if t.Signal != signals.ContainerFsAvailable && t.Signal != signals.ContainerFsInodesFree {
			out = append(out, t)
		}
	}
	for _, t := range ths {
		to, ok := from[t.Signal]
		if !ok {
			continue
		}
		d := t
		d.Signal = to
		d.Source = fmt.Sprintf("derived from %s (%s filesystem layout)", t.Signal, layout)
		d.Value = t.Value.clone()
		if t.MinReclaim != nil {
			mr := t.MinReclaim.clone()
			d.MinReclaim = &mr
		}
		out = append(out, d)
	}
	SortByPriority(out)
	return out
}
