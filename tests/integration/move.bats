#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Moving a GPU between two live runc containers (devgatectl move): the
# source loses it before the destination gets it, and no third grant can
# take it in between.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; start_daemon; }
teardown() { dg_teardown; }

# two_containers: runc containers a and b (their rootfs has /gpu1, 195:1,
# made before start); sets A, APID, B, BPID.
two_containers() {
	container a
	A=$CID APID=$CPID
	container b
	B=$CID BPID=$CPID
}

# probing CID: a probe runs in CID's cgroup.
probing() {
	local p
	for p in $(cat "$DG_CGROOT/$1/cgroup.procs"); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = probe ] && return 0
	done
	return 1
}

# overlaps LOG1 LOG2: every pair of runs where both containers could open
# the GPU (ENXIO) all through intervals that intersect; nothing when none.
overlaps() {
	awk '$3 == "ENXIO" && $1 <= $2 { print FILENAME, $1, $2 }' "$1" "$2" | awk -v f="$1" '
		BEGIN { na = 0; nb = 0 }
		$1 == f { a1[na] = $2; a2[na++] = $3; next }
		{ b1[nb] = $2; b2[nb++] = $3 }
		END { for (i = 0; i < na; i++) for (j = 0; j < nb; j++)
			if (a1[i] <= b2[j] && b1[j] <= a2[i]) print a1[i], a2[i], b1[j], b2[j] }'
}

# gaps LOG1 LOG2: the smallest time in us between an ENXIO run of one log
# ending and one of the other starting after it.
gaps() {
	awk '$3 == "ENXIO" { print $1, $2 }' "$1" "$2" | sort -n | awk '
		NR > 1 && $1 > last { g = ($1 - last) / 1000; if (min == "" || g < min) min = g }
		{ if ($2 > last) last = $2 }
		END { printf "%d\n", min }'
}

@test "move: the source loses the GPU before the destination gets it, every time" {
	# devgated pauses 100 ms once the destination's grant is in the kernel
	# (before its gate and record): were the source still able to open the
	# GPU then, the probers could not miss it.
	stop_daemon
	DEVGATE_FAULT=grant.guard:pause=100 start_daemon
	two_containers
	run -0 dg grant --pid "$APID" --gpu 1
	# A prober in each container opens /gpu1 without pause until the moves
	# are done and /stop is made in its root (however slow the machine).
	dg_runc exec "$A" probe -L 120000 /gpu1 /stop >"$DG_TMP/a.log" &
	pa=$!
	dg_runc exec "$B" probe -L 120000 /gpu1 /stop >"$DG_TMP/b.log" &
	pb=$!
	wait_until 30 probing "$A"
	wait_until 30 probing "$B"
	sleep 0.5
	for i in 1 2 3; do
		t0=$(date +%s%N)
		run -0 dg move --gpu 1 --from "$APID" --to "$BPID"
		t1=$(date +%s%N)
		echo "# move a -> b: $(((t1 - t0) / 1000)) us (devgatectl included)" >&3
		sleep 0.2
		run -0 dg move --gpu 1 --from "$BPID" --to "$APID"
		sleep 0.2
	done
	run -0 dg move --gpu 1 --from "$APID" --to "$BPID"
	touch "$DG_TMP/a/rootfs/stop" "$DG_TMP/b/rootfs/stop"
	wait "$pa" "$pb"
	cat "$DG_TMP/a.log" "$DG_TMP/b.log" >&2
	# Each side saw the GPU open and shut again (the probers saw the moves).
	[ "$(grep -c ENXIO "$DG_TMP/a.log")" -ge 4 ]
	[ "$(grep -c ENXIO "$DG_TMP/b.log")" -ge 4 ]
	[ "$(grep -c EPERM "$DG_TMP/a.log")" -ge 4 ]
	[ -z "$(grep -v -E ' (ENXIO|EPERM)$' "$DG_TMP/a.log" "$DG_TMP/b.log")" ]
	# No moment where both could open it.
	run overlaps "$DG_TMP/a.log" "$DG_TMP/b.log"
	[ -z "$output" ] || fail "both containers could open GPU 1 at once: $output"
	echo "# smallest gap with neither able to open it: $(gaps "$DG_TMP/a.log" "$DG_TMP/b.log") us" >&3
	# b holds it now, a not; a's node is gone, b's is there.
	run -1 probe "$A" /gpu1 /dev/nvidia1
	[ "${lines[0]}" = "/gpu1 EPERM" ]
	[ "${lines[1]}" = "/dev/nvidia1 ENOENT" ]
	run -1 probe "$B" /gpu1 /dev/nvidia1
	[ "${lines[0]}" = "/gpu1 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidia1 ENXIO" ]
	[ "$(grants_of "$DG_CGROOT/$A")" = 0 ]
	[ "$(grants_of "$DG_CGROOT/$B")" = 4 ]
	[ "$(dg status --json | jq -c '[.leases[] | {cgroup, g: [.gpus[].index]}]')" = \
		"[{\"cgroup\":\"/$B\",\"g\":[1]}]" ]
}

