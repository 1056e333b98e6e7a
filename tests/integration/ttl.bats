#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Leases that expire: grant --ttl, extend, devgate.io/ttl, expiry across a
# devgated restart, --kill-on-expiry, against live runc containers.
#
# Expiry is a whole CLOCK_REALTIME second; each test measures how long after
# it the container's open() turned from ENXIO (granted) to EPERM (denied) and
# prints it as a '# ' line. No assert is tighter than a second.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	DG_WATCH_PID=
}
teardown() {
	[ -n "$DG_WATCH_PID" ] && kill "$DG_WATCH_PID" 2>/dev/null
	dg_teardown
}

# gpu_node NAME: container NAME with a node of GPU 0 (195:0) at /gpu0 made
# before any grant: it opens with ENXIO while granted, EPERM otherwise.
gpu_container() {
	container "$1"
	mknod -m 666 "$DG_TMP/$1/rootfs/gpu0" c 195 0
}

# lease_field CID JQ: a field of CID's lease in status --json.
lease_field() {
	dg status --json | jq -r --arg c "$1" ".leases[] | select(.container == \$c) | $2"
}

# expires_s CID: the lease's expiry as a Unix time.
expires_s() {
	date -d "$(lease_field "$1" .expires)" +%s
}

# gone PID: the process is gone or a zombie (killed, its parent yet to reap it).
gone() {
	! kill -0 "$1" 2>/dev/null || [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = Z ]
}

now_ms() {
	echo $(($(date +%s%N) / 1000000))
}

denied() {
	[ "$(probe "$1" /gpu0)" = "/gpu0 EPERM" ]
}

# wait_denied CID EXPIRY LABEL: waits for CID's /gpu0 to be denied; prints
# and checks how late after EXPIRY (Unix seconds) that was seen.
wait_denied() {
	local cid=$1 expiry=$2 label=$3 late
	wait_until $((expiry - $(date +%s) + 5)) denied "$cid" ||
		fail "$label: /gpu0 still opens 5 s after the expiry"
	late=$(($(now_ms) - expiry * 1000))
	echo "# $label: denied ${late} ms after the expiry" >&3
	[ "$late" -ge 0 ] || fail "$label: denied ${late} ms before the expiry"
	[ "$late" -lt 1500 ] || fail "$label: denied ${late} ms after the expiry"
}

@test "a 2 s ttl: the GPU opens until expiry, then EPERM; lease gone, GPU free, counted" {
	start_daemon
	gpu_container c
	dg watch --json >"$DG_TMP/watch" &
	DG_WATCH_PID=$!
	# The reply is not printed; the "granted" event below shows it was in time.
	sleep 0.5
	run -0 dg grant --pid "$CPID" --gpu 0 --ttl 2s
	[[ "$output" == *"the lease expires at "*" (in "[23]"s)"* ]]
	run -0 dg status
	[[ "${lines[0]}" == *EXPIRES*LEFT* ]]
	left=$(lease_field "$CID" .expires_in)
	[ "$left" -ge 1 ] && [ "$left" -le 3 ]
	[ "$(lease_field "$CID" .kill_on_expiry)" = false ]
	expiry=$(expires_s "$CID")
	run -1 probe "$CID" /gpu0
	[ "$output" = "/gpu0 ENXIO" ]
	wait_denied "$CID" "$expiry" "ttl 2s"
	no_leases
	[ "$(dg list --json | jq -r '.gpus[0].state')" = free ]
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENOENT" ]
	[ "$(grant_entries)" = 0 ]
	[ -z "$(gate_leftovers)" ]
	grep -q "the lease of $CID expired at" "$DG_TMP/daemon.log"
	dg metrics | grep -qx 'devgate_lease_expirations_total 1'
	wait_until 2 grep -q '"type":"expired"' "$DG_TMP/watch" || fail "$(cat "$DG_TMP/watch")"
	grep -q '"type":"granted"' "$DG_TMP/watch"
	# The GPU is free for the next container.
	gpu_container d
	run -0 dg grant --pid "$CPID" --gpu 0
}

