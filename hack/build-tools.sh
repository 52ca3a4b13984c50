#!/usr/bin/env bash
# Builds the deployment tools the chart and kustomize tests run from the Go
# module proxy into a git-ignored cache keyed by version:
#
#   .cache/bin/helm-<version>/helm
#   .cache/bin/kustomize-<version>/kustomize
#
# The versions are the ones required by hack/tools/helm/go.mod and
# hack/tools/kustomize/go.mod (wrapper modules, so the main go.mod stays
# small). As hack/build-k8s.sh: binaries already present are kept; new ones
# are built into a temporary directory next to the cache and renamed into
# place; only Go and the module proxy are needed (CGO_ENABLED=0).
#
# Usage: hack/build-tools.sh [--print-env]
#   --print-env  print EVICTD_HELM_BIN=... and EVICTD_KUSTOMIZE_BIN=... and exit
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/hack/tools"

prog=build-tools
# shellcheck source=hack/build-lib.sh
source "$root/hack/build-lib.sh"

helm_version=$(required_version "$tools/helm/go.mod" helm.sh/helm/v3)
kustomize_version=$(required_version "$tools/kustomize/go.mod" sigs.k8s.io/kustomize/kustomize/v5)
helm_dir="$root/.cache/bin/helm-$helm_version"
kustomize_dir="$root/.cache/bin/kustomize-$kustomize_version"

if [[ "${1:-}" == "--print-env" ]]; then
	echo "EVICTD_HELM_BIN=$helm_dir/helm"
	echo "EVICTD_KUSTOMIZE_BIN=$kustomize_dir/kustomize"
	exit 0
elif [[ $# -gt 0 ]]; then
	echo "usage: $0 [--print-env]" >&2
	exit 2
fi

# The version stamps of the tools' own release builds, so `helm version`
# and `kustomize version` report the pinned versions, and helm's default
# Kubernetes version (for a chart's kubeVersion and `lint`'s deprecation
# checks without a cluster) is the one its client-go is from, as helm's
# Makefile sets it (client-go v0.X.Y is Kubernetes 1.X).
client_go=$(required_version "$tools/helm/go.mod" k8s.io/client-go)
k8s_minor=${client_go#v0.}
k8s_minor=${k8s_minor%%.*}
helm_ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
	helm_ldflags+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$k8s_minor"
done
build "$tools/helm" "$helm_dir" "$helm_ldflags" helm=helm.sh/helm/v3/cmd/helm
build "$tools/kustomize" "$kustomize_dir" "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=kustomize/$kustomize_version" \
	kustomize=sigs.k8s.io/kustomize/kustomize/v5
