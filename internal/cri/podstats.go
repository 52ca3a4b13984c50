package cri

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evictd/evictd/signals"
)

// The labels the kubelet puts on sandboxes and containers.
const (
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// DefaultPodLogsDir is where the kubelet keeps container logs.
const DefaultPodLogsDir = "/var/log/pods"

// volumePluginDirs are the directories, below <kubelet root>/pods/<uid>/
// volumes/, of the local volume kinds measured here. hostPath volumes live
// outside the pod's directory and are not measured (they are not the pod's
// to free); secret, downwardAPI and projected volumes are tmpfs.
var volumePluginDirs = []string{"kubernetes.io~empty-dir", "kubernetes.io~configmap", "kubernetes.io~git-repo"}

// DiskStatsConfig configures a DiskStats.
type DiskStatsConfig struct {
	// KubeletRootDir is the kubelet's --root-dir; default /var/lib/kubelet.
	KubeletRootDir string
	// PodLogsDir holds the pods' log directories; default /var/log/pods.
	PodLogsDir string
	// MaxAge is how long a directory's measured usage is reused (the
	// kubelet's volumeStatsAggPeriod); default 10 s.
	MaxAge time.Duration
	// MaxEntries caps the entries of one pod's log and volume directories
	// together, counted as they are walked; default 1,000,000. The
	// directories walked once the pod's budget is spent are not measured.
	MaxEntries int
	// PendingDeadline bounds FillPending, how long a pass may wait for
	// the stats of pods that have just started; default
	// DefaultPendingDeadline.
	PendingDeadline time.Duration
	// PodWalkBudget bounds the walk of one pod's log and volume
	// directories together, besides MaxEntries; default
	// DefaultPodWalkBudget. A pod whose walk runs past it is left out of
	// the stats (its partial count would rank it short) and not walked
	// again for MaxAge.
	PodWalkBudget time.Duration
	// Walkers is how many pods' directories are walked at once; default
	// DefaultWalkers.
	Walkers int
	// Cut, when set, is called for every pod whose measurement is cut
	// (by its time or its entry budget), with the reason; it must not
	// block.
	Cut func(CutReason)
}

// DiskStats measures the pods' disk usage: it is the loop's PodStatsSource for disk.
// It is safe for concurrent use.
type DiskStats struct {
	c               *Client
	walker          *podWalker
	pendingDeadline time.Duration
}

// NewDiskStats returns a DiskStats reading the runtime through c.
func NewDiskStats(c *Client, cfg DiskStatsConfig) (*DiskStats, error) {
	if c == nil {
		return nil, errors.New("pod disk stats: no CRI client")
	}
	if cfg.KubeletRootDir == "" {
		cfg.KubeletRootDir = "/var/lib/kubelet"
	}
	if cfg.PodLogsDir == "" {
		cfg.PodLogsDir = DefaultPodLogsDir
	}
	for _, d := range []string{cfg.KubeletRootDir, cfg.PodLogsDir} {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("pod disk stats: directory %q is not an absolute path", d)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"max age", cfg.MaxAge}, {"pending deadline", cfg.PendingDeadline}, {"pod walk budget", cfg.PodWalkBudget}} {
		if d.v < 0 {
			return nil, fmt.Errorf("pod disk stats: %s %s must not be negative", d.name, d.v)
		}
	}
	if cfg.MaxEntries < 0 || cfg.Walkers < 0 {
		return nil, fmt.Errorf("pod disk stats: max entries %d and walkers %d must not be negative", cfg.MaxEntries, cfg.Walkers)
	}
	if cfg.PendingDeadline == 0 {
		cfg.PendingDeadline = DefaultPendingDeadline
	}
	if cfg.PodWalkBudget == 0 {
		cfg.PodWalkBudget = DefaultPodWalkBudget
	}
	if cfg.Walkers == 0 {
		cfg.Walkers = DefaultWalkers
	}
	du := newDirUsage(cfg.MaxAge, cfg.MaxEntries)
	return &DiskStats{c: c, walker: newPodWalker(du, cfg.KubeletRootDir, cfg.PodLogsDir, cfg.PodWalkBudget, cfg.Walkers, cfg.Cut),
		pendingDeadline: cfg.PendingDeadline}, nil
}

