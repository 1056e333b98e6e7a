# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh
# Sourced by packaging/mkdeb.sh and packaging/chroot-build.sh (from the
# source tree): what goes into the package, and a digest of it that says
# whether a .deb built earlier is still current.

# dg_sources [BUILD_DIR]: the files that go into the package, NUL-separated:
# what git tracks or would; outside git, all but build trees.
dg_sources() {
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files -z --cached --others --exclude-standard |
			xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh
	else
		find . \( -path ./build -o -path ./build-asan -o -path "./${1:-build}" -o -path ./.git \) \
			-prune -o -type f -print0
	fi
}

# dg_inputs [BUILD_DIR]: a digest of those files' names, sizes and times: an
# edit, a new file or a removed one changes it.
dg_inputs() {
	dg_sources "$@" | xargs -0 stat -c '%n %s %Y' | sort | sha256sum | cut -c1-64
}

# dg_current DEB INPUTS: DEB exists and was built from INPUTS (its stamp).
dg_current() {
	[ -f "$1" ] && [ "$(cat "$1.inputs" 2>/dev/null)" = "$2" ]
}
