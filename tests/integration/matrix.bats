#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# The compatibility matrix: each runtime users run, on each host layout it
# runs on here. For every row: the grant reaches the driver inside, the
# neighbour GPU stays denied, the runtime's own device change while granted
# works, and revoke leaves the runtime's policy exactly as before.
#
# Rows named "v2" run the runtime in a private mount namespace with cgroup2
# on /sys/fs/cgroup (tests/lib/runc.sh), where it keeps its device policy in
# a BPF program. What each runtime needed here is in README's table.

load helpers

setup_file() { dg_podman_setup_file; }
teardown_file() { dg_podman_teardown_file; }
setup() {
	dg_setup
	start_daemon
	MX_RM=()
}
teardown() {
	local c
	for c in "${MX_RM[@]}"; do eval "$c"; done
	dg_teardown
}

# mx_cgroup PID: the host path of PID's cgroup v2 cgroup.
mx_cgroup() {
	echo "$DG_CGROOT$(awk -F: '$1 == "0" { print $3 }' "/proc/$1/cgroup")"
}

# mx_denied: the neighbour GPU and /dev/mem stay denied, /dev/null works.
mx_denied() {
	run -1 $MX_PROBE /gpu1 /mem
	[ "${lines[0]}" = "/gpu1 EPERM" ]
	[ "${lines[1]}" = "/mem EPERM" ]
	run -0 $MX_PROBE /dev/null
}

# mx_columns: grant, the runtime's own change (MX_UPDATE; it must leave
# /dev/null working) while granted, revoke; for a row that set CPID and
# MX_PROBE (a command that runs probe inside the container).
mx_columns() {
	run -1 $MX_PROBE /gpu1
	[ "$output" = "/gpu1 EPERM" ]
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 $MX_PROBE /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	mx_denied
	# A v2 row: the runtime's programs stay attached, unchanged, before the gate.
	[ -z "${MX_RT:-}" ] || gated_beside "$CG" "$MX_RT"
	# devgate's grant holds or heals.
	run -0 eval "$MX_UPDATE"
	wait_until 5 mx_granted
	mx_denied
	local rt=
	if [ -n "${MX_RT:-}" ]; then
		wait_until 5 mx_beside
		rt=$(cg_foreign "$CG")
	fi
	run -0 dg revoke --pid "$CPID"
	mx_denied
	[ -z "$(gate_leftovers)" ]
	# The runtime's policy is exactly what the runtime itself last made.
	[ -z "$rt" ] || [ "$(cg_progs "$CG")" = "$rt" ] || fail "after revoke: $(cg_progs "$CG"), not $rt"
}

# mx_beside: the gate is in its beside form after whatever the runtime has on CG now.
mx_beside() {
	gated_beside "$CG" "$(cg_foreign "$CG")"
}

# mx_check: the four columns for a v2 row (CG set too); MX_AFTER is the
# cgroup's programs after the revoke.
mx_check() {
	MX_RT=$(cg_progs "$CG")
	[ -n "$MX_RT" ] || fail "the runtime attached no device program to $CG"
	mx_columns
	MX_AFTER=$(cg_progs "$CG")
}

mx_granted() {
	[ "$($MX_PROBE /dev/nvidia0)" = "/dev/nvidia0 ENXIO" ]
}

@test "runc, v2: grant, neighbour, runc update while granted, revoke" {
	container c
	CG=$(mx_cgroup "$CPID")
	MX_PROBE="probe $CID"
	echo "{}" >"$DG_TMP/res.json"
	MX_UPDATE="dg_runc update -r $DG_TMP/res.json $CID"
	mx_check
	[ "$(echo "$MX_AFTER" | wc -w)" = 1 ]
}

@test "crun, v2 (memlock shim): grant, neighbour, crun update while granted, revoke" {
	requires runc
	command -v crun >/dev/null || missing "needs crun"
	CID="$DG_ID-crun"
	dg_bundle "$DG_TMP/crun" "$DEVGATE_BUILD/probe"
	CPID=$(dg_crun_run "$CID" "$DG_TMP/crun")
	MX_RM+=("dg_crun_rm $CID")
	CG=$(mx_cgroup "$CPID")
	DG_CGROUPS+=("$CG")
	MX_PROBE="dg_crun exec $CID probe"
	echo "{}" >"$DG_TMP/res.json"
	MX_UPDATE="dg_crun update -r $DG_TMP/res.json $CID"
	mx_check
	[ "$(echo "$MX_AFTER" | wc -w)" = 1 ]
}