// PodStats returns, by pod UID, the disk usage of pods stamped with now:
// per container (by name) the writable layer from the runtime's stats
// (Rootfs) and the container's log directory, <PodLogsDir>/<namespace>_
// <name>_<uid>/<container>/ (Logs); per local volume named in
// pod.LocalVolumes, its directory below <KubeletRootDir>/pods/<uid>/volumes/
// (emptyDir, configMap, gitRepo). Directories are measured like du -x and
// reused for MaxAge; all of one pod's count against one budget of
// MaxEntries entries, its logs first, and are walked within one time
// budget, PodWalkBudget; Walkers pods at a time. A piece that cannot be
// measured stays nil (a volume: absent), so the pod ranks as having no
// stats for what needs it. A pod whose walk ran past its time budget
// (now, or less than MaxAge before) is left out, as is one not measured
// before ctx ended: the caller keeps what it had of them. The error joins
// what failed, names each pod cut, and names the endpoint when the
// runtime cannot be reached (the Rootfs of every container is then nil,
// the logs and volumes are still measured).
func (d *DiskStats) PodStats(ctx context.Context, now time.Time, pods []signals.Pod) (map[string]signals.PodStats, error) {
	byPod, layers, err := d.c.writableLayers(ctx)
	return measure(ctx, d.walker, now, pods, byPod, layers, err)
}

// runtimeContainer is one container of a pod as the runtime knows it.
type runtimeContainer struct {
	id, name string
	running  bool
	created  int64
	attempt  uint32
}

// measure gives the disk stats of pods from the runtime's containers and
// writable layers (byPod, layers; err is what failed asking for them) and
// the pods' directories, walked by w; the pods w leaves out are not in
// the result.
func measure(ctx context.Context, w *podWalker, now time.Time, pods []signals.Pod, byPod map[string]map[string]runtimeContainer,
	layers map[string]*signals.FsUsage, err error) (map[string]signals.PodStats, error) {
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("pod disk stats: writable layers: %w", err))
	}
	names := make([][]string, len(pods))
	for i, p := range pods {
		names[i] = containerNames(p, byPod[p.UID])
	}
	results := w.walkPods(ctx, now, pods, names)
	out := make(map[string]signals.PodStats, len(pods))
	unwalked := 0
	for i, p := range pods {
		r := results[i]
		errs = append(errs, r.errs...)
		if !r.ok {
			if len(r.errs) == 0 {
				unwalked++
			}
			continue
		}
		st := r.st
		for j, name := range names[i] {
			if rc, ok := byPod[p.UID][name]; ok && j < len(st.Containers) {
				st.Containers[j].Rootfs = layers[rc.id]
			}
		}
		out[p.UID] = st
	}
	if unwalked > 0 {
		errs = append(errs, fmt.Errorf("pod disk stats: %d of %d pods not measured before the deadline: %w", unwalked, len(pods), ctx.Err()))
	}
	return out, errors.Join(errs...)
}

