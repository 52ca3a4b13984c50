// Package testcluster starts a real Kubernetes control plane for tests (etcd,
// kube-apiserver and optionally kube-controller-manager, built by
// hack/build-k8s.sh) on free loopback ports with generated certificates and
// static bearer tokens, and stops every process it started, by PID.
package testcluster
