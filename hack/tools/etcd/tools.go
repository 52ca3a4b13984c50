//go:build tools

// Package tools keeps the etcd server command that hack/build-k8s.sh builds in
// this module's go.mod and go.sum.
package tools

import _ "go.etcd.io/etcd/server/v3"
