#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The cost of the proof before "granted" (grant/proof.c): N hand-made
# containers (dg_plain: a cgroup, its own /dev), each granted GPU 0 (shared)
# twice: the first grant is proven from inside, the second finds the device
# layers unchanged and is not. Reports, from devgated's -v log and the
# client's wall clock, the medians of: the proof itself, the fingerprint
# check that spares it, and the two grants end to end. Prints a Markdown
# table; asserts no time.
#
# Knobs: BENCH_PROOF_N (containers, default 30), BENCH_PREFIX (names of
# its cgroup, pins and temporary directory; default dg27pf-bench-PID). Run
# as root from the tree, after make.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
B=${DEVGATE_BUILD:-$top/build}
N=${BENCH_PROOF_N:-30}
[ "$(id -u)" = 0 ] || { echo "proof.sh: run as root" >&2; exit 1; }
PFX=${BENCH_PREFIX:-dg27pf-bench-$$}
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
trap cleanup EXIT

median() { sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "-" }'; }
ms() { echo $(($(date +%s%N) / 1000)); }

"$top/tests/helpers/mkfixture" "$work/host" >/dev/null
"$B/devgated" -v --socket "$work/sock" --state-dir "$work/state" --pin-root "$PINS" \
	--host-root "$work/host" >"$work/daemon.log" 2>&1 &
DAEMON=$!
for _ in $(seq 400); do "$B/devgatectl" -s "$work/sock" status >/dev/null 2>&1 && break; sleep 0.05; done

mkdir -p "$work/root/bin" "$CG"
cp /bin/busybox "$work/root/bin/"
ln -sf busybox "$work/root/bin/sleep"
: >"$work/first" && : >"$work/second"
for i in $(seq "$N"); do
	pid=$(dg_plain "$CG/c$i" "$work/root")
	for f in first second; do
		t0=$(ms)
		"$B/devgatectl" -s "$work/sock" grant --pid "$pid" --gpu 0 --shared >/dev/null
		echo $(($(ms) - t0)) >>"$work/$f"
	done
done

proven=$(sed -n 's/.*proof: .* reach the driver.* (\([0-9]*\) us)$/\1/p' "$work/daemon.log")
spared=$(sed -n 's/.*proof: .* not proven again (\([0-9]*\) us)$/\1/p' "$work/daemon.log")
[ "$(echo "$proven" | grep -c .)" = "$N" ] && [ "$(echo "$spared" | grep -c .)" = "$N" ] ||
	{ echo "proof.sh: expected $N proofs and $N spared in the log" >&2; exit 1; }
cat <<EOF
| step ($N containers, medians) | us |
|---|---|
| the proof (prober cloned into the cgroup, 4 granted nodes + 1 neighbour opened) | $(echo "$proven" | median) |
| the fingerprint check that spares it (layers unchanged) | $(echo "$spared" | median) |
| first grant, end to end (devgatectl, with the proof) | $(median <"$work/first") |
| second grant, end to end (devgatectl, proof spared) | $(median <"$work/second") |
EOF
