#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# A grant to an already-gated container does each check once (issue 28):
# the gate by one query against the programs last found settled, the
# proof's layers from the gate step's read, the v1 plan from the target's
# /proc/PID/cgroup, the container's init by the pidfd kept of it; the heal
# check after it looks once. A change in between still gets the full
# check, and the reply stays true.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	make_host -n 3
}
teardown() {
	rm -f "$DG_PINS-rt"
	dg_teardown
}

# traced SET CMD...: runs CMD while strace records devgated's syscalls of
# SET in $DG_TMP/trace; with UNTIL set, then waits until that many
# attached-program queries are in it.
traced() {
	dg_trace_start "$1"
	shift
	"$@"
	[ -z "${UNTIL:-}" ] || wait_until 30 sh -c '[ "$(grep -c "BPF_PROG_QUERY.*query_flags=0," "$0")" -ge "$1" ]' \
		"$DG_TMP/trace" "$UNTIL"
	dg_trace_stop
}

calls() { grep -c "$1" "$DG_TMP/trace" || true; }

# A neighbour for GPU 2, made in the running container's rootfs.
neighbour() { mknod -m 666 "$DG_TMP/c/rootfs/gpu2" c 195 2; }

@test "an already-gated grant: programs queried twice, none opened by id; the init polled; /proc/PID/cgroup read twice; the added node alone made; one map update" {
	# Nothing but the grant looks at the cgroup while traced.
	start_daemon --no-attach-events --heal-ms 0 --recheck-ms 3600000
	container c
	run -0 dg grant --pid "$CPID" --gpu 1
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 dg revoke --pid "$CPID" --gpu 0
	traced bpf,pidfd_open,openat,poll,newfstatat,mknodat dg grant --pid "$CPID" --gpu 0
	[ "$(grants_of "$DG_CGROOT/$CID")" -gt 0 ]
	# The gate: one query of the attached programs, one of those in effect,
	# which the proof shares (main: 5 and 2, and a program opened by id).
	[ "$(calls 'BPF_PROG_QUERY.*query_flags=0,')" = 1 ]
	[ "$(calls 'BPF_PROG_QUERY.*BPF_F_QUERY_EFFECTIVE')" = 1 ]
	[ "$(calls BPF_PROG_GET_FD_BY_ID)" = 0 ]
	# The target's pidfd alone is opened; the init's kept one is polled.
	[ "$(calls pidfd_open)" = 1 ]
	# The target's read, and the proof's at the end; the v1 plan reads none.
	[ "$(calls "\"/proc/$CPID/cgroup\"")" = 2 ]
	# Each of the lease's five nodes looked at in the kept /dev (one the
	# container removed is made again), the added one made and looked at
	# again; the host's /dev is stated only for a helper.
	[ "$(calls 'newfstatat([0-9]*, "nvidia')" = 6 ]
	[ "$(calls mknodat)" = 1 ]
	[ "$(calls 'newfstatat(AT_FDCWD, "/dev",')" = 0 ]
	# The grants map: every node of the lease in one batch (main: one each).
	[ "$(calls BPF_MAP_UPDATE_BATCH)" = 1 ]
	[ "$(calls BPF_MAP_UPDATE_ELEM)" = 0 ]
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidia1 /mem
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidia1 ENXIO" ]
	[ "${lines[2]}" = "/mem EPERM" ]
}

@test "the heal check after a grant looks with one query, and still heals a program attached after it" {
	start_daemon --no-attach-events --recheck-ms 3600000
	container c
	neighbour
	run -0 dg grant --pid "$CPID" --gpu 1
	# The grant and the heal ticks after it (10 ms each): no full check.
	UNTIL=4 traced bpf dg grant --pid "$CPID" --gpu 0
	[ "$(calls BPF_PROG_GET_FD_BY_ID)" = 0 ]
	run -1 grep -q BPF_OBJ_GET_INFO_BY_FD "$DG_TMP/trace"
	# A change is still seen and healed by the next tick.
	bpftool prog load "$DEVGATE_BUILD/runtime_like.bpf.o" "$DG_PINS-rt" type cgroup/dev
	bpftool cgroup attach "$DG_CGROOT/$CID" device pinned "$DG_PINS-rt" multi
	wait_until 10 sh -c '[ "$(bpftool -j cgroup show "$1" | jq -r "[.[].name][-2:] | join(\" \")")" = \
		"devgate_beside devgate_tally" ]' _ "$DG_CGROOT/$CID" || fail "$(bpftool cgroup show "$DG_CGROOT/$CID")"
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidia1 /gpu2
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidia1 ENXIO" ]
	[ "${lines[2]}" = "/gpu2 EPERM" ]
}

# displaced_between MODE: GPU 1 granted, a program attached after devgate's
# by someone else while nothing heals, then GPU 0 granted: the grant must
# find the change itself, and its reply must hold inside.
displaced_between() {
	start_daemon --no-attach-events --heal-ms 0 --recheck-ms 3600000 --gate-mode "$1"
	container c
	neighbour
	run -0 dg grant --pid "$CPID" --gpu 1
	run -0 dg grant --pid "$CPID" --gpu 1 # settled, as the grant found it
	bpftool prog load "$DEVGATE_BUILD/runtime_like.bpf.o" "$DG_PINS-rt" type cgroup/dev
	bpftool cgroup attach "$DG_CGROOT/$CID" device pinned "$DG_PINS-rt" multi
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidia1 /gpu2 /mem
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidia1 ENXIO" ]
	[ "${lines[2]}" = "/gpu2 EPERM" ]
	[ "${lines[3]}" = "/mem EPERM" ]
}

@test "the beside gate displaced between two grants, nothing healing: the second grant puts it last, its reply true" {
	displaced_between beside
	[ "$(cg_prog_names "$DG_CGROOT/$CID" | awk '{ print $(NF-1), $NF }')" = "devgate_beside devgate_tally" ]
	cg_prog_names "$DG_CGROOT/$CID" | grep -q runtime_like
}

@test "gate-mode = replace: a program attached beside the gates between two grants is wrapped by the second, its reply true" {
	displaced_between replace
	[ "$(cg_prog_names "$DG_CGROOT/$CID")" = "devgate_gate devgate_gate devgate_tally" ]
}

# The nodes a grant adds are the only ones it looks at: what an earlier
# grant found in place (kept) stays kept, and the revoke leaves it.
@test "a node made before the grant, kept at it, stays kept through a later grant; the revoke leaves it" {
	start_daemon
	container c
	# Made as the runtime would, from outside the container's device policy.
	nsenter -t "$CPID" -m mknod -m 666 /dev/nvidia1 c 195 1
	run -0 dg grant --pid "$CPID" --gpu 1
	[[ "$output" == *"/dev/nvidia1"*"present"* ]]
	run -0 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"/dev/nvidia0"*"created"* ]]
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidia1 /mem
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidia1 ENXIO" ]
	[ "${lines[2]}" = "/mem EPERM" ]
	run -0 dg revoke --pid "$CPID"
	[[ "$output" == *"/dev/nvidia1"*"kept"* ]]
	[[ "$output" == *"/dev/nvidia0"*"removed"* ]]
	dg_runc exec "$CID" test -c /dev/nvidia1
	run -1 dg_runc exec "$CID" test -e /dev/nvidia0
	run -1 probe "$CID" /dev/nvidia1
	[ "$output" = "/dev/nvidia1 EPERM" ]
}