# mx_podman RUNTIME: a podman container with that OCI runtime (a path);
# sets CID, CPID, CG, MX_PROBE.
mx_podman() {
	requires podman
	CID="$DG_ID-pod"
	# shellcheck disable=SC2086
	dg_in_ns podman --root "$DG_NSDIR/storage" --runroot "$DG_NSDIR/runroot" \
		--storage-driver vfs --cgroup-manager cgroupfs --runtime "$1" \
		run -d --name "$CID" $DG_PODMAN_RUN localhost/devgate-test sleep 100000 >/dev/null
	MX_RM+=("dg_podman rm -f $CID >/dev/null 2>&1")
	CPID=$(dg_podman inspect -f '{{.State.Pid}}' "$CID")
	CG=$(mx_cgroup "$CPID")
	DG_CGROUPS+=("$CG")
	MX_PROBE="dg_podman exec $CID probe"
	MX_UPDATE="true"
}

@test "podman with runc, v2: grant, neighbour, revoke" {
	mx_podman "$(command -v runc)"
	mx_check
	[ "$(echo "$MX_AFTER" | wc -w)" = 1 ]
}

@test "podman with crun, v2 (memlock shim): grant, neighbour, revoke" {
	command -v crun >/dev/null || missing "needs crun"
	mx_podman "$(dg_crun_wrapper)"
	mx_check
	[ "$(echo "$MX_AFTER" | wc -w)" = 1 ]
}

# LXC's own change is liblxc's add_device_node (lxc-device add): a new
# program of LXC's own, which devgate's grant must survive.
@test "LXC, v2: grant, neighbour, lxc-device add while granted, revoke" {
	lxc_container c
	X="/dev/devgate-test-$DG_ID-x"
	mknod "${X}1" c 240 1
	MX_RM+=("rm -f ${X}1")
	MX_PROBE="lxc_probe $CID"
	MX_UPDATE="dg_lxc_add $CID ${X}1"
	mx_check
	# LXC's added device stays allowed after devgate's revoke.
	run -1 lxc_probe "$CID" /x1 /x2
	[ "${lines[0]}" = "/x1 ENXIO" ]
	[ "${lines[1]}" = "/x2 EPERM" ]
}

# mx_rootfs: a busybox tree with the probe and the denied /gpu1 and /mem.
mx_rootfs() {
	dg_bundle "$DG_TMP/img" "$DEVGATE_BUILD/probe" >/dev/null
	echo "$DG_TMP/img/rootfs"
}

# mx_docker NSFILE PREFIX: a private dockerd (in NSFILE's mount namespace;
# empty: the host's view) and a container of the probe image; sets CID,
# CPID and MX_PROBE.
mx_docker() {
	command -v dockerd >/dev/null || missing "needs dockerd"
	export DG_DOCKER_NS=$1
	MX_RM+=("dg_docker_stop $2")
	dg_docker_start "$2"
	dg_docker_image devgate-probe "$(mx_rootfs)"
	CID=mx
	dg_docker run -d --name "$CID" --network none devgate-probe sleep 100000 >/dev/null
	CPID=$(dg_docker inspect -f '{{.State.Pid}}' "$CID")
	MX_PROBE="dg_docker exec $CID probe"
}

# mx_lxd NSFILE PREFIX: a private LXD and a privileged container of the
# probe image (an unprivileged one has no device policy); sets CID, CPID,
# MX_PROBE, and MX_UPDATE to hot-plug /x1 (240:1) while granted.
mx_lxd() {
	command -v lxd >/dev/null || missing "needs lxd"
	export DG_LXD_NS=$1
	MX_RM+=("dg_lxd_stop $2")
	dg_lxd_start "$2"
	dg_lxd_image devgate-probe "$(mx_rootfs)"
	CID="$2-c"
	dg_lxd launch devgate-probe "$CID" -c security.privileged=true >/dev/null
	CPID=$(dg_lxd info "$CID" | awk '$1 == "PID:" { print $2 }')
	X="/dev/devgate-test-$DG_ID-x"
	mknod "${X}1" c 240 1
	MX_RM+=("rm -f ${X}1")
	MX_PROBE="dg_lxd exec $CID -- /bin/probe"
	MX_UPDATE="dg_lxd config device add $CID x1 unix-char source=${X}1 path=/x1"
}

# Docker 20.10 (Debian's docker.io), a private dockerd started here.
@test "Docker, v2: grant, neighbour, docker update while granted, revoke" {
	mx_docker "$DG_NSDIR/mnt" "dgmx$$d"
	CG=$(mx_cgroup "$CPID")
	MX_UPDATE="dg_docker update --restart on-failure $CID"
	mx_check
	[ "$(echo "$MX_AFTER" | wc -w)" = 1 ]
}

