#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Granting a GPU to a live runc container, checked from inside it.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; start_daemon; }
teardown() { dg_teardown; }

@test "granted GPU reaches the driver; others stay as the runtime decided" {
	container c
	run -0 probe "$CID" /dev/null
	run -1 probe "$CID" /gpu1 /mem
	[ "${lines[0]}" = "/gpu1 EPERM" ]
	[ "${lines[1]}" = "/mem EPERM" ]

	run -0 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == "granted GPU 0 ("*") to $CID (cgroup /$CID, PID $CPID)"* ]]

	run -1 probe "$CID" /dev/nvidia0 /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia-uvm-tools
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidiactl ENXIO" ]
	[ "${lines[2]}" = "/dev/nvidia-uvm ENXIO" ]
	[ "${lines[3]}" = "/dev/nvidia-uvm-tools ENXIO" ]
	# The second GPU and /dev/mem are still denied, /dev/null still allowed.
	run -1 probe "$CID" /gpu1 /mem
	[ "${lines[0]}" = "/gpu1 EPERM" ]
	[ "${lines[1]}" = "/mem EPERM" ]
	run -0 probe "$CID" /dev/null /dev/zero
}

@test "nodes are character devices with the right numbers and mode 0666" {
	container c
	run -0 dg grant --pid "$CPID" --gpu 1
	uvm=$(awk '$2 == "nvidia-uvm" { print $1 }' "$DG_HOST/proc/devices")
	run -0 dg_runc exec "$CID" stat -c '%n %F %t:%T %a' /dev/nvidia1 /dev/nvidiactl \
		/dev/nvidia-uvm /dev/nvidia-uvm-tools
	[ "${lines[0]}" = "/dev/nvidia1 character special file c3:1 666" ]
	[ "${lines[1]}" = "/dev/nvidiactl character special file c3:ff 666" ]
	[ "${lines[2]}" = "/dev/nvidia-uvm character special file $(printf %x "$uvm"):0 666" ]
	[ "${lines[3]}" = "/dev/nvidia-uvm-tools character special file $(printf %x "$uvm"):1 666" ]
	# GPU 0 was not granted: no node for it.
	run -1 dg_runc exec "$CID" test -e /dev/nvidia0
}

@test "by default the gate goes after the runtime program, which stays attached, unchanged" {
	container c
	before=$(cg_progs "$DG_CGROOT/$CID")
	[ "$(echo "$before" | wc -w)" = 1 ]
	run -0 dg grant --pid "$CPID" --gpu 0
	gated_beside "$DG_CGROOT/$CID" "$before"
	# No prog array slot: the runtime's program decides for itself.
	run -0 find "$DG_PINS/cg" -mindepth 1
	[ "$output" = "" ]
	run -0 dg revoke --pid "$CPID"
	[ "$(cg_progs "$DG_CGROOT/$CID")" = "$before" ]
	[ -z "$(gate_leftovers)" ]
}

@test "gate-mode = replace: the gate replaces the runtime program in place and the tally follows it" {
	stop_daemon
	start_daemon --gate-mode replace
	container c
	before=$(cg_progs "$DG_CGROOT/$CID")
	[ "$(echo "$before" | wc -w)" = 1 ]
	run -0 dg grant --pid "$CPID" --gpu 0
	[ "$(cg_prog_names "$DG_CGROOT/$CID")" = "devgate_gate devgate_tally" ]
	# The runtime's program waits in the slot the cgroup's storage names.
	state=$(cg_state "$DG_CGROOT/$CID")
	[ "$(echo "$state" | jq .cgroup_id)" = "$(stat -c %i "$DG_CGROOT/$CID")" ]
	[ "$(echo "$state" | jq .orig[0])" = "$before" ]
	[ "$(slot_prog 0 "$(echo "$state" | jq .slot[0])")" = "$before" ]
}

@test "gate-mode = replace: one gate for every container: loaded once, attached to each, no copy per cgroup" {
	stop_daemon
	start_daemon --gate-mode replace
	container a
	a_cg="$DG_CGROOT/$CID"
	run -0 dg grant --pid "$CPID" --gpu 0
	container b
	run -0 dg grant --pid "$CPID" --gpu 1
	# Both cgroups carry the very same two programs, the pinned shared ones.
	[ "$(cg_progs "$a_cg")" = "$(cg_progs "$DG_CGROOT/$CID")" ]
	gate=$(bpftool -j prog show pinned "$DG_PINS"/dg_gate0_*_v1 | jq .id)
	tally=$(bpftool -j prog show pinned "$DG_PINS"/dg_tally_*_v1 | jq .id)
	[ "$(cg_progs "$a_cg")" = "$gate $tally" ]
	# No per-cgroup pins: what differs lives in each cgroup's storage.
	run -0 find "$DG_PINS/cg" -mindepth 1
	[ "$output" = "" ]
	[ "$(cg_state "$a_cg" | jq .slot[0])" != "$(cg_state "$DG_CGROOT/$CID" | jq .slot[0])" ]
	# Each still gets only its own GPU.
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidia1
	[ "${lines[1]}" = "/dev/nvidia1 ENXIO" ]
	# A revoke puts b's runtime program back and empties its slot; a keeps its own.
	slot=$(cg_state "$DG_CGROOT/$CID" | jq .slot[0])
	run -0 dg revoke --pid "$CPID"
	[ "$(cg_prog_names "$DG_CGROOT/$CID")" != "devgate_gate devgate_tally" ]
	run -1 slot_prog 0 "$slot"
	[ "$(cg_prog_names "$a_cg")" = "devgate_gate devgate_tally" ]
}

