#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# The runtime's own device changes while devgate holds a grant (issue 27,
# item 3): each must take effect as it would without devgate, the grant
# must hold, the neighbour GPU must stay denied, and after devgate's revoke
# the runtime's policy must be exactly its own.
#
# devgated runs with the beside gate (the default gate-mode): it goes after
# the runtime's programs instead of in their place, so LXC's BPF_F_REPLACE
# of its own program still finds it (ARCHITECTURE.md, "The runtime's own
# updates"). With the gate in their place the LXC and LXD tests fail.

load helpers

# One private LXD for the file, in the file's cgroup2 namespace (so it uses a
# BPF device program), with an image that has the probe and the nodes of
# dg_lxc_create: /gpu0 /gpu1 (195:0, 195:1), /x1 /x2 (240:1, 240:2).
setup_file() {
	dg_setup_file
	export DG_LXD_PREFIX="devgate-test-cx$$"
	[ -d "$DG_NSDIR" ] && command -v lxd >/dev/null || return 0
	local root="$BATS_FILE_TMPDIR/lxdroot" a
	mkdir -p "$root/bin"
	cp /bin/busybox "$DEVGATE_BUILD/probe" "$root/bin/"
	for a in sh sleep ls cat grep wc; do ln -sf busybox "$root/bin/$a"; done
	mknod -m 666 "$root/gpu0" c 195 0
	mknod -m 666 "$root/gpu1" c 195 1
	mknod -m 666 "$root/x1" c 240 1
	mknod -m 666 "$root/x2" c 240 2
	DG_LXD_NS="$DG_NSDIR/mnt" dg_lxd_start "$DG_LXD_PREFIX" &&
		dg_lxd_image devgate-probe "$root"
}
teardown_file() {
	command -v lxd >/dev/null && DG_LXD_NS="$DG_NSDIR/mnt" dg_lxd_stop "$DG_LXD_PREFIX"
	dg_teardown_file
}
# Host nodes for add_device_node (240:1..3, like the container's /x1../x3).
setup() {
	dg_setup
	start_daemon
	X="/dev/devgate-test-$DG_ID-x"
	for i in 1 2 3; do mknod "$X$i" c 240 "$i"; done
}
teardown() {
	[ -z "${LXD_CT:-}" ] || dg_lxd delete -f "$LXD_CT" >/dev/null 2>&1 || true
	[ ! -e "$DG_PINS-pre" ] || "$DEVGATE_BUILD/preattach" -d "$PARENT" "$DG_PINS-pre" || true
	rm -f "${X}1" "${X}2" "${X}3" "$DG_PINS-rt" "$DG_PINS-pre"
	dg_teardown
}

# lxc_remove NAME NODE: liblxc's remove_device_node; prints True or False.
lxc_remove() {
	dg_in_ns "$DG_LXC_PY" -c 'import lxc, sys
c = lxc.Container(sys.argv[1], sys.argv[3])
print(c.remove_device_node(sys.argv[2]))' "$1" "$2" "$DG_TMP/lxc"
}

# LXC's own policy alone: one program of its own, none of devgate's.
lxc_alone() {
	[ "$(cg_progs "$CG" | wc -w)" = 1 ] && [ -z "$(cg_prog_names "$CG")" ] &&
		[ -z "$(gate_leftovers)" ]
}

# runc_container: the runc container c (sets CID, CPID and CG), with /gpu0
# (195:0) made in its rootfs: it stays after the revoke removes /dev/nvidia0.
runc_container() {
	container c
	CG="$DG_CGROOT/$CID"
	mknod -m 666 "$DG_TMP/c/rootfs/gpu0" c 195 0
}

# lxd_container NAME: a privileged LXD container (its device policy is LXD's
# BPF program); sets CID, CPID and CG.
lxd_container() {
	command -v lxd >/dev/null || missing "needs lxd"
	export DG_LXD_NS="$DG_NSDIR/mnt"
	dg_lxd_paths "$DG_LXD_PREFIX"
	CID="$DG_ID-$1"
	LXD_CT=$CID
	dg_lxd launch devgate-probe "$CID" -c security.privileged=true >/dev/null
	CPID=$(dg_lxd info "$CID" | awk '$1 == "PID:" { print $2 }')
	CG="$DG_CGROOT/lxc.payload.$CID"
	[ -n "$CPID" ] && [ -n "$(cg_progs "$CG")" ]
}

