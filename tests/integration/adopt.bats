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
teardown() { dg_teardown; }

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
