#!/usr/bin/env bash
# Installs promtool (and prometheus) from Debian's prometheus package, if
# promtool is missing: `make monitoring-check` checks and unit-tests the
# alerting and recording rules of deploy/monitoring with it (bookworm:
# 2.42.0).
#
# Idempotent: with promtool present it only prints its version. It runs
# `apt-get update` only when apt does not know the package yet (a fresh
# machine), or when the install fails on stale package lists. Run by a
# non-root user without promtool, it says so and exits 0 (the rule tests
# skip), except under CI=true, where it fails. No prometheus service is
# started: a policy-rc.d keeps the package's scripts from starting one
# during the install.
#
# Usage: hack/install-prometheus.sh   (as root when promtool is missing)
set -euo pipefail

log() { echo "install-prometheus: $*"; }
# shellcheck source=hack/apt-install.sh
source "$(dirname "$0")/apt-install.sh"

if ! command -v promtool >/dev/null 2>&1; then
	apt_install install-prometheus prometheus
	# Not root: the rule tests skip.
	[[ $(id -u) -eq 0 ]] || exit 0
fi

if ! command -v promtool >/dev/null 2>&1; then
	log "promtool still missing after the install" >&2
	exit 1
fi
log "$(promtool --version 2>&1 | head -n 1)"
