#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# What a devgated whose pins were lost adopts from the kernel: the maps that
# the gates and tallies on leased cgroups still use (daemon/gate/README.md).
# The kernel keeps a map's name to 15 characters; a longer one could never
# be found by name.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; }
teardown() {
	[ -z "${LOOP_PID:-}" ] || { touch "$DG_TMP/stop" && wait "$LOOP_PID"; } || true
	dg_teardown
}

# metric NAME: the value of one unlabelled sample of devgatectl metrics.
metric() {
	dg metrics | awk -v m="$1" '$1 == m { print $2 }'
}

# seen DEVICE: devgated has an event of a denial of DEVICE ("c 195:1").
seen() {
	dg events --json | jq -e -s --arg d "$1" 'any(.[]; .device == $d)' >/dev/null
}

@test "pins removed, devgated restarted: dropped denial events are still counted, new ones seen" {
	# No per-cgroup budget of events, so that one container fills the ring.
	DEVGATE_TEST_CGROUP_EVENTS=0 start_daemon
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	fill_ring 7000
	[ "$DENIED" -gt 6600 ]
	dropped=$(metric devgate_denial_events_dropped_total)
	[ "$dropped" -gt 0 ]

	stop_daemon TERM
	rm -rf "$DG_PINS"
	start_daemon
	grep -q "adopted the BPF maps of the gates on leased cgroups" "$DG_TMP/daemon.log"
	# The count lives in the kernel's map, which the container's tally keeps.
	[ "$(metric devgate_denial_events_dropped_total)" = "$dropped" ]
	# The ring the tally writes to is the one devgated reads.
	run -1 probe "$CID" /many/7001
	[ "$output" = "/many/7001 EPERM" ]
	wait_until 5 seen "c 195:7001" || fail "the denial of 195:7001 made no event"
	# And each map is pinned again under the name the kernel keeps for it.
	test -e "$DG_PINS/dg_grants_v1"
	for pin in "$DG_PINS"/dg_*_v1; do
		name=$(bpftool -j map show pinned "$pin" 2>/dev/null | jq -er .name) || continue # a program
		[ "$name" = "${pin##*/}" ] || fail "map pinned as ${pin##*/} is named $name in the kernel"
	done
}

# possible_cpus: how many CPUs a per-CPU map has a value for.
possible_cpus() {
	echo $(($(cut -d- -f2 /sys/devices/system/cpu/possible) + 1))
}

@test "an earlier release's drops counter, pinned as dg_event_drops_v1, is adopted: by pin, then by the name the kernel kept" {
	# As a release before the rename left it: a 17-character name, of which
	# the kernel kept 15 ("dg_event_drops_"), and a count of 5 per CPU.
	mkdir -p "$DG_PINS"
	bpftool map create "$DG_PINS/dg_event_drops_v1" type percpu_array key 4 value 8 \
		entries 1 name dg_event_drops_v1
	bpftool map update pinned "$DG_PINS/dg_event_drops_v1" key 0 0 0 0 value 5 0 0 0 0 0 0 0
	old_id=$(bpftool -j map show pinned "$DG_PINS/dg_event_drops_v1" | jq .id)
	[ "$(bpftool -j map show pinned "$DG_PINS/dg_event_drops_v1" | jq -r .name)" = dg_event_drops_ ]
	want=$((5 * $(possible_cpus)))

	start_daemon
	grep -q "adopted 1 BPF map(s) pinned under an earlier release's name" "$DG_TMP/daemon.log"
	[ "$(metric devgate_denial_events_dropped_total)" = "$want" ]
	# The same map, pinned under its new name as well; the old pin stays.
	[ "$(bpftool -j map show pinned "$DG_PINS/dg_evdrops_v1" | jq .id)" = "$old_id" ]
	test -e "$DG_PINS/dg_event_drops_v1"

	# A container's tally counts in it, so with every pin lost it is found
	# again by the name the kernel kept.
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	stop_daemon TERM
	rm -rf "$DG_PINS"
	start_daemon
	grep -q "adopted the BPF maps of the gates on leased cgroups" "$DG_TMP/daemon.log"
	[ "$(metric devgate_denial_events_dropped_total)" = "$want" ]
	[ "$(bpftool -j map show pinned "$DG_PINS/dg_evdrops_v1" | jq .id)" = "$old_id" ]
}

