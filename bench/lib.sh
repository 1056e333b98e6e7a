# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# What bench/run.sh and bench/fastpath.sh share. Sourced after
# tests/lib/runc.sh (dg_plain).

# bench_plain CGROUP ROOT LIST PROG: a hand-made container (dg_plain: a
# cgroup of its own, a tmpfs /dev, ROOT as its root) with the pinned
# runtime-like device program PROG attached, as a runtime would. CGROUP goes
# into the file LIST, which the caller's cleanup empties. Prints its PID.
bench_plain() {
	local cg=$1 pid
	echo "$cg" >>"$3"
	pid=$(dg_plain "$cg" "$2") || return 1
	bpftool cgroup attach "$cg" device pinned "$4" multi
	echo "$pid"
}

# Ratios over interleaved rounds. A run's noise drifts over seconds (other
# work on the machine), so each goal's ratio is taken within a round, where
# both sides ran back to back, and the run reports the median of the rounds
# with their quartiles: one slow stretch moves one round, not the figure.

# bench_p50 FILE KIND: the p50 of FILE's "KIND NS" lines (empty if none).
bench_p50() {
	awk -v k="$2" '$1 == k { print $2 }' "$1" 2>/dev/null | sort -n |
		awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}

# bench_rounds A KA B KB ROUNDS: for each round R, the p50 of the KA lines
# of A.R over that of the KB lines of B.R, one a line.
bench_rounds() {
	local r a b
	for r in $(seq "$5"); do
		a=$(bench_p50 "$1.$r" "$2")
		b=$(bench_p50 "$3.$r" "$4")
		[ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f\n", a / b }'
	done
	return 0
}

# bench_median: "median first-quartile third-quartile" of the numbers on
# stdin (%.2f each); nothing if there are none.
bench_median() {
	sort -g | awk '{ v[NR] = $1 }
		END {
			if (!NR) exit
			m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%.2f %.2f %.2f\n", m, v[int((NR + 3) / 4)], v[int((3 * NR + 3) / 4)]
		}'
}

# The loaded variant of a comparison: one CPU hog per CPU, each pinned to
# its CPU, started before the first loaded round and seen running, so every
# round and both sides meet the same competition (unpinned hogs were placed
# differently from one run to the next; bench/NOTES.md). Their PIDs are in
# BENCH_HOGS; bench_hogs_stop ends them.
BENCH_HOGS=()
bench_hogs_start() {
	local cpu
	for cpu in $(seq 0 $(($(nproc) - 1))); do
		taskset -c "$cpu" bash -c 'while :; do :; done' &
		BENCH_HOGS+=($!)
	done
	for _ in $(seq 200); do
		bench_hogs_running && return 0
		sleep 0.05
	done
	echo "bench: the CPU hogs did not start running" >&2
	bench_hogs_stop
	return 1
}
# bench_hogs_running: each hog runnable (state R), on its own CPU, with CPU
# time used.
bench_hogs_running() {
	local h cpu=0
	[ "${#BENCH_HOGS[@]}" -gt 0 ] || return 1
	for h in "${BENCH_HOGS[@]}"; do
		awk -v c="$cpu" '{ sub(/^.*\) /, ""); exit !($1 == "R" && $12 + $13 > 0 && $37 == c) }' \
			"/proc/$h/stat" 2>/dev/null || return 1
		cpu=$((cpu + 1))
	done
}
bench_hogs_stop() {
	[ "${#BENCH_HOGS[@]}" = 0 ] && return 0
	kill "${BENCH_HOGS[@]}" 2>/dev/null
	wait "${BENCH_HOGS[@]}" 2>/dev/null || true
	BENCH_HOGS=()
}
