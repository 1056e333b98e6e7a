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
	dg_trace_start openat,renameat,renameat2,unlinkat
	"$@"
	dg_trace_stop
}

# Files written whole (a temporary file renamed into place) in the trace.
writes() {
	grep -c 'openat(.*\.tmp", O_WRONLY|O_CREAT' "$DG_TMP/trace" || true
}

# journals: the journal files left in the state directory.
journals() {
	find "$DG_TMP/state/leases" -maxdepth 1 -name '*.json' -prune -o -type f -print
}

@test "a grant and a revoke each write the record once; a last revoke writes none" {
	traced dg grant --pid "$CPID" --gpu 1
	[ "$(writes)" = 1 ]
	run -1 probe "$CID" /gpu1
	[ "$output" = "/gpu1 ENXIO" ]
	# Already gated: a GPU more, then back.
	traced dg grant --pid "$CPID" --gpu 0
	[ "$(writes)" = 1 ]
	[ "$(dg status --json | jq '.leases[0].gpus | length')" = 2 ]
	traced dg revoke --pid "$CPID" --gpu 0
	[ "$(writes)" = 1 ]
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
	# A journal is renamed in whole, so only an outside hand (or a disk
	# that lost a write) leaves one empty or cut short; either is dropped,
	# since the kernel changes only after the journal is in place.
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
