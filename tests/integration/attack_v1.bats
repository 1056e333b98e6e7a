#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Attacks on devgate's cgroup v1 devices writes (hybrid hosts). A privileged
# container can write cgroupfs and move its first process into another v1
# devices cgroup: another container's, a host service's, a slice above a
# service, the v1 root. devgate must widen no device list but the
# container's own, before the grant or after it. And a driver reload that
# moves a dynamic major must move the v1 rules with it: the old number may
# be another driver's now.

load helpers

setup() {
	dg_setup
	requires runc cgroup1
	DG_ID="dg28at-$DG_ID"
	DG_PINS="/sys/fs/bpf/$DG_ID"
	DG_V1=$(v1_mount)
	V1_RUNCS=()
	V1_DIRS=()
	HOST_PIDS=()
	start_daemon
}

teardown() {
	local c d
	for c in "${HOST_PIDS[@]}"; do kill "$c" 2>/dev/null || true; done
	for c in "${V1_RUNCS[@]}"; do v1_runc delete -f "$c" >/dev/null 2>&1 || true; done
	for d in "${V1_DIRS[@]}"; do
		wait_until 10 v1_rmdirs "$d" || echo "teardown: cgroups $d are still there" >&2
	done
	dg_teardown
}

# host_service DIR: a host process (not a container's) alone in the v1
# devices cgroup DIR (made, parents first, below the v1 mount), whose list
# and its parents' allow /dev/null and not the GPU; sets SVC_PID.
host_service() {
	local dir=$DG_V1 part
	for part in ${1//\// }; do
		dir=$dir/$part
		mkdir "$dir"
		echo a >"$dir/devices.deny"
		echo 'c 1:3 rwm' >"$dir/devices.allow"
	done
	sleep 100000 >/dev/null 2>&1 3>&- &
	SVC_PID=$!
	HOST_PIDS+=("$SVC_PID")
	echo "$SVC_PID" >"$dir/cgroup.procs"
}

# svc_open DIR NODE: what a new process of the host service in DIR gets
# opening NODE (a host path): the v1 list of DIR alone decides.
svc_open() {
	sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" "$3"' _ "$DG_V1/$1" \
		"$DEVGATE_BUILD/probe" "$2"
}

# refused PID V1DIR: a grant to PID is refused (exit 6) naming V1DIR, and
# changes nothing: no lease, no grant in the map, V1DIR's list as it was.
refused() {
	local pid=$1 dir=$2 before
	before=$(cat "$dir/devices.list")
	run -6 dg grant --pid "$pid" --gpu 0
	[[ "$output" == *"the v1 devices cgroup ${dir#"$DG_V1"} of PID $pid also holds PID "* ]]
	[[ "$output" == *"which is not the container's"* ]]
	[[ "$output" == *"restart the container"* ]]
	[ "$(cat "$dir/devices.list")" = "$before" ]
	no_leases
	[ "$(grant_entries)" = 0 ]
}

@test "first process moved into another runc container's v1 cgroup: refused, the other's list untouched" {
	v1_container b
	cb=$CID pb=$CPID vb=$V1DIR
	V1_DIRS+=("$cb") # runc cannot remove it while a's init is there
	v1_container a
	ca=$CID pa=$CPID va=$V1DIR
	# What a privileged container that writes cgroupfs does to its own init.
	echo "$pa" >"$vb/cgroup.procs"
	refused "$pa" "$vb"
	run ! grep -q '^c 195:0 ' "$vb/devices.list"
	run -1 v1_probe "$cb" /gpu0 /gpu1
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]

	# Back home, the same grant goes through to a alone.
	echo "$pa" >"$va/cgroup.procs"
	run -0 dg grant --pid "$pa" --gpu 0
	run -1 v1_probe "$ca" /gpu0 /gpu1
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -1 v1_probe "$cb" /gpu0
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	run ! grep -q '^c 195:0 ' "$vb/devices.list"
	[ "$pb" != "$pa" ]
}