# loop_start: openloop in the container's cgroup CG, opening /dev/nvidia0's
# numbers (granted) and GPU 1's (not) from host nodes until loop_stop.
loop_start() {
	[ -e "$DG_TMP/gpu0" ] || mknod -m 666 "$DG_TMP/gpu0" c 195 0
	[ -e "$DG_TMP/gpu1" ] || mknod -m 666 "$DG_TMP/gpu1" c 195 1
	rm -f "$DG_TMP/ready" "$DG_TMP/stop"
	"$DEVGATE_BUILD/openloop" -t 300000 "$CG" "$DG_TMP/gpu0" "$DG_TMP/gpu1" \
		"$DG_TMP/ready" "$DG_TMP/stop" >"$DG_TMP/loop.out" 2>&1 &
	LOOP_PID=$!
	wait_until 10 test -e "$DG_TMP/ready" || fail "openloop: $(cat "$DG_TMP/loop.out")"
}

# loop_stop LABEL: GPU 0 was never denied and GPU 1 never let through meanwhile.
loop_stop() {
	local s=0
	touch "$DG_TMP/stop"
	wait "$LOOP_PID" || s=$?
	LOOP_PID=
	echo "# $1: $(cat "$DG_TMP/loop.out")" >&3
	[ "$s" = 0 ] || fail "$1: $(cat "$DG_TMP/loop.out")"
}

# gated_replace CG RT: the replace form, the gate in the place of the runtime's RT.
gated_replace() {
	[ "$(cg_prog_names "$1")" = "devgate_gate devgate_tally" ] &&
		[ "$(cg_state "$1" | jq .orig[0])" = "$2" ] &&
		[ "$(slot_prog 0 "$(cg_state "$1" | jq .slot[0])")" = "$2" ]
}

# Cgroups gated by a devgated of the other form (an older release, or a run
# with the other gate-mode) are converted at start, each with no moment
# where the granted GPU is denied or its neighbour allowed: to beside, the
# beside gate goes last first, then the runtime's program goes back in the
# gate's place (BPF_F_REPLACE); to replace, the gate goes in the program's
# place first, then the beside gate comes off.
@test "replace form converted to beside at start and back, a prober opening all the while" {
	start_daemon --gate-mode replace
	container c
	CG="$DG_CGROOT/$CID"
	rt=$(cg_progs "$CG")
	run -0 dg grant --pid "$CPID" --gpu 0
	gated_replace "$CG" "$rt"
	loop_start
	stop_daemon
	start_daemon --gate-mode beside
	wait_until 10 gated_beside "$CG" "$rt"
	loop_stop "replace to beside"
	grep -q "device program $rt back in its gate's place" "$DG_TMP/daemon.log"
	[ -z "$(gate_leftovers)" ] # no slot, no per-cgroup pin: the beside form needs none
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]

	loop_start
	stop_daemon
	start_daemon --gate-mode replace
	wait_until 10 gated_replace "$CG" "$rt"
	loop_stop "beside to replace"
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -0 dg revoke --pid "$CPID"
	[ "$(cg_progs "$CG")" = "$rt" ]
	[ -z "$(gate_leftovers)" ]
}

# crash_converting POINT [OPTION]: a devgated that dies at POINT as it converts at start.
crash_converting() {
	DEVGATE_FAULT=$1 timeout 60 "$DEVGATE_BUILD/devgated" --socket "$DG_SOCK" --state-dir "$DG_TMP/state" \
		--pin-root "$DG_PINS" --host-root "$DG_HOST" "${@:2}" >>"$DG_TMP/daemon.log" 2>&1 || true
}

