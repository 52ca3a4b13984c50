//go:build tools

// Package tools keeps the containerd commands that hack/build-k8s.sh builds
// in this module's go.mod and go.sum.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
