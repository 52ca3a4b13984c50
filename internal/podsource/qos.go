package podsource

import (
	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/qos"
	"github.com/evictd/evictd/signals"
)

// qosClass is the pod's QoS class as the API server stored it in
// status.qosClass, or, when that is empty (a pod that did not come from the
// API server) or not a class ranking knows, computed as Kubernetes does
// (qos.Class, which `evictd simulate` uses too).
func qosClass(pod *v1.Pod, note func(string, ...any)) signals.QOSClass {
	switch c := pod.Status.QOSClass; c {
	case v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort:
		return signals.QOSClass(c)
	case "":
	default:
		note("status.qosClass %q is not a QoS class; computed from the pod's resources instead", c)
	}
	return signals.QOSClass(qos.Class(pod))
}
