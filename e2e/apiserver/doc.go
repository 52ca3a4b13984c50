// Package apiserver holds the end-to-end tier where the test plays the
// kubelet: the evictd binary of $EVICTD_BIN against a real kube-apiserver
// (internal/testing/testcluster) under deploy/'s ServiceAccount, RBAC and
// admission policy, with its pods' memory in real cgroup v1 pod cgroups
// the test fills (TestAPIServerE2E), or its pods' containers in a real
// containerd on small loop-mounted filesystems (TestDiskE2E). No kubelet
// runs: the test reports pods Running and, once evictd has evicted one,
// stops its containers and removes it, so it can time and pin what a real
// kubelet would blur. Run it with `make e2e-apiserver` (as root); `make
// test` runs it too.
package apiserver
