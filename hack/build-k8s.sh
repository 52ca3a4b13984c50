#!/usr/bin/env bash
# Builds the test control plane's binaries from the Go module proxy into a
# git-ignored cache keyed by version:
#
#   .cache/bin/k8s-<version>/{kube-apiserver,kube-controller-manager,kube-scheduler,kubelet}
#   .cache/bin/etcd-<version>/etcd
#
# The versions are the ones required by hack/tools/k8s/go.mod and
# hack/tools/etcd/go.mod (wrapper modules, so the main go.mod stays small).
# Binaries already present are kept; new ones are built into a temporary
# directory next to the cache and renamed into place, so an interrupted build
# never leaves a broken binary behind. Needs only Go and the module proxy
# (CGO_ENABLED=0: no C toolchain).
#
# Usage: hack/build-k8s.sh [--print-env]
#   --print-env  print EVICTD_K8S_BIN_DIR=... and EVICTD_ETCD_BIN=... and exit
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/hack/tools"

prog=build-k8s
# shellcheck source=hack/build-lib.sh
source "$root/hack/build-lib.sh"

k8s_version=$(required_version "$tools/k8s/go.mod" k8s.io/kubernetes)
etcd_version=$(required_version "$tools/etcd/go.mod" go.etcd.io/etcd/server/v3)
k8s_dir="$root/.cache/bin/k8s-$k8s_version"
etcd_dir="$root/.cache/bin/etcd-$etcd_version"

if [[ "${1:-}" == "--print-env" ]]; then
	echo "EVICTD_K8S_BIN_DIR=$k8s_dir"
	echo "EVICTD_ETCD_BIN=$etcd_dir/etcd"
	exit 0
elif [[ $# -gt 0 ]]; then
	echo "usage: $0 [--print-env]" >&2
	exit 2
fi

# The version stamps Kubernetes' own release build sets (hack/lib/version.sh),
# so the binaries and the nodes they register report the real version.
minor=${k8s_version#v1.}
minor=${minor%%.*}
k8s_ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	k8s_ldflags+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done

build "$tools/etcd" "$etcd_dir" "-s -w" \
	etcd=go.etcd.io/etcd/server/v3
build "$tools/k8s" "$k8s_dir" "$k8s_ldflags" \
	kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
	kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
	kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
	kubelet=k8s.io/kubernetes/cmd/kubelet
