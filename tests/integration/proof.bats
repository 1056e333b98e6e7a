#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# The proof before "granted": devgated opens the granted nodes, and a
# neighbour GPU's, from a process in the container's cgroups, and rolls the
# grant back naming the layer that still denies.

load helpers

setup_file() {
	export DG_NSDIR="/run/dg28pf-test.$$"
	if [ "$(id -u)" = 0 ] && command -v runc >/dev/null; then dg_ns_setup; fi
}
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	DG_ID="dg28pf$BATS_TEST_NUMBER-${DG_TMP##*.}"
	DG_PINS="/sys/fs/bpf/dg28pf-test-$DG_ID"
	DG_V1=
	start_daemon -v
}
teardown() {
	local st=0
	if [ -n "$DG_V1" ]; then
		runc --root "$DG_TMP/runc1" delete -f "$CID" >/dev/null 2>&1 || true
		# runc made the container's cgroup in every v1 controller, not only devices.
		wait_until 10 v1_rmdirs "$DG_ID" || st=1
	fi
	dg_teardown || st=1
	return "$st"
}

# deny_on CGROUP: attaches runtime_like (denies every 195:*) there, not
# devgate's; prints its id.
deny_on() {
	bpftool prog load "$DEVGATE_BUILD/runtime_like.bpf.o" "$DG_PINS-rt" type cgroup/dev
	bpftool cgroup attach "$1" device pinned "$DG_PINS-rt" multi
	rm -f "$DG_PINS-rt"
	bpftool -j cgroup show "$1" | jq '.[] | select(.name == "runtime_like") | .id'
}

proofs() { grep -c "proof: $CID: .* reach the driver" "$DG_TMP/daemon.log" || true; }
cached() { grep -c "proof: $CID: device layers unchanged" "$DG_TMP/daemon.log" || true; }

# Nothing of a failed grant is left: no lease, no grant entry, no node, the
# runtime's own program alone on the cgroup, no prober among its processes.
nothing_left() {
	local cg=$1 progs=$2
	[ "$(dg status --json | jq '.leases | length')" = 0 ]
	[ "$(grants_of "$cg")" = 0 ]
	run -1 dg_runc exec "$CID" test -e /dev/nvidia0
	[ "$(cg_progs "$cg")" = "$progs" ]
	[ "$(wc -l <"$cg/cgroup.procs")" = 1 ]
}

@test "a first grant is proven from inside; an unchanged container is not proven again; a layer change is" {
	nested_container c
	run -0 dg grant --pid "$CPID" --gpu 0
	[ "$(proofs)" = 1 ]
	grep -q "proof: $CID: 4 node(s) reach the driver, the neighbour stays denied" \
		"$DG_TMP/daemon.log"
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]

	# Same layers: the second grant is not proven again.
	run -0 dg grant --pid "$CPID" --gpu 0
	[ "$(proofs)" = 1 ]
	[ "$(cached)" = 1 ]

	# A program on an ancestor changes the layers: proven again (and refused).
	id=$(deny_on "$PARENT")
	run -16 dg grant --pid "$CPID" --gpu 0
	[ "$(proofs)" = 1 ]
	[ "$(cached)" = 1 ]
	[[ "$output" == *"BPF program ID $id (runtime_like, attached at cgroup /$DG_ID) that is not devgate's"* ]]
	# That failed grant changed nothing: GPU 0, held before, is still held.
	[ "$(dg status --json | jq -r '.leases[0].gpus | length')" = 1 ]
	# Detached, the layers are those proven last: no proof needed again.
	bpftool cgroup detach "$PARENT" device id "$id"
	run -0 dg grant --pid "$CPID" --gpu 0
	[ "$(proofs)" = 1 ]
	[ "$(cached)" = 2 ]
}