# LXD 5.0 (Debian's lxd), a private LXD started here; a privileged
# container, whose device policy is LXD's program (an unprivileged one has
# none). Its own change: a unix-char device hot-plugged while granted.
@test "LXD, v2: grant, neighbour, config device add while granted, revoke" {
	mx_lxd "$DG_NSDIR/mnt" "dgmx$$l"
	CG=$(mx_cgroup "$CPID")
	mx_check
	# LXD's device stays after devgate's revoke.
	run -1 $MX_PROBE /x1
	[ "$output" = "/x1 ENXIO" ]
}

# Hybrid rows: the runtime in the host's own view, where /sys/fs/cgroup has
# the v1 controllers. There runc, podman (cgroupfs), Docker and privileged
# LXD keep their device policy in the v1 devices controller, which the
# kernel checks after any v2 program.

# mx_v1_list PID: the devices.list of PID's v1 devices cgroup, sorted.
mx_v1_list() {
	local mnt path
	mnt=$(awk '$9 == "cgroup" && $NF ~ /(^|,)devices(,|$)/ { print $5 }' /proc/self/mountinfo | tail -1)
	path=$(awk -F: '$2 ~ /(^|,)devices(,|$)/ { print $3 }' "/proc/$1/cgroup")
	[ -n "$mnt" ] && [ -n "$path" ] || fail "PID $1 has no v1 devices cgroup"
	sort "$mnt$path/devices.list"
}

# mx_check_v1 [RULE]: the four columns for a hybrid row (CPID, MX_PROBE,
# MX_UPDATE set); after the revoke, devices.list is what it was before the
# grant, plus RULE when the runtime's own change added one.
mx_check_v1() {
	local before expect
	before=$(mx_v1_list "$CPID")
	[ -n "$before" ] || fail "empty devices.list"
	[ "$before" != "a *:* rwm" ] || fail "the runtime restricts no device in v1"
	mx_columns
	expect=$(printf '%s\n%s' "$before" "${1:-}" | sed '/^$/d' | sort)
	[ "$(mx_v1_list "$CPID")" = "$expect" ] || fail "devices.list changed: $(mx_v1_list "$CPID")"
}

@test "runc, hybrid (v1 devices): grant, neighbour, runc update while granted, revoke" {
	requires runc
	CID="$DG_ID-h"
	dg_bundle "$DG_TMP/h" "$DEVGATE_BUILD/probe"
	runc --root "$DG_TMP/runc" run -d -b "$DG_TMP/h" "$CID" </dev/null >"$DG_TMP/h.log" 2>&1 ||
		fail "runc run: $(cat "$DG_TMP/h.log")"
	MX_RM+=("runc --root $DG_TMP/runc delete -f $CID")
	CPID=$(runc --root "$DG_TMP/runc" state "$CID" | jq -r .pid)
	MX_PROBE="runc --root $DG_TMP/runc exec $CID probe"
	echo "{}" >"$DG_TMP/res.json"
	MX_UPDATE="runc --root $DG_TMP/runc update -r $DG_TMP/res.json $CID"
	mx_check_v1
}

@test "podman with runc, hybrid (v1 devices, cgroupfs): grant, neighbour, revoke" {
	requires podman
	local pm=(podman --root "$DG_TMP/storage" --runroot "$DG_TMP/runroot" --storage-driver vfs
		--cgroup-manager cgroupfs --runtime runc)
	tar -C "$(mx_rootfs)" -c . | "${pm[@]}" import - localhost/devgate-probe >/dev/null
	CID="$DG_ID-pod"
	# shellcheck disable=SC2086
	"${pm[@]}" run -d --name "$CID" $DG_PODMAN_RUN localhost/devgate-probe sleep 100000 >/dev/null
	MX_RM+=("${pm[*]} rm -f $CID >/dev/null 2>&1" "${pm[*]} rmi -af >/dev/null 2>&1"
		"umount -R $DG_TMP/storage 2>/dev/null")
	CPID=$("${pm[@]}" inspect -f '{{.State.Pid}}' "$CID")
	MX_PROBE="${pm[*]} exec $CID probe"
	MX_UPDATE="true"
	mx_check_v1
}

@test "Docker, hybrid (v1 devices): grant, neighbour, docker update while granted, revoke" {
	mx_docker "" "dgmx$$h"
	MX_UPDATE="dg_docker update --cpu-shares 512 $CID"
	mx_check_v1
}

@test "LXD, hybrid (v1 devices, privileged): grant, neighbour, config device add while granted, revoke" {
	mx_lxd "" "dgmx$$k"
	mx_check_v1 "c 240:1 rwm"
	run -1 $MX_PROBE /x1
	[ "$output" = "/x1 ENXIO" ]
}
