#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# A gate displaced by someone else (systemd's daemon-reload, runc update,
# another agent) is put back at once: on the attach event where the kernel
# allows tracing programs, else by the heal check (--heal-ms, 10 ms); no
# denied device is let through meanwhile.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; }
teardown() {
	rm -f "$DG_PINS-rt"
	dg_teardown
}

# displaced ROUNDS LABEL [OPTION]: displaces the gate of the leased container
# c ROUNDS times (OPTION: displace's -r); figures in $output, the summary
# line printed for the log.
displaced() {
	bpftool prog load "$DEVGATE_BUILD/runtime_like.bpf.o" "$DG_PINS-rt" type cgroup/dev
	# GPU 0 is granted; GPU 1 is denied by the gate and by runtime_like alike.
	run "$DEVGATE_BUILD/displace" -n "$1" ${3:+"$3"} "$DG_CGROOT/$CID" "$DG_PINS-rt" \
		"$DG_HOST/dev/nvidia0" "$DG_HOST/dev/nvidia1"
	echo "# $2: $(echo "$output" | grep '^heal_us')" >&3
	[ -z "${DEVGATE_HEAL_VERBOSE:-}" ] || echo "$output" | sed 's/^/# /' >&3
	if [ -n "${DEVGATE_HEAL_RESULTS:-}" ]; then
		echo "$2 $(echo "$output" | grep '^heal_us')" >>"$DEVGATE_HEAL_RESULTS"
	fi
}

@test "gate-mode = replace: a displaced gate is healed at once, every time, no denied device let through" {
	# An hour between re-checks: only an event or the heal check can heal.
	start_daemon --recheck-ms 3600000 --gate-mode replace
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	rounds=${DEVGATE_HEAL_ROUNDS:-100}
	mode=$(grep -o 'healed on attach events\|found by a check every [0-9]* ms' "$DG_TMP/daemon.log")
	displaced "$rounds" "$mode, $rounds rounds"
	[ "$status" = 0 ] || fail "$(tail -3 <<<"$output") $(bpftool cgroup show "$DG_CGROOT/$CID") $(grep -v libbpf "$DG_TMP/daemon.log" | tail -5)"
	[ "$(echo "$output" | grep -c '^round ')" = "$rounds" ]
	[[ "$output" != *violations* ]]
	[ "$(grep -c 'device programs of .*; gates re-applied' "$DG_TMP/daemon.log")" -ge "$rounds" ]
	run -1 grep -q 'at the periodic check' "$DG_TMP/daemon.log"
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "$(cg_prog_names "$DG_CGROOT/$CID")" = "devgate_gate devgate_tally" ]
	# The revoke hands back the program that displaced the gate.
	run -0 dg revoke --pid "$CPID"
	[ "$(cg_prog_names "$DG_CGROOT/$CID")" = runtime_like ]
	run -1 probe "$CID" /gpu1
	[ "$output" = "/gpu1 EPERM" ]
}

# The beside gate (the default gate-mode) is not detached by anyone: a program
# attached after it decides after it, and GPU 0 is denied until the heal
# moves the gate to last place again (fail closed).
@test "the beside gate, a program attached after it: healed at once, every time" {
	start_daemon --recheck-ms 3600000
	container c
	rt=$(cg_progs "$DG_CGROOT/$CID")
	run -0 dg grant --pid "$CPID" --gpu 0
	gated_beside "$DG_CGROOT/$CID" "$rt"
	rounds=${DEVGATE_HEAL_ROUNDS:-100}
	displaced "$rounds" "beside gate, $rounds rounds" -r
	[ "$status" = 0 ] || fail "$(tail -3 <<<"$output") $(bpftool cgroup show "$DG_CGROOT/$CID")"
	[ "$(echo "$output" | grep -c '^round ')" = "$rounds" ]
	[[ "$output" != *violations* ]]
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "$(cg_prog_names "$DG_CGROOT/$CID")" = " devgate_mark runtime_like devgate_beside devgate_tally" ]
	gated_beside "$DG_CGROOT/$CID" "$rt $(cg_foreign "$DG_CGROOT/$CID" | awk '{ print $NF }')"
	run -0 dg revoke --pid "$CPID"
	[ "$(cg_prog_names "$DG_CGROOT/$CID")" = " runtime_like" ]
	[ "$(cg_progs "$DG_CGROOT/$CID" | awk '{ print $1 }')" = "$rt" ]
}

# The heal check's timer, once expired, waits for the loop: a grant that
# lands meanwhile must not arm it again (that cleared the expiry, so grants
# arriving back to back put the check off for as long as they went on).
# Each grant here pauses 400 ms at grant.pending, four heal periods, so the
# timer always expires while one is in hand.
@test "grants to another container arriving back to back do not put the heal check off" {
	DEVGATE_FAULT=grant.pending:pause=400 start_daemon --no-attach-events --heal-ms 100 \
		--recheck-ms 3600000
	container b
	busy=$CPID
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	touch "$DG_TMP/busy.go"
	# GPU 1 comes and goes on b: every grant is a first one ("granted").
	while [ -e "$DG_TMP/busy.go" ]; do
		dg grant --pid "$busy" --gpu 1 >/dev/null && echo granted >>"$DG_TMP/busy.log"
		dg revoke --pid "$busy" >/dev/null
	done &
	loop=$!
	wait_until 30 grep -qs granted "$DG_TMP/busy.log"
	displaced 3 "heal check every 100 ms, grants back to back, 3 rounds" -r
	rm -f "$DG_TMP/busy.go"
	wait "$loop"
	[ "$status" = 0 ] || fail "not healed while grants went on: $output"
	[ "$(echo "$output" | grep -c '^round ')" = 3 ]
	[[ "$output" != *violations* ]]
	[ "$(grep -c granted "$DG_TMP/busy.log")" -ge 3 ]
	[ "$(grep -c 'device programs of .*; gates re-applied in' "$DG_TMP/daemon.log")" -ge 3 ]
	run -1 grep -q 'at the periodic check' "$DG_TMP/daemon.log"
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
}

@test "with the heal check and attach events off, the periodic re-check still heals" {
	start_daemon --no-attach-events --heal-ms 0 --recheck-ms 200
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	displaced 5 "periodic re-check every 200 ms, 5 rounds" -r
	[ "$status" = 0 ] || fail "$output"
	[[ "$output" != *violations* ]]
	grep -q 'gates re-applied at the periodic check' "$DG_TMP/daemon.log"
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
}

@test "a program attached to a cgroup without a lease is left alone" {
	start_daemon --recheck-ms 3600000
	container d
	other=$CID
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	before=$(cg_progs "$DG_CGROOT/$CID")
	bpftool prog load "$DEVGATE_BUILD/runtime_like.bpf.o" "$DG_PINS-rt" type cgroup/dev
	# d holds no lease: its new program is left alone.
	bpftool cgroup attach "$DG_CGROOT/$other" device pinned "$DG_PINS-rt" multi
	sleep 0.2
	[ "$(cg_prog_names "$DG_CGROOT/$other" | awk '{print $NF}')" = runtime_like ]
	[ "$(cg_progs "$DG_CGROOT/$CID")" = "$before" ]
	run -1 grep -q 'gates re-applied' "$DG_TMP/daemon.log"
}
