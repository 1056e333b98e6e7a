# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# devgated's keeper cgroups (daemon/gate/keeper.h), where it holds the runtime
# programs its gates stand in for. They outlive a stopped devgated on
# purpose; tests and the bench let go of their own.

# dg_keeper_rm CGROOT PINS: detaches the programs of the keeper cgroups of
# the devgated that ran with --pin-root PINS, and removes those cgroups.
dg_keeper_rm() {
	local dir k id
	[ -n "$1" ] && [ -n "$2" ] || return 0
	dir="$1/devgate.keep/${2//\//_}"
	[ -d "$dir" ] || return 0
	for k in "$dir"/k*; do
		[ -d "$k" ] || continue
		for id in $(bpftool -j cgroup show "$k" 2>/dev/null | jq -r '.[].id'); do
			bpftool cgroup detach "$k" device id "$id" 2>/dev/null || true
		done
		rmdir "$k" 2>/dev/null || true
	done
	rmdir "$dir" 2>/dev/null || true
}