@test "extend --by pushes the expiry; extend --ttl sets it from now" {
	start_daemon
	gpu_container c
	run -0 dg grant --pid "$CPID" --gpu 0 --ttl 2s
	old=$(expires_s "$CID")
	run -0 dg extend --container "$CID" --by 3s
	[[ "$output" == "the lease of $CID now expires at "* ]]
	new=$(expires_s "$CID")
	[ "$new" = $((old + 3)) ]
	# Past the old expiry it still opens.
	wait_until 6 sh -c "[ \$(date +%s%N) -gt $(((old + 1) * 1000000000)) ]"
	run -1 probe "$CID" /gpu0
	[ "$output" = "/gpu0 ENXIO" ]
	[ "$(lease_field "$CID" .expires_in)" -ge 1 ]
	wait_denied "$CID" "$new" "extended by 3s"
	no_leases

	gpu_container d
	run -0 dg grant --pid "$CPID" --gpu 0 --ttl 1h
	run -0 dg --json extend --pid "$CPID" --ttl 3s
	left=$(echo "$output" | jq .lease.expires_in)
	[ "$left" -ge 2 ] && [ "$left" -le 4 ]
	wait_denied "$CID" "$(expires_s "$CID")" "extend --ttl 3s"
	grep -q "the lease of $CID now expires at" "$DG_TMP/daemon.log"
}

@test "extend of a lease without ttl, or past 366 days, is refused and changes nothing" {
	start_daemon
	gpu_container c
	run -0 dg grant --pid "$CPID" --gpu 0
	run -2 dg extend --pid "$CPID" --by 10m
	[ "${lines[0]}" = "devgatectl: the lease of $CID does not expire" ]
	[[ "${lines[1]}" == "hint: give it a time to live with 'devgatectl grant ... --ttl DURATION'"* ]]
	[ "$(lease_field "$CID" .expires)" = null ]
	# A grant with --ttl gives it one; a grant without keeps it.
	run -0 dg grant --pid "$CPID" --gpu 0 --ttl 1h
	before=$(lease_field "$CID" .expires)
	run -0 dg grant --pid "$CPID" --gpu 1
	[ "$(lease_field "$CID" .expires)" = "$before" ]
	run -2 dg extend --pid "$CPID" --by 366d
	[[ "$output" == *"more than 366 days from now"* ]]
	[ "$(lease_field "$CID" .expires)" = "$before" ]
	# A new --ttl replaces the expiry.
	run -0 dg grant --pid "$CPID" --gpu 1 --ttl 2h
	[ "$(lease_field "$CID" .expires)" != "$before" ]
	left=$(lease_field "$CID" .expires_in)
	[ "$left" -gt 7000 ] && [ "$left" -le 7201 ]
	run -5 dg extend --container nobody --by 1m
	[ "${lines[0]}" = "devgatectl: no container is labelled 'nobody'" ]
}

@test "bad durations are refused with a hint and change nothing" {
	start_daemon
	gpu_container c
	for bad in 0 0s -5s 10x 1.5h 5s5 ' 5s' '' 367d 99999999999999999999s; do
		run -2 dg grant --pid "$CPID" --gpu 0 --ttl "$bad"
		[[ "${lines[0]}" == "devgatectl: grant: --ttl wants a duration, not '$bad'"* ]] ||
			fail "--ttl '$bad': $output"
		[[ "${lines[1]}" == "hint: a duration is a whole number with an optional unit s, m, h or d"* ]]
	done
	run -2 dg grant --pid "$CPID" --gpu 0 --ttl 0s
	[[ "${lines[0]}" == *"(from 1 second to 366 days)" ]]
	run -2 dg grant --pid "$CPID" --gpu 0 --kill-on-expiry
	[ "${lines[0]}" = "devgatectl: grant: --kill-on-expiry needs --ttl DURATION" ]
	no_leases
	[ "$(grant_entries)" = 0 ]
	run -1 probe "$CID" /gpu0
	[ "$output" = "/gpu0 EPERM" ]
	run -0 dg grant --pid "$CPID" --gpu 0 --ttl 1h
	before=$(lease_field "$CID" .expires)
	for bad in 0 -1m 2w abc; do
		run -2 dg extend --pid "$CPID" --by "$bad"
		[[ "${lines[0]}" == "devgatectl: extend: --by wants a duration, not '$bad'"* ]]
	done
	run -2 dg extend --pid "$CPID"
	[ "${lines[0]}" = "devgatectl: extend: say how much longer with one of --by or --ttl" ]
	run -2 dg extend --pid "$CPID" --by 1m --ttl 1m
	[ "$(lease_field "$CID" .expires)" = "$before" ]
	[ "$(grep -c 'now expires at' "$DG_TMP/daemon.log")" = 0 ]
}

