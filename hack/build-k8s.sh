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

# required_version GOMOD MODULE prints the version GOMOD requires of MODULE.
required_version() {
	local v
	v=$(awk -v m="$2" '($1 == "require" && $2 == m) || ($1 == m && $2 ~ /^v/) { print ($1 == "require" ? $3 : $2); exit }' "$1")
	if [[ -z "$v" ]]; then
		echo "build-k8s: $1 does not require $2" >&2
		exit 1
	fi
	echo "$v"
}

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

# Builds are static and independent of any go.work above the repo; the
# wrapper modules' committed go.sum must already be complete.
export CGO_ENABLED=0 GOWORK=off

tmp_dirs=()
cleanup() {
	local d
	for d in "${tmp_dirs[@]}"; do rm -rf "$d"; done
}
trap cleanup EXIT

# build MODULE_DIR DEST_DIR LDFLAGS NAME=PACKAGE... builds every NAME missing
# from DEST_DIR into a temporary directory and renames it into place. Packages
# shared between the commands compile once, in Go's build cache.
build() {
	local mod="$1" dest="$2" ldflags="$3"
	shift 3
	local missing=() spec name tmp start
	for spec in "$@"; do
		name=${spec%%=*}
		if [[ -x "$dest/$name" ]]; then
			echo "build-k8s: $dest/$name present"
		else
			missing+=("$spec")
		fi
	done
	[[ ${#missing[@]} -eq 0 ]] && return 0

	mkdir -p "$dest"
	tmp=$(mktemp -d "$dest/.build.XXXXXX")
	tmp_dirs+=("$tmp")
	start=$SECONDS
	for spec in "${missing[@]}"; do
		name=${spec%%=*}
		echo "build-k8s: building $dest/$name (the first build takes minutes)"
		(cd "$mod" && go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$tmp/$name" "${spec#*=}")
		mv -f "$tmp/$name" "$dest/$name"
		echo "build-k8s: built $name ($((SECONDS - start)) s so far)"
	done
	rm -rf "$tmp"
}

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
