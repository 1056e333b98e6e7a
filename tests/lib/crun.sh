# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# crun containers for the tests, in the same private cgroup2 namespace as
# runc (tests/lib/runc.sh): crun 1.8 refuses the hybrid layout.
#
# crun raises RLIMIT_MEMLOCK unconditionally; where CAP_SYS_RESOURCE is
# missing (this sandbox), memlock_shim.so makes that one call succeed. A
# wrapper script carries the shim, so podman can use it as --runtime too.
#
# Needs: DG_NSDIR, DEVGATE_BUILD.

# dg_crun_wrapper: writes (once) and prints the wrapper's path.
dg_crun_wrapper() {
	local w="$DG_NSDIR/crun-shim"
	if [ ! -x "$w" ]; then
		printf '#!/bin/sh\nLD_PRELOAD=%s exec %s "$@"\n' \
			"$DEVGATE_BUILD/memlock_shim.so" "$(command -v crun)" >"$w"
		chmod 755 "$w"
	fi
	echo "$w"
}

dg_crun() {
	dg_in_ns "$(dg_crun_wrapper)" --root "$DG_NSDIR/crun" "$@"
}

# dg_crun_run ID BUNDLE: starts a detached container; prints its init's host PID.
dg_crun_run() {
	dg_oci_run dg_crun "$@"
}

dg_crun_rm() {
	dg_crun delete -f "$1" >/dev/null 2>&1 || true
}
