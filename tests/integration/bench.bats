#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# The bench's own parts, against live containers where they have one: the
# peer's client (bench/lxcload) does what it claims inside a live LXC
# container, the loaded rounds' CPU hogs are pinned one per CPU and running,
# and a ratio over rounds is their median (bench/lib.sh).

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	X="/dev/devgate-test-$DG_ID-x"
	mknod "${X}1" c 240 1
}
teardown() {
	bench_hogs_stop
	rm -f "${X}1"
	dg_teardown
}
# shellcheck source=../../bench/lib.sh
. "$BATS_TEST_DIRNAME/../../bench/lib.sh"

median_of() { bench_rounds "$@" | bench_median; }
lxcload() { dg_in_ns "$DEVGATE_BUILD/bench/lxcload" -P "$DG_TMP/lxc" "$@"; }

# What the bench times for LXC is liblxc's add_device_node and
# remove_device_node, on a container at LXC's defaults: the added node
# reaches the driver inside (ENXIO), its neighbour stays denied, and the
# remove denies it again.
@test "bench/lxcload: liblxc's add lets the node through inside, the neighbour stays denied, the remove takes it back" {
	lxc_container d defaults
	run -1 lxc_probe "$CID" /x1 /x2
	[ "${lines[0]}" = "/x1 EPERM" ]
	run -0 lxcload -a "$CID" "${X}1"
	[[ "$output" =~ ^add\ [0-9]+$ ]]
	run -1 lxc_probe "$CID" /x1 /x2 "${X}1"
	[ "${lines[0]}" = "/x1 ENXIO" ]
	[ "${lines[1]}" = "/x2 EPERM" ]
	[ "${lines[2]}" = "${X}1 ENXIO" ]
	# Cycles: an add and a remove each, one line each, the node gone after.
	run -0 lxcload -n 3 "$CID" "${X}1"
	[ "$(grep -c '^add [0-9]*$' <<<"$output")" = 3 ]
	[ "$(grep -c '^del [0-9]*$' <<<"$output")" = 3 ]
	run -1 lxc_probe "$CID" /x1 /x2
	[ "${lines[0]}" = "/x1 EPERM" ]
	[ "${lines[1]}" = "/x2 EPERM" ]
	# A container that does not run is an error, not a figure.
	run -1 lxcload -n 1 "$DG_ID-none" "${X}1"
	[[ "$output" == *"is not running"* ]]
}

# The loaded rounds: one hog per CPU, each pinned to its own CPU and
# running before the first round (unpinned hogs were placed differently
# from run to run), and none left after.
@test "bench's CPU hogs: one per CPU, pinned to it, running; gone when stopped" {
	bench_hogs_start
	[ "${#BENCH_HOGS[@]}" = "$(nproc)" ]
	bench_hogs_running
	cpu=0
	for h in "${BENCH_HOGS[@]}"; do
		[ "$(taskset -pc "$h" | sed 's/.*: //')" = "$cpu" ]
		cpu=$((cpu + 1))
	done
	hogs=("${BENCH_HOGS[@]}")
	bench_hogs_stop
	for h in "${hogs[@]}"; do [ ! -e "/proc/$h" ]; done
	run ! bench_hogs_running
}

# A ratio over interleaved rounds is the median of each round's ratio of
# p50s, each round's p50 taken first: a slow call (round 3's peer, 100x)
# or a fast one moves neither.
@test "bench's ratio over rounds: the median of each round's p50 ratio, with quartiles" {
	d="$DG_TMP/rounds"
	mkdir -p "$d"
	for r in 1 2 3 4 5; do
		printf 'add %s\nadd %s\nadd %s\n' 4000 4100 $((r == 3 ? 400000 : 3900)) >"$d/peer.$r"
		printf 'grant %s\ngrant %s\ngrant %s\n' 1000 $((r == 3 ? 1 : 1000 + r * 100)) 2000 >"$d/ours.$r"
	done
	run -0 bench_rounds "$d/peer" add "$d/ours" grant 5
	[ "${#lines[@]}" = 5 ]
	[ "${lines[0]}" = 3.6364 ]
	[ "${lines[2]}" = 4.1000 ]
	run -0 median_of "$d/peer" add "$d/ours" grant 5
	[ "$output" = "3.33 2.86 3.64" ]
	# A round with no samples on one side is left out, not counted as 0.
	: >"$d/ours.5"
	run -0 bench_rounds "$d/peer" add "$d/ours" grant 5
	[ "${#lines[@]}" = 4 ]
}

# metric NAME: a counter of this test's devgated.
metric() { dg metrics | awk -v m="$1" '$1 == m { print $2 }'; }
# connects FILE: the connect() calls strace saw to this test's socket.
connects() { grep -c "connect(.*\"$DG_SOCK\"" "$1" || true; }

