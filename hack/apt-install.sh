# Sourced by the hack/install-*.sh scripts: apt_install installs Debian
# packages the way every test dependency is installed, as root.
#
# apt_install NAME PACKAGE...
#   As a non-root user it says what to run and returns 0 (the tests that
#   need the packages skip), except under CI=true, where it exits 1. As
#   root it runs `apt-get update` only when apt has no candidate for a
#   package yet (a fresh machine), keeps the packages' scripts from
#   starting any service (a policy-rc.d of its own, removed afterwards),
#   and retries once after `apt-get update` when the install fails on
#   stale package lists. NAME is the calling script's, for its log lines.
apt_install() {
	local name=$1
	shift
	local -a pkgs=("$@")
	if [[ $(id -u) -ne 0 ]]; then
		echo "$name: missing packages: ${pkgs[*]}; run as root: apt-get install -y ${pkgs[*]}" >&2
		[[ "${CI:-}" == "true" ]] && exit 1
		echo "$name: the tests that need them will skip" >&2
		return 0
	fi
	export DEBIAN_FRONTEND=noninteractive
	local start=$SECONDS pkg
	for pkg in "${pkgs[@]}"; do
		if ! apt-cache policy "$pkg" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
			echo "$name: apt-get update (no candidate for $pkg)"
			apt-get update -q
			break
		fi
	done

	local policy=/usr/sbin/policy-rc.d own_policy=false
	if [[ ! -e "$policy" ]]; then
		printf '#!/bin/sh\n# written by evictd hack/apt-install.sh during an install\nexit 101\n' >"$policy"
		chmod 0755 "$policy"
		own_policy=true
	fi
	echo "$name: apt-get install -y ${pkgs[*]}"
	local rc=0
	if ! apt-get install -y -q --no-install-recommends "${pkgs[@]}"; then
		# Package lists older than the mirror name files it no longer has.
		echo "$name: install failed; apt-get update and one more try"
		apt-get update -q
		apt-get install -y -q --no-install-recommends "${pkgs[@]}" || rc=$?
	fi
	if $own_policy; then rm -f "$policy"; fi
	[[ $rc -eq 0 ]] || return $rc
	echo "$name: installed in $((SECONDS - start)) s"
}