lxd_probe() {
	dg_lxd exec "$CID" -- /bin/probe "$@"
}

# Mounts and nodes of PATH inside the container: 0 when LXD left none.
lxd_leftovers() {
	# shellcheck disable=SC2016 # $1 is the inner shell's
	dg_lxd exec "$CID" -- sh -c '{ grep " $1 " /proc/mounts; ls "$1"; } 2>/dev/null | wc -l' _ "$1"
}

# LXD 5.0 hot-plugs a unix-char device by a bind mount and a rule added
# through liblxc, which replaces LXC's program (BPF_F_REPLACE).
@test "LXD adds and removes a device while granted: both take effect, nothing is left" {
	lxd_container c
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 dg_lxd config device add "$CID" x1 unix-char source="${X}1" path="${X}1"
	run -1 lxd_probe "${X}1" /x1 /gpu0 /gpu1 /x2
	[ "${lines[0]}" = "${X}1 ENXIO" ]
	[ "${lines[1]}" = "/x1 ENXIO" ]
	[ "${lines[2]}" = "/gpu0 ENXIO" ]
	[ "${lines[3]}" = "/gpu1 EPERM" ]
	[ "${lines[4]}" = "/x2 EPERM" ]
	run -0 dg_lxd config device remove "$CID" x1
	[ "$(lxd_leftovers "${X}1")" = 0 ]
	run -1 lxd_probe /x1 /gpu0 /gpu1
	[ "${lines[0]}" = "/x1 EPERM" ]
	[ "${lines[1]}" = "/gpu0 ENXIO" ]
	[ "${lines[2]}" = "/gpu1 EPERM" ]

	run -0 dg revoke --pid "$CPID"
	[ "$(cg_progs "$CG" | wc -w)" = 1 ]
	[ -z "$(cg_prog_names "$CG")" ]
	[ -z "$(gate_leftovers)" ]
	run -1 lxd_probe /x1 /gpu0
	[ "${lines[0]}" = "/x1 EPERM" ]
	[ "${lines[1]}" = "/gpu0 EPERM" ]
	# LXD's view matches the kernel's: the same device adds and removes again.
	run -0 dg_lxd config device add "$CID" x1 unix-char source="${X}1" path="${X}1"
	run -1 lxd_probe /x1
	[ "$output" = "/x1 ENXIO" ]
	run -0 dg_lxd config device remove "$CID" x1
	[ "$(lxd_leftovers "${X}1")" = 0 ]
}

# After one update, LXC only ever replaces its program (BPF_F_REPLACE with
# the fd of the one it attached); it never appends again.
@test "LXC adds a device while granted, after an update of its own: it works" {
	lxc_container c
	run -0 dg_lxc_add "$CID" "${X}1"
	[ "$output" = True ]
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 dg_lxc_add "$CID" "${X}2"
	[ "$output" = True ]
	run -1 lxc_probe "$CID" /x2 /x1 /gpu0 /gpu1 /mem /x3
	[ "${lines[0]}" = "/x2 ENXIO" ]
	[ "${lines[1]}" = "/x1 ENXIO" ]
	[ "${lines[2]}" = "/gpu0 ENXIO" ]
	[ "${lines[3]}" = "/gpu1 EPERM" ]
	[ "${lines[4]}" = "/mem EPERM" ]
	[ "${lines[5]}" = "/x3 EPERM" ]
	run -0 lxc_probe "$CID" /dev/null

	run -0 dg revoke --pid "$CPID"
	wait_until 3 lxc_alone
	run -1 lxc_probe "$CID" /x1 /x2 /gpu0 /gpu1 /x3
	[ "${lines[0]}" = "/x1 ENXIO" ]
	[ "${lines[1]}" = "/x2 ENXIO" ]
	[ "${lines[2]}" = "/gpu0 EPERM" ]
	[ "${lines[3]}" = "/gpu1 EPERM" ]
	[ "${lines[4]}" = "/x3 EPERM" ]
	# LXC goes on updating its program as if devgate had never been there.
	run -0 dg_lxc_add "$CID" "${X}3"
	[ "$output" = True ]
	run -1 lxc_probe "$CID" /x3
	[ "$output" = "/x3 ENXIO" ]
	lxc_alone
}

