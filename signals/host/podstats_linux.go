package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
// With the memory of a pod it reads its containers', each from the
// container's own cgroup below the pod's, in the same Read: the usage an
// eviction's message quotes for a container is of the reading the pod was
// ranked on. A container's cgroup is named by its runtime ID (<id> with
// the cgroupfs driver, <runtime>-<id>.scope with systemd's), which the
// pod's signals.Container.ID gives; a container without one has no stats.
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
	// memDir is the pod's memory cgroup, below which its containers' are.
	memDir string
	// usage is memory.usage_in_bytes on v1, memory.current on v2.
	usage, stat, pids keptFile
	// containers are the memory cgroup files of the pod's containers
	// found so far, by container name.
	containers map[string]*containerFiles
}

// containerFiles are the memory cgroup files of one container instance.
type containerFiles struct {
	// id is the runtime's ID of the instance they are of.
	id          string
	usage, stat keptFile
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
// With a pod's working set come its containers' (Containers, in the order
// of pod.Containers, MemoryWorkingSet alone set): those with an ID whose
// cgroup is found below the pod's and reads. One that is not found (the
// instance the kubelet reported running has ended since) or does not
// read is left out, with no error: the pod still ranks on its own figure,
// and only the eviction's message lacks the container.
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
			if ws, err := r.workingSet(v, &pf.usage, &pf.stat); err != nil {
				errs = append(errs, fmt.Errorf("pod %s (uid %s) memory: %w", p.Ref(), p.UID, err))
				gone = errors.Is(err, fs.ErrNotExist)
			} else {
				st.MemoryWorkingSet = signals.Int64(ws)
				st.Containers = r.containerWorkingSets(v, pf, p.Containers)
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
	pf := &podFiles{
		qos:        p.QOS,
		memDir:     mem,
		usage:      newKeptFile(filepath.Join(mem, usageFile(v))),
		stat:       newKeptFile(filepath.Join(mem, "memory.stat")),
		pids:       newKeptFile(filepath.Join(r.cgroups.pidsDir(v, name), "pids.current")),
		containers: map[string]*containerFiles{},
	}
	r.pods[p.UID] = pf
	return pf, nil
}

// containerWorkingSets reads the working set of each of containers that
// has an ID from its own memory cgroup below pf's, as Read says. The files
// of a container instance are kept open like the pod's, and closed when
// the container is no longer listed with that ID, or its cgroup does not
// read (it is looked for again at the next Read).
func (r *PodStatsReader) containerWorkingSets(v cgroupVersion, pf *podFiles, containers []signals.Container) []signals.ContainerStats {
	var out []signals.ContainerStats
	for _, c := range containers {
		if c.ID == "" {
			continue
		}
		cf := pf.containers[c.Name]
		if cf != nil && cf.id != c.ID {
			r.forgetContainer(pf, c.Name)
			cf = nil
		}
		if cf == nil {
			dir, ok := containerDir(pf.memDir, c.ID)
			if !ok {
				continue
			}
			cf = &containerFiles{id: c.ID, usage: newKeptFile(filepath.Join(dir, usageFile(v))), stat: newKeptFile(filepath.Join(dir, "memory.stat"))}
			pf.containers[c.Name] = cf
		}
		ws, err := r.workingSet(v, &cf.usage, &cf.stat)
		if err != nil {
			r.forgetContainer(pf, c.Name)
			continue
		}
		out = append(out, signals.ContainerStats{Name: c.Name, MemoryWorkingSet: signals.Int64(ws)})
	}
	for name, cf := range pf.containers {
		if !listedWith(containers, name, cf.id) {
			r.forgetContainer(pf, name)
		}
	}
	return out
}

// listedWith reports whether containers has one named name with id.
func listedWith(containers []signals.Container, name, id string) bool {
	for _, c := range containers {
		if c.Name == name {
			return c.ID == id
		}
	}
	return false
}

// containerDir finds the cgroup directory of the container with id below
// its pod's, podDir: <id> with the cgroupfs driver, <runtime>-<id>.scope
// with the systemd driver (cri-containerd-, crio-, docker-), or
// <runtime>-<id> (CRI-O with cgroupfs). ok is false when there is none.
//
// CRI-O's conmon, the process that watches a container, is named after
// the container too: crio-conmon-<id>.scope (systemd) or crio-conmon-<id>
// (cgroupfs), in the pod's cgroup when CRI-O's conmon_cgroup is "pod" (the
// only choice with cgroupfs). That cgroup is never the container's: its
// memory is not the container's and its process must never get the
// container's signal, so a name whose runtime part ends in "conmon" is
// passed over, whatever the order the directory lists them in.
func containerDir(podDir, id string) (dir string, ok bool) {
	if id == "" || strings.ContainsAny(id, "/\x00") || id == "." || id == ".." {
		return "", false
	}
	if fi, err := os.Stat(filepath.Join(podDir, id)); err == nil && fi.IsDir() {
		return filepath.Join(podDir, id), true
	}
	entries, err := os.ReadDir(podDir)
	if err != nil {
		return "", false
	}
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() {
			continue
		}
		runtime, found := strings.CutSuffix(n, "-"+id+".scope")
		if !found {
			runtime, found = strings.CutSuffix(n, "-"+id)
		}
		if found && runtime != "" && !isConmon(runtime) {
			return filepath.Join(podDir, n), true
		}
	}
	return "", false
}

// isConmon reports whether runtime, the part of a cgroup's name before
// "-<id>", names CRI-O's conmon rather than the container: "crio-conmon"
// (or "conmon" alone).
func isConmon(runtime string) bool {
	return runtime == "conmon" || strings.HasSuffix(runtime, "-conmon")
}

// usageFile is the file of a memory cgroup's usage.
func usageFile(v cgroupVersion) string {
	if v == cgroupV2 {
		return "memory.current"
	}
	return "memory.usage_in_bytes"
}

// workingSet is a cgroup's usage less its inactive file pages, from its
// usage and memory.stat files, clamped at 0, as MemoryCgroup.WorkingSet
// reads it for a cgroup that is not the root.
func (r *PodStatsReader) workingSet(v cgroupVersion, usageFile, statFile *keptFile) (int64, error) {
	usage, err := r.count(usageFile)
	if err != nil {
		return 0, err
	}
	key := "total_inactive_file"
	if v == cgroupV2 {
		key = "inactive_file"
	}
	b, err := r.files.read(statFile)
	if err != nil {
		return 0, err
	}
	st, err := parseKeyed(statFile.path, b, key)
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
	for name := range pf.containers {
		r.forgetContainer(pf, name)
	}
	delete(r.pods, uid)
}

// forgetContainer closes the files of pf's container name and drops them.
func (r *PodStatsReader) forgetContainer(pf *podFiles, name string) {
	cf, ok := pf.containers[name]
	if !ok {
		return
	}
	r.files.close(&cf.usage)
	r.files.close(&cf.stat)
	delete(pf.containers, name)
}

func (r *PodStatsReader) closeAll() {
	for uid := range r.pods {
		r.forget(uid)
	}
}