@test "one beside gate for every container: the same pinned programs on each, no copy per cgroup" {
	container a
	a_cg="$DG_CGROOT/$CID"
	a_rt=$(cg_progs "$a_cg")
	run -0 dg grant --pid "$CPID" --gpu 0
	container b
	b_rt=$(cg_progs "$DG_CGROOT/$CID")
	run -0 dg grant --pid "$CPID" --gpu 1
	gated_beside "$a_cg" "$a_rt"
	gated_beside "$DG_CGROOT/$CID" "$b_rt"
	run -0 find "$DG_PINS/cg" -mindepth 1
	[ "$output" = "" ]
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidia1
	[ "${lines[1]}" = "/dev/nvidia1 ENXIO" ]
	# A revoke takes devgate's programs off b alone.
	run -0 dg revoke --pid "$CPID"
	[ "$(cg_progs "$DG_CGROOT/$CID")" = "$b_rt" ]
	gated_beside "$a_cg" "$a_rt"
}

@test "granting twice is one grant" {
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	progs=$(cg_progs "$DG_CGROOT/$CID")
	entries=$(grant_entries)
	run -0 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"already holds what was asked"* ]]
	[ "$(cg_progs "$DG_CGROOT/$CID")" = "$progs" ]
	[ "$(grant_entries)" = "$entries" ]
	[ "$entries" = 4 ]
	run -0 dg status --json
	[ "$(echo "$output" | jq '.leases | length')" = 1 ]
	[ "$(echo "$output" | jq '.leases[0].gpus | length')" = 1 ]
}

@test "grant by UUID prefix, PCI bus id and 'all'" {
	container a
	uuid1=$(dg list --json | jq -r '.gpus[1].uuid')
	run -0 dg grant --pid "$CPID" --gpu "${uuid1:0:12}"
	run -1 probe "$CID" /dev/nvidia1
	[ "$output" = "/dev/nvidia1 ENXIO" ]
	pid_a=$CPID
	cid_a=$CID

	container b
	run -0 dg revoke --pid "$pid_a"
	run -0 dg grant --pid "$CPID" --gpu 0000:18:00.0
	run -0 dg revoke --pid "$CPID"
	run -0 dg grant --pid "$CPID" --gpu all
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidia1
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/dev/nvidia1 ENXIO')" ]
	run -1 probe "$cid_a" /dev/nvidia1
	[ "$output" = "/dev/nvidia1 ENOENT" ]
}

@test "grant by cgroup path, with a label shown in status" {
	container c
	run -0 dg grant --cgroup "/$CID" --gpu 0 --container my-job
	[[ "$output" == *"to my-job (cgroup /$CID, PID $CPID)"* ]]
	run -0 dg status
	[[ "${lines[1]}" == "my-job"*"/$CID"*"exclusive"*"GPU 0"* ]]
	# One lease holding an exclusive and a shared GPU shows one MODE: mixed.
	run -0 dg grant --cgroup "/$CID" --gpu 1 --shared
	run -0 dg status
	[[ "${lines[1]}" == "my-job"*"mixed"*"GPU 0"*"GPU 1"* ]]
	run -0 dg revoke --cgroup "/$CID" --gpu 1
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
}

@test "grant --json returns the lease and the nodes made" {
	container c
	run -0 dg --json grant --pid "$CPID" --gpu 0
	[ "$(echo "$output" | jq -r '.cgroup')" = "/$CID" ]
	[ "$(echo "$output" | jq -r '.granted | length')" = 1 ]
	[ "$(echo "$output" | jq -r '[.nodes[].status] | unique | join(",")')" = created ]
	[ "$(echo "$output" | jq -r '.gpus[0].node.path')" = /dev/nvidia0 ]
}

@test "old drivers name major 195 nvidia-frontend" {
	stop_daemon
	rm -rf "$DG_HOST"
	make_host --old-driver -n 1
	start_daemon
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
}

@test "a grant of 16 GPUs makes all 19 nodes (the helper once stopped at 16)" {
	stop_daemon
	rm -rf "$DG_HOST"
	make_host -n 16
	start_daemon
	container c
	run -0 dg grant --pid "$CPID" --gpu all
	[ "$(echo "$output" | grep -c ' created$')" = 19 ]
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidia15 /dev/nvidia-uvm-tools
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/dev/nvidia15 ENXIO\n/dev/nvidia-uvm-tools ENXIO')" ]
}

@test "a container whose process runs as uid 1000 gets its GPU (liveness needs no CAP_KILL)" {
	dg_bundle "$DG_TMP/u" "$DEVGATE_BUILD/probe"
	jq '.process.user = {"uid": 1000, "gid": 1000}' "$DG_TMP/u/config.json" >"$DG_TMP/u/c.json"
	mv "$DG_TMP/u/c.json" "$DG_TMP/u/config.json"
	CID="$DG_ID-u"
	CPID=$(dg_run "$CID" "$DG_TMP/u")
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	[ "$(stat -c %u "/proc/$CPID")" = 1000 ]
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
}