# The kept-connection row of the throughput section: with -k each dgload job
# makes one connection to devgated (the kernel's count, by strace) and sends
# all its requests on it; devgated serves and counts every one, and each
# takes effect inside the container. Without -k every request has a
# connection of its own, as devgatectl makes it.
@test "bench/dgload -k: one kept connection serves every request, devgated counts each, the grants reach inside" {
	start_daemon
	container a
	apid=$CPID
	aid=$CID
	mknod -m 666 "$DG_TMP/a/rootfs/gpu0" c 195 0
	container b
	mknod -m 666 "$DG_TMP/b/rootfs/gpu0" c 195 0
	g0=$(metric devgate_grants_total)
	r0=$(metric devgate_revokes_total)
	# Two containers granted on one kept connection, and held.
	run -0 strace -f -e trace=connect -o "$DG_TMP/hold.st" \
		"$DEVGATE_BUILD/bench/dgload" -s "$DG_SOCK" -g 0 --shared -k --hold "$apid" "$CPID"
	[ "$(grep -c '^grant [0-9]*$' <<<"$output")" = 2 ]
	[ "$(connects "$DG_TMP/hold.st")" = 1 ]
	for c in "$aid" "$CID"; do
		run -1 probe "$c" /dev/nvidia0 /gpu1
		[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
		[ "${lines[1]}" = "/gpu1 EPERM" ]
	done
	run -0 dg revoke --pid "$apid"
	# 25 grant+revoke cycles of one job on one connection.
	run -0 strace -f -e trace=connect -o "$DG_TMP/k.st" \
		"$DEVGATE_BUILD/bench/dgload" -s "$DG_SOCK" -g 0 --shared -k -n 25 "$apid"
	[ "$(grep -c '^grant [0-9]*$' <<<"$output")" = 25 ]
	[ "$(grep -c '^revoke [0-9]*$' <<<"$output")" = 25 ]
	[[ "$output" == *"1 jobs, 25 cycles each, one kept connection a job, "*" requests/s"* ]]
	[ "$(connects "$DG_TMP/k.st")" = 1 ]
	[ "$(metric devgate_grants_total)" = $((g0 + 2 + 25)) ]
	[ "$(metric devgate_revokes_total)" = $((r0 + 1 + 25)) ]
	# The last revoke took effect: GPU 0 denied again in a (its node gone),
	# still reaches b.
	run -1 probe "$aid" /gpu0 /gpu1 /dev/nvidia0
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "${lines[2]}" = "/dev/nvidia0 ENOENT" ]
	run -1 probe "$CID" /dev/nvidia0 /gpu0
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu0 ENXIO" ]
	# Without -k: a connection per request.
	run -0 strace -f -e trace=connect -o "$DG_TMP/n.st" \
		"$DEVGATE_BUILD/bench/dgload" -s "$DG_SOCK" -g 0 --shared -n 3 "$apid"
	[ "$(connects "$DG_TMP/n.st")" = 6 ]
	[[ "$output" == *"a connection a request"* ]]
}

# Two runs' figure files: a goal's figure that moved more than 20% fails the
# reproduce check; an information figure (third word "info") is shown with
# its spread but no goal counts it; a figure in one file only is listed.
@test "bench/spread.sh: goal figures over 20% fail the check, information figures are listed, not counted" {
	d="$DG_TMP/spread"
	mkdir -p "$d"
	printf 'gi_ratio 100\nrate1g 1000\nproof_us 1000 info\nonly_a 3\n' >"$d/a"
	printf 'gi_ratio 119\nrate1g 1100\nproof_us 1600 info\n' >"$d/b"
	run -0 sh "$DG_ROOT/bench/spread.sh" "$d/a" "$d/b"
	[[ "$output" == *"proof_us"*"1000"*"1600"*"60.0% over 20% (information)"* ]]
	[[ "$output" == *"gi_ratio"*"19.0%"* ]]
	[[ "$output" == *"only_a"*"3"*"-"* ]]
	[ "${lines[-1]}" = "2 of 2 goal figures within 20%" ]
	printf 'gi_ratio 121\nrate1g 1100\nproof_us 1000 info\n' >"$d/b"
	run -1 sh "$DG_ROOT/bench/spread.sh" "$d/a" "$d/b"
	[[ "$output" == *"gi_ratio"*"21.0% over 20%"* ]]
	[ "${lines[-1]}" = "1 of 2 goal figures within 20%" ]
	# Usage errors change nothing and say why.
	run -2 sh "$DG_ROOT/bench/spread.sh" "$d/a"
	[[ "$output" == *"usage: spread.sh A B"* ]]
	run -2 sh "$DG_ROOT/bench/spread.sh" "$d/a" "$d/none"
	[[ "$output" == *"cannot read $d/none"* ]]
}
