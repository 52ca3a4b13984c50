#!/bin/sh
# Before removal (deb: $1 is remove; rpm: $1 is 0), not before an upgrade:
# stop evictd and its socket (which would start it again) and disable both,
# so no link to a removed unit is left behind.
set -e
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl stop evictd.socket evictd.service || true
	fi
	if command -v systemctl >/dev/null 2>&1; then
		systemctl --no-reload disable evictd.socket evictd.service >/dev/null 2>&1 || true
	fi
	;;
esac