# grant_key CGROUP MAJOR MINOR: a dg_grant_key (bpf/devgate.h) as bpftool's bytes.
grant_key() {
	python3 -c 'import struct, sys; print(" ".join(str(b) for b in struct.pack("<QIIII", int(sys.argv[1]), 2, int(sys.argv[2]), int(sys.argv[3]), 0)))' \
		"$(stat -c %i "$1")" "$2" "$3"
}

# A grant puts all of the lease's grants again, in one batch: one someone
# deleted from the map meanwhile is back, and the reply holds inside.
@test "a grant entry lost between two grants is back after the second" {
	start_daemon --no-attach-events --heal-ms 0 --recheck-ms 3600000
	container c
	neighbour
	run -0 dg grant --pid "$CPID" --gpu 1
	# shellcheck disable=SC2046
	bpftool map delete pinned "$DG_PINS/dg_grants_v1" key $(grant_key "$DG_CGROOT/$CID" 195 1)
	run -1 probe "$CID" /dev/nvidia1
	[ "$output" = "/dev/nvidia1 EPERM" ]
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidia1 /gpu2
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidia1 ENXIO" ]
	[ "${lines[2]}" = "/gpu2 EPERM" ]
}

# A grant leaves the lease's whole working set in the container: a node it
# holds that the container removed since is made again, and is devgate's.
@test "a held node the container removed is made again by the next grant; the revoke removes it" {
	start_daemon
	container c
	run -0 dg grant --pid "$CPID" --gpu 1
	dg_runc exec "$CID" rm /dev/nvidiactl
	run -1 probe "$CID" /dev/nvidiactl
	[ "$output" = "/dev/nvidiactl ENOENT" ]
	run -0 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"/dev/nvidiactl"*"created"* ]]
	[[ "$output" == *"/dev/nvidia1"*"present"* ]]
	run -1 probe "$CID" /dev/nvidiactl /dev/nvidia0 /dev/nvidia1 /mem
	[ "${lines[0]}" = "/dev/nvidiactl ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[2]}" = "/dev/nvidia1 ENXIO" ]
	[ "${lines[3]}" = "/mem EPERM" ]
	run -0 dg revoke --pid "$CPID"
	[[ "$output" == *"/dev/nvidiactl"*"removed"* ]]
	run -1 dg_runc exec "$CID" test -e /dev/nvidiactl
}
