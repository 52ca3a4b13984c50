package qos

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	kubectlqos "k8s.io/kubectl/pkg/util/qos"
)

// Class is the QoS class Kubernetes gives pod, as submitted or as stored:
// the class of pod with the API server's resource defaults (WithDefaults)
// applied. It ignores pod.Status.QOSClass; pod is not changed.
//
// The rule is Kubernetes 1.37's with the PodLevelResources feature on (its
// default since 1.34): only positive cpu and memory quantities count;
// pod-level resources, when the pod sets any (cpu, memory or hugepages),
// decide alone; otherwise the app and init containers are summed:
// BestEffort when none has a cpu or memory request or limit, Guaranteed
// when every one has both limits and the summed requests equal the summed
// limits, else Burstable. It is k8s.io/kubectl's ComputePodQOS (1.36's)
// with 1.37's fix of an empty spec.resources
// (PodLevelResourcesFixKubeletQOSClass, beta and on in 1.37): 1.36 let it
// decide, and found such a pod BestEffort whatever its containers; 1.37
// leaves the containers to decide. evictd takes the class the API server
// wrote into the pod's status whenever there is one, so only pods without
// it (snapshots, a pod read before the API server set it) follow this
// rule on a 1.36 cluster. The tests pin it.
func Class(pod *v1.Pod) v1.PodQOSClass {
	pod = WithDefaults(pod)
	if pod.Spec.Resources != nil && !resourcehelper.IsPodLevelResourcesSet(pod) {
		p := *pod
		p.Spec.Resources = nil
		pod = &p
	}
	return kubectlqos.ComputePodQOS(pod)
}
