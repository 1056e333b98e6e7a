#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# A pure cgroup v1 host (no cgroup v2 mounted at all; tests/lib/v1host.sh):
# devgated gates through the v1 devices controller alone. A container is
# its v1 devices cgroup (keyed by its kernfs id); grant writes devices.allow,
# revoke devices.deny; no BPF program anywhere.

load helpers
# shellcheck source=../lib/v1host.sh
. "$DG_ROOT/tests/lib/v1host.sh"

setup_file() {
	export DG_V1HOST="/run/dg30v1-test.$$"
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
	DG_ID="dg30v1-$DG_ID"
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

# Both sides, as the kernel answers inside: GPU 0 reaches the driver (ENXIO)
# through its own node and devgate's, GPU 1 and /dev/mem stay denied.
gpu0_only() {
	run -1 v1h_probe "$CID" /gpu0 /dev/nvidia0 /gpu1 /mem
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[2]}" = "/gpu1 EPERM" ]
	[ "${lines[3]}" = "/mem EPERM" ]
}

# Nothing granted: GPU 0 denied again, devgate's node gone, the list as before.
nothing_granted() {
	local before=$1
	run -1 v1h_probe "$CID" /gpu0 /gpu1 /dev/nvidia0
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "${lines[2]}" = "/dev/nvidia0 ENOENT" ]
	[ "$(cat "$V1DIR/devices.list")" = "$before" ]
}

lease_count() {
	dg status --json | jq '.leases | length'
}

@test "v1 host: grant by PID writes devices.allow (GPU 0 reaches the driver, GPU 1 stays denied), no BPF program; revoke leaves devices.list exactly as before" {
	local before
	run -1 v1h grep -q ' - cgroup2 ' /proc/self/mountinfo
	grep -q "no cgroup v2 is mounted: gating through the cgroup v1 devices controller at $DG_V1 alone" "$DG_TMP/daemon.log"
	v1h_container a
	v1h_legacy
	before=$(cat "$V1DIR/devices.list")
	run -0 dg grant --pid "$CPID" --gpu 0
	gpu0_only
	grep -qx 'c 195:0 rw' "$V1DIR/devices.list"
	run -0 dg status --json
	[ "$(echo "$output" | jq -r '.leases[0].cgroup')" = "/$CID" ]
	# No device program was attached or pinned: there is no v2 to attach to.
	run -0 find "$DG_PINS/cg" -mindepth 1
	[ -z "$output" ]
	run -0 dg revoke --pid "$CPID"
	nothing_granted "$before"
	[ "$(lease_count)" = 0 ]
}

@test "v1 host: grant by runc name and by v1 cgroup path; a second grant adds GPU 1; revoke by cgroup restores the list" {
	local before
	v1h_container c
	before=$(cat "$V1DIR/devices.list")
	run -0 dg grant --container "$CID" --gpu 0
	gpu0_only
	run -0 dg status --json
	[ "$(echo "$output" | jq -r '.leases[0].runtime')" = runc ]
	run -0 dg grant --cgroup "/$CID" --gpu 1
	run -1 v1h_probe "$CID" /gpu0 /gpu1 /mem
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 ENXIO" ]
	[ "${lines[2]}" = "/mem EPERM" ]
	run -0 dg revoke --cgroup "/$CID"
	nothing_granted "$before"
}

@test "v1 host: devgated restarted keeps the lease and the rules, puts back a rule lost while it was down, and a later revoke works" {
	local before
	v1h_container r
	before=$(cat "$V1DIR/devices.list")
	run -0 dg grant --pid "$CPID" --gpu 0
	stop_daemon TERM
	gpu0_only
	echo 'c 195:0 rw' >"$V1DIR/devices.deny"
	run -1 v1h_probe "$CID" /gpu0
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	v1h_daemon --runc-root "$DG_V1HOST/runc"
	grep -q "reconcile: adopted lease of $CID" "$DG_TMP/daemon.log"
	[ "$(lease_count)" = 1 ]
	gpu0_only
	run -0 dg revoke --pid "$CPID"
	nothing_granted "$before"
}