@test "first process moved into a host service's v1 cgroup, or a slice above one: refused" {
	V1_DIRS+=("$DG_ID-slice")
	host_service "$DG_ID-slice/svc"
	run -1 svc_open "$DG_ID-slice/svc" "$DG_HOST/dev/nvidia0"
	[ "$output" = "$DG_HOST/dev/nvidia0 EPERM" ]
	v1_container a
	ca=$CID pa=$CPID va=$V1DIR

	echo "$pa" >"$DG_V1/$DG_ID-slice/svc/cgroup.procs"
	refused "$pa" "$DG_V1/$DG_ID-slice/svc"
	# The slice holds no process but the container's: the service below it counts.
	echo "$pa" >"$DG_V1/$DG_ID-slice/cgroup.procs"
	refused "$pa" "$DG_V1/$DG_ID-slice"
	[[ "$output" == *"also holds PID $SVC_PID of cgroup /"* ]]
	run -1 svc_open "$DG_ID-slice/svc" "$DG_HOST/dev/nvidia0"
	[ "$output" = "$DG_HOST/dev/nvidia0 EPERM" ]
	run -0 svc_open "$DG_ID-slice/svc" /dev/null

	echo "$pa" >"$va/cgroup.procs"
	run -0 dg grant --pid "$pa" --gpu 0
	run -1 v1_probe "$ca" /gpu0
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	run -1 svc_open "$DG_ID-slice/svc" "$DG_HOST/dev/nvidia0"
	[ "$output" = "$DG_HOST/dev/nvidia0 EPERM" ]
}

@test "first process moved into the v1 root: nothing written there or in its own v1 cgroup" {
	v1_container a
	pa=$CPID va=$V1DIR
	before=$(cat "$va/devices.list")
	root=$(cat "$DG_V1/devices.list")
	echo "$pa" >"$DG_V1/cgroup.procs"
	# The v1 root restricts nothing: only the v2 gate is devgate's to open.
	run -0 dg grant --pid "$pa" --gpu 0
	[ "$(jq -r '.cgroup1 // "none"' "$DG_TMP"/state/leases/*.json)" = none ]
	[ "$(cat "$DG_V1/devices.list")" = "$root" ]
	[ "$(cat "$va/devices.list")" = "$before" ]
	run -0 dg revoke --pid "$pa"
	[ "$(cat "$va/devices.list")" = "$before" ]
}

# v1_gpu0_back DIR: heal put c 195:0 back in DIR.
v1_gpu0_back() {
	grep -qx 'c 195:0 rw' "$1/devices.list"
}

@test "first process moved after the grant: heal, a second grant and a restart follow it nowhere" {
	v1_container b
	cb=$CID vb=$V1DIR
	V1_DIRS+=("$cb") # runc cannot remove it while a's init is there
	v1_container a
	ca=$CID pa=$CPID va=$V1DIR
	before_b=$(cat "$vb/devices.list") before_a=$(cat "$va/devices.list")
	run -0 dg grant --pid "$pa" --gpu 0
	grep -qx 'c 195:0 rw' "$va/devices.list"
	echo "$pa" >"$vb/cgroup.procs"

	# Heal puts lost rules back where the lease has them, not where the PID went.
	echo 'c 195:0 rw' >"$va/devices.deny"
	wait_until 10 v1_gpu0_back "$va"
	[ "$(cat "$vb/devices.list")" = "$before_b" ]
	run -1 v1_probe "$cb" /gpu0
	[ "${lines[0]}" = "/gpu0 EPERM" ]

	# More for the same lease, by the PID that left: refused, the lease as it was.
	run -6 dg grant --pid "$pa" --gpu 1
	[[ "$output" == *"PID $pa is in the v1 devices cgroup ${vb#"$DG_V1"}, outside ${va#"$DG_V1"}"* ]]
	[[ "$output" == *"revoke the lease, then grant again"* ]]
	[ "$(cat "$vb/devices.list")" = "$before_b" ]
	[ "$(dg status --json | jq -r '[.leases[].gpus[]] | length')" = 1 ]

	stop_daemon TERM
	start_daemon
	[ "$(cat "$vb/devices.list")" = "$before_b" ]
	run -1 v1_probe "$ca" /gpu0 /gpu1
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -1 v1_probe "$cb" /gpu0
	[ "${lines[0]}" = "/gpu0 EPERM" ]

	run -0 dg revoke --cgroup "/$ca"
	[ "$(cat "$va/devices.list")" = "$before_a" ]
	[ "$(cat "$vb/devices.list")" = "$before_b" ]
}

