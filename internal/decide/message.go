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

	var names, usages []string
	if c.Stats != nil && (res == signals.ResourceMemory || res == signals.ResourceEphemeralStorage) {
		for _, ctr := range c.Pod.Containers {
			usage, ok := containerUsage(c.Stats, ctr.Name, res)
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
	annotations := map[string]string{
		annotationOffendingContainers:      strings.Join(names, ","),
		annotationOffendingContainersUsage: strings.Join(usages, ","),
		annotationStarvedResource:          string(res),
	}
	return b.String(), annotations
}

// containerUsage is one container's use of res: its working set for
// memory, its writable layer plus logs for ephemeral storage (as the
// kubelet's message counts it, whatever the filesystem layout).
func containerUsage(st *signals.PodStats, name string, res signals.Resource) (int64, bool) {
	for _, cs := range st.Containers {
		if cs.Name != name {
			continue
		}
		switch res {
		case signals.ResourceMemory:
			if cs.MemoryWorkingSet == nil || *cs.MemoryWorkingSet < 0 {
				return 0, false
			}
			return *cs.MemoryWorkingSet, true
		case signals.ResourceEphemeralStorage:
			// A negative measurement is no measurement; the sum
			// saturates rather than overflow.
			var used int64
			measured := false
			for _, u := range []*signals.FsUsage{cs.Rootfs, cs.Logs} {
				if u != nil && u.Bytes >= 0 {
					used, measured = signals.AddSat(used, u.Bytes), true
				}
			}
			return used, measured
		}
	}
	return 0, false
}
