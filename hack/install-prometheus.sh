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

if ! command -v promtool >/dev/null 2>&1; then
	if [[ $(id -u) -ne 0 ]]; then
		log "promtool missing; run as root: apt-get install -y prometheus" >&2
		[[ "${CI:-}" == "true" ]] && exit 1
		log "the rule tests will skip" >&2
		exit 0
	fi
	export DEBIAN_FRONTEND=noninteractive
	start=$SECONDS
	if ! apt-cache policy prometheus 2>/dev/null | grep -q 'Candidate: [0-9]'; then
		log "apt-get update (no candidate for prometheus)"
		apt-get update -q
	fi

	policy=/usr/sbin/policy-rc.d
	own_policy=false
	if [[ ! -e "$policy" ]]; then
		printf '#!/bin/sh\n# written by evictd hack/install-prometheus.sh during an install\nexit 101\n' >"$policy"
		chmod 0755 "$policy"
		own_policy=true
	fi
	trap 'if $own_policy; then rm -f "$policy"; fi' EXIT

	log "apt-get install -y prometheus"
	if ! apt-get install -y -q --no-install-recommends prometheus; then
		log "install failed; apt-get update and one more try"
		apt-get update -q
		apt-get install -y -q --no-install-recommends prometheus
	fi
	log "installed in $((SECONDS - start)) s"
fi

if ! command -v promtool >/dev/null 2>&1; then
	log "promtool still missing after the install" >&2
	exit 1
fi
log "$(promtool --version 2>&1 | head -n 1)"
