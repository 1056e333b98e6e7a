#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The cost of the proof before "granted" (grant/proof.c): N hand-made
# containers (dg_plain: a cgroup, its own /dev), each granted GPU 0 (shared)
# twice: the first grant is proven from inside, the second finds the device
# layers unchanged and is not. Reports, from devgated's -v log and the
# client's wall clock, p50 and p99 of: the proof itself, the fingerprint
# check that spares it, and the two grants end to end; once as the machine
# is, once with two CPU hogs added, in the same run. Prints Markdown
# tables; asserts no time.
#
# Knobs: BENCH_PROOF_N (containers, default 30), BENCH_PREFIX (names of
# its cgroup, pins and temporary directory; default dg28pf-bench-PID). Run
# as root from the tree, after make.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
B=${DEVGATE_BUILD:-$top/build}
N=${BENCH_PROOF_N:-30}
[ "$(id -u)" = 0 ] || { echo "proof.sh: run as root" >&2; exit 1; }
PFX=${BENCH_PREFIX:-dg28pf-bench-$$}
work=$(mktemp -d "/tmp/$PFX.XXXXXX")
PINS=/sys/fs/bpf/$PFX-proof
CGROOT=$(awk '$9 == "cgroup2" && $4 == "/" { print $5; exit }' /proc/self/mountinfo)
CG=$CGROOT/$PFX-proof
DAEMON=
# shellcheck source=../tests/lib/runc.sh
. "$top/tests/lib/runc.sh"

cleanup() {
	[ -n "$DAEMON" ] && kill "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null
	if [ -d "$CG" ]; then
		echo 1 >"$CG/cgroup.kill" 2>/dev/null || true
		for _ in $(seq 50); do
			find "$CG" -depth -type d -exec rmdir {} \; 2>/dev/null || true
			[ -d "$CG" ] || break
			sleep 0.1
		done
	fi
	rm -rf "$PINS" "$work"
}
trap 'hogs_stop; cleanup' EXIT

# pct P: the P-th percentile (nearest rank) of the numbers on stdin.
pct() { sort -n | awk -v p="$1" '{ v[NR] = $1 } END { i = int((NR * p + 99) / 100); print NR ? v[i < 1 ? 1 : i] : "-" }'; }
ms() { echo $(($(date +%s%N) / 1000)); }
hogs=()
hogs_stop() {
	[ ${#hogs[@]} = 0 ] || { kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null || true; }
	hogs=()
}

"$top/tests/helpers/mkfixture" "$work/host" >/dev/null
"$B/devgated" -v --socket "$work/sock" --state-dir "$work/state" --pin-root "$PINS" \
	--host-root "$work/host" >"$work/daemon.log" 2>&1 &
DAEMON=$!
for _ in $(seq 400); do "$B/devgatectl" -s "$work/sock" status >/dev/null 2>&1 && break; sleep 0.05; done

mkdir -p "$work/root/bin" "$CG"
cp /bin/busybox "$work/root/bin/"
ln -sf busybox "$work/root/bin/sleep"
# phase NAME: N new containers, each granted twice; the log lines and the
# client's times go to $work/NAME.*.
phase() {
	local from
	from=$(($(wc -l <"$work/daemon.log") + 1))
	: >"$work/$1.first" && : >"$work/$1.second"
	for i in $(seq "$N"); do
		pid=$(dg_plain "$CG/$1$i" "$work/root")
		for f in first second; do
			t0=$(ms)
			"$B/devgatectl" -s "$work/sock" grant --pid "$pid" --gpu 0 --shared >/dev/null
			echo $(($(ms) - t0)) >>"$work/$1.$f"
		done
	done
	tail -n +"$from" "$work/daemon.log" |
		sed -n 's/.*proof: .* reach the driver.* (\([0-9]*\) us)$/\1/p' >"$work/$1.proven"
	tail -n +"$from" "$work/daemon.log" |
		sed -n 's/.*proof: .* not proven again (\([0-9]*\) us)$/\1/p' >"$work/$1.spared"
	[ "$(grep -c . "$work/$1.proven")" = "$N" ] && [ "$(grep -c . "$work/$1.spared")" = "$N" ] ||
		{ echo "proof.sh: expected $N proofs and $N spared in the log" >&2; exit 1; }
	tail -n +"$from" "$work/daemon.log" | sed -n 's/.*(prober: clone \([0-9]*\) us, to its first step \([0-9]*\) us, joins \([0-9]*\) us, opens \([0-9]*\) us, to reaped \([0-9]*\) us).*/\1 \2 \3 \4 \5/p' >"$work/$1.steps"
	for c in 1 2 3 4 5; do cut -d' ' -f"$c" "$work/$1.steps" >"$work/$1.step$c"; done
	cut -d' ' -f1 /proc/loadavg >"$work/$1.load"
}
row() { echo "| $1 | $(pct 50 <"$work/$2") | $(pct 99 <"$work/$2") |"; }

phase quiet
# Loaded: two CPU hogs beside whatever else runs (this is a 2-core machine).
for _ in 1 2; do (while :; do :; done) & hogs+=($!); done
phase loaded
hogs_stop
for p in quiet loaded; do
	cat <<EOF

$p ($N containers, load average $(cat "$work/$p.load") after, $([ $p = loaded ] && echo "two CPU hogs added" || echo "no hogs added"))

| step | p50 us | p99 us |
|---|---|---|
$(row "the proof (prober cloned into the cgroup, 4 granted nodes + 1 neighbour opened)" $p.proven)
$(row "- of which the clone system call" $p.step1)
$(row "- the clone to the prober's first step (waiting for a CPU)" $p.step2)
$(row "- the prober's join of the v1 devices cgroup (hybrid hosts)" $p.step3)
$(row "- the prober's opens" $p.step4)
$(row "- its last step to devgated's reaping it" $p.step5)
$(row "the fingerprint check that spares it (layers unchanged)" $p.spared)
$(row "first grant, end to end (devgatectl, with the proof)" $p.first)
$(row "second grant, end to end (devgatectl, proof spared)" $p.second)
EOF
done
