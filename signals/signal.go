package signals

import (
	"fmt"
	"time"
)

// Signal is the name of an eviction signal, spelled as the kubelet spells it.
type Signal string

// The eviction signals evictd understands, the same set as the kubelet's.
const (
	MemoryAvailable            Signal = "memory.available"
	AllocatableMemoryAvailable Signal = "allocatableMemory.available"
	NodeFsAvailable            Signal = "nodefs.available"
	NodeFsInodesFree           Signal = "nodefs.inodesFree"
	ImageFsAvailable           Signal = "imagefs.available"
	ImageFsInodesFree          Signal = "imagefs.inodesFree"
	ContainerFsAvailable       Signal = "containerfs.available"
	ContainerFsInodesFree      Signal = "containerfs.inodesFree"
	PIDAvailable               Signal = "pid.available"
)

// Resource is what evicting a pod gives back to the node.
type Resource string

// The resources reclaimed for each signal.
const (
	ResourceMemory           Resource = "memory"
	ResourceEphemeralStorage Resource = "ephemeral-storage"
	ResourceInodes           Resource = "inodes"
	ResourcePIDs             Resource = "pids"
)

// Pressure is the kind of node pressure a signal reports; evictd publishes
// one condition and one taint per kind.
type Pressure string

// The three kinds of node pressure.
const (
	MemoryPressure Pressure = "memory"
	DiskPressure   Pressure = "disk"
	PIDPressure    Pressure = "pid"
)

type signalInfo struct {
	resource Resource
	pressure Pressure
}

var known = map[Signal]signalInfo{
	MemoryAvailable:            {ResourceMemory, MemoryPressure},
	AllocatableMemoryAvailable: {ResourceMemory, MemoryPressure},
	NodeFsAvailable:            {ResourceEphemeralStorage, DiskPressure},
	NodeFsInodesFree:           {ResourceInodes, DiskPressure},
	ImageFsAvailable:           {ResourceEphemeralStorage, DiskPressure},
	ImageFsInodesFree:          {ResourceInodes, DiskPressure},
	ContainerFsAvailable:       {ResourceEphemeralStorage, DiskPressure},
	ContainerFsInodesFree:      {ResourceInodes, DiskPressure},
	PIDAvailable:               {ResourcePIDs, PIDPressure},
}

// All lists every signal in a fixed order: memory first, then disk, then PIDs.
func All() []Signal {
	return []Signal{
		MemoryAvailable, AllocatableMemoryAvailable,
		NodeFsAvailable, NodeFsInodesFree,
		ImageFsAvailable, ImageFsInodesFree,
		ContainerFsAvailable, ContainerFsInodesFree,
		PIDAvailable,
	}
}

// Valid reports whether s is one of the signals evictd understands.
func (s Signal) Valid() bool {
	_, ok := known[s]
	return ok
}

// Resource is the resource that evicting a pod frees for s ("" if s is unknown).
func (s Signal) Resource() Resource { return known[s].resource }

// Pressure is the kind of node pressure s reports ("" if s is unknown).
func (s Signal) Pressure() Pressure { return known[s].pressure }

// Observation is one reading of one signal: how much of the resource is
// available, out of what capacity, at what time.
type Observation struct {
	Signal    Signal
	Available int64
	Capacity  int64
	Time      time.Time
}

// Check rejects observations that cannot be true of a real node, so that a
// garbled reading is an error for its signal rather than a reason to evict.
func (o Observation) Check() error {
	switch {
	case !o.Signal.Valid():
		return fmt.Errorf("observation of unknown signal %q", o.Signal)
	case o.Capacity <= 0:
		return fmt.Errorf("%s: capacity %d is not positive", o.Signal, o.Capacity)
	case o.Time.IsZero():
		return fmt.Errorf("%s: observation has no time", o.Signal)
	}
	return nil
}

// Observations holds the latest reading of each signal that could be read.
// A signal that could not be read is absent, never zero.
type Observations map[Signal]Observation
