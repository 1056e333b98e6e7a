#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Taking a GPU back from a live runc container.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; start_daemon; }
teardown() { dg_teardown; }

@test "revoke: EPERM again, node gone, runtime program restored, pins gone" {
	container c
	# A node the runtime itself never allowed, made before start.
	mknod -m 666 "$DG_TMP/c/rootfs/gpu0" c 195 0
	original=$(cg_progs "$DG_CGROOT/$CID")
	run -1 probe "$CID" /gpu0
	[ "$output" = "/gpu0 EPERM" ]

	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" /gpu0
	[ "$output" = "/gpu0 ENXIO" ]

	run -0 dg revoke --pid "$CPID" --gpu 0
	[[ "$output" == *"/dev/nvidia0"*"removed"* ]]
	run -1 probe "$CID" /gpu0 /dev/nvidia0 /dev/nvidiactl
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	[ "${lines[1]}" = "/dev/nvidia0 ENOENT" ]
	[ "${lines[2]}" = "/dev/nvidiactl ENOENT" ]
	[ "$(cg_progs "$DG_CGROOT/$CID")" = "$original" ]
	[ -z "$(gate_leftovers)" ]
	[ "$(grant_entries)" = 0 ]
	run -0 probe "$CID" /dev/null
	run -1 probe "$CID" /mem
	[ "$output" = "/mem EPERM" ]
}

@test "partial revoke keeps the control nodes until the last GPU goes" {
	container c
	run -0 dg grant --pid "$CPID" --gpu 0,1
	run -0 dg revoke --pid "$CPID" --gpu 1
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidiactl /dev/nvidia1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidiactl ENXIO" ]
	[ "${lines[2]}" = "/dev/nvidia1 ENOENT" ]
	[ "$(grant_entries)" = 4 ]
	run -0 dg revoke --pid "$CPID" --gpu 0
	[[ "$output" == *"holds no GPU now"* ]]
	run -1 probe "$CID" /dev/nvidiactl
	[ "$output" = "/dev/nvidiactl ENOENT" ]
}

@test "revoke of a GPU the container does not hold is a clear error" {
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	entries=$(grant_entries)
	run -10 dg revoke --pid "$CPID" --gpu 1
	[[ "$output" == "devgatectl: $CID does not hold GPU 1 ("* ]]
	[ "$(grant_entries)" = "$entries" ]
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	run -0 dg revoke --pid "$CPID"
	run -10 dg revoke --pid "$CPID"
	[ "${lines[0]}" = "devgatectl: PID $CPID (cgroup /$CID) holds no GPU" ]
	[ "${lines[1]}" = "hint: 'devgatectl status' shows what each container holds" ]
	run -0 dg revoke --pid "$CPID" --missing-ok
}

@test "revoke by container label and by cgroup" {
	container a
	run -0 dg grant --pid "$CPID" --gpu 0 --container job-a
	cid_a=$CID
	container b
	run -0 dg grant --pid "$CPID" --gpu 1
	run -0 dg revoke --container job-a
	run -1 probe "$cid_a" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENOENT" ]
	run -0 dg revoke --cgroup "/$CID"
	run -0 dg status --json
	[ "$(echo "$output" | jq '.leases | length')" = 0 ]
}

@test "revoke leaves alone a node the container replaced" {
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	dg_runc exec "$CID" sh -c 'rm /dev/nvidia0 && echo mine > /dev/nvidia0'
	run -0 dg revoke --pid "$CPID"
	[[ "$output" == *"/dev/nvidia0"*"conflict"* ]]
	run -0 dg_runc exec "$CID" cat /dev/nvidia0
	[ "$output" = mine ]
}

@test "revoke reports processes still holding the device; --kill ends them" {
	# GPU 0 is 1:7 here (/dev/full): a node that opens, so it can be held.
	stop_daemon
	rm -rf "$DG_HOST"
	make_host --nvidia-major 1 --minor-base 7
	start_daemon
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 probe "$CID" /dev/nvidia7
	[ "$output" = "/dev/nvidia7 ok" ]
	dg_runc exec -d "$CID" sh -c 'exec 3</dev/nvidia7; exec sleep 100002'
	wait_until 5 pgrep -f 'sleep 100002'
	holder=$(pgrep -f 'sleep 100002')
	run -0 --separate-stderr dg revoke --pid "$CPID"
	[[ "$output" == *"still open: PID $holder (sleep) holds /dev/nvidia7"* ]]
	# shellcheck disable=SC2154 # bats sets stderr with --separate-stderr
	[[ "$stderr" == *"hint: revoke again with --kill to end them"* ]]
	kill -0 "$holder"
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 dg --json revoke --pid "$CPID" --kill=TERM
	[ "$(echo "$output" | jq '.holders[0].pid')" = "$holder" ]
	[ "$(echo "$output" | jq '.killed')" = 1 ]
	wait_until 5 sh -c "! kill -0 $holder 2>/dev/null"
	run -2 dg revoke --pid "$CPID" --kill=NOPE
}
