// Package testnode brings up a whole Kubernetes node on this machine for the
// end-to-end tests, the demo and the side-by-side benchmark: the control
// plane of internal/testing/testcluster (with the controller manager and the
// scheduler), a containerd of internal/testing/testruntime with a pod network, a
// real kubelet on it, and evictd beside the kubelet as its own process under
// the ServiceAccount of deploy/rbac.yaml, as on a production node.
package testnode
