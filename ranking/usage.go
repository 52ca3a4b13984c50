package ranking

import (
	"github.com/evictd/evictd/signals"
)

// mode is how a signal ranks pods.
type mode int

const (
	// byPriority ranks by priority alone: the signal has no per-pod usage
	// (imagefs.* in the split layout holds only images) or is unknown.
	byPriority mode = iota
	// byMemory and byDisk compare usage with a request (memory, or
	// ephemeral-storage for disk bytes).
	byMemory
	byDisk
	// byInodes and byPIDs have no request: usage alone.
	byInodes
	byPIDs
)

// hasRequest reports whether the mode compares usage with a request.
func (m mode) hasRequest() bool { return m == byMemory || m == byDisk }

// statsBeforePriority reports whether pods without stats go before the
// others whatever their priority, as the kubelet's first key puts them for
// memory and disk bytes. PIDs rank by priority first (as the kubelet's
// rankPIDPressure), inodes by QoS class then priority (seed 001), and there
// pods without stats lead only among equal priorities.
func (m mode) statsBeforePriority() bool { return m.hasRequest() }

// fsPieces says which parts of a pod's disk usage land on the filesystem a
// disk signal watches.
type fsPieces struct {
	rootfs  bool // containers' writable layers
	logs    bool // containers' log files
	volumes bool // the pod's local volumes
}

func (p fsPieces) none() bool { return !p.rootfs && !p.logs && !p.volumes }

// fsGroup is the filesystem a disk signal watches.
type fsGroup int

const (
	notDisk fsGroup = iota
	nodeFs
	imageFs
	containerFs
)

// diskSignal tells which filesystem sig watches and whether it counts bytes
// (false: inodes).
func diskSignal(sig signals.Signal) (g fsGroup, bytes bool) {
	switch sig {
	case signals.NodeFsAvailable:
		return nodeFs, true
	case signals.NodeFsInodesFree:
		return nodeFs, false
	case signals.ImageFsAvailable:
		return imageFs, true
	case signals.ImageFsInodesFree:
		return imageFs, false
	case signals.ContainerFsAvailable:
		return containerFs, true
	case signals.ContainerFsInodesFree:
		return containerFs, false
	}
	return notDisk, false
}

// piecesFor is the table "Disk rank inputs by layout" of the kubelet
// reference, §4. The kubelet also lists "images", which it never measures:
// evicting a pod frees no image, so evictd leaves it out. known is false for
// a signal that is not a disk signal or a layout evictd does not know.
func piecesFor(sig signals.Signal, layout signals.FsLayout) (p fsPieces, known bool) {
	g, _ := diskSignal(sig)
	if g == notDisk {
		return fsPieces{}, false
	}
	all := fsPieces{rootfs: true, logs: true, volumes: true}
	switch layout {
	case signals.SingleFs:
		// One filesystem holds everything, whatever the signal's name.
		return all, true
	case signals.DedicatedImageFs:
		// Writable layers live with the images; containerfs is imagefs.
		if g == nodeFs {
			return fsPieces{logs: true, volumes: true}, true
		}
		return fsPieces{rootfs: true}, true
	case signals.SplitImageFs:
		// Writable layers live on nodefs (containerfs is nodefs); imagefs
		// holds only images, which no eviction frees.
		if g == imageFs {
			return fsPieces{}, true
		}
		return all, true
	}
	return fsPieces{}, false
}

// DiskUsage is what pod occupies on the filesystem watched by the disk signal
// sig under layout: bytes and inodes of the containers' writable layers
// (rootfs), their logs and the pod's local volumes, as the layout table of
// the kubelet reference §4 says:
//
//	layout            nodefs.*                       imagefs.*   containerfs.*
//	single            rootfs + logs + volumes        same        same
//	dedicated-imagefs logs + volumes                 rootfs      = imagefs
//	split-imagefs     rootfs + logs + volumes        nothing     = nodefs
//
// Local volumes are the volumes named in pod.LocalVolumes that have an entry
// in st.Volumes; a named volume without an entry adds nothing. Containers are
// those of st.Containers, and every container named in pod.Containers must be
// among them.
//
// ok is false, meaning "no stats", when pod or st is nil, sig is not a disk
// signal or layout is unknown, st has no container while writable layers or
// logs are needed, a container of the pod has no stats, a needed Rootfs or
// Logs is nil, or any measured value is negative. imagefs.* in the split
// layout measures nothing and returns 0, 0, true. Sums saturate at
// math.MaxInt64 instead of overflowing.
func DiskUsage(pod *signals.Pod, st *signals.PodStats, sig signals.Signal, layout signals.FsLayout) (bytes, inodes int64, ok bool) {
	pieces, known := piecesFor(sig, layout)
	if pod == nil || st == nil || !known {
		return 0, 0, false
	}
	var sum fsTotal
	if pieces.rootfs || pieces.logs {
		if len(st.Containers) == 0 {
			return 0, 0, false
		}
		for _, c := range pod.Containers {
			if !hasContainer(st.Containers, c.Name) {
				return 0, 0, false
			}
		}
		for _, c := range st.Containers {
			if pieces.rootfs && !sum.add(c.Rootfs) {
				return 0, 0, false
			}
			if pieces.logs && !sum.add(c.Logs) {
				return 0, 0, false
			}
		}
	}
	if pieces.volumes {
		for _, name := range pod.LocalVolumes {
			v, found := st.Volumes[name]
			if !found {
				continue
			}
			if !sum.add(&v) {
				return 0, 0, false
			}
		}
	}
	return sum.Bytes, sum.Inodes, true
}

