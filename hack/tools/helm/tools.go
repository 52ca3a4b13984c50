//go:build tools

// Package tools keeps the helm command that hack/build-tools.sh builds in
// this module's go.mod and go.sum.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
