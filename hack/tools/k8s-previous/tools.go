//go:build tools

// Package tools keeps the previous lane's Kubernetes commands in this
// module's go.mod and go.sum; hack/build-k8s.sh builds only its kubelet.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