@test "expiry across a restart: passed while down -> revoked at start; not yet -> on time" {
	start_daemon
	gpu_container a
	cid_a=$CID
	run -0 dg grant --pid "$CPID" --gpu 0 --ttl 2s
	exp_a=$(expires_s "$cid_a")
	container b
	cid_b=$CID
	mknod -m 666 "$DG_TMP/b/rootfs/gpu0" c 195 1
	run -0 dg grant --pid "$CPID" --gpu 1 --ttl 6s
	exp_b=$(expires_s "$cid_b")
	[ "$(jq .expires "$DG_TMP/state/leases/"*.json | sort -n | head -1)" = "$exp_a" ]
	stop_daemon
	# Down past a's expiry: the kernel still grants (nothing ran to revoke).
	wait_until 6 sh -c "[ \$(date +%s) -gt $exp_a ]"
	run -1 probe "$cid_a" /gpu0
	[ "$output" = "/gpu0 ENXIO" ]
	start_daemon
	t=$(now_ms)
	echo "# expired while down: revoked by the start, $((t - exp_a * 1000)) ms after the expiry" >&3
	run -1 probe "$cid_a" /gpu0
	[ "$output" = "/gpu0 EPERM" ]
	[ "$(dg status --json | jq '.leases | length')" = 1 ]
	[ "$(lease_field "$cid_b" .expires)" != "" ]
	[ "$(expires_s "$cid_b")" = "$exp_b" ]
	grep -q "the lease of $cid_a expired at" "$DG_TMP/daemon.log"
	run -1 probe "$cid_b" /gpu0
	[ "$output" = "/gpu0 ENXIO" ]
	wait_denied "$cid_b" "$exp_b" "after a restart"
	no_leases
	[ "$(grant_entries)" = 0 ]
	[ -z "$(gate_leftovers)" ]
}

@test "a crash while an expired lease is revoked: the next start finishes the revoke" {
	for point in revoke.journal revoke.grants revoke.record; do
		gpu_container "c-${point#revoke.}"
		crash_with "$point" sh -c "'$DEVGATE_BUILD/devgatectl' -s '$DG_SOCK' grant \
			--pid $CPID --gpu 0 --ttl 1s && sleep 4"
		grep -q "the lease of $CID expired at" "$DG_TMP/daemon.log"
		start_daemon
		run -1 probe "$CID" /gpu0
		[ "$output" = "/gpu0 EPERM" ] || fail "after a crash at $point: $output"
		no_leases
		[ "$(grant_entries)" = 0 ]
		[ -z "$(gate_leftovers)" ]
		left=$(find "$DG_TMP/state/leases" -maxdepth 1 -type f)
		[ -z "$left" ] || fail "after a crash at $point, left in the state: $left"
		stop_daemon
	done
}