@test "a program that is not devgate's denies the GPU on an ancestor: refused by its id, nothing left" {
	nested_container c
	progs=$(cg_progs "$PARENT/$CID")
	id=$(deny_on "$PARENT")
	run -16 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"/dev/nvidia0 (c 195:0) stays denied inside $CID by BPF program ID $id (runtime_like, attached at cgroup /$DG_ID) that is not devgate's; the grant was rolled back"* ]]
	[[ "$output" == *"bpftool cgroup tree"* ]]
	nothing_left "$PARENT/$CID" "$progs"
	run -16 dg --json grant --pid "$CPID" --gpu 0
	[ "$(echo "$output" | jq -r .error.code)" = not_delivered ]

	# Without it the same grant reaches the driver, and the neighbour stays denied.
	bpftool cgroup detach "$PARENT" device id "$id"
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
}

@test "the proof's own opens are neither counted nor reported as denials" {
	nested_container c
	run -0 dg grant --pid "$CPID" --gpu 0
	[ "$(proofs)" = 1 ]
	run -0 dg metrics
	[ "$(grep -c "^devgate_device_accesses_[a-z]*_total{container=\"$CID\"" <<<"$output")" = 0 ]
	# The container's own opens are.
	run -1 probe "$CID" /gpu1
	run -0 dg metrics
	grep -q "^devgate_device_accesses_denied_total{container=\"$CID\".*device=\"195:1\".* 1$" <<<"$output"
}

@test "a frozen container: refused as frozen before any prober is cloned, nothing left" {
	nested_container c
	progs=$(cg_progs "$PARENT/$CID")
	echo 1 >"$PARENT/$CID/cgroup.freeze"
	wait_until 10 grep -qx "frozen 1" "$PARENT/$CID/cgroup.events"
	run -16 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"cgroup /$DG_ID/$CID is frozen (the prober was killed)"* ]]
	[ "$(dg status --json | jq '.leases | length')" = 0 ]
	[ "$(grants_of "$PARENT/$CID")" = 0 ]
	[ "$(cg_progs "$PARENT/$CID")" = "$progs" ]
	[ "$(wc -l <"$PARENT/$CID/cgroup.procs")" = 1 ]
	echo 0 >"$PARENT/$CID/cgroup.freeze"
	nothing_left "$PARENT/$CID" "$progs"
	run -0 dg grant --pid "$CPID" --gpu 0
}

# hold_prober: restarts devgated so that its prober waits on a FIFO
# (DEVGATE_TEST_PROBER_HOLD) after joining the container's cgroups and
# before its opens, with a proof time of 10 minutes: an attack then meets
# a running prober, and only what devgated notices ends the wait.
hold_prober() {
	HOLD="$DG_TMP/hold"
	mkfifo "$HOLD"
	stop_daemon
	DEVGATE_TEST_PROBER_HOLD=$HOLD DEVGATE_TEST_PROOF_TIMEOUT_MS=600000 start_daemon -v
}
# release_prober: lets a held prober go on (an O_RDWR open of a FIFO never blocks).
release_prober() {
	local fd
	exec {fd}<>"$HOLD"
	exec {fd}>&-
}
# The held prober, the one process of cgroup $1 that is not the container's.
prober_of() { grep -vx "$CPID" "$1/cgroup.procs"; }
prober_held() { [ -n "$(prober_of "$1")" ]; }
# grant_bg: the grant, in the background, bounded (exit 124 when it hangs); sets GRANT.
grant_bg() {
	timeout 120 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" grant --pid "$CPID" --gpu 0 \
		>"$DG_TMP/grant.out" 2>&1 &
	GRANT=$!
}
# grant_wait: the background grant's exit status, in GST.
grant_wait() {
	GST=0
	wait "$GRANT" || GST=$?
}

@test "attack: the container freezes its cgroup while the prober runs: refused at once as frozen, nothing left" {
	nested_container c
	progs=$(cg_progs "$PARENT/$CID")
	hold_prober
	grant_bg
	wait_until 60 prober_held "$PARENT/$CID"
	echo 1 >"$PARENT/$CID/cgroup.freeze"
	# devgated sees cgroup.events change and kills the prober: no 10-minute wait.
	grant_wait
	[ "$GST" = 16 ]
	grep -q "cgroup /$DG_ID/$CID is frozen (the prober was killed)" "$DG_TMP/grant.out"
	[ "$(wc -l <"$PARENT/$CID/cgroup.procs")" = 1 ]
	echo 0 >"$PARENT/$CID/cgroup.freeze"
	release_prober
	nothing_left "$PARENT/$CID" "$progs"
	# Thawed, the same grant is proven and holds; the neighbour stays denied.
	grant_bg
	wait_until 60 prober_held "$PARENT/$CID"
	release_prober
	grant_wait
	[ "$GST" = 0 ]
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
}