@test "LXC removes a device while granted: it is denied inside, the grant holds" {
	lxc_container c
	run -0 dg_lxc_add "$CID" "${X}1"
	run -0 dg_lxc_add "$CID" "${X}2"
	[ "$output" = True ]
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 lxc_remove "$CID" "${X}1"
	[ "$output" = True ]
	run -1 lxc_probe "$CID" /x1 /x2 /gpu0 /gpu1 /mem
	[ "${lines[0]}" = "/x1 EPERM" ]
	[ "${lines[1]}" = "/x2 ENXIO" ]
	[ "${lines[2]}" = "/gpu0 ENXIO" ]
	[ "${lines[3]}" = "/gpu1 EPERM" ]
	[ "${lines[4]}" = "/mem EPERM" ]

	run -0 dg revoke --pid "$CPID"
	wait_until 3 lxc_alone
	run -1 lxc_probe "$CID" /x1 /x2 /gpu0
	[ "${lines[0]}" = "/x1 EPERM" ]
	[ "${lines[1]}" = "/x2 ENXIO" ]
	[ "${lines[2]}" = "/gpu0 EPERM" ]
}

# runc 1.1 leaves the device program alone on update; devgate must too.
@test "runc update while granted: the grant holds; the revoke gives runc its program back" {
	runc_container
	before=$(cg_progs "$CG")
	run -0 dg grant --pid "$CPID" --gpu 0
	echo '{}' >"$DG_TMP/empty.json"
	run -0 dg_runc update -r "$DG_TMP/empty.json" "$CID"
	run -1 probe "$CID" /gpu0 /gpu1 /mem
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "${lines[2]}" = "/mem EPERM" ]
	run -0 dg revoke --pid "$CPID"
	[ "$(cg_progs "$CG")" = "$before" ]
	[ -z "$(gate_leftovers)" ]
	run -1 probe "$CID" /gpu0 /gpu1
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
}

# granted_then_revoked: in runc_container with GPU 0 granted, /gpu0 reaches
# the driver and /gpu1 stays denied; after the revoke runc's program (no
# name) is alone and devgate left nothing.
granted_then_revoked() {
	run -1 probe "$CID" /gpu0 /gpu1
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -0 dg revoke --pid "$CPID"
	[ "$(cg_prog_names "$CG")" = "" ]
	[ -z "$(gate_leftovers)" ]
}

# The runtime's program stays attached, untouched: the beside gate and the
# tally follow it, and the revoke takes off only what devgate put on.
@test "the beside gate: after the runtime's program, which stays; the revoke leaves it alone" {
	runc_container
	before=$(cg_progs "$CG")
	run -0 dg grant --pid "$CPID" --gpu 0
	[ "$(cg_progs "$CG" | cut -d' ' -f1)" = "$before" ]
	[ "$(cg_prog_names "$CG")" = " devgate_mark devgate_beside devgate_tally" ]
	gated_beside "$CG" "$before"
	run -1 probe "$CID" /gpu0 /gpu1 /mem
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "${lines[2]}" = "/mem EPERM" ]
	run -0 probe "$CID" /dev/null
	run -0 dg revoke --pid "$CPID"
	[ "$(cg_progs "$CG")" = "$before" ]
	[ -z "$(gate_leftovers)" ]
	run -1 probe "$CID" /gpu0
	[ "$output" = "/gpu0 EPERM" ]
}