@test "--kill-on-expiry kills a process holding the node; without it, it is reported" {
	# GPUs are 1:7 (/dev/full) and 1:8 here: nodes that open, so they can be held.
	make_host --nvidia-major 1 --minor-base 7
	start_daemon
	container k
	cid_k=$CID
	run -0 dg grant --pid "$CPID" --gpu 0 --ttl 2s --kill-on-expiry
	[[ "$output" == *"holders are killed then"* ]]
	[ "$(lease_field "$cid_k" .kill_on_expiry)" = true ]
	dg_runc exec -d "$cid_k" sh -c 'exec 3</dev/nvidia7; exec sleep 100003'
	wait_until 5 pgrep -f 'sleep 100003'
	holder_k=$(pgrep -f 'sleep 100003')
	container h
	cid_h=$CID
	run -0 dg grant --pid "$CPID" --gpu 1 --ttl 2s
	dg_runc exec -d "$cid_h" sh -c 'exec 3</dev/nvidia8; exec sleep 100004'
	wait_until 5 pgrep -f 'sleep 100004'
	holder_h=$(pgrep -f 'sleep 100004')
	exp=$(expires_s "$cid_k")
	kill -0 "$holder_k"
	wait_until 6 gone "$holder_k"
	echo "# holder killed $(($(now_ms) - exp * 1000)) ms after the expiry" >&3
	wait_until 3 no_leases
	grep -q "$cid_k: PID $holder_k (sleep) still holds /dev/nvidia7" "$DG_TMP/daemon.log"
	grep -q "$cid_k: sent signal 9 to 1 holder(s)" "$DG_TMP/daemon.log"
	run -1 gone "$holder_h"
	grep -q "$cid_h: PID $holder_h (sleep) still holds /dev/nvidia8" "$DG_TMP/daemon.log"
	run -1 probe "$cid_h" /dev/nvidia8
	[ "$output" = "/dev/nvidia8 ENOENT" ]
}

@test "extend is for root and admin-group only, as grant and revoke are" {
	# nobody must reach the socket's directory, which devgated makes.
	chmod 0711 "$DG_TMP"
	DG_SOCK="$DG_TMP/run/sock"
	start_daemon --socket-group 4242 --admin-group 4343
	gpu_container c
	run -0 dg grant --pid "$CPID" --gpu 0 --ttl 1h
	before=$(lease_field "$CID" .expires)
	run -4 setpriv --reuid 65534 --regid 65534 --groups 4242 \
		"$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" extend --pid "$CPID" --by 1h
	[[ "${lines[0]}" == *"'extend' changes leases: root or devgated's admin-group only"* ]]
	[ "$(lease_field "$CID" .expires)" = "$before" ]
	run -0 setpriv --reuid 65534 --regid 65534 --groups 4242 \
		"$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" status --json
	[ "$(echo "$output" | jq -r '.leases[0].expires')" = "$before" ]
	run -0 setpriv --reuid 65534 --regid 65534 --groups 4242,4343 \
		"$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" extend --pid "$CPID" --by 1h
	[ "$(expires_s "$CID")" = $(($(date -d "$before" +%s) + 3600)) ]
}

@test "OCI hook: devgate.io/ttl makes the lease expire; a bad one fails the start" {
	requires runc
	start_daemon
	hooked_bundle c '.annotations = {"devgate.io/gpus": "0", "devgate.io/ttl": "2s"} |
		.process.args = ["sh", "-c", "sleep 100000"]'
	mknod -m 666 "$DG_TMP/c/rootfs/gpu0" c 195 0
	dg_runc run -d -b "$DG_TMP/c" "$CID" </dev/null >/dev/null
	left=$(lease_field "$CID" .expires_in)
	[ "$left" -ge 1 ] && [ "$left" -le 3 ]
	run -1 probe "$CID" /gpu0
	[ "$output" = "/gpu0 ENXIO" ]
	wait_denied "$CID" "$(expires_s "$CID")" "devgate.io/ttl 2s"
	no_leases

	hooked_bundle b '.annotations = {"devgate.io/gpus": "1", "devgate.io/ttl": "soon"} |
		.process.args = ["probe", "/dev/null"]'
	run ! dg_runc run -b "$DG_TMP/b" "$CID" </dev/null
	[[ "$output" == *"annotation devgate.io/ttl='soon' is not a duration"* ]]
	no_leases
}
