#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Two devgated side by side on the same fake host, each with hand-made
# containers of its own (bench/lib.sh's bench_plain: a cgroup with a
# runtime-like device program, a tmpfs /dev): side a as built, side b
# either with DEVGATE_TEST_NO_DEVCACHE=1 (a helper per node job: the kept
# /dev against the helper) or, with FP_BASE=DIR, the devgated of another
# build in DIR (a change against its base). Rounds are interleaved (a, b,
# floor, fork floor) so the machine's load falls on all alike. Prints
# p50/p99 in us, requests/s, devgated's CPU time per request of the rate
# runs (from /proc/PID/schedstat: what a busy machine moves least), and the
# ratios to the floor (bench/floor.c: the same node and map calls, bare, no
# fork) and to the floor plus a bare socket round trip; raw samples and
# both daemons' logs (-v: each grant's nodes/bpf/state split, each revoke's
# steps) go to bench/out/fastpath/.
#
# Knobs: FP_ROUNDS (default 5), FP_N (cycles per round and side, default
# 40), FP_BASE (a build directory for side b), FP_PREFIX (the prefix of
# every name this makes: cgroups, sockets, pins; default dg30pf).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/build
BASE=${FP_BASE:-}
OUT=$top/bench/out/fastpath
ROUNDS=${FP_ROUNDS:-5}
N=${FP_N:-40}
PFX=${FP_PREFIX:-dg30pf}

