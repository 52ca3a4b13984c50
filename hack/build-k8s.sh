#!/usr/bin/env bash
# Builds the tests' Kubernetes, etcd and containerd from the Go module proxy
# into a git-ignored cache keyed by version:
#
#   .cache/bin/k8s-<version>/{kube-apiserver,kube-controller-manager,kube-scheduler,kubelet}
#   .cache/bin/k8s-<previous version>/kubelet
#   .cache/bin/containerd-<version>/{containerd,containerd-shim-runc-v2,ctr}
#   .cache/bin/etcd-<version>/etcd
#
# The control plane and the real-node tests' default kubelet are those of
# hack/tools/k8s/go.mod, with the containerd of hack/tools/containerd/go.mod
# (today's node). The previous lane's kubelet (EVICTD_NODE_LANE=previous,
# with the node's packaged containerd) is hack/tools/k8s-previous/go.mod's;
# etcd is hack/tools/etcd/go.mod's. Wrapper modules, so the main go.mod
# stays small; the versions live there alone. runc and the CNI plugins are
# Debian's (hack/install-runtime.sh).
#
# Binaries already present are kept; new ones are built into a temporary
# directory next to the cache and renamed into place, so an interrupted build
# never leaves a broken binary behind. Needs only Go and the module proxy
# (CGO_ENABLED=0: no C toolchain).
#
# Usage: hack/build-k8s.sh [--print-env | all | node | previous]
#   --print-env  print the directories the tests take them from and exit
#   all          build everything (the default)
#   node         only what today's node needs: etcd, the control plane, the
#                default kubelet and containerd
#   previous     only the previous lane's kubelet
# make test builds node first and previous beside the default lane's tests.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/hack/tools"

prog=build-k8s
# shellcheck source=hack/build-lib.sh
source "$root/hack/build-lib.sh"

k8s_version=$(required_version "$tools/k8s/go.mod" k8s.io/kubernetes)
previous_version=$(required_version "$tools/k8s-previous/go.mod" k8s.io/kubernetes)
containerd_version=$(required_version "$tools/containerd/go.mod" github.com/containerd/containerd/v2)
etcd_version=$(required_version "$tools/etcd/go.mod" go.etcd.io/etcd/server/v3)
k8s_dir="$root/.cache/bin/k8s-$k8s_version"
previous_dir="$root/.cache/bin/k8s-$previous_version"
containerd_dir="$root/.cache/bin/containerd-$containerd_version"
etcd_dir="$root/.cache/bin/etcd-$etcd_version"

if [[ "${1:-}" == "--print-env" ]]; then
	echo "EVICTD_K8S_BIN_DIR=$k8s_dir"
	echo "EVICTD_K8S_PREVIOUS_BIN_DIR=$previous_dir"
	echo "EVICTD_CONTAINERD_BIN_DIR=$containerd_dir"
	echo "EVICTD_ETCD_BIN=$etcd_dir/etcd"
	exit 0
fi
which=${1:-all}
if [[ $# -gt 1 ]] || [[ ! "$which" =~ ^(all|node|previous)$ ]]; then
	echo "$prog: unknown arguments \"$*\"; usage: $0 [--print-env | all | node | previous]" >&2
	exit 2
fi

# k8s_ldflags VERSION prints the version stamps Kubernetes' own release build
# sets (hack/lib/version.sh), so the binaries and the nodes they register
# report the real version.
k8s_ldflags() {
	local minor=${1#v1.} flags="-s -w" p
	minor=${minor%%.*}
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		flags+=" -X $p.gitVersion=$1 -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
	done
	echo "$flags"
}

build_node() {
	build "$tools/etcd" "$etcd_dir" "-s -w" \
		etcd=go.etcd.io/etcd/server/v3
	build "$tools/k8s" "$k8s_dir" "$(k8s_ldflags "$k8s_version")" \
		kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
		kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
		kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
		kubelet=k8s.io/kubernetes/cmd/kubelet

	# containerd's own static build, without cgo: no_btrfs leaves out the
	# btrfs snapshotter (its library is cgo). The version stamps are those
	# of containerd's Makefile, so `containerd --version` reports the
	# pinned one.
	local pkg=github.com/containerd/containerd/v2
	build_tags="no_btrfs" build "$tools/containerd" "$containerd_dir" \
		"-s -w -X $pkg/version.Version=$containerd_version -X $pkg/version.Package=$pkg" \
		containerd=$pkg/cmd/containerd \
		containerd-shim-runc-v2=$pkg/cmd/containerd-shim-runc-v2 \
		ctr=$pkg/cmd/ctr
}

build_previous() {
	build "$tools/k8s-previous" "$previous_dir" "$(k8s_ldflags "$previous_version")" \
		kubelet=k8s.io/kubernetes/cmd/kubelet
}

case $which in
all) build_node; build_previous ;;
node) build_node ;;
previous) build_previous ;;
esac
