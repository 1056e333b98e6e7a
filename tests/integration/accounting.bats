#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# GPU-seconds per lease and GPU (status --json, devgate_gpu_seconds_total):
# they match the wall time a live runc container held its GPUs, within 1%,
# and keep counting across a restart of devgated.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; start_daemon; }
teardown() { dg_teardown; }

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# within VALUE LOW HIGH: LOW*0.99 <= VALUE <= HIGH*1.01 + 0.002 (seconds;
# 1% as the issue asks, plus the millisecond the daemon rounds to).
within() {
	awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v >= lo * 0.99 && v <= hi * 1.01 + 0.002) }' ||
		fail "$1 is not within 1% of [$2, $3]"
}

# held N T0 T1 T2 T3: GPU-seconds of N GPUs held from between T0 and T1 (ms)
# to between T2 and T3: "LOW HIGH".
held() {
	awk -v n="$1" -v a="$2" -v b="$3" -v c="$4" -v d="$5" \
		'BEGIN { printf "%.3f %.3f\n", n * (c - b) / 1000, n * (d - a) / 1000 }'
}

# check_held N T0 T1 WHAT CMD...: CMD prints a count of GPU-seconds: N GPUs'
# time from between T0 and T1 (ms) to when CMD ran, within 1%.
check_held() {
	local n=$1 t0=$2 t1=$3 what=$4 t2 t3 v lo hi
	shift 4
	t2=$(now_ms)
	v=$("$@")
	t3=$(now_ms)
	read -r lo hi < <(held "$n" "$t0" "$t1" "$t2" "$t3")
	echo "# $what: $v GPU-seconds of $n GPU(s) held [$lo, $hi]" >&3
	within "$v" "$lo" "$hi"
}

lease_seconds() { dg status --json | jq -r ".leases[] | select(.cgroup == \"/$1\") | .gpu_seconds"; }

# metric_sum CID [GPU-UUID]: devgate_gpu_seconds_total of a container, summed.
metric_sum() {
	dg metrics | awk -v cg="cgroup=\"/$1\"" -v g="${2:-}" '
		/^devgate_gpu_seconds_total\{/ && index($0, cg) && (g == "" || index($0, "gpu=\"" g "\"")) { s += $2 }
		END { printf "%.3f\n", s }'
}

@test "gpu-seconds: two GPUs for 3 s are 6 GPU-seconds, in status and the metric" {
	container c
	t0=$(now_ms)
	run -0 dg grant --pid "$CPID" --gpu 0,1
	t1=$(now_ms)
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	sleep 3
	check_held 2 "$t0" "$t1" "status, the lease" lease_seconds "$CID"
	for g in 0 1; do
		check_held 1 "$t0" "$t1" "status, GPU $g" \
			sh -c "\"\$0\" -s \"\$1\" status --json | jq -r '.leases[0].gpus[$g].gpu_seconds'" \
			"$DEVGATE_BUILD/devgatectl" "$DG_SOCK"
	done
	check_held 2 "$t0" "$t1" "metric" metric_sum "$CID"
	[ "$(dg metrics | grep -c "^devgate_gpu_seconds_total{container=\"$CID\",cgroup=\"/$CID\",gpu=\"GPU-")" = 2 ]
	dg metrics | grep -q '^# TYPE devgate_gpu_seconds_total counter$'
}

@test "gpu-seconds: a revoked GPU stops counting and stays; the lease's end drops the series" {
	container c
	t0=$(now_ms)
	run -0 dg grant --pid "$CPID" --gpu 0,1
	t1=$(now_ms)
	uuid1=$(dg list --json | jq -r '.gpus[1].uuid')
	sleep 1
	t2=$(now_ms)
	run -0 dg revoke --pid "$CPID" --gpu 1
	t3=$(now_ms)
	m1=$(metric_sum "$CID" "$uuid1")
	read -r lo hi < <(held 1 "$t0" "$t1" "$t2" "$t3")
	within "$m1" "$lo" "$hi"
	sleep 1
	# GPU 1's series stays, no longer growing; GPU 0 goes on.
	[ "$(metric_sum "$CID" "$uuid1")" = "$m1" ]
	t4=$(now_ms)
	total=$(lease_seconds "$CID")
	t5=$(now_ms)
	read -r lo hi < <(held 1 "$t0" "$t1" "$t4" "$t5")
	within "$total" "$(awk -v a="$lo" -v b="$m1" 'BEGIN { print a + b }')" \
		"$(awk -v a="$hi" -v b="$m1" 'BEGIN { print a + b }')"
	# Taken again, GPU 1 goes on from where it was: the counter never falls.
	run -0 dg grant --pid "$CPID" --gpu 1
	m1b=$(metric_sum "$CID" "$uuid1")
	awk -v a="$m1b" -v b="$m1" 'BEGIN { exit !(a >= b) }'
	run -0 dg revoke --pid "$CPID"
	[ "$(dg metrics | grep -c '^devgate_gpu_seconds_total{')" = 0 ]
}

@test "gpu-seconds: the time devgated was down counts, and the count goes on" {
	container c
	t0=$(now_ms)
	run -0 dg grant --pid "$CPID" --gpu 0,1 --container job
	t1=$(now_ms)
	sleep 1
	before=$(lease_seconds "$CID")
	stop_daemon
	sleep 2
	# The kernel kept the grant while devgated was down.
	run -1 probe "$CID" /dev/nvidia1
	[ "$output" = "/dev/nvidia1 ENXIO" ]
	start_daemon
	check_held 2 "$t0" "$t1" "after 2 s down and a start ($before before the stop)" \
		lease_seconds "$CID"
	after=$(lease_seconds "$CID")
	awk -v a="$after" -v b="$before" 'BEGIN { exit !(a >= b + 4 * 0.99) }'
	m=$(metric_sum "$CID")
	awk -v a="$m" -v b="$after" 'BEGIN { exit !(a >= b) }'
	grep -q '"since_ms"' "$DG_TMP/state/leases/"*.json
}

@test "gpu-seconds: a moved GPU's time stays with the source; the destination starts anew" {
	container a
	A=$CID APID=$CPID
	container b
	B=$CID BPID=$CPID
	run -0 dg grant --pid "$APID" --gpu 0
	sleep 1
	t0=$(now_ms)
	run -0 dg --json move --gpu 0 --from "$APID" --to "$BPID"
	t1=$(now_ms)
	# b's count starts at the move: at most the time the move took.
	moved_at=$(echo "$output" | jq -r '.to.gpu_seconds')
	within "$moved_at" 0 "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1000 }')"
	# a holds nothing now: its lease and series are gone.
	[ "$(dg metrics | grep -c "cgroup=\"/$A\"")" = 0 ]
	sleep 1
	check_held 1 "$t0" "$t1" "b, a second after the move" lease_seconds "$B"
}