@test "move: a grant from a third container during moves never gets the GPU" {
	two_containers
	container c
	C=$CID CPID3=$CPID
	run -0 dg grant --pid "$APID" --gpu 1
	# The prober and the third container's grants go on until the moves are
	# done, however slow the machine: stop files end them.
	dg_runc exec "$C" probe -L 120000 /gpu1 /stop >"$DG_TMP/c.log" &
	pc=$!
	wait_until 30 probing "$C"
	(
		while [ ! -e "$DG_TMP/third.stop" ]; do
			code=0
			"$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" grant --pid "$CPID3" --gpu 1 \
				>>"$DG_TMP/third.out" 2>&1 || code=$?
			echo "$code" >>"$DG_TMP/third.codes"
		done
	) &
	pg=$!
	wait_until 30 test -s "$DG_TMP/third.codes"
	moves=0
	for _ in 1 2 3 4; do
		run -0 dg move --gpu 1 --from "$APID" --to "$BPID"
		run -0 dg move --gpu 1 --from "$BPID" --to "$APID"
		moves=$((moves + 2))
	done
	touch "$DG_TMP/third.stop" "$DG_TMP/c/rootfs/stop"
	wait "$pg" "$pc"
	echo "# $moves moves against $(wc -l <"$DG_TMP/third.codes") grants of a third container" >&3
	[ "$(wc -l <"$DG_TMP/third.codes")" -ge 2 ]
	# Every one of them refused as in use (exit 8), never granted.
	[ "$(sort -u "$DG_TMP/third.codes")" = 8 ]
	grep -q "held by container" "$DG_TMP/third.out"
	[ "$(grep -vc 'held by container\|^hint' "$DG_TMP/third.out")" = 0 ]
	[ "$(awk '$3 != "EPERM"' "$DG_TMP/c.log")" = "" ]
	[ "$(grants_of "$DG_CGROOT/$C")" = 0 ]
}

@test "move: refusals change nothing" {
	two_containers
	run -0 dg grant --pid "$APID" --gpu 1
	entries=$(grant_entries)
	# The source does not hold it.
	run -10 dg move --gpu 0 --from "$APID" --to "$BPID"
	[[ "$output" == "devgatectl: $A does not hold GPU 0 ("* ]]
	# No such GPU.
	run -7 dg move --gpu 9 --from "$APID" --to "$BPID"
	# One container.
	run -2 dg move --gpu 1 --from "$APID" --to "/$A"
	[[ "$output" == *"one container"* ]]
	# The source holds nothing.
	run -10 dg move --gpu 1 --from "$BPID" --to "$APID"
	[[ "$output" == *"holds no GPU"* ]]
	# No such label.
	run -5 dg move --gpu 1 --from nobody --to "$BPID"
	# The destination holds it already (both share it).
	run -0 dg revoke --pid "$APID"
	run -0 dg grant --pid "$APID" --gpu 1 --shared
	run -0 dg grant --pid "$BPID" --gpu 1 --shared
	entries=$(grant_entries)
	run -8 dg move --gpu 1 --from "$APID" --to "$BPID"
	[[ "$output" == *"$B holds GPU 1 already"* ]]
	[ "$(grant_entries)" = "$entries" ]
	run -1 probe "$A" /gpu1
	[ "$output" = "/gpu1 ENXIO" ]
	# Usage errors send nothing.
	run -2 dg move --gpu 1 --from "$APID"
	[[ "$output" == *"--gpu SEL --from TARGET --to TARGET"* ]]
	run -2 dg move --gpu 1 --from pid:x --to "$BPID"
	[ -z "$(find "$DG_TMP/state/leases" -name '*.moving')" ]
}

