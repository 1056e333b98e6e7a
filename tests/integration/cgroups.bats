#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Cgroups without a runtime program, and child cgroups of a container.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; start_daemon; }
teardown() { dg_teardown; }

@test "a cgroup with no device program gets the default gate" {
	plain_container p
	cg="$DG_CGROOT/$CID"
	[ -z "$(cg_progs "$cg")" ]
	# Nothing filters devices yet: the ungranted GPU reaches the driver.
	run -1 in_cgroup "$cg" "$CPID" /bin/probe /gpu1
	[ "$output" = "/gpu1 ENXIO" ]

	run -0 dg grant --pid "$CPID" --gpu 0
	[ "$(cg_prog_names "$cg")" = "devgate_gate devgate_tally" ]
	run -1 in_cgroup "$cg" "$CPID" /bin/probe /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -0 in_cgroup "$cg" "$CPID" /bin/probe /dev/null

	run -0 dg revoke --pid "$CPID"
	[ -z "$(cg_progs "$cg")" ]
	run -1 in_cgroup "$cg" "$CPID" /bin/probe /gpu1
	[ "$output" = "/gpu1 ENXIO" ]
}

@test "a process in a child cgroup of the container gets the grant too" {
	container c
	sub="$DG_CGROOT/$CID/sub"
	mkdir "$sub"
	DG_CGROUPS+=("$sub")
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 in_cgroup "$sub" "$CPID" /bin/probe /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -0 dg revoke --pid "$CPID"
	run -1 in_cgroup "$sub" "$CPID" /bin/probe /gpu1
	[ "$output" = "/gpu1 EPERM" ]
}

# The beside form's counterpart is heal.bats' "a program attached after it".
@test "gate-mode = replace: a device program a runtime attaches later is wrapped too" {
	stop_daemon
	start_daemon --gate-mode replace
	container c
	original=$(cg_progs "$DG_CGROOT/$CID")
	run -0 dg grant --pid "$CPID" --gpu 0
	bpftool prog load "$DEVGATE_BUILD/runtime_like.bpf.o" "$DG_PINS-rt" type cgroup/dev
	bpftool cgroup attach "$DG_CGROOT/$CID" device pinned "$DG_PINS-rt" multi
	rm -f "$DG_PINS-rt"
	# The new program alone would deny GPU 0; the periodic check wraps it.
	for _ in $(seq 40); do
		[ "$(cg_prog_names "$DG_CGROOT/$CID")" = "devgate_gate devgate_gate devgate_tally" ] &&
			break
		sleep 0.1
	done
	[ "$(cg_prog_names "$DG_CGROOT/$CID")" = "devgate_gate devgate_gate devgate_tally" ]
	run -1 probe "$CID" /dev/nvidia0 /gpu1 /mem
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "${lines[2]}" = "/mem EPERM" ]
	grep -q "gates re-applied" "$DG_TMP/daemon.log"

	# On revoke both runtime programs come back in place of their gates.
	run -0 dg revoke --pid "$CPID"
	run -0 bpftool -j cgroup show "$DG_CGROOT/$CID"
	[ "$(echo "$output" | jq length)" = 2 ]
	[ "$(echo "$output" | jq -r '.[1].name')" = runtime_like ]
	[ "$(echo "$output" | jq -r '.[0].id')" = "$original" ]
	run -1 probe "$CID" /gpu1
	[ "$output" = "/gpu1 EPERM" ]
}

@test "cgroup2 stacked over the hybrid mount: devgated picks the reachable one; --cgroup-root is checked" {
	stop_daemon
	# In its own mount namespace, cgroup2 on /sys/fs/cgroup hides .../unified.
	unshare -m --propagation private sh -c '
		mount -t cgroup2 none /sys/fs/cgroup &&
		exec "$1" --socket "$2" --state-dir "$3" --pin-root "$4" --host-root "$5"' _ \
		"$DEVGATE_BUILD/devgated" "$DG_SOCK" "$DG_TMP/state" "$DG_PINS" "$DG_HOST" \
		>>"$DG_TMP/daemon.log" 2>&1 &
	DG_DAEMON_PID=$!
	wait_for_daemon
	grep -q "cgroup v2 at /sys/fs/cgroup," "$DG_TMP/daemon.log"
	run -0 dg list
	stop_daemon
	run -14 "$DEVGATE_BUILD/devgated" --socket "$DG_SOCK" --state-dir "$DG_TMP/state" \
		--pin-root "$DG_PINS" --host-root "$DG_HOST" --cgroup-root "$DG_TMP"
	[[ "$output" == *"cgroup-root $DG_TMP is not a cgroup v2 mount"* ]]
}