@test "v1 host: revoke reports a process still holding the device, and --kill ends it (in the container by its v1 devices cgroup)" {
	# GPU 0 is 1:7 here (/dev/full): a node that opens, so it can be held.
	stop_daemon
	rm -rf "$DG_HOST"
	make_host --nvidia-major 1 --minor-base 7
	v1h_daemon --runc-root "$DG_V1HOST/runc"
	v1h_container k
	run -0 dg grant --pid "$CPID" --gpu 0
	v1h_runc exec -d "$CID" sh -c 'exec 3</dev/nvidia7; exec sleep 100007'
	wait_until 10 pgrep -f 'sleep 100007'
	holder=$(pgrep -f 'sleep 100007')
	run -0 dg --json revoke --pid "$CPID" --kill=TERM
	[ "$(echo "$output" | jq '.holders[0].pid')" = "$holder" ]
	[ "$(echo "$output" | jq '.killed')" = 1 ]
	wait_until 10 sh -c "! kill -0 $holder 2>/dev/null"
}

@test "v1 host: a container that exits releases its lease at once (a pidfd of its process; v1 has no cgroup.events)" {
	# The periodic check far off: only the exit itself can release in time.
	stop_daemon
	v1h_daemon --runc-root "$DG_V1HOST/runc" --recheck-ms 600000
	v1h_container x
	run -0 dg grant --pid "$CPID" --gpu 0
	[ "$(lease_count)" = 1 ]
	v1h_runc kill "$CID" KILL
	wait_until 5 [ "$(lease_count)" = 0 ]
	grep -q "container ended" "$DG_TMP/daemon.log"
	# The GPU is free for another container at once.
	v1h_container y
	run -0 dg grant --pid "$CPID" --gpu 0
	gpu0_only
}

@test "v1 host: a container removed and made again at the same path while devgated was down is another: its lease is released, the new one gets nothing" {
	local before id
	v1h_container z
	before=$(cat "$V1DIR/devices.list")
	run -0 dg grant --pid "$CPID" --gpu 0
	id=$(dg status --json | jq -r '.leases[0].cgroup_id')
	stop_daemon TERM
	v1h_runc delete -f "$CID"
	v1h_runc run -d -b "$DG_TMP/z" "$CID" </dev/null >"$DG_TMP/z/run2.log" 2>&1
	CPID=$(v1h_runc state "$CID" | jq -r .pid)
	[ "$(cat "$V1DIR/devices.list")" = "$before" ]
	v1h_daemon --runc-root "$DG_V1HOST/runc"
	grep -q "reconcile: cgroup gone while devgated was down" "$DG_TMP/daemon.log"
	[ "$(lease_count)" = 0 ]
	nothing_granted "$before"
	run -0 dg grant --pid "$CPID" --gpu 0
	[ "$(dg status --json | jq -r '.leases[0].cgroup_id')" != "$id" ]
	gpu0_only
}

# The held prober: the one process of v1 cgroup $1 that is not the container's.
prober_of() { grep -vx "$CPID" "$1/cgroup.procs"; }
prober_held() { [ -n "$(prober_of "$1")" ]; }

@test "v1 host: the proof joins the container's v1 devices cgroup alone (no v2 cgroup to clone into) and finds GPU 0 reaching the driver, GPU 1 denied" {
	local hold=$DG_TMP/hold grant prober fd st=0
	mkfifo "$hold"
	stop_daemon
	DEVGATE_TEST_PROBER_HOLD=$hold DEVGATE_TEST_PROOF_TIMEOUT_MS=600000 \
		v1h_daemon --runc-root "$DG_V1HOST/runc" -v
	v1h_container p
	timeout 120 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" grant --pid "$CPID" --gpu 0 \
		>"$DG_TMP/grant.out" 2>&1 &
	grant=$!
	wait_until 60 prober_held "$V1DIR"
	prober=$(prober_of "$V1DIR")
	grep -qx "0::/" "/proc/$prober/cgroup"
	grep -q ":devices:/$CID\$" "/proc/$prober/cgroup"
	# Let it go on: an O_RDWR open of a FIFO never blocks.
	exec {fd}<>"$hold"
	exec {fd}>&-
	wait "$grant" || st=$?
	[ "$st" = 0 ]
	grep -Eq "proof: $CID: [1-9] node\(s\) reach the driver, the neighbour stays denied" "$DG_TMP/daemon.log"
	gpu0_only
}