@test "a devgated killed in the middle of a conversion: the next start converges, the GPU open throughout" {
	start_daemon --gate-mode replace
	container c
	CG="$DG_CGROOT/$CID"
	rt=$(cg_progs "$CG")
	run -0 dg grant --pid "$CPID" --gpu 0
	loop_start
	stop_daemon
	# Killed with the beside gate last and the replace form's gate still there.
	crash_converting guard.convert
	[[ "$(cg_prog_names "$CG")" == *devgate_gate*devgate_beside* ]] || fail "$(cg_prog_names "$CG")"
	start_daemon --gate-mode beside
	wait_until 10 gated_beside "$CG" "$rt"
	loop_stop "replace to beside, killed half-way"
	[ -z "$(gate_leftovers)" ]

	loop_start
	stop_daemon
	# Killed with the gate in the program's place and the beside gate still there.
	crash_converting guard.unconvert --gate-mode replace
	[[ "$(cg_prog_names "$CG")" == *devgate_gate*devgate_beside* ]] || fail "$(cg_prog_names "$CG")"
	start_daemon --gate-mode replace
	wait_until 10 gated_replace "$CG" "$rt"
	loop_stop "beside to replace, killed half-way"
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -0 dg revoke --pid "$CPID"
	[ "$(cg_progs "$CG")" = "$rt" ]
	[ -z "$(gate_leftovers)" ]
}

# An earlier release's lookout kept its record in per-CPU slots
# (DEVGATE_TEST_MARK=slots loads that form; so do kernels whose device
# programs lack task storage). At start the current lookout and beside gate
# go on before the earlier ones come off: the GPU stays open throughout.
@test "the lookout's per-CPU slots converted to the task's record at start, a prober opening all the while" {
	export DEVGATE_TEST_MARK=slots
	start_daemon
	unset DEVGATE_TEST_MARK
	container c
	CG="$DG_CGROOT/$CID"
	rt=$(cg_progs "$CG")
	run -0 dg grant --pid "$CPID" --gpu 0
	gated_beside "$CG" "$rt"
	run ! keeps_per_task "$(lookout_id "$CG")"
	old=$(bpftool -j cgroup show "$CG" |
		jq -r '[.[] | select(.name == "devgate_beside" or .name == "devgate_mark") | .id] | join(" ")')
	loop_start
	stop_daemon
	start_daemon
	wait_until 10 keeps_per_task "$(lookout_id "$CG")"
	wait_until 10 gated_beside "$CG" "$rt"
	loop_stop "slots to task storage"
	for id in $old; do
		[[ " $(cg_progs "$CG") " != *" $id "* ]] || fail "$id left: $(cg_progs "$CG")"
	done
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -0 dg revoke --pid "$CPID"
	[ "$(cg_progs "$CG")" = "$rt" ]
	[ -z "$(gate_leftovers)" ]
}

@test "a devgated killed between putting its beside gate on and taking the earlier one off: the next start converges" {
	export DEVGATE_TEST_MARK=slots
	start_daemon
	unset DEVGATE_TEST_MARK
	container c
	CG="$DG_CGROOT/$CID"
	rt=$(cg_progs "$CG")
	run -0 dg grant --pid "$CPID" --gpu 0
	loop_start
	stop_daemon
	crash_converting own.beside_off
	[[ "$(cg_prog_names "$CG")" == *devgate_beside*devgate_beside* ]] || fail "$(cg_prog_names "$CG")"
	start_daemon
	wait_until 10 keeps_per_task "$(lookout_id "$CG")"
	wait_until 10 gated_beside "$CG" "$rt"
	loop_stop "slots to task storage, killed half-way"
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -0 dg revoke --pid "$CPID"
	[ "$(cg_progs "$CG")" = "$rt" ]
	[ -z "$(gate_leftovers)" ]
}