@test "move --json: mode kept, expiry carried, holders reported and killed" {
	stop_daemon
	rm -rf "$DG_HOST"
	# GPU 0 is 1:7 here (/dev/full): a node that opens, so it can be held.
	make_host --nvidia-major 1 --minor-base 7
	start_daemon
	two_containers
	run -0 dg grant --pid "$APID" --gpu 0,1 --shared --ttl 1h --container job-a
	expires=$(dg status --json | jq -r '.leases[0].expires')
	dg_runc exec -d "$A" sh -c 'exec 3</dev/nvidia7; exec sleep 100003'
	wait_until 5 pgrep -f 'sleep 100003'
	holder=$(pgrep -f 'sleep 100003')
	run -0 dg --json move --gpu 0 --from job-a --to "cgroup:/$B" --kill=TERM
	echo "$output" | jq . >&2
	[ "$(echo "$output" | jq -r '.moved | length')" = 1 ]
	[ "$(echo "$output" | jq -r '.to.cgroup')" = "/$B" ]
	[ "$(echo "$output" | jq -r '.to.gpus[0].shared')" = true ]
	[ "$(echo "$output" | jq -r '.to.expires')" = "$expires" ]
	[ "$(echo "$output" | jq -r '.from.container')" = job-a ]
	[ "$(echo "$output" | jq -r '[.from.gpus[].index] | join(",")')" = 1 ]
	[ "$(echo "$output" | jq '.holders[0].pid')" = "$holder" ]
	[ "$(echo "$output" | jq '.killed')" = 1 ]
	wait_until 5 sh -c "! kill -0 $holder 2>/dev/null"
	run -0 probe "$B" /dev/nvidia7
	run -1 probe "$A" /dev/nvidia7
	[ "$output" = "/dev/nvidia7 ENOENT" ]
	# The rest of a's lease moves by label, into b's lease; a then holds nothing.
	run -0 dg move --gpu all --from job-a --to "$BPID"
	[[ "$output" == *"holds no GPU now"* ]]
	[ "$(dg status --json | jq '[.leases[] | .gpus | length] | join(",")' -r)" = 2 ]
	run -2 dg --json move --gpu 1
	[ "$(echo "$output" | jq -r .error.code)" = invalid ]
}

# A devgated killed between the steps of a move: after the next start the
# GPU is with exactly one of the two, with its grant and node, and with no
# third; never both.
@test "move: a crash at any step leaves the GPU with exactly one of the two" {
	two_containers
	for point in move.journal move.grants move.nodes grant.nodes grant.grants grant.record \
		move.commit; do
		run -0 dg grant --pid "$APID" --gpu 1
		stop_daemon
		crash_with "$point" dg move --gpu 1 --from "$APID" --to "$BPID"
		start_daemon
		holders=$(dg status --json | jq -r '[.leases[] | select(.gpus | any(.index == 1)) | .cgroup] | join(" ")')
		echo "# crash at $point: held by $holders" >&3
		case $point in
		move.commit | grant.record) [ "$holders" = "/$B" ] ;;
		*) [ "$holders" = "/$A" ] ;;
		esac
		[ "$holders" = "/$A" ] && { have=$A; not=$B; } || { have=$B; not=$A; }
		run -1 probe "$have" /gpu1 /dev/nvidia1
		[ "${lines[0]}" = "/gpu1 ENXIO" ] || fail "$point: $have cannot open it: $output"
		[ "${lines[1]}" = "/dev/nvidia1 ENXIO" ] || fail "$point: $have has no node: $output"
		run -1 probe "$not" /gpu1
		[ "$output" = "/gpu1 EPERM" ] || fail "$point: $not can open it too"
		[ "$(grants_of "$DG_CGROOT/$not")" = 0 ]
		[ -z "$(find "$DG_TMP/state/leases" -maxdepth 1 \( -name '*.pending' -o -name '*.moving' \))" ] ||
			fail "$point: a journal left over"
		run -0 dg revoke --pid "$APID" --missing-ok
		run -0 dg revoke --pid "$BPID" --missing-ok
	done
}
