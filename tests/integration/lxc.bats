#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# A live LXC container that updates its own device program (lxc-device add)
# while devgate holds a grant on it, and after the revoke.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
# Host nodes for add_device_node (240:1..3, like the container's /x1../x3).
setup() {
	dg_setup
	start_daemon
	X="/dev/devgate-test-$DG_ID-x"
	for i in 1 2 3; do mknod "$X$i" c 240 "$i"; done
}
teardown() {
	rm -f "${X}1" "${X}2" "${X}3"
	dg_teardown
}

# progs_named NAMES: the device programs on the container's cgroup, by name.
progs_named() { [ "$(cg_prog_names "$CG")" = "$1" ]; }

@test "a grant on an LXC container: its own policy stays, the GPU is added" {
	lxc_container c
	own=$(cg_progs "$CG")
	run -0 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == "granted GPU 0 ("*") to lxc.payload.$CID "* ]]
	gated_beside "$CG" "$own"
	run -1 lxc_probe "$CID" /gpu0 /gpu1 /mem /x1
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "${lines[2]}" = "/mem EPERM" ]
	[ "${lines[3]}" = "/x1 EPERM" ]
	run -0 lxc_probe "$CID" /dev/null /dev/zero
}

# gate-mode = replace (coexist.bats has the default, beside form). LXC's
# first update in a container tries BPF_F_REPLACE of its program; the
# gate stands in its place, so the kernel refuses (ENOENT), and LXC appends
# the new program instead and tries to detach the old one (ENOENT again).
# devgate sees LXC's monitor keep the new program open instead of the old
# one and drops the old one's gate: LXC's latest policy alone decides.
@test "gate-mode = replace: LXC adds a device while granted: its new program replaces the old one" {
	stop_daemon
	start_daemon --gate-mode replace
	lxc_container c
	old=$(cg_progs "$CG")
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 dg_lxc_add "$CID" "${X}1"
	[ "$output" = True ]
	wait_until 3 progs_named "devgate_gate devgate_tally"
	run -1 lxc_probe "$CID" /x1 /gpu0 /gpu1 /mem /x2
	[ "${lines[0]}" = "/x1 ENXIO" ]
	[ "${lines[1]}" = "/gpu0 ENXIO" ]
	[ "${lines[2]}" = "/gpu1 EPERM" ]
	[ "${lines[3]}" = "/mem EPERM" ]
	[ "${lines[4]}" = "/x2 EPERM" ]
	run -0 lxc_probe "$CID" /dev/null

	run -0 dg revoke --pid "$CPID"
	# Only LXC's newest program is put back: the added device stays allowed.
	progs=$(cg_progs "$CG")
	[ "$(echo "$progs" | wc -w)" = 1 ]
	[ "$progs" != "$old" ]
	[ -z "$(cg_prog_names "$CG")" ]
	run -1 lxc_probe "$CID" /x1 /gpu0 /gpu1 /mem /x2
	[ "${lines[0]}" = "/x1 ENXIO" ]
	[ "${lines[1]}" = "/gpu0 EPERM" ]
	[ "${lines[2]}" = "/gpu1 EPERM" ]
	[ "${lines[3]}" = "/mem EPERM" ]
	[ "${lines[4]}" = "/x2 EPERM" ]
}

# gate-mode = replace: once a REPLACE has worked, LXC never falls back to
# appending: its update while granted fails, and the rule stays in LXC's
# list, so adding the same device again is a no-op. The replace form can do
# nothing about it (ARCHITECTURE.md; the beside form can: coexist.bats);
# what it must do is fail closed, and leave LXC able to update after the revoke.
@test "gate-mode = replace: LXC that replaced its program before the grant: its add while granted fails closed" {
	stop_daemon
	start_daemon --gate-mode replace
	lxc_container c
	run -0 dg_lxc_add "$CID" "${X}1"
	[ "$output" = True ]
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 dg_lxc_add "$CID" "${X}2"
	[ "$output" = False ]
	run -1 lxc_probe "$CID" /x1 /x2 /gpu0 /gpu1 /mem
	[ "${lines[0]}" = "/x1 ENXIO" ]
	[ "${lines[1]}" = "/x2 EPERM" ]
	[ "${lines[2]}" = "/gpu0 ENXIO" ]
	[ "${lines[3]}" = "/gpu1 EPERM" ]
	[ "${lines[4]}" = "/mem EPERM" ]

	run -0 dg revoke --pid "$CPID"
	run -1 lxc_probe "$CID" /x1 /x2 /gpu0
	[ "${lines[0]}" = "/x1 ENXIO" ]
	[ "${lines[1]}" = "/x2 EPERM" ]
	[ "${lines[2]}" = "/gpu0 EPERM" ]
	# The next add reaches the kernel, with the rule that failed while granted.
	run -0 dg_lxc_add "$CID" "${X}3"
	[ "$output" = True ]
	run -1 lxc_probe "$CID" /x1 /x2 /x3 /gpu0 /mem
	[ "${lines[0]}" = "/x1 ENXIO" ]
	[ "${lines[1]}" = "/x2 ENXIO" ]
	[ "${lines[2]}" = "/x3 ENXIO" ]
	[ "${lines[3]}" = "/gpu0 EPERM" ]
	[ "${lines[4]}" = "/mem EPERM" ]
}

# As LXC's users run it (tests/lib/lxc.sh, and the bench's peer): LXC's
# default log level (at TRACE liblxc loads every device program with the
# verifier's full log) and LXC's default device list (common.conf's), where
# /dev/full (1:7) is allowed and 1:1 is not. devgate's grant adds the GPU.
@test "LXC at its defaults: no trace log, LXC's own device list, the GPU added" {
	requires lxc
	CID="$DG_ID-d"
	DG_LXCS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/lxc.payload.$CID" "$DG_CGROOT/lxc.monitor.$CID")
	dg_lxc_create "$CID" "$DEVGATE_BUILD/probe" defaults
	mknod -m 666 "$DG_TMP/lxc/$CID/rootfs/full" c 1 7
	CPID=$(dg_lxc_start "$CID")
	run -0 lxc_probe "$CID" /full /dev/null
	run -1 lxc_probe "$CID" /mem
	[ "$output" = "/mem EPERM" ]
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 lxc_probe "$CID" /gpu0 /gpu1 /full /mem
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "${lines[2]}" = "/full ok" ]
	[ "${lines[3]}" = "/mem EPERM" ]
	# The log exists and has nothing below LXC's default level.
	[ -f "$DG_TMP/lxc/$CID.log" ]
	run ! grep -E ' (TRACE|DEBUG|INFO|NOTICE) ' "$DG_TMP/lxc/$CID.log"
}