@test "attack: the prober is killed before it answers: never taken as a pass, the grant rolled back" {
	nested_container c
	progs=$(cg_progs "$PARENT/$CID")
	hold_prober
	grant_bg
	wait_until 60 prober_held "$PARENT/$CID"
	kill -KILL "$(prober_of "$PARENT/$CID")"
	grant_wait
	[ "$GST" = 16 ]
	grep -q "the prober in cgroup /$DG_ID/$CID was killed before it answered" "$DG_TMP/grant.out"
	nothing_left "$PARENT/$CID" "$progs"
}

@test "attack: cgroup.kill during the proof kills the container and the prober: refused, nothing left" {
	nested_container c
	hold_prober
	grant_bg
	wait_until 60 prober_held "$PARENT/$CID"
	echo 1 >"$PARENT/$CID/cgroup.kill"
	grant_wait
	[ "$GST" = 16 ]
	grep -q "killed before it answered" "$DG_TMP/grant.out"
	[ "$(dg status --json | jq '.leases | length')" = 0 ]
	[ "$(grants_of "$PARENT/$CID")" = 0 ]
	wait_until 30 test ! -s "$PARENT/$CID/cgroup.procs"
}

@test "hybrid: a v1 devices cgroup whose parent denies the GPU is named, and the grant rolled back" {
	requires runc
	local v1
	v1=$(awk '$9 == "cgroup" && $4 == "/" && $NF ~ /(^|,)devices(,|$)/ { print $5; exit }' \
		/proc/self/mountinfo)
	[ -n "$v1" ] || missing "needs a cgroup v1 devices hierarchy (a hybrid host)"
	CID="$DG_ID-v1"
	DG_V1="$v1/$DG_ID"
	# The parent denies: no child can allow, whoever writes its devices.allow.
	# (A list, not a deny exception: a cgroup that allows all lists "a *:* rwm".)
	mkdir "$DG_V1"
	echo a >"$DG_V1/devices.deny"
	for rule in 'c *:* m' 'b *:* m' 'c 1:* rwm' 'c 5:* rwm' 'c 136:* rwm' 'c 10:200 rwm'; do
		echo "$rule" >"$DG_V1/devices.allow"
	done
	dg_bundle "$DG_TMP/v1" "$DEVGATE_BUILD/probe"
	jq --arg p "/$DG_ID/$CID" '.linux.cgroupsPath = $p' "$DG_TMP/v1/config.json" \
		>"$DG_TMP/v1/config.new"
	mv "$DG_TMP/v1/config.new" "$DG_TMP/v1/config.json"
	runc --root "$DG_TMP/runc1" run -d -b "$DG_TMP/v1" "$CID" </dev/null >"$DG_TMP/v1.log" 2>&1 ||
		fail "runc: $(cat "$DG_TMP/v1.log")"
	CPID=$(runc --root "$DG_TMP/runc1" state "$CID" | jq -r .pid)
	DG_CGROUPS+=("$DG_CGROOT/$DG_ID")
	v2=$(awk -F: '$1 == 0 { print $3 }' "/proc/$CPID/cgroup")
	progs=$(cg_progs "$DG_CGROOT$v2")

	# devgate's own v1 write is refused first (exit 11); without it the proof
	# would refuse (16). Either way the error names the v1 devices cgroup.
	run dg grant --pid "$CPID" --gpu 0
	[ "$status" = 11 ]
	[[ "$output" == *"v1 devices cgroup /$DG_ID/$CID refused"* ]]
	[ "$(dg status --json | jq '.leases | length')" = 0 ]
	[ "$(grants_of "$DG_CGROOT$v2")" = 0 ]
	[ "$(cg_progs "$DG_CGROOT$v2")" = "$progs" ]
	run -1 runc --root "$DG_TMP/runc1" exec "$CID" test -e /dev/nvidia0
	[ "$(wc -l <"$DG_V1/$CID/cgroup.procs")" = 1 ]
}
