#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# devgate's benchmarks (make bench). Each figure is a ratio taken within one
# run, so the machine's noise cancels. Writes bench/results.md and
# bench/scale.png; raw samples go to bench/out/. Nothing here asserts a time:
# goals are reported, met or missed.
#
# Knobs: BENCH_N (cycles per latency run, default 200), BENCH_SCALE (lease
# counts, default "1 10 100 1000"), BENCH_HOOK_RUNS (default 30).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/build
OUT=$top/bench/out
N=${BENCH_N:-200}
SCALE=${BENCH_SCALE:-"1 10 100 1000"}
HOOK_RUNS=${BENCH_HOOK_RUNS:-30}

[ "$(id -u)" = 0 ] || { echo "bench: run as root" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"
work=$(mktemp -d /tmp/devgate-bench.XXXXXX)
export DG_NSDIR=/run/devgate-bench-$$
PINS=/sys/fs/bpf/devgate-bench-$$
SOCK=$work/devgated.sock
CGROOT=
DAEMON=
# What to clean up is kept in files: the helpers that start containers run in
# $(...) subshells, where appending to an array would be lost.
CONTAINERS=$work/containers.list
PLAIN=$work/plain.list
# shellcheck source=../tests/lib/runc.sh
. "$top/tests/lib/runc.sh"

cleanup() {
	set +e
	local c left
	[ -f "$CONTAINERS" ] && while read -r c; do dg_rm "$c"; done <"$CONTAINERS"
	[ -f "$PLAIN" ] && while read -r c; do echo 1 >"$c/cgroup.kill"; done <"$PLAIN" 2>/dev/null
	# A thousand killed containers take a moment to empty their cgroups.
	for _ in $(seq 100); do
		left=0
		[ -f "$PLAIN" ] && while read -r c; do
			[ -d "$c" ] && ! rmdir "$c" 2>/dev/null && left=1
		done <"$PLAIN"
		[ "$left" = 0 ] && break
		sleep 0.1
	done
	[ -n "$DAEMON" ] && kill "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null
	sysctl -qw kernel.bpf_stats_enabled=0
	rm -rf "$PINS" "$PINS-rt" "$work"
	dg_ns_teardown
}
trap cleanup EXIT INT TERM

log() { printf '== %s\n' "$*" >&2; }
dg() { "$B/devgatectl" -s "$SOCK" "$@"; }

# stats KIND FILE: "p50 p99 mean" in microseconds of the KIND lines.
stats() {
	grep "^$1 " "$2" | sort -n -k2 |
		awk '{ v[NR] = $2; s += $2 }
		     END { p50 = int((NR + 1) / 2); p99 = int(NR * 0.99); if (p99 < 1) p99 = 1;
			   printf "%.0f %.0f %.0f\n", v[p50] / 1000, v[p99] / 1000, s / NR / 1000 }'
}
field() { echo "$1" | awk -v i="$2" '{ print $i }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
verdict() { awk -v v="$1" -v g="$2" 'BEGIN { print (v <= g) ? "met" : "**missed**" }'; }

start_daemon() {
	"$B/devgated" --socket "$SOCK" --state-dir "$work/state" --pin-root "$PINS" \
		--host-root "$work/host" -v 2>"$work/devgated.log" &
	DAEMON=$!
	for _ in $(seq 200); do dg status >/dev/null 2>&1 && return 0; sleep 0.05; done
	echo "bench: devgated did not start" >&2
	cat "$work/devgated.log" >&2
	exit 1
}

# The daemon's own breakdown of its last N grants (devgated -v).
breakdown() {
	grep -a "grant to" "$work/devgated.log" | tail -n "$1" |
		awk '{ n += $7; b += $10; s += $13; c++ }
		     END { printf "%.0f %.0f %.0f\n", n / c, b / c, s / c }'
}

runc_container() { # NAME -> PID
	dg_bundle "$work/$1" "$B/probe" >/dev/null
	cp "$B/bench/opencost" "$work/$1/rootfs/bin/"
	echo "bench-$$-$1" >>"$CONTAINERS"
	dg_run "bench-$$-$1" "$work/$1"
}

plain_root() {
	mkdir -p "$work/plainroot/bin"
	cp /bin/busybox "$work/plainroot/bin/"
	ln -sf busybox "$work/plainroot/bin/sleep"
	bpftool prog load "$B/runtime_like.bpf.o" "$PINS-rt" type cgroup/dev
}

# plain NAME -> PID: a cgroup with a runtime-like device program, a process
# in its own mount namespace with its own /dev.
plain() {
	local cg="$CGROOT/bench-$$-$1"
	echo "$cg" >>"$PLAIN"
	dg_plain "$cg" "$work/plainroot" >"$work/pid"
	bpftool cgroup attach "$cg" device pinned "$PINS-rt" multi
	cat "$work/pid"
}

machine() {
	echo "- machine: $(nproc) cores, $(awk '/model name/ { sub(/.*: /, ""); print; exit }' /proc/cpuinfo), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
	echo "- kernel: $(uname -r); $(findmnt -T "$work" -no FSTYPE) for the state directory"
	echo "- date: $(date -u +%Y-%m-%dT%H:%MZ); devgate $BUILT_FROM"
	echo "- load average at start: $LOAD_AT_START"
}

# ---- setup ----
LOAD_AT_START=$(cut -d' ' -f1-3 /proc/loadavg)
# Before this run rewrites results.md and scale.png, which would mark it dirty.
BUILT_FROM=$(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown)
log "setup"
make -s -C "$top" all build/bench/dgload build/bench/floor build/bench/opencost >/dev/null
"$top/tests/helpers/mkfixture" "$work/host" -n 2 >/dev/null
dg_ns_setup
CGROOT=$(dg_cgroot)
start_daemon
plain_root
PID=$(runc_container lat)

# ---- 1 and 2: grant and revoke latency ----
log "grant/revoke latency: $N cycles each, floor first"
mkdir -p "$work/floordir"
"$B/bench/floor" -n "$N" "$PID" >"$OUT/floor.txt"
"$B/bench/floor" -n "$N" -d "$work/floordir" "$PID" >"$OUT/floor-durable.txt"
"$B/bench/dgload" -s "$SOCK" -g 0 -n "$N" "$PID" >"$OUT/first-grant.txt" 2>/dev/null
first_bd=$(breakdown "$N")
# Spaced like container starts: devgated has its spare gate ready.
"$B/bench/dgload" -s "$SOCK" -g 0 -n "$((N / 4))" -p 20 "$PID" >"$OUT/first-paced.txt" 2>/dev/null
paced_bd=$(breakdown "$((N / 4))")
dg grant --pid "$PID" --gpu 1 >/dev/null
"$B/bench/dgload" -s "$SOCK" -g 0 -n "$N" "$PID" >"$OUT/grant.txt" 2>/dev/null
incr_bd=$(breakdown "$N")
dg revoke --pid "$PID" >/dev/null
# The whole CLI, process start included (hyperfine resets before each run).
ctl="$B/devgatectl -s $SOCK"
hyperfine -N --runs 50 --warmup 3 --export-json "$OUT/cli-grant.json" \
	--prepare "$ctl revoke --pid $PID --missing-ok" "$ctl grant --pid $PID --gpu 0" >/dev/null
hyperfine -N --runs 50 --warmup 3 --export-json "$OUT/cli-revoke.json" \
	--prepare "$ctl grant --pid $PID --gpu 0" "$ctl revoke --pid $PID" >/dev/null
{
	jq -r '.results[0].times[] | "grant \(. * 1e9 | floor)"' "$OUT/cli-grant.json"
	jq -r '.results[0].times[] | "revoke \(. * 1e9 | floor)"' "$OUT/cli-revoke.json"
} >"$OUT/cli.txt"
dg revoke --pid "$PID" --missing-ok >/dev/null

fl=$(stats grant "$OUT/floor.txt")
flr=$(stats revoke "$OUT/floor.txt")
fd=$(stats grant "$OUT/floor-durable.txt")
fdr=$(stats revoke "$OUT/floor-durable.txt")
g1=$(stats grant "$OUT/first-grant.txt")
gp=$(stats grant "$OUT/first-paced.txt")
r1=$(stats revoke "$OUT/first-grant.txt")
gi=$(stats grant "$OUT/grant.txt")
ri=$(stats revoke "$OUT/grant.txt")
gc=$(stats grant "$OUT/cli.txt")
rc=$(stats revoke "$OUT/cli.txt")

# ---- profile of an already-gated grant ----
# Two views of the same kind of cycle as "already gated" above. perf trace:
# time inside each system call of the daemon, waits on the disk included.
# perf record: on-CPU samples of the daemon and its node helpers (same comm).
log "profile: perf trace and perf record of $N already-gated grant+revoke cycles"
dg grant --pid "$PID" --gpu 1 >/dev/null
perf trace -s -p "$DAEMON" -o "$work/trace.txt" 2>/dev/null &
tracer=$!
sleep 1
"$B/bench/dgload" -s "$SOCK" -g 0 -n "$N" "$PID" >/dev/null 2>&1
kill -INT "$tracer"
wait "$tracer" || true
# "syscall calls total_ms" by total time, for the report.
awk '$2 ~ /^[0-9]+$/ && $4 ~ /^[0-9.]+$/ { t[$1] += $4; c[$1] += $2 }
     END { for (k in t) printf "%s %d %.3f\n", k, c[k], t[k] }' "$work/trace.txt" |
	sort -k3 -rn | grep -v '^epoll_wait ' >"$OUT/profile-syscalls.txt" || true
perf record -q -a -g -F 4000 -e cpu-clock -o "$work/perf.data" -- \
	"$B/bench/dgload" -s "$SOCK" -g 0 -n "$N" "$PID" >/dev/null 2>&1
dg revoke --pid "$PID" >/dev/null
perf report -i "$work/perf.data" --comm devgated --children --sort sym --stdio -g none \
	--percentage relative --percent-limit 5 2>/dev/null | grep -E '^ +[0-9]' \
	>"$OUT/profile.txt" || true

# ---- 3: gate cost per open() ----
log "gate cost per open(): runc's program alone vs the gate in front of it"
OPID=$(runc_container open)
ocid="bench-$$-open"
# In the container's cgroup and mount namespace, pinned to one CPU: less
# scheduling noise than runc exec.
opencost() {
	sh -c 'echo $$ >"$1/cgroup.procs" && exec taskset -c 1 nsenter -t "$2" -m -r \
		/bin/opencost -n 100000 -r 5 /dev/null' _ "$CGROOT/$ocid" "$OPID" | sort -n | sed -n 3p
}
ROUNDS=9
for _ in $(seq $ROUNDS); do
	a=$(opencost)
	dg grant --pid "$OPID" --gpu 0 >/dev/null
	g=$(opencost)
	dg revoke --pid "$OPID" >/dev/null
	echo "alone $a"
	echo "gated $g"
	echo "ratio $(awk -v a="$a" -v g="$g" 'BEGIN { printf "%.4f", g / a }')"
done >"$OUT/opencost.txt"
# Per-program run time from the kernel's own BPF statistics. Collecting them
# costs two clock reads per run; a near-empty program shows that floor.
sysctl -qw kernel.bpf_stats_enabled=1
rt_id=$(bpftool -j cgroup show "$CGROOT/$ocid" | jq '.[0].id')
bpftool cgroup attach "$CGROOT/$ocid" device pinned "$PINS-rt" multi
opencost >/dev/null
floor_id=$(bpftool -j cgroup show "$CGROOT/$ocid" | jq '.[1].id')
bpftool cgroup detach "$CGROOT/$ocid" device pinned "$PINS-rt"
dg grant --pid "$OPID" --gpu 0 >/dev/null
gate_id=$(bpftool -j cgroup show "$CGROOT/$ocid" | jq '.[0].id')
tally_id=$(bpftool -j cgroup show "$CGROOT/$ocid" | jq '.[1].id')
opencost >/dev/null
prog_ns() { bpftool -j prog show id "$1" | jq 'if .run_cnt > 0 then .run_time_ns / .run_cnt else 0 end'; }
gate_ns=$(prog_ns "$gate_id")
tally_ns=$(prog_ns "$tally_id")
dg revoke --pid "$OPID" >/dev/null
opencost >/dev/null
rt_ns=$(prog_ns "$rt_id")
stats_floor=$(prog_ns "$floor_id")
sysctl -qw kernel.bpf_stats_enabled=0
mid=$(((ROUNDS + 1) / 2))
alone=$(awk '$1 == "alone" { print $2 }' "$OUT/opencost.txt" | sort -n | sed -n ${mid}p)
gated=$(awk '$1 == "gated" { print $2 }' "$OUT/opencost.txt" | sort -n | sed -n ${mid}p)
open_extra=$(awk '$1 == "ratio" { print $2 }' "$OUT/opencost.txt" | sort -n |
	sed -n ${mid}p | awk '{ printf "%.1f", ($1 - 1) * 100 }')
# The gate's run includes runc's program (tail call); the tally is one more
# program, whose share of the clock reads is the floor's.
prog_extra=$(awk -v r="$rt_ns" -v g="$gate_ns" -v t="$tally_ns" -v f="$stats_floor" -v a="$alone" \
	'BEGIN { printf "%.1f", (g - r + t - f) / a * 100 }')
prog_extra_raw=$(awk -v r="$rt_ns" -v g="$gate_ns" -v t="$tally_ns" -v a="$alone" \
	'BEGIN { printf "%.1f", (g + t - r) / a * 100 }')

# ---- 4: OCI hook overhead ----
log "OCI hook overhead: runc run with and without devgate's hook, $HOOK_RUNS each"
dg_bundle "$work/plain" "$B/probe" >/dev/null
jq '.process.args = ["true"]' "$work/plain/config.json" >"$work/c.json"
mv "$work/c.json" "$work/plain/config.json"
cp -a "$work/plain" "$work/hooked"
jq --arg hook "$B/devgate-hook" --arg s "$SOCK" '.annotations = {"devgate.io/gpus": "0"} |
	.hooks = {createRuntime: [{path: $hook, args: ["devgate-hook", "-s", $s, "createRuntime"]}],
		  poststop: [{path: $hook, args: ["devgate-hook", "-s", $s, "poststop"]}]}' \
	"$work/hooked/config.json" >"$work/c.json"
mv "$work/c.json" "$work/hooked/config.json"
cp -a "$work/plain" "$work/noop"
jq '.hooks = {createRuntime: [{path: "/bin/true"}], poststop: [{path: "/bin/true"}]}' \
	"$work/noop/config.json" >"$work/c.json"
mv "$work/c.json" "$work/noop/config.json"
runtime() { # KIND [COUNT] -> mean ns of COUNT runc runs back to back
	local t0 n=${2:-1}
	t0=$(date +%s%N)
	for _ in $(seq "$n"); do
		dg_runc run -b "$work/$1" "bench-$$-run" </dev/null >/dev/null
	done
	echo $((($(date +%s%N) - t0) / n))
}
kinds=(plain noop hooked)
declare -A took
for round in $(seq "$HOOK_RUNS"); do
	# Single starts on a settled machine (devgated makes its spares while idle,
	# as between container starts), in an order that rotates each round.
	for j in 0 1 2; do
		k=${kinds[$(((round + j) % 3))]}
		sleep 0.05
		took[$k]=$(runtime "$k")
	done
	# Five starts back to back: the daemon's work after each is charged too.
	for k in "${kinds[@]}"; do
		sleep 0.05
		took[chain-$k]=$(runtime "$k" 5)
	done
	for k in "${!took[@]}"; do echo "$k ${took[$k]}"; done
	# Each round's own ratios: slow drift of the machine cancels.
	echo "noopratio $((took[noop] * 10000 / took[plain]))"
	echo "hookratio $((took[hooked] * 10000 / took[plain]))"
	echo "chainratio $((took[chain-hooked] * 10000 / took[chain-plain]))"
done >"$OUT/hook.txt"
hp=$(stats plain "$OUT/hook.txt")
hn=$(stats noop "$OUT/hook.txt")
hh=$(stats hooked "$OUT/hook.txt")
hcp=$(stats chain-plain "$OUT/hook.txt")
hch=$(stats chain-hooked "$OUT/hook.txt")
median_ratio() { # KIND: median of a round's ratio, as percent extra
	grep "^$1 " "$OUT/hook.txt" | sort -n -k2 | awk '{ v[NR] = $2 }
		END { printf "%.1f", (v[int((NR + 1) / 2)] / 10000 - 1) * 100 }'
}
noop_extra=$(median_ratio noopratio)
hook_extra=$(median_ratio hookratio)
chain_extra=$(median_ratio chainratio)

# ---- 5: scale ----
log "scale: grant latency and daemon RSS with $SCALE leased containers"
PROBE=$(plain probe)
# The probe keeps GPU 1, so its cycles on shared GPU 0 time the grant itself,
# not the loading of its gates; what varies is the number of other leases.
dg grant --pid "$PROBE" --gpu 1 >/dev/null
held=0
: >"$OUT/scale.dat"
for level in $SCALE; do
	pids=()
	while [ "$held" -lt "$level" ]; do
		pids+=("$(plain "l$held")")
		held=$((held + 1))
	done
	[ ${#pids[@]} -eq 0 ] || "$B/bench/dgload" -s "$SOCK" -g 0 --shared --hold "${pids[@]}" \
		>/dev/null
	sleep 1.2 # let a periodic re-check of all leases run once
	"$B/bench/dgload" -s "$SOCK" -g 0 --shared -n "$N" "$PROBE" >"$OUT/scale-$level.txt" \
		2>/dev/null
	s=$(stats grant "$OUT/scale-$level.txt")
	bd=$(breakdown "$N")
	rss=$(awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$DAEMON/status")
	# The same bare syscalls at this level: does the machine itself slow down?
	"$B/bench/floor" -n "$((N / 2))" -d "$work/floordir" "$PROBE" >"$OUT/scale-floor-$level.txt"
	f=$(stats grant "$OUT/scale-floor-$level.txt")
	echo "$level $(field "$s" 1) $(field "$s" 2) $rss $bd $(field "$f" 1)" >>"$OUT/scale.dat"
	log "  $level leases: grant p50 $(field "$s" 1) us, p99 $(field "$s" 2) us, RSS $rss MiB"
done
s1=$(head -1 "$OUT/scale.dat")
sN=$(tail -1 "$OUT/scale.dat")
scale_ratio=$(ratio "$(field "$sN" 2)" "$(field "$s1" 2)")
scale_norm=$(awk -v a="$(field "$sN" 2)" -v fa="$(field "$sN" 8)" -v b="$(field "$s1" 2)" \
	-v fb="$(field "$s1" 8)" 'BEGIN { printf "%.2f", (a / fa) / (b / fb) }')
rss_max=$(awk '{ if ($4 > m) m = $4 } END { print m }' "$OUT/scale.dat")

# ---- 6: throughput ----
log "throughput: grants+revokes from 8 parallel clients"
tp=()
for j in $(seq 8); do tp+=("$(plain "tp$j")"); done
"$B/bench/dgload" -s "$SOCK" -g 0 --shared -n "$((N / 2))" -j 8 "${tp[@]}" \
	>"$OUT/throughput.txt" 2>"$OUT/throughput.log"
"$B/bench/dgload" -s "$SOCK" -g 0 --shared -n "$((N / 2))" -j 1 "${tp[0]}" \
	>"$OUT/throughput1.txt" 2>"$OUT/throughput1.log"
rate8=$(sed -n 's/.* \([0-9.]*\) requests\/s/\1/p' "$OUT/throughput.log")
rate1=$(sed -n 's/.* \([0-9.]*\) requests\/s/\1/p' "$OUT/throughput1.log")

# ---- 7: healing a displaced gate ----
log "heal: a displaced gate with $((held + 9)) leases held, and the check's CPU"
heal_leases=$((held + 9))
ticks() { awk '{ print $14 + $15 }' "/proc/$DAEMON/stat"; }
t0=$(ticks)
sleep 10
heal_cpu=$(awk -v a="$t0" -v b="$(ticks)" -v hz="$(getconf CLK_TCK)" \
	'BEGIN { printf "%.2f", (b - a) / hz / 10 * 100 }')
heal_period=$(awk -v n="$heal_leases" 'BEGIN { p = n * 0.5; print (p > 10) ? p : 10 }')
heal_per_lease=$(awk -v c="$heal_cpu" -v n="$heal_leases" -v p="$heal_period" \
	'BEGIN { printf "%.1f", c / 100 * p * 1000 / n }')
dg grant --pid "$PID" --gpu 0 --shared >/dev/null
# GPU 1 is the probe's, so it stays denied to this container.
"$B/displace" -n 20 "$CGROOT/bench-$$-lat" "$PINS-rt" "$work/host/dev/nvidia0" \
	"$work/host/dev/nvidia1" >"$OUT/heal-scale.txt"
heal_scale=$(grep '^heal_us' "$OUT/heal-scale.txt")
dg revoke --pid "$PID" >/dev/null
# Alone on the machine: the bats test, 100 rounds, once with the heal check
# and once with the periodic re-check alone (what devgate did before).
kill "$DAEMON" && wait "$DAEMON" 2>/dev/null
DAEMON=
DEVGATE_HEAL_RESULTS="$OUT/heal.txt" bats "$top/tests/integration/heal.bats" >"$OUT/heal.tap"
heal_alone=$(grep 'found by a check\|healed on attach events' "$OUT/heal.txt" | sed 's/.*heal_us //')
heal_poll=$(grep 'periodic re-check' "$OUT/heal.txt" | sed 's/.*heal_us //')
heal_p99=$(echo "$heal_alone" | awk '{ printf "%.1f", $4 / 1000 }')

# ---- plot ----
gnuplot <<EOF
set terminal pngcairo size 900,520 font ",11"
set output "$top/bench/scale.png"
set title "devgated: grant latency and memory against leased containers"
set logscale x 10
set xlabel "containers holding a lease"
set ylabel "grant latency (ms)"
set y2label "devgated RSS (MiB)"
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:16]
set key bottom right opaque box
set grid
plot "$OUT/scale.dat" using 1:(\$2/1000) with linespoints lw 2 title "grant p50", \
     "$OUT/scale.dat" using 1:(\$3/1000) with linespoints lw 2 title "grant p99", \
     "$OUT/scale.dat" using 1:(\$8/1000) with linespoints lw 1 title "durable floor p50 (same level)", \
     "$OUT/scale.dat" using 1:4 axes x1y2 with linespoints lw 2 dt 2 title "RSS (goal: 16 MiB)"
EOF

# ---- results.md ----
g1_ratio=$(ratio "$(field "$g1" 1)" "$(field "$fl" 1)")
gi_ratio=$(ratio "$(field "$gi" 1)" "$(field "$fl" 1)")
gi_dratio=$(ratio "$(field "$gi" 1)" "$(field "$fd" 1)")
g1_dratio=$(ratio "$(field "$g1" 1)" "$(field "$fd" 1)")
ri_ratio=$(ratio "$(field "$ri" 1)" "$(field "$flr" 1)")
ri_dratio=$(ratio "$(field "$ri" 1)" "$(field "$fdr" 1)")
row() { printf '| %s | %s | %s | %s |\n' "$1" "$(field "$2" 1)" "$(field "$2" 2)" "$3"; }
{
	cat <<EOF
# devgate benchmark results

Produced by \`make bench\` (bench/run.sh); raw samples in \`bench/out/\`.
Reproduce: \`sh scripts/install-deps.sh && make bench\` as root. Every goal
below is a ratio of two figures taken in the same run, so machine noise
largely cancels.

$(machine)

## 1-2. Grant and revoke latency ($N cycles each)

Times are from request sent to reply read, over devgated's socket (the way a
runtime integration calls it); the node is usable when the reply arrives.
The floor does the same work as bare syscalls in one process: pidfd_open,
fork, setns(CLONE_NEWNS), mknodat (unlinkat), one BPF map update (delete).
"Durable floor" adds what devgated must also do before it may answer: write
the lease and make it survive a crash (write, fsync, rename, fsync dir).

| measurement | p50 (us) | p99 (us) | p50 ratio to floor |
|---|---|---|---|
$(row "floor: grant" "$fl" "1.00")
$(row "durable floor: grant" "$fd" "$(ratio "$(field "$fd" 1)" "$(field "$fl" 1)")")
$(row "devgate grant, container not yet gated, back to back" "$g1" "$g1_ratio (durable: $g1_dratio)")
$(row "devgate grant, container not yet gated, 20 ms apart" "$gp" "$(ratio "$(field "$gp" 1)" "$(field "$fl" 1)") (durable: $(ratio "$(field "$gp" 1)" "$(field "$fd" 1)"))")
$(row "devgate grant, container already gated" "$gi" "$gi_ratio (durable: $gi_dratio)")
$(row "devgatectl grant (process start included)" "$gc" "$(ratio "$(field "$gc" 1)" "$(field "$fl" 1)")")
$(row "floor: revoke" "$flr" "1.00")
$(row "durable floor: revoke" "$fdr" "$(ratio "$(field "$fdr" 1)" "$(field "$flr" 1)")")
$(row "devgate revoke, last GPU (runtime program restored)" "$r1" "$(ratio "$(field "$r1" 1)" "$(field "$flr" 1)")")
$(row "devgate revoke, container keeps a GPU" "$ri" "$ri_ratio (durable: $ri_dratio)")
$(row "devgatectl revoke (process start included)" "$rc" "$(ratio "$(field "$rc" 1)" "$(field "$flr" 1)")")

Where a grant's time goes (devgated -v, means in us: nodes / BPF / state):
not yet gated, back to back $(field "$first_bd" 1) / $(field "$first_bd" 2) / $(field "$first_bd" 3);
not yet gated, 20 ms apart $(field "$paced_bd" 1) / $(field "$paced_bd" 2) / $(field "$paced_bd" 3);
already gated $(field "$incr_bd" 1) / $(field "$incr_bd" 2) / $(field "$incr_bd" 3).

Goal: grant p50 <= 3x the floor. Already gated: $gi_ratio, $(verdict "$gi_ratio" 3);
not yet gated: $g1_ratio, $(verdict "$g1_ratio" 3).

Profile of $N more already-gated grant+revoke cycles ($((2 * N)) requests).
\`perf trace -s\` on devgated: the system calls that take the most time,
waits included, in us per request (the node helper's own calls are not
traced; the daemon's poll() waits for them; epoll_wait, the daemon idle
between requests, is left out):

| system call | calls per request | us per request |
|---|---|---|
$(head -8 "$OUT/profile-syscalls.txt" | awk -v r="$((2 * N))" '{ printf "| %s | %.1f | %.0f |\n", $1, $2 / r, $3 * 1000 / r }')

\`perf record -e cpu-clock -a -g\`, devgated and its helpers, on-CPU time
including callees, entries over 5%:

\`\`\`
$(cat "$OUT/profile.txt")
\`\`\`

## 3. Gate cost per open()

open()+close() of /dev/null by a process in a runc container's cgroup and
mount namespace, pinned to one CPU: $ROUNDS rounds, each timing runc's program
alone and then devgate's gate (which tail-calls runc's program) plus the
tally, each the median of 5 x 100,000 calls; the extra is the median of the
rounds' own ratios. perf cannot count instructions on
this machine (\`perf stat -e instructions\` is not supported), so the
programs' own cost comes from the kernel's BPF statistics
(kernel.bpf_stats_enabled: run time / run count per program).

| measurement | ns per call |
|---|---|
| open+close, runc's program alone (median of $ROUNDS) | $alone |
| open+close, gate + tally in front (median of $ROUNDS) | $gated |
| runc's program, per run | $(printf '%.1f' "$rt_ns") |
| gate (with its tail call into runc's program), per run | $(printf '%.1f' "$gate_ns") |
| tally, per run | $(printf '%.1f' "$tally_ns") |
| a near-empty device program, per run (the statistics' own cost) | $(printf '%.1f' "$stats_floor") |

Extra per open(): $open_extra% of the whole call by wall clock; by the
programs' run time $prog_extra% (net of the statistics' cost of the extra
program; $prog_extra_raw% counting it). Goal <= 3%: $(verdict "$prog_extra" 3) by run time,
$(verdict "$open_extra" 3) by wall clock (a noisy figure: a few % either way between runs).

## 4. OCI hook overhead

\`runc run\` of a container whose process is \`true\`, $HOOK_RUNS rounds. Each
round times one start of each kind (no hook, a no-op hook, devgate's hook)
on a settled machine, 50 ms after the last, in an order that rotates, and
then five starts of each kind back to back, where devgated's work after a
container (its release, the spares it makes for the next grant) falls on the
next start. Extras are medians of the rounds' own ratios to the runs without
a hook. devgate's hook asks for GPU 0 by annotation, so each start includes
a grant at createRuntime and a release at poststop.

| measurement | p50 (us) | p99 (us) |
|---|---|---|
| runc run, no hook | $(field "$hp" 1) | $(field "$hp" 2) |
| runc run, a no-op hook (/bin/true) at the same two stages | $(field "$hn" 1) | $(field "$hn" 2) |
| runc run, devgate's hook | $(field "$hh" 1) | $(field "$hh" 2) |
| five back to back, no hook, per start | $(field "$hcp" 1) | $(field "$hcp" 2) |
| five back to back, devgate's hook, per start | $(field "$hch" 1) | $(field "$hch" 2) |

Extra: $hook_extra% for a single start (a no-op hook alone: $noop_extra%),
$chain_extra% back to back. Goal <= 10%: $(verdict "$hook_extra" 10) for a single start,
$(verdict "$chain_extra" 10) back to back.

## 5. Scale

Grant latency of one more container while N others hold a lease (plain
cgroups, each with a runtime-like device program, all sharing GPU 0), and
devgated's resident memory. The measured container keeps GPU 1 and cycles a
shared GPU 0, so its gates stay in place. ![scale](scale.png)

| leases | grant p50 (us) | grant p99 (us) | RSS (MiB) | nodes / BPF / state, mean us | durable floor p50 (us) | grant / durable floor |
|---|---|---|---|---|---|---|
$(awk '{ printf "| %s | %s | %s | %s | %s / %s / %s | %s | %.2f |\n", $1, $2, $3, $4, $5, $6, $7, $8, $2 / $8 }' "$OUT/scale.dat")

Goal: p50 at $(field "$sN" 1) within 1.2x of 1: $scale_ratio, $(verdict "$scale_ratio" 1.2).
Relative to the durable floor measured at the same level (what the machine
itself does with that many containers): $scale_norm, $(verdict "$scale_norm" 1.2).
Goal: RSS <= 16 MiB: $rss_max MiB at most, $(verdict "$rss_max" 16).

## 6. Throughput

Grant+revoke cycles from 8 parallel clients, each on its own container
(shared GPU 0): $rate8 requests/s; one client alone: $rate1 requests/s.
devgated serves requests one at a time (one thread; every change is made
durable before the reply), so parallel clients mostly queue.

## 7. Healing a displaced gate

\`tests/integration/heal.bats\` and \`tests/helpers/displace\`: systemd's way of
replacing a cgroup's device program (attach its own, detach the rest,
devgate's gate included), then the time until the granted GPU opens again
from inside the cgroup; a denied GPU is opened on every try meanwhile and
must stay EPERM. This kernel refuses tracing programs (fexit: EPERM even
for root), so the heal check (\`--heal-ms\`, 10 ms) finds the change.

| setting | heal p50 (us) | p99 (us) | max (us) |
|---|---|---|---|
| heal check, 1 lease, 100 rounds | $(field "$heal_alone" 2) | $(field "$heal_alone" 4) | $(field "$heal_alone" 6) |
| heal check, $heal_leases leases (period ${heal_period} ms), 20 rounds | $(echo "$heal_scale" | awk '{ print $3 }') | $(echo "$heal_scale" | awk '{ print $5 }') | $(echo "$heal_scale" | awk '{ print $7 }') |
| periodic re-check only (200 ms), 5 rounds | $(field "$heal_poll" 2) | $(field "$heal_poll" 4) | $(field "$heal_poll" 6) |

Goal p99 <= 50 ms with one lease: ${heal_p99} ms, $(verdict "$heal_p99" 50). Violations
(a denied GPU let through) in all rounds: $(grep -c violations "$OUT/heal-scale.txt" "$OUT/heal.tap" | awk -F: '{ s += $2 } END { print s + 0 }').
With many leases each displacement comes a few ms after the previous heal,
so it waits nearly a whole period: the second row is the worst case.
The check's cost with $heal_leases leases held and idle: $heal_cpu% of a CPU,
~$heal_per_lease us per lease and look.
EOF
	[ -f "$top/bench/NOTES.md" ] && { echo; cat "$top/bench/NOTES.md"; }
} >"$top/bench/results.md"

log "wrote bench/results.md and bench/scale.png"
cat "$top/bench/results.md"
