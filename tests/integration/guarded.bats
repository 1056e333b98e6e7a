#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# The GPU-class devices map (dg_guarded_v1, an array indexed by major that
# the programs' lookups are inlined from): a major at the top of the 12-bit
# range, a dynamic one (nvidia-uvm's kind) and minors past the DRM bitmap
# are guarded, granted and counted as 195 is.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; }
teardown() { dg_teardown; }

# count NAME DEVICE TEXT: the value of $CID's one series of NAME for DEVICE.
count() {
	local lines
	lines=$(echo "$3" | grep "^$1{" | grep -F "container=\"$CID\"" | grep -F "device=\"$2\"" || true)
	[ "$(echo "$lines" | grep -c .)" = 1 ] || fail "want one series of $1 $2, got: $lines"
	echo "${lines##* }"
}

# free_major FROM...: the first of the majors no driver here holds (the
# kernel then answers ENXIO to an allowed open of it).
free_major() {
	local m
	for m in "$@"; do
		grep -q "^ *$m " /proc/devices || {
			echo "$m"
			return 0
		}
	done
	fail "majors $* are all held by drivers here"
}

# edges MODE: major 4095 and a dynamic uvm major with gate-mode MODE.
edges() {
	top=$(free_major 4095)
	uvm=$(free_major 509 508 507 506 505)
	make_host --nvidia-major "$top" --uvm-major "$uvm"
	start_daemon --gate-mode "$1"
	container c
	# Nodes the runtime left denied: the second GPU, a minor past the
	# bitmap's 256 (a major with every minor GPU-class), uvm's own numbers.
	mknod -m 666 "$DG_TMP/c/rootfs/hi1" c "$top" 1
	mknod -m 666 "$DG_TMP/c/rootfs/hi300" c "$top" 300
	mknod -m 666 "$DG_TMP/c/rootfs/uvm" c "$uvm" 0
	run -1 probe "$CID" /hi1 /uvm
	[ "$output" = "$(printf '/hi1 EPERM\n/uvm EPERM')" ]

	run -0 dg grant --pid "$CPID" --gpu 0
	GATED_NAMES=$(cg_prog_names "$DG_CGROOT/$CID")
	run -0 dg_runc exec "$CID" stat -c '%n %t:%T' /dev/nvidia0 /dev/nvidia-uvm
	[ "$output" = "$(printf '/dev/nvidia0 %x:0\n/dev/nvidia-uvm %x:0' "$top" "$uvm")" ]
	run -1 probe "$CID" -n 3 /dev/nvidia0
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n%.0s' 1 2 3)" ]
	run -1 probe "$CID" /uvm /dev/nvidia-uvm
	[ "$output" = "$(printf '/uvm ENXIO\n/dev/nvidia-uvm ENXIO')" ]
	# The neighbours stay denied, and the tally saw them as GPU-class.
	run -1 probe "$CID" -n 2 /hi1
	[ "$output" = "$(printf '/hi1 EPERM\n%.0s' 1 2)" ]
	run -1 probe "$CID" -n 2 /hi300
	[ "$output" = "$(printf '/hi300 EPERM\n%.0s' 1 2)" ]
	run -0 probe "$CID" /dev/null

	text=$(dg metrics)
	[ "$(count devgate_device_accesses_granted_total "$top:0" "$text")" = 3 ]
	[ "$(count devgate_device_accesses_allowed_total "$top:0" "$text")" = 3 ]
	[ "$(count devgate_device_accesses_denied_total "$top:1" "$text")" = 2 ]
	# $top:300 is no node of the inventory: the cgroup's one "other" key.
	[ "$(count devgate_device_accesses_denied_total other "$text")" = 2 ]
	[ "$(count devgate_device_accesses_granted_total "$uvm:0" "$text")" = 2 ]

	run -0 dg revoke --pid "$CPID"
	run -1 probe "$CID" /uvm /hi1
	[ "$output" = "$(printf '/uvm EPERM\n/hi1 EPERM')" ]
	run -0 probe "$CID" /dev/null
}

@test "major 4095 and a dynamic uvm major: granted, denied and counted as 195; every minor of them" {
	edges beside
	[[ "$GATED_NAMES" == *devgate_beside* ]]
}

@test "the same with gate-mode = replace (a gate in runc's program's place)" {
	edges replace
	[[ "$GATED_NAMES" == *devgate_gate* && "$GATED_NAMES" != *devgate_beside* ]]
}

@test "DRM: minors past the bitmap and the host's display minors stay the runtime's, uncounted" {
	make_host -n 1 --amd 2
	start_daemon
	container c
	mknod -m 666 "$DG_TMP/c/rootfs/r129" c 226 129
	mknod -m 666 "$DG_TMP/c/rootfs/r300" c 226 300
	mknod -m 666 "$DG_TMP/c/rootfs/card9" c 226 9

	run -0 dg grant --pid "$CPID" --gpu 1
	run -1 probe "$CID" /dev/dri/renderD128
	[ "$output" = "/dev/dri/renderD128 ENXIO" ]
	run -1 probe "$CID" /r129 /r300 /card9
	[ "$output" = "$(printf '/r129 EPERM\n/r300 EPERM\n/card9 EPERM')" ]

	text=$(dg metrics)
	[ "$(count devgate_device_accesses_granted_total 226:128 "$text")" = 1 ]
	[ "$(count devgate_device_accesses_denied_total 226:129 "$text")" = 1 ]
	# 226:300 and 226:9 are not GPU-class: no series, not even "other".
	run -1 grep -c "container=\"$CID\".*device=\"\(226:300\|226:9\|other\)\"" <<<"$text"
	[ "$output" = 0 ]
}