@test "v1 host: cgroup2 mounted while devgated was down: a lease keyed by a v1 cgroup id is released at start, not taken for a v2 cgroup's, and its v1 rules are denied again" {
	local before
	v1h_container m
	before=$(cat "$V1DIR/devices.list")
	run -0 dg grant --pid "$CPID" --gpu 0
	gpu0_only
	stop_daemon TERM
	V1H_UNIFIED=/sys/fs/cgroup/unified
	v1h mount -t cgroup2 none "$V1H_UNIFIED"
	v1h_daemon --runc-root "$DG_V1HOST/runc"
	grep -q "released .* of $CID: reconcile: its cgroup id is of the other cgroup hierarchy (v1 devices or v2) than this devgated's" "$DG_TMP/daemon.log"
	[ "$(lease_count)" = 0 ]
	run -1 v1h_probe "$CID" /gpu0 /gpu1
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "$(cat "$V1DIR/devices.list")" = "$before" ]
}

# The runtime rewrote its list as runc 1.0 and older did on every update:
# deny all, then allow its own rules again.
v1h_rewrite() {
	local rule
	echo a >"$V1DIR/devices.deny"
	while read -r rule; do echo "$rule" >"$V1DIR/devices.allow"; done <<<"$1"
}

v1h_gpu0_open() {
	[ "$(v1h_probe "$CID" /gpu0)" = "/gpu0 ENXIO" ]
}

@test "v1 host: runc update keeps the grant; a rewritten devices list is healed by the heal check" {
	local before
	v1h_container u
	before=$(cat "$V1DIR/devices.list")
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 v1h_runc update --pids-limit 512 "$CID"
	gpu0_only
	v1h_rewrite "$before"
	wait_until 10 v1h_gpu0_open
	grep -Eq "the v1 devices list of $CID \(/$CID\) lost [1-9][0-9]* of devgate's rules; put back" "$DG_TMP/daemon.log"
	gpu0_only
	run -0 dg revoke --pid "$CPID"
	nothing_granted "$before"
}

@test "v1 host: a stranger process in the container's v1 devices cgroup: the grant is refused (exit 6) and changes nothing" {
	local before stranger
	v1h_container s
	before=$(cat "$V1DIR/devices.list")
	# A host process that wrote itself into the container's devices cgroup only.
	sleep 1000 &
	stranger=$!
	echo "$stranger" >"$V1DIR/cgroup.procs"
	run -6 dg grant --pid "$CPID" --gpu 0
	kill "$stranger"
	[[ "$output" == *"the v1 devices cgroup /$CID of PID $CPID also holds PID $stranger of v1 cgroups"* ]]
	[[ "$output" == *"which is not the container's"* ]]
	nothing_granted "$before"
	[ "$(lease_count)" = 0 ]
}

@test "v1 host: doctor and doctor --containers say v1 devices PATH (no cgroup v2) works; metrics export the lease and say access counters are not available" {
	local cg2 mech
	v1h_container d
	run -0 dg grant --pid "$CPID" --gpu 0
	run v1h "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" doctor --json
	cg2=$(echo "$output" | jq -r '.checks[] | select(.name == "cgroup2")')
	[ "$(echo "$cg2" | jq -r .status)" = warn ]
	[[ "$(echo "$cg2" | jq -r .message)" == "no cgroup v2 hierarchy is mounted, only cgroup v1 (devices at $DG_V1): devgated gates through v1 devices alone"* ]]
	mech=$(echo "$output" | jq -r '.checks[] | select(.name == "mechanism")')
	[ "$(echo "$mech" | jq -r .status)" = ok ]
	[[ "$(echo "$mech" | jq -r .message)" == *": v1 devices /$CID (no cgroup v2), which allows its GPUs"* ]]
	run v1h "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" doctor --containers --json
	[ "$(echo "$output" | jq -r --arg id "$CID" '.containers[] | select(.id == $id) | .mechanism')" = "v1 devices /$CID (no cgroup v2)" ]
	run -0 dg metrics
	echo "$output" | grep -q '^devgate_leases 1$'
	echo "$output" | grep -q 'Not available on a host with cgroup v1 alone'
}