# A program attached after the beside gate decides after it: the heal puts
# the gate last again, and the neighbour stays denied meanwhile.
@test "a program attached after the beside gate: the heal puts the gate after it" {
	runc_container
	run -0 dg grant --pid "$CPID" --gpu 0
	bpftool prog load "$DEVGATE_BUILD/runtime_like.bpf.o" "$DG_PINS-rt" type cgroup/dev
	bpftool cgroup attach "$CG" device pinned "$DG_PINS-rt" multi
	wait_until 5 sh -c '[ "$(bpftool -j cgroup show "$1" | jq -r "[.[].name] | join(\" \")")" = \
		" devgate_mark runtime_like devgate_beside devgate_tally" ]' _ "$CG" ||
		fail "$(bpftool cgroup show "$CG")"
	run -1 probe "$CID" /gpu0 /gpu1 /mem
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "${lines[2]}" = "/mem EPERM" ]
	run -0 dg revoke --pid "$CPID"
	[ "$(cg_prog_names "$CG")" = " runtime_like" ]
	run -1 probe "$CID" /gpu0
	[ "$output" = "/gpu0 EPERM" ]
}

# accesses KIND: devgate_device_accesses_KIND_total of GPU 0's node (195:0), summed.
accesses() {
	dg metrics | awk -v m="devgate_device_accesses_$1_total" \
		'index($1, m "{") == 1 && index($1, "device=\"195:0\"") { s += $2 } END { print s + 0 }'
}

# An ancestor's program attached with BPF_F_PREORDER (Linux 6.15) runs
# before the container's own, so its denial comes before the beside gate:
# the gate must not clear it. devgate's lookout (devgate_mark, pre-order on
# the container's cgroup) tells the gate what the ancestors decided. The
# ancestor is the test's own parent cgroup: one on the root would deny 195:*
# to every process on the host while it is attached.
@test "an ancestor's pre-order program denies while granted: its denial stands" {
	nested_container c
	CG="$PARENT/$CID"
	mknod -m 666 "$DG_TMP/c/rootfs/gpu0" c 195 0
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" /gpu0 /gpu1
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	granted=$(accesses granted)
	denied=$(accesses denied)
	bpftool prog load "$DEVGATE_BUILD/runtime_like.bpf.o" "$DG_PINS-pre" type cgroup/dev
	"$DEVGATE_BUILD/preattach" "$PARENT" "$DG_PINS-pre"
	run -1 probe "$CID" /gpu0 /gpu1 /mem
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "${lines[2]}" = "/mem EPERM" ]
	run -0 probe "$CID" /dev/null
	# The denial the lookout kept is counted as one, never as granted.
	[ "$(accesses granted)" = "$granted" ]
	[ "$(accesses denied)" -gt "$denied" ]
	"$DEVGATE_BUILD/preattach" -d "$PARENT" "$DG_PINS-pre"
	granted_then_revoked
}

# A move of the beside gate to last place (someone attached a program after
# it) attaches its other instance first and then detaches the one in place:
# a prober in the container's cgroup never sees the granted device denied.
# The program moveprobe attaches allows everything, so only a move could.
@test "the beside gate moved to last place, 30 times: the granted device is never denied" {
	runc_container
	run -0 dg grant --pid "$CPID" --gpu 0
	mknod -m 666 "$DG_TMP/gpu0" c 195 0
	run "$DEVGATE_BUILD/moveprobe" -n 30 -t 10000 "$CG" "$DG_TMP/gpu0"
	echo "$output"
	[ "$status" = 0 ]
	[ "$(echo "$output" | grep -c '^round ')" = 30 ]
	granted_then_revoked
}

# A restarted devgated knows its beside gate again: by its pin, or, with the
# pins gone, on the leased cgroup.
@test "devgated restarted, with and without pins: the beside gate is known and stays alone" {
	runc_container
	run -0 dg grant --pid "$CPID" --gpu 0
	progs=$(cg_progs "$CG")
	stop_daemon
	start_daemon
	run -0 dg status
	[ "$(cg_progs "$CG")" = "$progs" ]
	stop_daemon
	rm -f "$DG_PINS/dg_beside_v1" "$DG_PINS/dg_tally_map_v1"
	start_daemon
	[ "$(cg_progs "$CG")" = "$progs" ]
	[ -e "$DG_PINS/dg_beside_v1" ]
	run -1 probe "$CID" /gpu0 /gpu1
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -0 dg revoke --pid "$CPID"
	[ "$(cg_progs "$CG")" = "$(echo "$progs" | cut -d' ' -f1)" ]
	[ -z "$(gate_leftovers)" ]
}

