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

// The memory pressure stall signals: the share of time, averaged over 10 s,
// 60 s or 300 s, in which some task (some) or every non-idle task (full) was
// stalled waiting for memory, as the kernel's PSI reports it in
// /proc/pressure/memory. The kubelet has no such signals. Unlike the others
// they measure what is lacking rather than what is left: their thresholds
// read "stall > X" (memory.pressure.full.avg10>20), see Stall.
const (
	MemoryPressureSomeAvg10  Signal = "memory.pressure.some.avg10"
	MemoryPressureSomeAvg60  Signal = "memory.pressure.some.avg60"
	MemoryPressureSomeAvg300 Signal = "memory.pressure.some.avg300"
	MemoryPressureFullAvg10  Signal = "memory.pressure.full.avg10"
	MemoryPressureFullAvg60  Signal = "memory.pressure.full.avg60"
	MemoryPressureFullAvg300 Signal = "memory.pressure.full.avg300"
)

// StallScale is the Capacity of every stall observation: a stall is counted
// in hundredths of a percent (basis points), the resolution PSI prints, so
// 10000 is 100% of the time stalled and 2050 is 20.50%.
const StallScale = 10000

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

// Pressures returns the three kinds in the order evictd reports them:
// memory, disk, PIDs.
func Pressures() [3]Pressure { return [3]Pressure{MemoryPressure, DiskPressure, PIDPressure} }

type signalInfo struct {
	resource Resource
	pressure Pressure
	// kind and window are set for the stall signals only: "some" or
	// "full", and "10s", "60s" or "300s".
	kind, window string
}

var known = map[Signal]signalInfo{
	MemoryAvailable:            {ResourceMemory, MemoryPressure, "", ""},
	AllocatableMemoryAvailable: {ResourceMemory, MemoryPressure, "", ""},
	NodeFsAvailable:            {ResourceEphemeralStorage, DiskPressure, "", ""},
	NodeFsInodesFree:           {ResourceInodes, DiskPressure, "", ""},
	ImageFsAvailable:           {ResourceEphemeralStorage, DiskPressure, "", ""},
	ImageFsInodesFree:          {ResourceInodes, DiskPressure, "", ""},
	ContainerFsAvailable:       {ResourceEphemeralStorage, DiskPressure, "", ""},
	ContainerFsInodesFree:      {ResourceInodes, DiskPressure, "", ""},
	PIDAvailable:               {ResourcePIDs, PIDPressure, "", ""},
	MemoryPressureSomeAvg10:    {ResourceMemory, MemoryPressure, "some", "10s"},
	MemoryPressureSomeAvg60:    {ResourceMemory, MemoryPressure, "some", "60s"},
	MemoryPressureSomeAvg300:   {ResourceMemory, MemoryPressure, "some", "300s"},
	MemoryPressureFullAvg10:    {ResourceMemory, MemoryPressure, "full", "10s"},
	MemoryPressureFullAvg60:    {ResourceMemory, MemoryPressure, "full", "60s"},
	MemoryPressureFullAvg300:   {ResourceMemory, MemoryPressure, "full", "300s"},
}

// All lists every signal in a fixed order: memory first (the stall signals
// after the two memory.available ones), then disk, then PIDs.
func All() []Signal {
	return []Signal{
		MemoryAvailable, AllocatableMemoryAvailable,
		MemoryPressureSomeAvg10, MemoryPressureSomeAvg60, MemoryPressureSomeAvg300,
		MemoryPressureFullAvg10, MemoryPressureFullAvg60, MemoryPressureFullAvg300,
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

// Stall reports whether s is a memory pressure stall signal. Its
// observations hold the stall itself in Available (in 1/StallScale of the
// time, so higher is worse) out of a Capacity of StallScale, and its
// thresholds are met above their value, not below.
func (s Signal) Stall() bool { return known[s].kind != "" }

// StallLabels returns the PSI line ("some" or "full") and averaging window
// ("10s", "60s", "300s") of a stall signal, and ok == false for any other.
func (s Signal) StallLabels() (kind, window string, ok bool) {
	i := known[s]
	return i.kind, i.window, i.kind != ""
}

// StallWindow returns the averaging window of a stall signal: 10 s, 60 s or
// 300 s; 0 for any other signal.
func (s Signal) StallWindow() time.Duration {
	switch known[s].window {
	case "10s":
		return 10 * time.Second
	case "60s":
		return 60 * time.Second
	case "300s":
		return 300 * time.Second
	}
	return 0
}

// Observation is one reading of one signal: how much of the resource is
// available, out of what capacity, at what time. For a stall signal
// (Signal.Stall) Available is the stall, in 1/StallScale of the time, and
// Capacity is StallScale.
type Observation struct {
	Signal    Signal
	Available int64
	Capacity  int64
	Time      time.Time
	// Local, on a stall observation, says the stall was not corroborated
	// as the node's: over the signal's averaging window the kernel
	// reclaimed nothing for the node as a whole and the pods' parent
	// cgroup reached no limit of its own, so the tasks that stalled waited
	// on their own cgroups' limits (a container held at its memory.high or
	// memory.max). A stall threshold is not met on a local stall (see
	// thresholds.Met). False, the zero value, is a stall corroborated as
	// the node's, or one read without corroboration (a snapshot that does
	// not say), which thresholds act on as before. Only stall signals may
	// set it.
	Local bool `json:",omitempty"`
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
	case o.Signal.Stall() && o.Capacity != StallScale:
		return fmt.Errorf("%s: capacity %d is not the stall scale %d", o.Signal, o.Capacity, StallScale)
	case o.Signal.Stall() && (o.Available < 0 || o.Available > StallScale):
		return fmt.Errorf("%s: stall %d is outside 0..%d", o.Signal, o.Available, StallScale)
	case o.Local && !o.Signal.Stall():
		return fmt.Errorf("%s: only a memory.pressure.* stall can be local", o.Signal)
	}
	return nil
}

// Observations holds the latest reading of each signal that could be read.
// A signal that could not be read is absent, never zero.
type Observations map[Signal]Observation

// FormatStall prints a stall in 1/StallScale of the time as a percentage
// with no trailing zeros: 2050 → "20.5%", 2000 → "20%", 1 → "0.01%".
func FormatStall(v int64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	whole, frac := v/100, v%100
	switch {
	case frac == 0:
		return fmt.Sprintf("%s%d%%", sign, whole)
	case frac%10 == 0:
		return fmt.Sprintf("%s%d.%d%%", sign, whole, frac/10)
	}
	return fmt.Sprintf("%s%d.%02d%%", sign, whole, frac)
}