// podDirs measures pod's directories: the log directory of each container
// named, in order, and its local volumes. All of them count against one
// budget of du.maxEntries entries, so a pod cannot spread a million files
// over many volumes to cost many times the cap; those walked once it is
// spent fail with errTooMany. Stats stamped now have a container for each
// name (Logs nil when not measured) and the volumes found.
func podDirs(ctx context.Context, du *dirUsage, now time.Time, p signals.Pod, names []string, kubeletRoot, logsDir string) (signals.PodStats, []error) {
	var errs []error
	st := signals.PodStats{UID: p.UID, Time: now}
	// What names a directory must stay one path element: the API server
	// validates names and generates UIDs, but evictd does not walk
	// outside the kubelet's directories on a broken answer's say.
	for _, part := range []string{p.Namespace, p.Name, p.UID} {
		if !pathElement(part) {
			return st, []error{fmt.Errorf("pod %s (UID %q): %q cannot name a directory; its disk usage is not measured", p.Ref(), p.UID, part)}
		}
	}
	logDir := filepath.Join(logsDir, p.Namespace+"_"+p.Name+"_"+p.UID)
	left := du.maxEntries
	for _, name := range names {
		cs := signals.ContainerStats{Name: name}
		if !pathElement(name) {
			errs = append(errs, fmt.Errorf("pod %s container %q: the name cannot name a directory; its logs are not measured", p.Ref(), name))
			st.Containers = append(st.Containers, cs)
			continue
		}
		u, n, err := du.usage(ctx, now, filepath.Join(logDir, name), left)
		left -= n
		if err != nil {
			errs = append(errs, fmt.Errorf("pod %s container %s logs: %w", p.Ref(), name, err))
		} else {
			cs.Logs = &u
		}
		st.Containers = append(st.Containers, cs)
	}
	volumesDir := filepath.Join(kubeletRoot, "pods", p.UID, "volumes")
	for _, v := range p.LocalVolumes {
		if !pathElement(v) {
			errs = append(errs, fmt.Errorf("pod %s volume %q: the name cannot name a directory; not measured", p.Ref(), v))
			continue
		}
		u, n, found, err := volumeUsage(ctx, du, now, volumesDir, v, left)
		left -= n
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("pod %s volume %s: %w", p.Ref(), v, err))
		case found:
			if st.Volumes == nil {
				st.Volumes = map[string]signals.FsUsage{}
			}
			st.Volumes[v] = u
		}
	}
	return st, errs
}

