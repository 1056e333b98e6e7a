#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# devgated killed (SIGKILL, via DEVGATE_FAULT) between every two steps of
# grant, revoke, release and of its own recovery, several times each; after
# the next start every invariant holds:
#   - each lease has its grants, its gate and its nodes (the GPU opens);
#   - nothing exists without a lease (no grant, gate or GPU node);
#   - a revoke in flight never leaves the GPU open;
#   - no GPU is held exclusively twice.
# DEVGATE_FAULT_ROUNDS sets the rounds per point (default 5; make torture).

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; }
teardown() { dg_teardown; }

ROUNDS=${DEVGATE_FAULT_ROUNDS:-5}

# crash_starting POINT: a devgated that dies at POINT while it starts.
crash_starting() {
	DEVGATE_FAULT=$1 "$DEVGATE_BUILD/devgated" --socket "$DG_SOCK" --state-dir "$DG_TMP/state" \
		--pin-root "$DG_PINS" --host-root "$DG_HOST" >>"$DG_TMP/daemon.log" 2>&1 || true
}

# check_invariants CID: the container's GPUs are exactly what the leases say.
check_invariants() {
	local cid=$1 json leased held expect
	json=$(dg status --json)
	leased=$(echo "$json" | jq -r --arg cg "/$cid" \
		'[.leases[] | select(.cgroup == $cg) | .gpus[].index] | join(" ")')
	for i in 0 1; do
		run probe "$cid" "/dev/nvidia$i"
		if [[ " $leased " == *" $i "* ]]; then
			expect="/dev/nvidia$i ENXIO"
		else
			# Not leased: the node is gone, or the kernel denies it.
			[[ "$output" == "/dev/nvidia$i ENOENT" || "$output" == "/dev/nvidia$i EPERM" ]] ||
				fail "GPU $i of $cid is not leased but: $output"
			continue
		fi
		[ "$output" = "$expect" ] || fail "GPU $i of $cid is leased but: $output"
	done
	# Grants: three control nodes and one node per leased GPU, nothing else.
	held=$(echo "$json" | jq '[.leases[] | .gpus | length] | add // 0')
	expect=$(echo "$json" | jq '[.leases[] | .gpus | length + 3] | add // 0')
	[ "$(grant_entries)" = "$expect" ] || fail "$(grant_entries) grants for $held leased GPU(s)"
	if [ "$held" = 0 ]; then
		[ "$(cg_progs "$DG_CGROOT/$cid")" = "$ORIGINAL" ] || fail "a gate without a lease"
	else
		gated_beside "$DG_CGROOT/$cid" "$ORIGINAL" || fail "a lease without its gate"
	fi
	# No GPU twice unless every holder shares it.
	[ "$(dg list --json | jq '[.gpus[] | select((.holders | length) > 1 and
		(.holders | any(.shared | not)))] | length')" = 0 ] || fail "a GPU held twice"
	[ -z "$(find "$DG_TMP/state/leases" -maxdepth 1 \( -name '*.pending' -o -name '*.revoking' -o -name '*.revoke-to' \))" ] ||
		fail "a journal left over"
}

@test "grant: a crash after any step, then a start, leaves all or nothing" {
	make_host
	container c
	ORIGINAL=$(cg_progs "$DG_CGROOT/$CID")
	for point in grant.pending grant.nodes grant.grants grant.guard grant.record; do
		for _ in $(seq "$ROUNDS"); do
			crash_with "$point" dg grant --pid "$CPID" --gpu 0
			start_daemon
			check_invariants "$CID"
			run -0 dg revoke --pid "$CPID" --missing-ok
			check_invariants "$CID"
			stop_daemon
		done
	done
}

# closed_at_once POINT GPU: once the grants step ran, the GPU is shut even
# while devgated is down; before it (the journal only), from the next start.
closed_at_once() {
	[ "$1" != revoke.journal ] || return 0
	run probe "$CID" "/dev/nvidia$2"
	[ "$output" != "/dev/nvidia$2 ENXIO" ] || fail "GPU $2 open after a revoke crashed at $1"
}

