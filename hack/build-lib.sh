# Shared by hack/build-k8s.sh and hack/build-tools.sh, which source it after
# setting prog (the name their lines start with): what a build of a pinned
# command from a wrapper module under hack/tools needs.

# required_version GOMOD MODULE prints the version GOMOD requires of MODULE.
required_version() {
	local v
	v=$(awk -v m="$2" '($1 == "require" && $2 == m) || ($1 == m && $2 ~ /^v/) { print ($1 == "require" ? $3 : $2); exit }' "$1")
	if [[ -z "$v" ]]; then
		echo "$prog: $1 does not require $2" >&2
		exit 1
	fi
	echo "$v"
}

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
# shared between the commands compile once, in Go's build cache. Build tags,
# if any, are $build_tags.
build() {
	local mod="$1" dest="$2" ldflags="$3"
	shift 3
	local missing=() spec name tmp start
	for spec in "$@"; do
		name=${spec%%=*}
		if [[ -x "$dest/$name" ]]; then
			echo "$prog: $dest/$name present"
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
		echo "$prog: building $dest/$name (the first build takes minutes)"
		(cd "$mod" && go build -mod=readonly -trimpath ${build_tags:+-tags "$build_tags"} -ldflags "$ldflags" -o "$tmp/$name" "${spec#*=}")
		mv -f "$tmp/$name" "$dest/$name"
		echo "$prog: built $name ($((SECONDS - start)) s so far)"
	done
	rm -rf "$tmp"
}