// containerNames lists the pod's containers: those of its spec, then those
// the runtime has that the spec does not name (init containers).
func containerNames(p signals.Pod, rt map[string]runtimeContainer) []string {
	var names []string
	seen := map[string]bool{}
	for _, c := range p.Containers {
		if !seen[c.Name] {
			seen[c.Name] = true
			names = append(names, c.Name)
		}
	}
	for name := range rt {
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	return names
}

// volumeUsage measures the volume's directory below volumesDir in the first
// plugin directory that has it, within limit entries, and returns the
// entries it has; found is false when none has it (a hostPath volume, or
// one not set up yet).
func volumeUsage(ctx context.Context, du *dirUsage, now time.Time, volumesDir, name string, limit int) (signals.FsUsage, int, bool, error) {
	for _, plugin := range volumePluginDirs {
		u, n, err := du.usage(ctx, now, filepath.Join(volumesDir, plugin, name), limit)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		return u, n, err == nil, err
	}
	return signals.FsUsage{}, 0, false, nil
}

// writableLayers returns the runtime's containers by pod UID and container
// name (the running one, else the latest created, as the kubelet picks)
// and their writable layers' usage by container ID (absent when not
// reported). The runtime's memory working sets are not taken: an
// eviction's message quotes the containers' working sets read with their
// pod's (host.PodStatsReader), not these, gathered at another time.
func (c *Client) writableLayers(ctx context.Context) (map[string]map[string]runtimeContainer, map[string]*signals.FsUsage, error) {
	sandboxes, err := c.listPodSandboxes(ctx)
	if err != nil {
		return nil, nil, err
	}
	containers, err := c.listContainers(ctx)
	if err != nil {
		return nil, nil, err
	}
	c.running.learn(sandboxes, containers)
	// Best effort: a container whose stop signal is not known gets
	// SIGTERM from evictd's direct signal, as before the runtime said.
	if err := c.stopSignals.learn(ctx, c.runtimeName, c.containerStatusVerbose, containers); err != nil {
		c.log.Debug("cannot tell some containers' stop signals", "err", err)
	}
	stats, err := c.listContainerStats(ctx)
	if err != nil {
		return nil, nil, err
	}
	byPod, layers := runtimeUsage(sandboxes, containers, stats)
	return byPod, layers, nil
}

// runtimeUsage is writableLayers on the runtime's answers: the containers
// by pod UID (the sandbox's io.kubernetes.pod.uid label, else its
// metadata's UID) and name (the io.kubernetes.container.name label, else
// its metadata's name), and the writable layers reported with both bytes
// and inodes, by container ID. Counts beyond int64 are clamped to
// math.MaxInt64; a container of an unknown sandbox is left out.
func runtimeUsage(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container, stats []*runtimeapi.ContainerStats) (map[string]map[string]runtimeContainer, map[string]*signals.FsUsage) {
	uidOf := sandboxPodUIDs(sandboxes)
	byPod := map[string]map[string]runtimeContainer{}
	for _, ctr := range containers {
		uid := uidOf[ctr.GetPodSandboxId()]
		if uid == "" {
			continue
		}
		name := ctr.GetLabels()[labelContainerName]
		if name == "" {
			name = ctr.GetMetadata().GetName()
		}
		rc := runtimeContainer{id: ctr.GetId(), name: name, created: ctr.GetCreatedAt(), attempt: ctr.GetMetadata().GetAttempt(),
			running: ctr.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING}
		if byPod[uid] == nil {
			byPod[uid] = map[string]runtimeContainer{}
		}
		if old, ok := byPod[uid][name]; !ok || better(rc, old) {
			byPod[uid][name] = rc
		}
	}
	layers := make(map[string]*signals.FsUsage, len(stats))
	for _, s := range stats {
		wl := s.GetWritableLayer()
		if wl.GetUsedBytes() == nil || wl.GetInodesUsed() == nil {
			continue
		}
		layers[s.GetAttributes().GetId()] = &signals.FsUsage{
			Bytes:  clampInt64(wl.GetUsedBytes().GetValue()),
			Inodes: clampInt64(wl.GetInodesUsed().GetValue()),
		}
	}
	return byPod, layers
}

// better reports whether a should stand for its pod's container name rather
// than b: running before not running, then the later created, then the
// later attempt, then the greater ID. The last two make the pick of one of
// several containers created at the same time (a runtime that reports no
// creation times) the same whatever the order the runtime lists them in,
// which for containerd is a map's.
func better(a, b runtimeContainer) bool {
	if a.running != b.running {
		return a.running
	}
	if a.created != b.created {
		return a.created > b.created
	}
	if a.attempt != b.attempt {
		return a.attempt > b.attempt
	}
	return a.id > b.id
}

// clampInt64 is v as an int64, math.MaxInt64 when v is beyond it.
func clampInt64(v uint64) int64 {
	if v > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(v)
}

// MergeDisk copies the disk pieces of disk (Containers' Rootfs and Logs,
// Volumes) into stats, the usage read from the pods' cgroups, keyed by pod
// UID; a pod only in disk is added. It is how one PodStatsSource gives both.
// A container's memory working set is only ever the one read with its pod's
// (stats'): disk, gathered at another time, gives none.
func MergeDisk(stats, disk map[string]signals.PodStats) map[string]signals.PodStats {
	if stats == nil {
		stats = make(map[string]signals.PodStats, len(disk))
	}
	for uid, d := range disk {
		st, ok := stats[uid]
		if !ok {
			st = signals.PodStats{UID: uid, Time: d.Time}
		}
		for _, dc := range d.Containers {
			i := indexOf(st.Containers, dc.Name)
			if i < 0 {
				st.Containers = append(st.Containers, signals.ContainerStats{Name: dc.Name})
				i = len(st.Containers) - 1
			}
			st.Containers[i].Rootfs, st.Containers[i].Logs = dc.Rootfs, dc.Logs
		}
		st.Volumes = d.Volumes
		stats[uid] = st
	}
	return stats
}

func indexOf(cs []signals.ContainerStats, name string) int {
	for i := range cs {
		if cs[i].Name == name {
			return i
		}
	}
	return -1
}

// pathElement reports whether s names exactly one directory entry: not
// empty, not "." or "..", no "/" and no NUL.
func pathElement(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

// sandboxPodUIDs maps each sandbox's ID to its pod's UID: its
// io.kubernetes.pod.uid label, else its metadata's UID.
func sandboxPodUIDs(sandboxes []*runtimeapi.PodSandbox) map[string]string {
	uidOf := make(map[string]string, len(sandboxes))
	for _, s := range sandboxes {
		uid := s.GetLabels()[labelPodUID]
		if uid == "" {
			uid = s.GetMetadata().GetUid()
		}
		uidOf[s.GetId()] = uid
	}
	return uidOf
}
