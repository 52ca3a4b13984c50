#!/usr/bin/env bash
# Installs what internal/testing/testvm boots a cgroup v2 guest with, from
# Debian's packages, when missing: qemu-system-x86 (qemu-system-x86_64,
# run with TCG: this machine's KVM runs only PVM guest kernels),
# linux-image-amd64 (the guest's kernel and modules, /boot/vmlinuz-*), and
# busybox-static (the guest's initramfs). See ../shared/CGROUP-V2.md.
#
# Idempotent; `apt-get update` only when apt does not know a package yet.
# Run by a non-root user with packages missing, it says what to run and
# exits 0 (the VM tests skip), except under CI=true, where it fails.
#
# Usage: hack/install-vm.sh   (as root when something is missing)
set -euo pipefail

# shellcheck source=hack/apt-install.sh
source "$(dirname "$0")/apt-install.sh"

missing=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
compgen -G '/boot/vmlinuz-*-amd64' >/dev/null || missing+=(linux-image-amd64)
[[ -x /bin/busybox ]] && /bin/busybox --list 2>/dev/null | grep -qx switch_root || missing+=(busybox-static)
if ((${#missing[@]} > 0)); then
	apt_install install-vm "${missing[@]}"
fi
echo "install-vm: $(qemu-system-x86_64 --version 2>/dev/null | head -n 1 || echo 'no qemu'); kernels: $(ls /boot/vmlinuz-*-amd64 2>/dev/null | tr '\n' ' ')"
