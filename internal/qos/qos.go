package qos

import (
	v1 "k8s.io/api/core/v1"
	kubectlqos "k8s.io/kubectl/pkg/util/qos"
)

// Class is the QoS class Kubernetes gives pod, as submitted or as stored:
// the class of pod with the API server's resource defaults (WithDefaults)
// applied. It ignores pod.Status.QOSClass; pod is not changed.
//
// The rule is k8s.io/kubectl's ComputePodQOS, Kubernetes 1.36's rule with
// the PodLevelResources feature on (its default since 1.34): only positive
// cpu and memory quantities count; pod-level resources, when the pod sets
// them, decide alone; otherwise the app and init containers are summed:
// BestEffort when none has a cpu or memory request or limit, Guaranteed
// when every one has both limits and the summed requests equal the summed
// limits, else Burstable. The tests pin that rule.
func Class(pod *v1.Pod) v1.PodQOSClass {
	return kubectlqos.ComputePodQOS(WithDefaults(pod))
}
