#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# A pure cgroup v1 host (no cgroup v2 mounted at all; tests/lib/v1host.sh):
# devgated starts there and says what that means, and a grant never
# answers "granted" while the kernel still denies.

load helpers
# shellcheck source=../lib/v1host.sh
. "$DG_ROOT/tests/lib/v1host.sh"

setup_file() {
	export DG_V1HOST="/run/dg29v1-test.$$"
	if [ "$(id -u)" = 0 ] && command -v runc >/dev/null; then
		v1host_setup
	fi
}

teardown_file() {
	v1host_teardown
}

setup() {
	dg_setup
	requires runc cgroup1
	DG_ID="dg29v1-$DG_ID"
	DG_PINS="/sys/fs/bpf/$DG_ID"
	DG_V1=$(v1_mount)
	V1H_RUNCS=()
	V1H_UNIFIED=
	v1h_daemon --runc-root "$DG_V1HOST/runc"
}

teardown() {
	v1h_rm
	# Lazily: devgated still holds the mount open until dg_teardown stops it.
	[ -z "$V1H_UNIFIED" ] || v1h umount -l "$V1H_UNIFIED"
	dg_teardown
}

# Both sides, as the kernel answers inside: neither GPU reaches the driver,
# devgate made no node, and the runtime's list is as it was.
nothing_granted() {
	local before=$1
	run -1 v1h_probe "$CID" /gpu0 /gpu1 /dev/nvidia0
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "${lines[2]}" = "/dev/nvidia0 ENOENT" ]
	[ "$(cat "$V1DIR/devices.list")" = "$before" ]
	run -0 dg status --json
	[ "$(echo "$output" | jq '.leases | length')" = 0 ]
}

@test "v1 host: devgated starts with no cgroup v2 and says in its log what that means and why each grant is refused" {
	run -1 v1h grep -q ' - cgroup2 ' /proc/self/mountinfo
	grep -q "warning: cgroup v1 devices at $DG_V1: this host has no cgroup v2, only cgroup v1" "$DG_TMP/daemon.log"
	grep -q "does not gate through v1 devices alone (no per-access counters, no proof through a BPF view); every grant is refused" "$DG_TMP/daemon.log"
	run -0 dg status --json
	[ "$(echo "$output" | jq '.leases | length')" = 0 ]
}

@test "v1 host: a grant by PID, v1 cgroup or runc name is refused (exit 6, the reason, a hint) and changes nothing: both GPUs stay EPERM inside, no node, devices.list as before" {
	local before
	v1h_container a
	v1h_legacy
	before=$(cat "$V1DIR/devices.list")
	run -6 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"PID $CPID cannot be gated: this host has no cgroup v2, only cgroup v1;"* ]]
	[[ "$output" == *"hint: mount cgroup v2 beside v1 ('mount -t cgroup2 none /sys/fs/cgroup/unified')"* ]]
	nothing_granted "$before"
	run -6 dg grant --cgroup "/$CID" --gpu 0
	[[ "$output" == *"cgroup /$CID cannot be gated: this host has no cgroup v2"* ]]
	run -6 dg grant --container "$CID" --gpu 0
	[[ "$output" == *"container '$CID' cannot be gated: this host has no cgroup v2"* ]]
	nothing_granted "$before"
}

@test "v1 host: doctor says there is no cgroup v2, that devgated refuses every grant, and how to get one" {
	local cg2 mech
	run -1 v1h "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" doctor --json
	cg2=$(echo "$output" | jq -r '.checks[] | select(.name == "cgroup2")')
	[ "$(echo "$cg2" | jq -r .status)" = fail ]
	[[ "$(echo "$cg2" | jq -r .message)" == "no cgroup v2 hierarchy is mounted, only cgroup v1 (devices at $DG_V1): devgated runs and refuses every grant"* ]]
	[[ "$(echo "$cg2" | jq -r .hint)" == "mount cgroup v2 beside v1"* ]]
	mech=$(echo "$output" | jq -r '.checks[] | select(.name == "mechanism")')
	[ "$(echo "$mech" | jq -r .status)" = fail ]
	[ "$(echo "$mech" | jq -r .message)" = "no lease, and no grant can be had: with no cgroup v2, devgated refuses each (v1 devices $DG_V1 are not gated alone)" ]
}

@test "v1 host: the hint works: with cgroup2 mounted beside v1, devgated and the container started again, the grant reaches the driver, the neighbour stays denied, and revoke leaves devices.list as it was" {
	local before
	V1H_UNIFIED=/sys/fs/cgroup/unified
	v1h mount -t cgroup2 none "$V1H_UNIFIED"
	stop_daemon
	v1h_daemon --runc-root "$DG_V1HOST/runc"
	v1h_container b
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	[ "$(grep '^0::' "/proc/$CPID/cgroup")" = "0::/$CID" ]
	before=$(cat "$V1DIR/devices.list")
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 v1h_probe "$CID" /gpu0 /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[2]}" = "/gpu1 EPERM" ]
	run -0 dg revoke --pid "$CPID"
	run -1 v1h_probe "$CID" /gpu0
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	[ "$(cat "$V1DIR/devices.list")" = "$before" ]
}
