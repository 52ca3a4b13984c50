package kubeclient

import v1 "k8s.io/api/core/v1"

// ContainersRunning reports whether pod's status names a container, of any
// kind, still running: the kubelet writes a container's stop once it has
// seen it, so a terminal phase beside a running container means the
// containers have not all stopped yet.
func ContainersRunning(pod *v1.Pod) bool {
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, cs := range list {
			if cs.State.Running != nil {
				return true
			}
		}
	}
	return false
}
