#!/usr/bin/env bash
# Installs what internal/testing/testruntime needs from Debian's packages, if missing:
#
#   containerd, ctr   containerd (bookworm: 1.6.20)
#   runc              runc (bookworm: 1.1.5)
#   mkfs.ext4         e2fsprogs
#   mount, losetup    mount
#   ip                iproute2
#   CNI plugins       containernetworking-plugins (/usr/lib/cni: bridge, host-local, loopback)
#
# Idempotent: with everything present it only prints the versions. It runs
# `apt-get update` only when a package is missing and apt does not know it yet
# (a fresh machine), or when the install fails on stale package lists. Run by
# a non-root user with something missing, it says so and exits 0 (the tests
# that need root skip), except under CI=true, where it fails. No containerd service is started: the tests start their
# own containerd with its own config, root and socket; a policy-rc.d keeps the
# package's scripts from starting one during the install.
#
# Usage: hack/install-runtime.sh   (as root when something is missing)
set -euo pipefail

log() { echo "install-runtime: $*"; }
# shellcheck source=hack/apt-install.sh
source "$(dirname "$0")/apt-install.sh"

# package_for COMMAND prints the Debian package that ships COMMAND.
package_for() {
	case "$1" in
	containerd | ctr) echo containerd ;;
	runc) echo runc ;;
	mkfs.ext4) echo e2fsprogs ;;
	mount | losetup | umount) echo mount ;;
	ip) echo iproute2 ;;
	/usr/lib/cni/bridge) echo containernetworking-plugins ;;
	*) return 1 ;;
	esac
}

# Debian puts mkfs.ext4 in /usr/sbin, which a non-login PATH may lack.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

missing=()
for cmd in containerd ctr runc mkfs.ext4 mount umount losetup ip /usr/lib/cni/bridge; do
	if ! command -v "$cmd" >/dev/null 2>&1; then
		pkg=$(package_for "$cmd")
		[[ " ${missing[*]} " == *" $pkg "* ]] || missing+=("$pkg")
	fi
done

if [[ ${#missing[@]} -gt 0 ]]; then
	apt_install install-runtime "${missing[@]}"
	# Outside CI a non-root `make test` goes on: the tests that need root
	# and containerd skip themselves.
	[[ $(id -u) -eq 0 ]] || exit 0
fi

for cmd in containerd ctr runc mkfs.ext4 mount losetup ip /usr/lib/cni/bridge; do
	if ! command -v "$cmd" >/dev/null 2>&1; then
		log "$cmd still missing after the install" >&2
		exit 1
	fi
done

log "$(containerd --version)"
log "$(runc --version | head -n 1)"
log "ctr $(ctr --version | awk '{print $NF}')"
log "$(mkfs.ext4 -V 2>&1 | head -n 1)"
