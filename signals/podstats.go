package signals

import (
	"strings"
	"time"
)

// FsUsage is what something occupies on a filesystem.
type FsUsage struct {
	Bytes  int64
	Inodes int64
}

// ContainerStats is the usage of one container of a pod. A nil field was not
// measured (which is not the same as zero).
type ContainerStats struct {
	Name string
	// MemoryWorkingSet is the container cgroup's usage minus inactive file
	// pages, read with its pod's MemoryWorkingSet.
	MemoryWorkingSet *int64
	// Rootfs is the container's writable layer.
	Rootfs *FsUsage
	// Logs is the container's log files.
	Logs *FsUsage
}

// PodStats is the usage of one pod, read from its cgroup and (for disk) from
// the runtime and the kubelet's volume directories. A nil field was not
// measured; pods whose stats for a resource are missing rank first.
type PodStats struct {
	// UID is the pod's metadata.uid.
	UID  string
	Time time.Time
	// MemoryWorkingSet is the pod cgroup's usage minus inactive file pages.
	MemoryWorkingSet *int64
	// Processes is the number of tasks in the pod cgroup.
	Processes  *int64
	Containers []ContainerStats
	// Volumes holds the usage of the pod's volumes, by volume name.
	Volumes map[string]FsUsage
}

// Int64 returns a pointer to v, for filling the optional fields above.
func Int64(v int64) *int64 { return &v }

// FsLayout is how the node's filesystems are laid out; it decides which
// usage counts for which disk signal and which reclaim runs first.
type FsLayout int

// The three layouts the kubelet knows.
const (
	// SingleFs: images, writable layers, logs and volumes on one filesystem.
	SingleFs FsLayout = iota
	// DedicatedImageFs: images and writable layers on their own filesystem.
	DedicatedImageFs
	// SplitImageFs: images alone on imagefs, writable layers on nodefs.
	SplitImageFs
)

func (l FsLayout) String() string {
	switch l {
	case SingleFs:
		return "single"
	case DedicatedImageFs:
		return "dedicated-imagefs"
	case SplitImageFs:
		return "split-imagefs"
	}
	return "unknown"
}

// PodStatsKinds says which of a pod's figures a pass needs, so that a
// reader reads only those: a pass that ranks pods by memory reads no pids
// file, and a pass that ranks none reads no cgroup file at all.
type PodStatsKinds uint8

// The kinds of pod stats.
const (
	// PodMemory is the pod cgroup's working set (PodStats.MemoryWorkingSet)
	// and, read with it, its containers' (ContainerStats.MemoryWorkingSet).
	PodMemory PodStatsKinds = 1 << iota
	// PodProcesses is the pod cgroup's task count (PodStats.Processes).
	PodProcesses
	// PodDisk is what the runtime and the pod's directories give:
	// Containers' writable layers and logs, and Volumes.
	PodDisk
)

// Has reports whether k includes every kind of o.
func (k PodStatsKinds) Has(o PodStatsKinds) bool { return k&o == o }

func (k PodStatsKinds) String() string {
	var parts []string
	for _, p := range []struct {
		k    PodStatsKinds
		name string
	}{{PodMemory, "memory"}, {PodProcesses, "processes"}, {PodDisk, "disk"}} {
		if k.Has(p.k) {
			parts = append(parts, p.name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}