// fsTotal accumulates filesystem usage without overflowing.
type fsTotal struct {
	Bytes  int64
	Inodes int64
}

// add adds u; it reports false if u is nil or negative.
func (t *fsTotal) add(u *signals.FsUsage) bool {
	if u == nil || u.Bytes < 0 || u.Inodes < 0 {
		return false
	}
	t.Bytes = signals.AddSat(t.Bytes, u.Bytes)
	t.Inodes = signals.AddSat(t.Inodes, u.Inodes)
	return true
}

func hasContainer(cs []signals.ContainerStats, name string) bool {
	for i := range cs {
		if cs[i].Name == name {
			return true
		}
	}
	return false
}

// nonNegative clamps a request to zero: a negative request cannot be real,
// and zero is what the kubelet assumes when there is none.
func nonNegative(v int64) int64 { return max(v, 0) }

// modeFor picks how sig ranks pods under layout.
func modeFor(sig signals.Signal, layout signals.FsLayout) mode {
	if sig.Stall() { // memory pressure stall ranks as memory.available does
		return byMemory
	}
	switch sig {
	case signals.MemoryAvailable, signals.AllocatableMemoryAvailable:
		return byMemory
	case signals.PIDAvailable:
		return byPIDs
	}
	pieces, known := piecesFor(sig, layout)
	if !known || pieces.none() {
		return byPriority
	}
	if _, bytes := diskSignal(sig); bytes {
		return byDisk
	}
	return byInodes
}

// ByUsage reports whether Rank orders pods by their measured usage under
// sig and layout, rather than by priority alone (imagefs.* in the split
// layout, an unknown signal or layout).
func ByUsage(sig signals.Signal, layout signals.FsLayout) bool {
	return modeFor(sig, layout) != byPriority
}

// StatsFor says which pod stats Rank reads to rank pods under sig and
// layout: the memory working set, the task count or the disk usage; none
// when it ranks by priority alone.
func StatsFor(sig signals.Signal, layout signals.FsLayout) signals.PodStatsKinds {
	switch modeFor(sig, layout) {
	case byMemory:
		return signals.PodMemory
	case byPIDs:
		return signals.PodProcesses
	case byDisk, byInodes:
		return signals.PodDisk
	}
	return 0
}

// measure fills c's Usage, Request, HasStats and ExceedsRequest for mode m.
// A measurement that is missing or negative leaves HasStats false.
func measure(c *Candidate, m mode, sig signals.Signal, layout signals.FsLayout) {
	p, st := c.Pod, c.Stats
	var usage int64
	var has bool
	switch m {
	case byMemory:
		c.Request = nonNegative(p.MemoryRequest)
		if st != nil && st.MemoryWorkingSet != nil && *st.MemoryWorkingSet >= 0 {
			usage, has = *st.MemoryWorkingSet, true
		}
	case byDisk:
		c.Request = nonNegative(p.EphemeralStorageRequest)
		usage, _, has = DiskUsage(p, st, sig, layout)
	case byInodes:
		// The kubelet subtracts the ephemeral-storage request (bytes) from
		// the inode count, mixing units; inodes have no request, so evictd
		// ranks by the inode count alone.
		_, usage, has = DiskUsage(p, st, sig, layout)
	case byPIDs:
		if st != nil && st.Processes != nil && *st.Processes >= 0 {
			usage, has = *st.Processes, true
		}
	}
	if has {
		c.Usage, c.HasStats = usage, true
		c.ExceedsRequest = m.hasRequest() && usage > c.Request
	}
}
