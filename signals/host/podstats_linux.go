package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"time"

	"github.com/evictd/evictd/signals"
)

// PodStatsReader reads each pod's memory working set and task count from its
// pod cgroup (kubepods/<qos>/pod<uid>, or its systemd slice), on cgroup v1
// and v2.
//
// It reads only the kinds it is asked for, through files it keeps open
// from one Read to the next (podfiles_linux.go): at most keptFileLimit of
// them, the others opened and closed at each read. A pod's files are
// closed when a Read no longer lists the pod; Close closes them all.
//
// Containers is left empty: container cgroups are subdirectories of the pod
// cgroup named by container ID (cgroupfs) or by runtime scope (systemd), and
// without asking the runtime there is no container name to give them.
type PodStatsReader struct {
	cgroups *cgroups

	mu sync.Mutex
	// version is the hierarchy the paths in pods were made for.
	version cgroupVersion
	pods    map[string]*podFiles
	files   files
	// listed marks the pods of the Read under way, to close the others.
	listed map[string]bool
}

// podFiles are the cgroup files of one pod, by what they hold.
type podFiles struct {
	qos signals.QOSClass
	// usage is memory.usage_in_bytes on v1, memory.current on v2.
	usage, stat, pids keptFile
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
	return &PodStatsReader{cgroups: cg, pods: map[string]*podFiles{}, files: files{max: keptFileLimit()}, listed: map[string]bool{}}, nil
}

// Read returns, by UID, the stats of the kinds asked for (PodMemory,
// PodProcesses; it reads no disk usage) of the pods (UID and QOS set)
// whose cgroup could be read, stamped with now. MemoryWorkingSet is the pod
// cgroup's usage minus inactive file pages; Processes is its pids.current.
// A field not asked for, or that could not be read, is nil; a pod none of
// whose figures asked for could be read (its cgroup is gone, say) is
// absent. The error joins everything that failed, for the caller to log.
//
// A Read that asks for neither kind reads no file and returns no stats; it
// only closes the files of the pods it does not list.
func (r *PodStatsReader) Read(ctx context.Context, pods []signals.Pod, now time.Time, kinds signals.PodStatsKinds) (map[string]signals.PodStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.forgetUnlisted(pods)
	kinds &= signals.PodMemory | signals.PodProcesses
	if kinds == 0 {
		return map[string]signals.PodStats{}, nil
	}
	out := make(map[string]signals.PodStats, len(pods))
	v, err := r.cgroups.version()
	if err != nil {
		return out, fmt.Errorf("pod stats: %w", err)
	}
	if v != r.version {
		r.closeAll()
		r.version = v
	}
	var errs []error
	for _, p := range pods {
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("pod stats: %w", err))
			break
		}
		pf, err := r.filesOf(v, p)
		if err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", p.Ref(), err))
			continue
		}
		st := signals.PodStats{UID: p.UID, Time: now}
		gone := false
		if kinds.Has(signals.PodMemory) {
			if ws, err := r.workingSet(v, pf); err != nil {
				errs = append(errs, fmt.Errorf("pod %s (uid %s) memory: %w", p.Ref(), p.UID, err))
				gone = errors.Is(err, fs.ErrNotExist)
			} else {
				st.MemoryWorkingSet = signals.Int64(ws)
			}
		}
		if kinds.Has(signals.PodProcesses) {
			if n, err := r.count(&pf.pids); err != nil {
				errs = append(errs, fmt.Errorf("pod %s (uid %s) processes: %w", p.Ref(), p.UID, err))
				gone = gone || errors.Is(err, fs.ErrNotExist)
			} else {
				st.Processes = signals.Int64(n)
			}
		}
		if gone {
			// A file of its cgroup is missing: the cgroup has gone, or
			// is going. Keep none of its files open.
			r.forget(p.UID)
		}
		if st.MemoryWorkingSet != nil || st.Processes != nil {
			out[p.UID] = st
		}
	}
	return out, errors.Join(errs...)
}

// Close closes every file the reader keeps open. The reader stays usable:
// the next Read opens what it reads.
func (r *PodStatsReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeAll()
	return nil
}

// filesOf returns p's files, their paths made on first use (and again if
// p's QoS class changed, which would be a different cgroup).
func (r *PodStatsReader) filesOf(v cgroupVersion, p signals.Pod) (*podFiles, error) {
	if pf, ok := r.pods[p.UID]; ok && pf.qos == p.QOS {
		return pf, nil
	}
	name, err := podCgroupName(r.cgroups.kubepods, p.QOS, p.UID)
	if err != nil {
		return nil, err
	}
	r.forget(p.UID)
	mem := r.cgroups.memoryDir(v, name)
	usage := "memory.usage_in_bytes"
	if v == cgroupV2 {
		usage = "memory.current"
	}
	pf := &podFiles{
		qos:   p.QOS,
		usage: newKeptFile(filepath.Join(mem, usage)),
		stat:  newKeptFile(filepath.Join(mem, "memory.stat")),
		pids:  newKeptFile(filepath.Join(r.cgroups.pidsDir(v, name), "pids.current")),
	}
	r.pods[p.UID] = pf
	return pf, nil
}

// workingSet is the pod cgroup's usage minus its inactive file pages,
// clamped at 0, as MemoryCgroup.WorkingSet reads it for a cgroup that is
// not the root.
func (r *PodStatsReader) workingSet(v cgroupVersion, pf *podFiles) (int64, error) {
	usage, err := r.count(&pf.usage)
	if err != nil {
		return 0, err
	}
	key := "total_inactive_file"
	if v == cgroupV2 {
		key = "inactive_file"
	}
	b, err := r.files.read(&pf.stat)
	if err != nil {
		return 0, err
	}
	st, err := parseKeyed(pf.stat.path, b, key)
	if err != nil {
		return 0, err
	}
	return max(usage-st[key], 0), nil
}

// count reads a file holding one non-negative integer, as readCount does.
func (r *PodStatsReader) count(f *keptFile) (int64, error) {
	b, err := r.files.read(f)
	if err != nil {
		return 0, err
	}
	return parseCount(f.path, string(bytes.TrimSpace(b)))
}

// forgetUnlisted closes the files of the pods not in pods: they have gone.
func (r *PodStatsReader) forgetUnlisted(pods []signals.Pod) {
	if len(r.pods) == 0 {
		return
	}
	clear(r.listed)
	for i := range pods {
		r.listed[pods[i].UID] = true
	}
	for uid := range r.pods {
		if !r.listed[uid] {
			r.forget(uid)
		}
	}
	clear(r.listed)
}

// forget closes uid's files and drops their paths.
func (r *PodStatsReader) forget(uid string) {
	pf, ok := r.pods[uid]
	if !ok {
		return
	}
	r.files.close(&pf.usage)
	r.files.close(&pf.stat)
	r.files.close(&pf.pids)
	delete(r.pods, uid)
}

func (r *PodStatsReader) closeAll() {
	for uid := range r.pods {
		r.forget(uid)
	}
}