@test "revoke: a crash after any step never leaves the GPU open" {
	make_host
	container c
	ORIGINAL=$(cg_progs "$DG_CGROOT/$CID")
	for point in revoke.journal revoke.grants revoke.record revoke.nodes; do
		for _ in $(seq "$ROUNDS"); do
			start_daemon
			run -0 dg grant --pid "$CPID" --gpu 0,1
			stop_daemon
			# Revoke one GPU, then the rest: a partial and a full revoke.
			crash_with "$point" dg revoke --pid "$CPID" --gpu 1
			closed_at_once "$point" 1
			start_daemon
			check_invariants "$CID"
			closed_at_once revoke.grants 1
			stop_daemon
			crash_with "$point" dg revoke --pid "$CPID"
			closed_at_once "$point" 0
			start_daemon
			check_invariants "$CID"
			[ "$(dg status --json | jq '.leases | length')" = 0 ]
			stop_daemon
		done
	done
}

@test "release: a crash while a container's end is handled leaves nothing behind" {
	make_host
	for point in release.record release.grants; do
		for r in $(seq "$ROUNDS"); do
			container "$point-$r"
			start_daemon
			run -0 dg grant --pid "$CPID" --gpu 0
			stop_daemon
			DEVGATE_FAULT=$point start_daemon
			dg_rm "$CID"
			wait_until 5 sh -c "! kill -0 $DG_DAEMON_PID 2>/dev/null" ||
				fail "devgated did not die at $point"
			wait "$DG_DAEMON_PID" 2>/dev/null || true
			DG_DAEMON_PID=
			start_daemon
			[ "$(dg status --json | jq '.leases | length')" = 0 ]
			[ "$(grant_entries)" = 0 ]
			stop_daemon
		done
	done
}

@test "recovery itself: a crash while finishing a revoke or rolling back a grant" {
	make_host
	container c
	ORIGINAL=$(cg_progs "$DG_CGROOT/$CID")
	for _ in $(seq "$ROUNDS"); do
		crash_with grant.guard dg grant --pid "$CPID" --gpu 0
		crash_starting reconcile.rollback
		start_daemon
		check_invariants "$CID"
		run -0 dg grant --pid "$CPID" --gpu 1
		stop_daemon
		crash_with revoke.grants dg revoke --pid "$CPID"
		crash_starting reconcile.revoke
		start_daemon
		check_invariants "$CID"
		stop_daemon
	done
}

# driver_left PID: devgate's marked (unbindable) mounts in PID's mount namespace.
driver_left() {
	awk '/ unbindable / { print $5 }' "/proc/$1/mountinfo"
}

@test "grant --driver: a crash before or after the driver's mounts, then a start, leaves none of them" {
	make_host --driver "550.54.14:$DEVGATE_BUILD/fakedrv.so"
	container c
	ORIGINAL=$(cg_progs "$DG_CGROOT/$CID")
	for point in grant.driver grant.driver.mounted; do
		for _ in $(seq "$ROUNDS"); do
			crash_with "$point" dg grant --pid "$CPID" --gpu 0 --driver compute,utility
			[ "$point" = grant.driver ] || [ -n "$(driver_left "$CPID")" ] ||
				fail "no driver mount to recover from at $point"
			start_daemon
			check_invariants "$CID"
			[ -z "$(driver_left "$CPID")" ] || fail "driver mounts left after $point: $(driver_left "$CPID")"
			[ ! -e "$DG_TMP/c/rootfs/usr" ] || fail "driver directories left after $point"
			run -0 dg grant --pid "$CPID" --gpu 0 --driver compute
			[ -n "$(driver_left "$CPID")" ]
			run -0 dg revoke --pid "$CPID"
			check_invariants "$CID"
			[ -z "$(driver_left "$CPID")" ] && [ ! -e "$DG_TMP/c/rootfs/usr" ]
			stop_daemon
		done
	done
}
