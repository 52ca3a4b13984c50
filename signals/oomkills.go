package signals

import "time"

// OOMScope is where the kernel's OOM kills are counted: a counter the
// kernel keeps, which evictd reads and compares with its last reading.
type OOMScope string

// The scopes of the OOM kill counts. A kill in kubepods counts in both.
const (
	// OOMScopeKubepods counts the kills of processes in the pods' parent
	// cgroup and every cgroup below it, whichever limit was reached (the
	// container's, the pod's, kubepods', or the node's memory): cgroup
	// v2's kubepods memory.events oom_kill, which is hierarchical. Cgroup
	// v1 has no such count (a kill counts only in the victim's own
	// cgroup, which goes with the container), so it is not read there.
	OOMScopeKubepods OOMScope = "kubepods"
	// OOMScopeNode counts every kill on the node, in any cgroup, for any
	// limit or the node's own shortage: /proc/vmstat oom_kill.
	OOMScopeNode OOMScope = "node"
)

// OOMScopes lists every scope in the order evictd reports them.
func OOMScopes() []OOMScope { return []OOMScope{OOMScopeKubepods, OOMScopeNode} }

// OOMKills is one reading of the kernel's OOM kill counts.
type OOMKills struct {
	// Time is when they were read.
	Time time.Time
	// Counts holds, for each scope the node can count and could be read,
	// the kernel's count of kills: since boot for the node, since the
	// cgroup was made for kubepods (0 while it does not exist). A scope
	// the node cannot count, or whose file could not be read, is absent.
	Counts map[OOMScope]int64
}
