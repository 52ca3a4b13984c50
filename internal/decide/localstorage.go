package decide

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/ranking"
	"github.com/evictd/evictd/signals"
)

// The pseudo-signals of local-storage limit eviction, the kubelet's metric
// labels for it. They are not thresholds (signals.Signal.Valid rejects
// them); they name why a pod over its own limit was evicted, in Requests
// and in the evictions metric.
const (
	SignalEmptyDirLimit                  signals.Signal = "emptydirfs.limit"
	SignalPodEphemeralStorageLimit       signals.Signal = "ephemeralpodfs.limit"
	SignalContainerEphemeralStorageLimit signals.Signal = "ephemeralcontainerfs.limit"
)

// LocalStorageSignals lists the three pseudo-signals.
func LocalStorageSignals() []signals.Signal {
	return []signals.Signal{SignalEmptyDirLimit, SignalPodEphemeralStorageLimit, SignalContainerEphemeralStorageLimit}
}

// The kubelet's messages for the three local-storage evictions
// (pkg/kubelet/eviction/eviction_manager.go), trailing space included.
const (
	emptyDirMessageFmt                  = "Usage of EmptyDir volume %q exceeds the limit %q. "
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
)

// Violation is a pod over one of its own local-storage limits.
type Violation struct {
	// Signal is one of the three pseudo-signals above.
	Signal signals.Signal `json:"signal"`
	Pod    *signals.Pod   `json:"pod"`
	// Usage and Limit are in bytes.
	Usage int64 `json:"usage"`
	Limit int64 `json:"limit"`
	// Message is the Evicted event's text, in the kubelet's words.
	Message string `json:"message"`
}

// Request is the eviction a violation calls for: at once (1 s grace, the
// kubelet's immediateEvictionGracePeriodSeconds), the node first, without
// annotations.
func (v Violation) Request() Request {
	return Request{Signal: v.Signal, Hard: true, Eviction: Eviction{Pod: v.Pod, GracePeriod: hardEvictionGracePeriodSeconds, Message: v.Message}}
}

// localStorageViolations is the kubelet's localStorageEviction without the
// killing: for each pod, in order, the first of its local-storage limits it
// exceeds, checked as the kubelet checks them:
//
//  1. emptyDir sizeLimit: the volume's measured bytes > its sizeLimit;
//  2. pod ephemeral-storage limit: the pod's rootfs, logs and local volumes
//     (all on one filesystem, whatever the layout) > its limit;
//  3. container ephemeral-storage limit: the container's logs, plus its
//     writable layer unless the layout puts that on a dedicated imagefs,
//     > its limit.
//
// Critical pods are never listed, nor pods without stats; a check whose
// usage was not measured (a volume, container or piece without stats, a
// negative value) is skipped, so missing data never evicts.
func localStorageViolations(pods []signals.Pod, stats map[string]signals.PodStats, layout signals.FsLayout) []Violation {
	var out []Violation
	for i := range pods {
		pod := &pods[i]
		if pod.Critical() {
			continue
		}
		st, ok := stats[pod.UID]
		if !ok {
			continue
		}
		if v, ok := emptyDirViolation(pod, &st); ok {
			out = append(out, v)
			continue
		}
		if v, ok := podLimitViolation(pod, &st); ok {
			out = append(out, v)
			continue
		}
		if v, ok := containerLimitViolation(pod, &st, layout); ok {
			out = append(out, v)
		}
	}
	return out
}

// emptyDirViolation checks the emptyDirs with a sizeLimit, by volume name.
func emptyDirViolation(pod *signals.Pod, st *signals.PodStats) (Violation, bool) {
	names := make([]string, 0, len(pod.EmptyDirLimits))
	for name := range pod.EmptyDirLimits {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		limit := pod.EmptyDirLimits[name]
		u, ok := st.Volumes[name]
		if !ok || limit <= 0 || u.Bytes <= limit {
			continue
		}
		return Violation{Signal: SignalEmptyDirLimit, Pod: pod, Usage: u.Bytes, Limit: limit,
			Message: fmt.Sprintf(emptyDirMessageFmt, name, bytesString(limit))}, true
	}
	return Violation{}, false
}

// podLimitViolation checks the pod's ephemeral-storage limit against its
// whole local disk use: the kubelet's EphemeralStorage stat counts rootfs,
// logs and local volumes whichever filesystem holds them, which is the
// single-filesystem view of ranking.DiskUsage.
func podLimitViolation(pod *signals.Pod, st *signals.PodStats) (Violation, bool) {
	if pod.EphemeralStorageLimit <= 0 {
		return Violation{}, false
	}
	used, _, ok := ranking.DiskUsage(pod, st, signals.NodeFsAvailable, signals.SingleFs)
	if !ok || used <= pod.EphemeralStorageLimit {
		return Violation{}, false
	}
	return Violation{Signal: SignalPodEphemeralStorageLimit, Pod: pod, Usage: used, Limit: pod.EphemeralStorageLimit,
		Message: fmt.Sprintf(podEphemeralStorageMessageFmt, bytesString(pod.EphemeralStorageLimit))}, true
}

// containerLimitViolation checks each measured container, in the stats'
// order, against its own limit.
func containerLimitViolation(pod *signals.Pod, st *signals.PodStats, layout signals.FsLayout) (Violation, bool) {
	limits := map[string]int64{}
	for _, c := range pod.Containers {
		if c.EphemeralStorageLimit > 0 {
			limits[c.Name] = c.EphemeralStorageLimit
		}
	}
	if len(limits) == 0 {
		return Violation{}, false
	}
	for _, cs := range st.Containers {
		limit, ok := limits[cs.Name]
		if !ok || cs.Logs == nil || cs.Logs.Bytes < 0 {
			continue
		}
		used := cs.Logs.Bytes
		if layout != signals.DedicatedImageFs {
			if cs.Rootfs == nil || cs.Rootfs.Bytes < 0 {
				continue
			}
			used = signals.AddSat(used, cs.Rootfs.Bytes)
		}
		if used <= limit {
			continue
		}
		return Violation{Signal: SignalContainerEphemeralStorageLimit, Pod: pod, Usage: used, Limit: limit,
			Message: fmt.Sprintf(containerEphemeralStorageMessageFmt, cs.Name, bytesString(limit))}, true
	}
	return Violation{}, false
}

// bytesString writes a byte count as a binary Kubernetes quantity ("1Gi",
// "500Mi", or plain bytes when no suffix fits), as the kubelet prints the
// limits in its messages.
func bytesString(b int64) string {
	return resource.NewQuantity(b, resource.BinarySI).String()
}
