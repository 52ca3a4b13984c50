package cri

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evictd/evictd/signals"
)

// DefaultPendingDeadline is how long FillPending waits at most for the
// runtime and the directories of the pods it reads.
const DefaultPendingDeadline = time.Second

// MaxPending is how many pods FillPending reads at most in one call, so a
// pass before the first background refresh ends (every pod pending) does
// not read the whole node's stats itself.
const MaxPending = 8

// A pod's disk stats are gathered in the background, every few seconds,
// and a pass takes the last ones. A pod that has started since has none
// (or those of before its containers were created: no writable layer, no
// log directory): it ranks as a pod without stats, first for disk
// pressure, and its Evicted event can name no container. FillPending
// reads such pods afresh for the pass that needs them.

// FillPending returns disk, the disk stats a pass has of pods, with those
// of its pending pods read afresh: a pod disk has no stats of, or whose
// stats lack a container of its spec, or a container's writable layer or
// logs. It asks the runtime about those pods alone (their sandboxes,
// containers and container stats by the kubelet's pod UID label: no other
// container's shim is called) and measures their directories, within
// the DiskStats' PendingDeadline, at most MaxPending pods in the order of
// pods. A pod read afresh replaces its entry in disk when it is no longer
// pending or disk had none; disk itself is not changed. The error joins
// what failed.
func (d *DiskStats) FillPending(ctx context.Context, now time.Time, pods []signals.Pod, disk map[string]signals.PodStats) (map[string]signals.PodStats, error) {
	var todo []signals.Pod
	for _, p := range pods {
		if st, ok := disk[p.UID]; !ok || Pending(&p, &st) {
			todo = append(todo, p)
			if len(todo) == MaxPending {
				break
			}
		}
	}
	if len(todo) == 0 {
		return disk, nil
	}
	ctx, cancel := context.WithTimeout(ctx, d.pendingDeadline)
	defer cancel()
	byPod, layers, err := d.c.writableLayersOf(ctx, todo)
	fresh, err := measure(ctx, d.walker, now, todo, byPod, layers, err)
	out := maps.Clone(disk)
	if out == nil {
		out = make(map[string]signals.PodStats, len(fresh))
	}
	for _, p := range todo {
		st, ok := fresh[p.UID]
		if _, had := disk[p.UID]; ok && (!had || !Pending(&p, &st)) {
			out[p.UID] = st
		}
	}
	if err != nil {
		err = fmt.Errorf("pod disk stats of %d pod(s) just started: %w", len(todo), err)
	}
	return out, err
}

// Pending reports whether st, a pod's disk stats, lack what its containers
// give once created: a container of the pod's spec, or a container's
// writable layer or logs. Such stats rank the pod as one without stats
// (ranking.DiskUsage) and name none of its containers.
func Pending(pod *signals.Pod, st *signals.PodStats) bool {
	for _, c := range pod.Containers {
		if indexOf(st.Containers, c.Name) < 0 {
			return true
		}
	}
	for _, c := range st.Containers {
		if c.Rootfs == nil || c.Logs == nil {
			return true
		}
	}
	return false
}

// writableLayersOf is writableLayers for pods alone: each pod's
// sandboxes, containers and container stats listed with the kubelet's pod
// UID label as the filter, so the runtime reads no other container's
// stats. The running containers known for the stop are not learnt from
// it: it is no full listing.
func (c *Client) writableLayersOf(ctx context.Context, pods []signals.Pod) (map[string]map[string]runtimeContainer, map[string]*signals.FsUsage, error) {
	var (
		sandboxes  []*runtimeapi.PodSandbox
		containers []*runtimeapi.Container
		stats      []*runtimeapi.ContainerStats
		errs       []error
	)
	for _, p := range pods {
		sel := map[string]string{labelPodUID: p.UID}
		sb, err := c.listPodSandboxesWith(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ctrs, err := c.listContainersWith(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		st, err := c.listContainerStatsWith(ctx, &runtimeapi.ContainerStatsFilter{LabelSelector: sel})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sandboxes, containers, stats = append(sandboxes, sb...), append(containers, ctrs...), append(stats, st...)
	}
	byPod, layers := runtimeUsage(sandboxes, containers, stats)
	return byPod, layers, errors.Join(errs...)
}
