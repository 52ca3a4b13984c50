package decide

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/ranking"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// The annotations the kubelet puts on its Evicted event, kept so that tools
// reading them keep working.
const (
	annotationOffendingContainers      = "offending_containers"
	annotationOffendingContainersUsage = "offending_containers_usage"
	annotationStarvedResource          = "starved_resource"
	annotationOffendingPod             = "offending_pod"
	annotationOffendingPodUsage        = "offending_pod_usage"
)

// quantity prints bytes or counts the way the kubelet's messages do.
func quantity(v int64, r signals.Resource) string {
	format := resource.BinarySI
	if r == signals.ResourceInodes || r == signals.ResourcePIDs {
		format = resource.DecimalSI
	}
	return resource.NewQuantity(v, format).String()
}

// observed says what o shows, for reasons and condition messages:
// "available 80Mi of 1Gi", or for a stall signal "stall 35.5% of the time".
func observed(o signals.Observation) string {
	if o.Signal.Stall() {
		return "stall " + signals.FormatStall(o.Available) + " of the time"
	}
	res := o.Signal.Resource()
	return "available " + quantity(o.Available, res) + " of " + quantity(o.Capacity, res)
}

// evictionMessage builds the text of the Evicted event and the pod's
// DisruptionTarget condition, in the kubelet's words, and the event's
// annotations naming the containers that used more than they requested.
//
// For memory, a pod with a pod-level memory request (KEP-2837) gets a
// line of its own first, whether or not it used more than that request,
// and the offending_pod annotations, as the kubelet's does. The container
// lines follow in the order of the pod's stats, each container against its
// own request; ephemeral containers, which cannot have requests, are not
// in c.Pod.Containers and are never named.
func evictionMessage(th thresholds.Threshold, obs signals.Observation, c ranking.Candidate) (string, map[string]string) {
	res := th.Signal.Resource()
	var b strings.Builder
	fmt.Fprintf(&b, "The node was low on resource: %s. ", res)
	if th.Signal.Stall() {
		// No kubelet wording exists for a stall; keep the same shape.
		fmt.Fprintf(&b, "Threshold: %s, observed: %s stalled. ", thresholds.Format(th), signals.FormatStall(obs.Available))
	} else {
		fmt.Fprintf(&b, "Threshold quantity: %s, available: %s. ",
			quantity(thresholds.Quantity(th.Value, obs.Capacity), res), quantity(obs.Available, res))
	}

	annotations := map[string]string{}
	if r := c.Pod.PodLevelMemoryRequest; res == signals.ResourceMemory && r != nil &&
		c.Stats != nil && c.Stats.MemoryWorkingSet != nil && *c.Stats.MemoryWorkingSet >= 0 {
		usage := quantity(*c.Stats.MemoryWorkingSet, res)
		fmt.Fprintf(&b, "Pod %s was using %s, request is %s, has larger consumption of %s. ", c.Pod.Name, usage, r.Text, res)
		annotations[annotationOffendingPod] = c.Pod.Name
		annotations[annotationOffendingPodUsage] = usage
	}

	var names, usages []string
	if c.Stats != nil && (res == signals.ResourceMemory || res == signals.ResourceEphemeralStorage) {
		for i := range c.Stats.Containers {
			cs := &c.Stats.Containers[i]
			ctr, ok := container(c.Pod, cs.Name)
			if !ok {
				continue
			}
			usage, ok := containerUsage(cs, res)
			if !ok {
				continue
			}
			request := ctr.MemoryRequest
			if res == signals.ResourceEphemeralStorage {
				request = ctr.EphemeralStorageRequest
			}
			if usage <= request {
				continue
			}
			fmt.Fprintf(&b, "Container %s was using %s, request is %s, has larger consumption of %s. ",
				ctr.Name, quantity(usage, res), quantity(request, res), res)
			names = append(names, ctr.Name)
			usages = append(usages, quantity(usage, res))
		}
	}
	annotations[annotationOffendingContainers] = strings.Join(names, ",")
	annotations[annotationOffendingContainersUsage] = strings.Join(usages, ",")
	annotations[annotationStarvedResource] = string(res)
	return b.String(), annotations
}

// EvictionMessage is evictionMessage for a pod ranked elsewhere: the
// Evicted event's text and annotations, in the kubelet's words, for
// evicting c for th on o. `evictd simulate --kubelet` writes with it what
// the kubelet would have written for the pod its own ranking picks.
func EvictionMessage(th thresholds.Threshold, o signals.Observation, c ranking.Candidate) (string, map[string]string) {
	return evictionMessage(th, o, c)
}

// container is the first of pod's containers named name.
func container(pod *signals.Pod, name string) (signals.Container, bool) {
	for _, ctr := range pod.Containers {
		if ctr.Name == name {
			return ctr, true
		}
	}
	return signals.Container{}, false
}

// containerUsage is one container's use of res: its working set for
// memory, its writable layer plus logs for ephemeral storage (as the
// kubelet's message counts it, whatever the filesystem layout), both
// measured or none: half of it is a figure no pass ranked on, as the
// kubelet's message names no container without both.
func containerUsage(cs *signals.ContainerStats, res signals.Resource) (int64, bool) {
	switch res {
	case signals.ResourceMemory:
		if cs.MemoryWorkingSet == nil || *cs.MemoryWorkingSet < 0 {
			return 0, false
		}
		return *cs.MemoryWorkingSet, true
	case signals.ResourceEphemeralStorage:
		// A negative measurement is no measurement; the sum
		// saturates rather than overflow.
		if cs.Rootfs == nil || cs.Logs == nil || cs.Rootfs.Bytes < 0 || cs.Logs.Bytes < 0 {
			return 0, false
		}
		return signals.AddSat(cs.Rootfs.Bytes, cs.Logs.Bytes), true
	}
	return 0, false
}
