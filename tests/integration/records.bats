#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# A request writes its lease's record once (daemon/lease/state.c): the
# journal written first becomes the record by a rename, and a full revoke
# moves the record aside as its journal. faults.bats crashes each step.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	start_daemon
	container c
	# The bundle's /gpu1 (195:1): EPERM unless granted, ENXIO (no driver) when it is.
}
teardown() { dg_teardown; }

# traced CMD...: runs CMD while strace records devgated's file calls in $DG_TMP/trace.
traced() {
	rm -f "$DG_TMP/trace"
	strace -qq -e trace=openat,renameat,renameat2,unlinkat -o "$DG_TMP/trace" \
		-p "$DG_DAEMON_PID" 3>&- &
	local tracer=$!
	wait_until 10 sh -c "! grep -q '^TracerPid:[[:space:]]*0$' /proc/$DG_DAEMON_PID/status"
	"$@"
	kill "$tracer"
	wait "$tracer" || true
}

# Files written in the trace: a record whole (a temporary file renamed into
# place), a journal in place.
writes() {
	grep -cE 'openat\(.*(\.tmp|\.pending|\.revoke-to)", O_WRONLY\|O_CREAT' "$DG_TMP/trace" || true
}

# Renames in the trace: the journal's onto the record is the one a request needs.
renames() {
	grep -c '^renameat' "$DG_TMP/trace" || true
}

# journals: the journal files left in the state directory.
journals() {
	find "$DG_TMP/state/leases" -maxdepth 1 -name '*.json' -prune -o -type f -print
}

@test "a grant and a revoke each write the record once; a last revoke writes none" {
	traced dg grant --pid "$CPID" --gpu 1
	[ "$(writes)" = 1 ]
	[ "$(renames)" = 1 ]
	run -1 probe "$CID" /gpu1
	[ "$output" = "/gpu1 ENXIO" ]
	# Already gated: a GPU more, then back.
	traced dg grant --pid "$CPID" --gpu 0
	[ "$(writes)" = 1 ]
	[ "$(renames)" = 1 ]
	[ "$(dg status --json | jq '.leases[0].gpus | length')" = 2 ]
	traced dg revoke --pid "$CPID" --gpu 0
	[ "$(writes)" = 1 ]
	[ "$(renames)" = 1 ]
	run -1 probe "$CID" /gpu1 /dev/nvidia0
	[ "${lines[0]}" = "/gpu1 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidia0 ENOENT" ]
	[ -z "$(journals)" ]
	# What is on disk is what a restart reads.
	stop_daemon
	start_daemon
	[ "$(dg status --json | jq -c '[.leases[0].gpus[].index]')" = "[1]" ]
	traced dg revoke --pid "$CPID"
	[ "$(writes)" = 0 ]
	[ "$(renames)" = 1 ]
	run -1 probe "$CID" /gpu1
	[ "$output" = "/gpu1 EPERM" ]
	[ -z "$(journals)" ]
	[ -z "$(find "$DG_TMP/state/leases" -maxdepth 1 -name '*.json')" ]
	stop_daemon
	start_daemon
	[ "$(dg status --json | jq '.leases | length')" = 0 ]
}

@test "a request checks that leases/ is in place with one lstat, not an fstat of the open directory" {
	rm -f "$DG_TMP/trace"
	strace -qq -y -e trace=fstat,newfstatat,lstat -o "$DG_TMP/trace" -p "$DG_DAEMON_PID" 3>&- &
	tracer=$!
	wait_until 10 sh -c "! grep -q '^TracerPid:[[:space:]]*0$' /proc/$DG_DAEMON_PID/status"
	dg grant --pid "$CPID" --gpu 1
	dg revoke --pid "$CPID" --gpu 1
	kill "$tracer"
	wait "$tracer" || true
	run -1 probe "$CID" /gpu1
	[ "$output" = "/gpu1 EPERM" ]
	# The path is looked at before each write and rename ...
	[ "$(grep -c "\"$DG_TMP/state/leases\"" "$DG_TMP/trace")" -ge 2 ]
	# ... and the descriptor, whose inode cannot change, not at all.
	run ! grep -E "^(fstat|newfstatat)\([0-9]+<$DG_TMP/state/leases>, \"\"" "$DG_TMP/trace"
}

@test "a journal that a crash left empty or cut short is dropped: the lease keeps its record and GPU" {
	run -0 dg grant --pid "$CPID" --gpu 1
	cgid=$(dg status --json | jq -r '.leases[0].cgroup_id')
	[ -n "$cgid" ] && [ "$cgid" != null ]
	stop_daemon
	# Journals are written in place: a crash between the open and the write
	# leaves one empty, and none is cut short by a crash mid-write unless
	# write() was; either is dropped, since the kernel changes after it.
	: >"$DG_TMP/state/leases/$cgid.revoke-to"
	head -c 20 "$DG_TMP/state/leases/$cgid.json" >"$DG_TMP/state/leases/$cgid.pending"
	start_daemon
	[ -z "$(journals)" ]
	[ "$(dg status --json | jq -c '[.leases[0].gpus[].index]')" = "[1]" ]
	run -1 probe "$CID" /gpu1
	[ "$output" = "/gpu1 ENXIO" ]
	grep -q "dropping unreadable journal.*$cgid.revoke-to" "$DG_TMP/daemon.log"
	grep -q "dropping unreadable journal.*$cgid.pending" "$DG_TMP/daemon.log"
	run -0 dg revoke --pid "$CPID"
	run -1 probe "$CID" /gpu1
	[ "$output" = "/gpu1 EPERM" ]
}

@test "a grant that finds a node in place writes its journal again through a temporary file" {
	# /dev/nvidia0 is in the container already (made from the host, past
	# the runtime's program): the grant keeps it, and says so in its journal
	# again once its nodes are made.
	nsenter -t "$CPID" -m mknod /dev/nvidia0 c 195 0
	traced dg grant --pid "$CPID" --gpu 0
	# The new journal in place; the one written again renamed in, so a
	# crash while it is written leaves the first whole.
	[ "$(grep -c '\.pending", O_WRONLY|O_CREAT|O_EXCL.* = [0-9]' "$DG_TMP/trace")" = 1 ]
	[ "$(grep -c 'openat(.*\.pending\.tmp", O_WRONLY|O_CREAT' "$DG_TMP/trace")" = 1 ]
	[ "$(renames)" = 2 ]
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	run -0 dg revoke --pid "$CPID"
	# Kept: the container's own node stays, denied again.
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 EPERM" ]
	[ -z "$(journals)" ]
}