# Without any program of the runtime's the beside gate would let every GPU
# through: the default gate takes its place (GPU-class devices only when
# granted), as on a cgroup that had no program at the grant.
@test "the runtime takes its program off: the default gate replaces the beside gate" {
	runc_container
	rt=$(cg_progs "$CG")
	run -0 dg grant --pid "$CPID" --gpu 0
	bpftool cgroup detach "$CG" device id "$rt"
	wait_until 5 sh -c '[ "$(bpftool -j cgroup show "$1" | jq -r "[.[].name] | join(\" \")")" = \
		"devgate_gate devgate_tally" ]' _ "$CG" ||
		fail "$(bpftool cgroup show "$CG")"
	run -1 probe "$CID" /gpu0 /gpu1
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -0 probe "$CID" /dev/null
	run -0 dg revoke --pid "$CPID"
	[ -z "$(cg_progs "$CG")" ]
	[ -z "$(gate_leftovers)" ]
}

# The lookout's record is the thread's own: threads of one process on one
# CPU, with a CPU hog among them, each see their own access. Per-CPU slots
# shared by thread id could hand one thread's record to another where the
# kernel preempts between the programs of one access (this test machine's
# kernel runs with preempt=none: it cannot, so the record's kind is checked
# too).
@test "threads on one CPU under a hog: the granted GPU is never denied, the neighbour always is" {
	runc_container
	run -0 dg grant --pid "$CPID" --gpu 0
	mknod -m 666 "$DG_TMP/gpu0" c 195 0
	mknod -m 666 "$DG_TMP/gpu1" c 195 1
	keeps_per_task "$(lookout_id "$CG")"
	for cpu in 0 $(($(nproc) - 1)); do
		run "$DEVGATE_BUILD/threadopen" -n 8 -c "$cpu" -d 2000 "$CG" "$DG_TMP/gpu0" "$DG_TMP/gpu1"
		echo "# cpu $cpu: $output" >&3
		[ "$status" = 0 ]
	done
	granted_then_revoked
}

# stale_opener: a bash process in $CG, on CPU 0, that opens GPU 0 itself
# (no new process) once, then again when $DG_TMP/go exists; each result in
# $DG_TMP/open1 and open2.
stale_opener() {
	echo "$BASHPID" >"$CG/cgroup.procs"
	taskset -cp 0 "$BASHPID" >/dev/null
	{ : <"$DG_TMP/gpu0"; } 2>"$DG_TMP/open1" || true
	until [ -e "$DG_TMP/go" ]; do sleep 0.02; done
	{ : <"$DG_TMP/gpu0"; } 2>"$DG_TMP/open2" || true
}

# A record is taken once, by the access it belongs to: with the lookout
# gone (detached while devgated is down, so nothing heals it), the record
# the same thread left at its previous access must not stand for this one,
# in which an ancestor's pre-order program denies.
@test "the lookout detached: a thread's record from an earlier access never clears an ancestor's denial" {
	nested_container c
	CG="$PARENT/$CID"
	mknod -m 666 "$DG_TMP/c/rootfs/gpu0" c 195 0
	run -0 dg grant --pid "$CPID" --gpu 0
	mknod -m 666 "$DG_TMP/gpu0" c 195 0
	stale_opener &
	wait_until 10 test -s "$DG_TMP/open1"
	grep -q "No such device or address" "$DG_TMP/open1" || fail "$(cat "$DG_TMP/open1")"
	mark=$(lookout_id "$CG")
	stop_daemon
	bpftool cgroup detach "$CG" device id "$mark"
	bpftool prog load "$DEVGATE_BUILD/runtime_like.bpf.o" "$DG_PINS-pre" type cgroup/dev
	"$DEVGATE_BUILD/preattach" "$PARENT" "$DG_PINS-pre"
	touch "$DG_TMP/go"
	wait
	"$DEVGATE_BUILD/preattach" -d "$PARENT" "$DG_PINS-pre"
	grep -q "Operation not permitted" "$DG_TMP/open2" || fail "second open: $(cat "$DG_TMP/open2")"
	start_daemon
	wait_until 10 test -n "$(lookout_id "$CG")"
	granted_then_revoked
}
