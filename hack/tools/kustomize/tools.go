//go:build tools

// Package tools keeps the kustomize command that hack/build-tools.sh builds
// in this module's go.mod and go.sum.
package tools

import _ "sigs.k8s.io/kustomize/kustomize/v5"