# v1_uvm_container NAME OLD NEW: v1_container with /old and /new, nodes of
# nvidia-uvm under either major.
v1_uvm_container() {
	v1_container "$1"
	mknod -m 666 "$DG_TMP/$1/rootfs/old" c "$2" 0
	mknod -m 666 "$DG_TMP/$1/rootfs/new" c "$3" 0
}

@test "a driver reload that moves nvidia-uvm: the v1 rules move too, the old major is denied again" {
	old=$(uvm_major) new=$(free_major)
	v1_uvm_container b "$old" "$new"
	cb=$CID
	v1_uvm_container a "$old" "$new"
	ca=$CID pa=$CPID va=$V1DIR
	before=$(cat "$va/devices.list")
	run -0 dg grant --pid "$pa" --gpu 0
	grep -qx "c $old:0 rw" "$va/devices.list"
	run -1 v1_probe "$ca" /old /new
	[ "$output" = "$(printf '/old ENXIO\n/new EPERM')" ]

	reload_uvm "$new"
	run -0 dg rescan
	grep -q "refreshed $ca after a driver reload: nvidia-uvm $old:0 -> $new:0" "$DG_TMP/daemon.log"
	# The kernel's list: the new numbers in, devgate's old ones out.
	grep -qx "c $new:0 rw" "$va/devices.list"
	grep -qx "c $new:1 rw" "$va/devices.list"
	run ! grep -q "^c $old:" "$va/devices.list"
	run -1 v1_probe "$ca" /dev/nvidia-uvm /new /old /gpu1
	[ "$output" = "$(printf '/dev/nvidia-uvm ENXIO\n/new ENXIO\n/old EPERM\n/gpu1 EPERM')" ]
	run -1 v1_probe "$cb" /new /old
	[ "$output" = "$(printf '/new EPERM\n/old EPERM')" ]
	# The record holds the new rules, so heal and revoke act on them.
	run -0 jq -r '.cgroup1_added[]' "$DG_TMP"/state/leases/*.json
	[[ "$output" == *"c $new:0 rw"* ]]
	[[ "$output" != *"c $old:"* ]]
	echo "c $new:0 rw" >"$va/devices.deny"
	wait_until 10 grep -qx "c $new:0 rw" "$va/devices.list"

	run -0 dg revoke --pid "$pa"
	[ "$(cat "$va/devices.list")" = "$before" ]
	run -1 v1_probe "$ca" /new /old
	[ "$output" = "$(printf '/new EPERM\n/old EPERM')" ]
}

@test "a crash in the middle of a v1 refresh: the next start finishes it, nothing of the old left" {
	# After refresh.nodes the new rules are in the kernel's list and not in
	# the record: the rerun must still own them, or revoke would leave them.
	stop_daemon TERM
	old=$(uvm_major) new=$(free_major)
	DEVGATE_FAULT=refresh.nodes start_daemon
	v1_uvm_container a "$old" "$new"
	ca=$CID pa=$CPID va=$V1DIR
	before=$(cat "$va/devices.list")
	run -0 dg grant --pid "$pa" --gpu 0
	reload_uvm "$new"
	run ! dg rescan
	wait_until 5 sh -c "! kill -0 $DG_DAEMON_PID 2>/dev/null" || fail "devgated did not die"
	wait "$DG_DAEMON_PID" 2>/dev/null || true
	DG_DAEMON_PID=
	grep -qx "c $new:0 rw" "$va/devices.list"
	start_daemon
	grep -q "reconcile: adopted lease of $ca" "$DG_TMP/daemon.log"
	grep -qx "c $new:0 rw" "$va/devices.list"
	run ! grep -q "^c $old:" "$va/devices.list"
	run -1 v1_probe "$ca" /new /old
	[ "$output" = "$(printf '/new ENXIO\n/old EPERM')" ]
	run -0 dg revoke --pid "$pa"
	[ "$(cat "$va/devices.list")" = "$before" ]
}
