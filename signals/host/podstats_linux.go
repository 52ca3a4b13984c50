package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/evictd/evictd/signals"
)

// PodStatsReader reads each pod's memory working set and task count from its
// pod cgroup (kubepods/<qos>/pod<uid>, or its systemd slice), on cgroup v1
// and v2.
//
// Containers is left empty: container cgroups are subdirectories of the pod
// cgroup named by container ID (cgroupfs) or by runtime scope (systemd), and
// without asking the runtime there is no container name to give them.
type PodStatsReader struct {
	cgroups *cgroups
}

// NewPodStatsReader reads the pod cgroups under the kubepods cgroup that
// cfg names.
func NewPodStatsReader(cfg Config) (*PodStatsReader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cg, err := newCgroups(cfg)
	if err != nil {
		return nil, err
	}
	return &PodStatsReader{cgroups: cg}, nil
}

// Read returns, by UID, the stats of the pods (UID and QOS set) whose cgroup
// could be read, stamped with now. MemoryWorkingSet is the pod cgroup's
// usage minus inactive file pages; Processes is its pids.current. A field
// that could not be read is nil; a pod none of whose figures could be read
// (its cgroup is gone, say) is absent. The error joins everything that
// failed, for the caller to log.
func (r *PodStatsReader) Read(ctx context.Context, pods []signals.Pod, now time.Time) (map[string]signals.PodStats, error) {
	out := make(map[string]signals.PodStats, len(pods))
	v, err := r.cgroups.version()
	if err != nil {
		return out, fmt.Errorf("pod stats: %w", err)
	}
	var errs []error
	for _, p := range pods {
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("pod stats: %w", err))
			break
		}
		name, err := podCgroupName(r.cgroups.kubepods, p.QOS, p.UID)
		if err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", p.Ref(), err))
			continue
		}
		st := signals.PodStats{UID: p.UID, Time: now}
		if ws, err := r.cgroups.memoryCgroup(v, name).WorkingSet(); err != nil {
			errs = append(errs, fmt.Errorf("pod %s (uid %s) memory: %w", p.Ref(), p.UID, err))
		} else {
			st.MemoryWorkingSet = signals.Int64(ws)
		}
		if n, err := tasks(r.cgroups.pidsDir(v, name)); err != nil {
			errs = append(errs, fmt.Errorf("pod %s (uid %s) processes: %w", p.Ref(), p.UID, err))
		} else {
			st.Processes = signals.Int64(n)
		}
		if st.MemoryWorkingSet != nil || st.Processes != nil {
			out[p.UID] = st
		}
	}
	return out, errors.Join(errs...)
}
