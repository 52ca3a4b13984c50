#!/usr/bin/env bash
# Installs rpm from Debian's packages, if missing: hack/package's test reads
# the .rpm that `make package` builds with it (its files, modes, config
# files and digests), as an RPM-based distribution would.
#
# Idempotent; `apt-get update` only when apt does not know the package yet.
# Run by a non-root user without rpm, it says what to run and exits 0 (the
# test then checks the .rpm's lead alone), except under CI=true, where it
# fails.
#
# Usage: hack/install-rpm.sh   (as root when rpm is missing)
set -euo pipefail

# shellcheck source=hack/apt-install.sh
source "$(dirname "$0")/apt-install.sh"

if ! command -v rpm >/dev/null 2>&1; then
	apt_install install-rpm rpm
fi
echo "install-rpm: $(rpm --version 2>/dev/null || echo 'no rpm')"
