#!/usr/bin/env bash
# Builds the real-node tests' "next" lane (issue 26: today's node) from the
# Go module proxy into the git-ignored cache keyed by version, as
# hack/build-k8s.sh builds the default lane's:
#
#   .cache/bin/k8s-<version>/{kube-apiserver,kube-controller-manager,kube-scheduler,kubelet}
#   .cache/bin/containerd-<version>/{containerd,containerd-shim-runc-v2,ctr}
#
# The versions are the ones required by hack/tools/k8s-1.37/go.mod and
# hack/tools/containerd/go.mod. etcd is the default lane's
# (hack/build-k8s.sh). runc and the CNI plugins stay Debian's
# (hack/install-runtime.sh). The lane runs with EVICTD_NODE_LANE=next
# (internal/testing/testnode); `make k8s-bins-next` builds it.
#
# Usage: hack/build-next.sh [--print-env]
#   --print-env  print EVICTD_K8S_NEXT_BIN_DIR=... and
#                EVICTD_CONTAINERD_NEXT_BIN_DIR=... and exit
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/hack/tools"

prog=build-next
# shellcheck source=hack/build-lib.sh
source "$root/hack/build-lib.sh"

k8s_version=$(required_version "$tools/k8s-1.37/go.mod" k8s.io/kubernetes)
containerd_version=$(required_version "$tools/containerd/go.mod" github.com/containerd/containerd/v2)
k8s_dir="$root/.cache/bin/k8s-$k8s_version"
containerd_dir="$root/.cache/bin/containerd-$containerd_version"

if [[ "${1:-}" == "--print-env" ]]; then
	echo "EVICTD_K8S_NEXT_BIN_DIR=$k8s_dir"
	echo "EVICTD_CONTAINERD_NEXT_BIN_DIR=$containerd_dir"
	exit 0
elif [[ $# -gt 0 ]]; then
	echo "usage: $0 [--print-env]" >&2
	exit 2
fi

# The version stamps of Kubernetes' release build, as hack/build-k8s.sh.
minor=${k8s_version#v1.}
minor=${minor%%.*}
k8s_ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	k8s_ldflags+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done

build "$tools/k8s-1.37" "$k8s_dir" "$k8s_ldflags" \
	kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
	kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
	kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
	kubelet=k8s.io/kubernetes/cmd/kubelet

# containerd's own static build, without cgo: no_btrfs leaves out the btrfs
# snapshotter (its library is cgo). The version stamps are those of
# containerd's Makefile, so `containerd --version` reports the pinned one.
containerd_pkg=github.com/containerd/containerd/v2
build_tags="no_btrfs" build "$tools/containerd" "$containerd_dir" \
	"-s -w -X $containerd_pkg/version.Version=$containerd_version -X $containerd_pkg/version.Package=$containerd_pkg" \
	containerd=$containerd_pkg/cmd/containerd \
	containerd-shim-runc-v2=$containerd_pkg/cmd/containerd-shim-runc-v2 \
	ctr=$containerd_pkg/cmd/ctr
