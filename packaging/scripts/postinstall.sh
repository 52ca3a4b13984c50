#!/bin/sh
# After install or upgrade (deb: configure; rpm: $1 is 1 or 2). Enables
# nothing. /etc/evictd holds credentials: root's alone, also when it
# existed before the package (make install, by hand).
set -e
chmod 0700 /etc/evictd
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
	# An upgrade: restart a running evictd on the new binary.
	systemctl try-restart evictd.service || true
fi
