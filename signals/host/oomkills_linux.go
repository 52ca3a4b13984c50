package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/evictd/evictd/signals"
)

// What the kernel counts of its OOM kills, and where (mm/oom_kill.c
// __oom_kill_process: count_vm_event(OOM_KILL) and
// memcg_memory_event_mm(victim's mm, MEMCG_OOM_KILL); mm/memcontrol.h
// memcg_memory_event):
//
//   - /proc/vmstat oom_kill counts every kill on the node, whatever limit
//     or shortage caused it and wherever the victim ran: the node scope,
//     on cgroup v1 and v2 alike (Linux 4.13 and later).
//   - On cgroup v2 the victim's cgroup and each of its ancestors but the
//     root count the kill in memory.events oom_kill, so kubepods'
//     memory.events counts every kill in the pods' cgroups: the kubepods
//     scope. (Mounted with memory_localevents, memory.events counts the
//     cgroup's own kills only, and kubepods, which holds no process
//     itself, would count none.)
//   - On cgroup v1 a kill counts only in the victim's own cgroup's
//     memory.oom_control oom_kill, not in its parents': kubepods' own
//     count stays 0, and a container's count goes with its cgroup, which
//     the runtime removes as soon as the killed container has exited,
//     usually before any pass reads it. The kubepods scope is therefore
//     not read on v1: the node scope counts those kills, without telling
//     whether the victim was in a pod; which container was killed is in
//     its status (OOMKilled) and in the kernel log.
//
// prometheus/procfs parses neither /proc/vmstat nor memory.events; both
// are read with parseKeyed, strictly, like memory.stat.

// OOMKillReader reads the kernel's OOM kill counts of the node and, on
// cgroup v2, of the kubepods cgroup. Reading them costs two small files;
// the loop compares each reading with the last one it made.
type OOMKillReader struct {
	vmstat  string
	cgroups *cgroups
}

// NewOOMKillReader reads cfg.ProcRoot's vmstat and the kubepods cgroup
// under cfg.CgroupMount and cfg.CgroupRoot.
func NewOOMKillReader(cfg Config) (*OOMKillReader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cg, err := newCgroups(cfg)
	if err != nil {
		return nil, err
	}
	return &OOMKillReader{vmstat: filepath.Join(cfg.ProcRoot, "vmstat"), cgroups: cg}, nil
}

// OOMKills reads the counts of every scope the node can count, stamped
// with now. A scope whose file cannot be read or parsed is left out and
// named in the error; the others are returned. A kubepods cgroup that
// does not exist (yet) has killed nothing: its count is 0.
func (r *OOMKillReader) OOMKills(ctx context.Context, now time.Time) (signals.OOMKills, error) {
	out := signals.OOMKills{Time: now, Counts: make(map[signals.OOMScope]int64, 2)}
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("OOM kill counts: %w", err)
	}
	var errs []error
	if n, err := r.node(); err != nil {
		errs = append(errs, fmt.Errorf("OOM kills of scope %s: %w", signals.OOMScopeNode, err))
	} else {
		out.Counts[signals.OOMScopeNode] = n
	}
	if n, ok, err := r.kubepods(); err != nil {
		errs = append(errs, fmt.Errorf("OOM kills of scope %s: %w", signals.OOMScopeKubepods, err))
	} else if ok {
		out.Counts[signals.OOMScopeKubepods] = n
	}
	return out, errors.Join(errs...)
}

// node reads /proc/vmstat oom_kill.
func (r *OOMKillReader) node() (int64, error) {
	b, err := os.ReadFile(r.vmstat)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", r.vmstat, err)
	}
	return parseOOMKill(r.vmstat, b)
}

// kubepods reads kubepods' memory.events oom_kill on cgroup v2; ok is
// false on cgroup v1, which has no such count.
func (r *OOMKillReader) kubepods() (n int64, ok bool, err error) {
	v, err := r.cgroups.version()
	if err != nil {
		return 0, false, err
	}
	if v != cgroupV2 {
		return 0, false, nil
	}
	dir := r.cgroups.memoryDir(v, r.cgroups.kubepods)
	file := filepath.Join(dir, "memory.events")
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
			return 0, true, nil // no pods yet: none was killed
		}
	}
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", file, err)
	}
	n, err = parseOOMKill(file, b)
	return n, err == nil, err
}

// parseOOMKill returns the oom_kill count of b, the content of file: a
// /proc/vmstat, a cgroup v2 memory.events or a cgroup v1
// memory.oom_control, all "key count" lines. The whole file must be well
// formed and have one oom_kill line (kernels before 4.13 have none).
func parseOOMKill(file string, b []byte) (int64, error) {
	v, err := parseKeyed(file, b, "oom_kill")
	if err != nil {
		return 0, err
	}
	return v["oom_kill"], nil
}
