// Package node holds evictd's end-to-end scenarios on a whole real node
// (internal/testing/testnode): a kubelet on containerd with its own
// thresholds off, and the evictd binary beside it under its
// ServiceAccount. TestKubeletV2Node runs such a node in a cgroup v2 guest
// (internal/testing/testvm) against a control plane on this machine. Run
// them with `make e2e-node` or `make e2e` (as root); `make test` runs them
// too, beside every other package (those at a lower CPU priority).
package node