[ "$(id -u)" = 0 ] || { echo "fastpath: run as root" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"
work=$(mktemp -d "/tmp/$PFX-fastpath.XXXXXX")
export DG_NSDIR=/run/$PFX-fastpath-$$
PINS=/sys/fs/bpf/$PFX-fastpath-$$
PLAIN=$work/plain.list
DAEMONS=()
# shellcheck source=../tests/lib/runc.sh
. "$top/tests/lib/runc.sh"
# shellcheck source=lib.sh
. "$top/bench/lib.sh"

cleanup() {
	set +e
	local p c
	for p in "${DAEMONS[@]}"; do kill "$p" && wait "$p"; done
	cp "$work"/*.log "$OUT/" 2>/dev/null
	[ -f "$PLAIN" ] && while read -r c; do echo 1 >"$c/cgroup.kill"; done <"$PLAIN" 2>/dev/null
	sleep 0.5
	[ -f "$PLAIN" ] && while read -r c; do rmdir "$c"; done <"$PLAIN" 2>/dev/null
	rm -rf "$PINS-a" "$PINS-b" "$PINS-rt"
	umount "$work/state-a" "$work/state-b" 2>/dev/null
	dg_ns_teardown
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

log() { printf '== %s\n' "$*" >&2; }
# stats KIND FILE: "p50 p99" in microseconds of the KIND lines.
stats() {
	grep "^$1 " "$2" | sort -n -k2 |
		awk '{ v[NR] = $2 } END { p99 = int(NR * 0.99); if (p99 < 1) p99 = 1;
			printf "%.0f %.0f\n", v[int((NR + 1) / 2)] / 1000, v[p99] / 1000 }'
}
rate() { sed -n 's/.* \([0-9.]*\) requests\/s/\1/p' "$1"; }

# daemon SIDE BUILD [ENV...]: devgated of BUILD for side a or b, its records on a tmpfs of its own.
daemon() {
	local side=$1 build=$2
	shift 2
	mkdir -p "$work/state-$side"
	mount -t tmpfs -o mode=0700,size=16m "$PFX-state" "$work/state-$side"
	env "$@" "$build/devgated" --socket "$work/$side.sock" --state-dir "$work/state-$side" \
		--pin-root "$PINS-$side" --host-root "$work/host" -v 2>"$work/devgated-$side.log" &
	DAEMONS+=($!)
	for _ in $(seq 200); do
		"$B/devgatectl" -s "$work/$side.sock" status >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	echo "fastpath: devgated ($side) did not start" >&2
	exit 1
}

# plain NAME -> PID
plain() {
	bench_plain "$CGROOT/$PFX-$$-$1" "$work/root" "$PLAIN" "$PINS-rt"
}

# cpu SIDE: CPU time (ns) side's devgated has run so far; less moved by the
# machine's load than wall time is.
cpu() {
	local pid
	[ "$1" = a ] && pid=${DAEMONS[0]} || pid=${DAEMONS[1]}
	cut -d' ' -f1 "/proc/$pid/schedstat"
}

# rate SIDE PID: the one-client rate run; also the CPU devgated spent on it.
rate_run() {
	local c0
	c0=$(cpu "$1")
	load "$1" -g 0 --shared -n "$N" -j 1 "$2" >/dev/null 2>>"$OUT/rate-$1.log"
	echo "cpu $(($(cpu "$1") - c0))" >>"$OUT/cpu-$1.txt"
}

load() { # SIDE ARGS...: bench/dgload against side's devgated
	local side=$1
	shift
	"$B/bench/dgload" -s "$work/$side.sock" "$@"
}

make -s -C "$top" all build/bench/dgload build/bench/floor >/dev/null
"$top/tests/helpers/mkfixture" "$work/host" -n 3 >/dev/null
dg_ns_setup
CGROOT=$(dg_cgroot)
mkdir -p "$work/root/bin"
cp /bin/busybox "$work/root/bin/"
ln -sf busybox "$work/root/bin/sleep"
bpftool prog load "$B/runtime_like.bpf.o" "$PINS-rt" type cgroup/dev
daemon a "$B"
if [ -n "$BASE" ]; then
	daemon b "$BASE"
	sides=("this build" "base")
else
	daemon b "$B" DEVGATE_TEST_NO_DEVCACHE=1
	sides=("kept /dev" "helper")
fi
# Per side: one container that keeps GPU 1 (already gated), one that holds nothing.
for s in a b; do
	eval "g_$s=\$(plain g$s) f_$s=\$(plain f$s)"
done
# shellcheck disable=SC2154 # set by the eval above
{
	"$B/devgatectl" -s "$work/a.sock" grant --pid "$g_a" --gpu 1 >/dev/null
	"$B/devgatectl" -s "$work/b.sock" grant --pid "$g_b" --gpu 1 >/dev/null
	log "load at start: $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds of $N cycles"
	for r in $(seq "$ROUNDS"); do
		log "round $r"
		load a -g 0 -n "$N" "$g_a" >>"$OUT/gated-a.txt" 2>>"$OUT/gated-a.log"
		load b -g 0 -n "$N" "$g_b" >>"$OUT/gated-b.txt" 2>>"$OUT/gated-b.log"
		"$B/bench/floor" -n "$N" "$g_a" >>"$OUT/floor.txt"
		"$B/bench/floor" -f -n "$N" "$g_a" >>"$OUT/floor-fork.txt"
		"$B/bench/floor" -r -n "$N" >>"$OUT/roundtrip.txt"
		load a -g 0 -n "$N" "$f_a" >>"$OUT/first-a.txt" 2>/dev/null
		load b -g 0 -n "$N" "$f_b" >>"$OUT/first-b.txt" 2>/dev/null
		rate_run a "$g_a"
		rate_run b "$g_b"
	done
	log "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
}
printf '%-40s %14s %14s\n' "p50 / p99 (us)" "${sides[0]}" "${sides[1]}"
for k in grant revoke; do
	printf '%-40s %14s %14s\n' "already gated: $k" "$(stats "$k" "$OUT/gated-a.txt")" \
		"$(stats "$k" "$OUT/gated-b.txt")"
	printf '%-40s %14s %14s\n' "first grant / last revoke: $k" "$(stats "$k" "$OUT/first-a.txt")" \
		"$(stats "$k" "$OUT/first-b.txt")"
	printf '%-40s %14s\n' "floor (no fork): $k" "$(stats "$k" "$OUT/floor.txt")"
	printf '%-40s %14s\n' "fork floor (fork, setns): $k" "$(stats "$k" "$OUT/floor-fork.txt")"
done
printf '%-40s %14s\n' "socket round trip" "$(stats roundtrip "$OUT/roundtrip.txt")"
# ratio KIND SIDE [RT]: already gated p50 over the floor's p50 (plus the
# socket round trip's p50 when RT is given).
ratio() {
	awk -v a="$(stats "$1" "$OUT/gated-$2.txt" | cut -d' ' -f1)" \
		-v f="$(stats "$1" "$OUT/floor.txt" | cut -d' ' -f1)" \
		-v r="${3:+$(stats roundtrip "$OUT/roundtrip.txt" | cut -d' ' -f1)}" \
		'BEGIN { printf "%.2fx", a / (f + r) }'
}
for k in grant revoke; do
	printf '%-40s %14s %14s\n' "already gated $k / floor, p50" "$(ratio "$k" a)" "$(ratio "$k" b)"
	printf '%-40s %14s %14s\n' "already gated $k / (floor + round trip)" \
		"$(ratio "$k" a rt)" "$(ratio "$k" b rt)"
done
printf '%-40s %14s %14s\n' "requests/s, one client, already gated" \
	"$(rate "$OUT/rate-a.log" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')" \
	"$(rate "$OUT/rate-b.log" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')"
# devgated's CPU per request of the rate runs (each N grants and N revokes), median of the rounds.
printf '%-40s %14s %14s\n' "devgated CPU per request, us (rate runs)" \
	"$(sort -n -k2 "$OUT/cpu-a.txt" | awk -v n="$N" '{ v[NR] = $2 } END { printf "%.0f", v[int((NR + 1) / 2)] / n / 2 / 1000 }')" \
	"$(sort -n -k2 "$OUT/cpu-b.txt" | awk -v n="$N" '{ v[NR] = $2 } END { printf "%.0f", v[int((NR + 1) / 2)] / n / 2 / 1000 }')"
for s in a b; do
	grep -a "grant to $PFX-$$-g$s" "$work/devgated-$s.log" |
		awk -v s="$s" '{ n += $7; b += $10; st += $13; c++ }
			END { printf "side %s, already gated, mean us: nodes %.0f, bpf %.0f, state %.0f\n", s, n / c, b / c, st / c }'
done
for s in a b; do
	grep -a "revoke from $PFX-$$-g$s:" "$work/devgated-$s.log" |
		awk -v s="$s" '{ j += $7; st += $10; h += $13; c++ }
			END { printf "side %s, already gated, revoke mean us: journal %.0f, steps %.0f, holders %.0f\n", s, j / c, st / c, h / c }'
	grep -a "revoke steps of $PFX-$$-g$s:" "$work/devgated-$s.log" |
		awk -v s="$s" '{ b += $8; r += $11; n += $14; g += $17; j += $21; c++ }
			END { printf "side %s, already gated, revoke steps mean us: bpf %.0f, record %.0f, nodes %.0f, gate %.0f, journal clear %.0f\n", s, b / c, r / c, n / c, g / c, j / c }'
	grep -a "revoke steps of $PFX-$$-f$s:" "$work/devgated-$s.log" |
		awk -v s="$s" '{ b += $8; r += $11; n += $14; g += $17; j += $21; c++ }
			END { printf "side %s, last revoke steps mean us: bpf %.0f, record %.0f, nodes %.0f, gate %.0f, journal clear %.0f\n", s, b / c, r / c, n / c, g / c, j / c }'
done
