#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Inventory, exclusive and shared leases, automatic release, restarts.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; }
teardown() {
	# The pin root of a second devgated that was refused after making it.
	[ -n "${DG_PINS:-}" ] && rm -rf "$DG_PINS-other"
	dg_teardown
}

mixed_host() {
	make_host -g "NVIDIA H100 80GB HBM3=2330" -g "NVIDIA A100-SXM4-40GB=20b0" \
		-g "NVIDIA H100 80GB HBM3=2330" -g "NVIDIA L4=27b8"
}

@test "list shows each GPU's ids, architecture and holder; --free and --json" {
	mixed_host
	start_daemon
	run -0 dg list --json
	[ "$(echo "$output" | jq -r '[.gpus[].arch] | join(" ")')" = "hopper ampere hopper ada" ]
	[ "$(echo "$output" | jq -r '[.gpus[].product] | join(" ")')" = \
		"10de:2330 10de:20b0 10de:2330 10de:27b8" ]
	[ "$(echo "$output" | jq -r '[.gpus[].pci] | join(" ")')" = \
		"0000:18:00.0 0000:3b:00.0 0000:5e:00.0 0000:81:00.0" ]
	container c
	run -0 dg grant --pid "$CPID" --gpu 1
	run -0 dg list
	[[ "${lines[2]}" == "1 "*"ampere"*"held by $CID"*"NVIDIA A100-SXM4-40GB" ]]
	run -0 dg list --free --json
	[ "$(echo "$output" | jq -r '[.gpus[].index] | join(" ")')" = "0 2 3" ]
	run -0 dg list --json
	[ "$(echo "$output" | jq -r '.gpus[1].holders[0].container')" = "$CID" ]
}

@test "two containers ask for the only free GPU at once: one wins, the other changes nothing" {
	make_host -n 1
	start_daemon
	container a
	pa=$CPID ca=$CID
	container b
	pb=$CPID cb=$CID
	orig_a=$(cg_progs "$DG_CGROOT/$ca")
	orig_b=$(cg_progs "$DG_CGROOT/$cb")
	dg grant --pid "$pa" --gpu 0 >"$DG_TMP/a.out" 2>&1 &
	ja=$!
	dg grant --pid "$pb" --gpu 0 >"$DG_TMP/b.out" 2>&1 &
	jb=$!
	sa=0 sb=0
	wait "$ja" || sa=$?
	wait "$jb" || sb=$?
	[ "$((sa + sb))" = 8 ] # exactly one 0 and one 8
	if [ "$sa" = 0 ]; then
		win=$ca lose=$cb lose_orig=$orig_b lose_out=$DG_TMP/b.out
	else
		win=$cb lose=$ca lose_orig=$orig_a lose_out=$DG_TMP/a.out
	fi
	grep -q "GPU 0 held by container $win" "$lose_out"
	run -1 probe "$win" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	run -1 probe "$lose" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENOENT" ]
	[ "$(grants_of "$DG_CGROOT/$lose")" = 0 ]
	[ "$(cg_progs "$DG_CGROOT/$lose")" = "$lose_orig" ]
}

@test "--gpus N with constraints picks matching free GPUs, lowest index first" {
	mixed_host
	start_daemon
	container a
	run -0 dg --json grant --pid "$CPID" --gpus 2 --arch hopper
	[ "$(echo "$output" | jq -r '[.gpus[].index] | sort | join(" ")')" = "0 2" ]
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidia2 /dev/nvidia1
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/dev/nvidia2 ENXIO\n/dev/nvidia1 ENOENT')" ]
	# Asking again for the same total changes nothing.
	run -0 dg --json grant --pid "$CPID" --gpus 2 --arch hopper
	[ "$(echo "$output" | jq '.granted | length')" = 0 ]
	holder=$CID

	container b
	run -8 dg grant --pid "$CPID" --gpus 1 --arch hopper
	[ "${lines[0]}" = "devgatectl: requested 1 GPU with arch=hopper: 0 free (GPU 0 held by container $holder; GPU 2 held by container $holder)" ]
	run -0 dg --json grant --pid "$CPID" --gpus 1 --product 10de:27b8
	[ "$(echo "$output" | jq -r '.gpus[0].index')" = 3 ]
	# Counts are of matching GPUs: there is one A100 only.
	run -8 dg grant --pid "$CPID" --gpus 2 --model a100
	[ "${lines[0]}" = "devgatectl: requested 2 GPUs with model=a100: 1 free" ]
	run -0 dg --json grant --pid "$CPID" --gpus 1 --model a100
	[ "$(echo "$output" | jq -r '[.gpus[].index] | sort | join(" ")')" = "1 3" ]
	run -7 dg grant --pid "$CPID" --gpus 1 --arch volta
	[ "$output" = "devgatectl: no GPU on this host matches arch=volta
hint: run 'devgatectl list' to see each GPU's model, arch and product" ]
	run -2 dg grant --pid "$CPID" --gpus 1 --arch fermi9
	run -2 dg grant --pid "$CPID" --gpus 1 --product 10de
}

@test "shared GPUs: shared with shared, never with exclusive" {
	start_daemon
	container a
	pa=$CPID ca=$CID
	container b
	pb=$CPID
	container c
	pc=$CPID
	run -0 dg grant --pid "$pa" --gpu 0 --shared
	run -0 dg grant --pid "$pb" --gpu 0 --shared
	run -1 probe "$CID" /dev/nvidia0
	run -8 dg grant --pid "$pc" --gpu 0
	[[ "$output" == "devgatectl: GPU 0 shared by container "* ]]
	run -0 dg grant --pid "$pc" --gpu 1
	run -8 dg grant --pid "$pa" --gpu 1 --shared
	[[ "$output" == "devgatectl: GPU 1 held by container $CID"* ]]
	run -0 dg status
	[[ "$output" == *"$ca"*"shared"*"GPU 0"* ]]
	run -0 dg list --json
	[ "$(echo "$output" | jq -r '.gpus[0].state')" = shared ]
	[ "$(echo "$output" | jq '.gpus[0].holders | length')" = 2 ]
}

@test "status --json describes each lease" {
	start_daemon
	container c
	run -0 dg grant --pid "$CPID" --gpu 1 --container job-1
	run -0 dg status --json
	lease=$(echo "$output" | jq '.leases[0]')
	[ "$(echo "$lease" | jq -r .container)" = job-1 ]
	[ "$(echo "$lease" | jq -r .cgroup)" = "/$CID" ]
	[ "$(echo "$lease" | jq -r .cgroup_id)" = "$(stat -c %i "$DG_CGROOT/$CID")" ]
	[ "$(echo "$lease" | jq -r .pid)" = "$CPID" ]
	[[ "$(echo "$lease" | jq -r .since)" =~ ^20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T.*Z$ ]]
	[ "$(echo "$lease" | jq -r '.gpus[0].shared')" = false ]
	[ "$(echo "$lease" | jq -r '.gpus[0].index')" = 1 ]
}

# Counter entries of one cgroup (by id) in devgate's counters map.
counters_of() {
	bpftool -j map dump pinned "$DG_PINS/dg_counters_v1" |
		jq --argjson id "$1" '[.[] | select(.formatted.key.cgroup_id == $id)] | length'
}

@test "SIGKILL of the container releases its lease within 1 s, pins and grants too" {
	start_daemon
	container c
	id=$(stat -c %i "$DG_CGROOT/$CID")
	rt=$(cg_progs "$DG_CGROOT/$CID")
	run -0 dg grant --pid "$CPID" --gpu 0
	gated_beside "$DG_CGROOT/$CID" "$rt"
	# Counted opens: of the granted GPU, and of one the runtime denies.
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "$(counters_of "$id")" -gt 0 ]
	dg_runc kill "$CID" KILL
	wait_until 1 no_leases
	[ "$(dg list --json | jq -r '.gpus[0].state')" = free ]
	[ -z "$(gate_leftovers)" ]
	[ "$(grant_entries)" = 0 ]
	# Its counters went with it, by key (no walk of the whole map).
	[ "$(counters_of "$id")" = 0 ]
	grep -q "released 1 GPU(s) of $CID: container ended" "$DG_TMP/daemon.log"
	# The freed GPU can go to someone else at once.
	container d
	run -0 dg grant --pid "$CPID" --gpu 0
}

restart_keeps_lease() { # SIGNAL
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	progs=$(cg_progs "$DG_CGROOT/$CID")
	stop_daemon "$1"
	# While devgated is down the pinned gate keeps the grant working.
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	start_daemon
	grep -q "reconcile: adopted lease of $CID (1 GPU(s))" "$DG_TMP/daemon.log"
	[ "$(cg_progs "$DG_CGROOT/$CID")" = "$progs" ] # adopted, not rebuilt
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	run -0 dg status --json
	[ "$(echo "$output" | jq -r '.leases[0].cgroup')" = "/$CID" ]
	holder=$CID
	container other
	run -8 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"GPU 0 held by container $holder"* ]]
	# And the adopted lease still ends when its container does.
	dg_runc kill "$holder" KILL
	wait_until 1 no_leases
}

@test "daemon restart after SIGTERM: leases adopted, container keeps its GPU" {
	start_daemon
	restart_keeps_lease TERM
}

@test "daemon restart after SIGKILL: leases adopted, container keeps its GPU" {
	start_daemon
	restart_keeps_lease KILL
}

@test "a container that ends while devgated is down is released on start" {
	start_daemon
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	stop_daemon KILL
	dg_rm "$CID"
	start_daemon
	grep -q "released 1 GPU(s) of $CID: reconcile: cgroup gone while devgated was down" \
		"$DG_TMP/daemon.log"
	no_leases
	[ -z "$(gate_leftovers)" ]
	[ "$(grant_entries)" = 0 ]
	[ -z "$(ls "$DG_TMP/state/leases")" ]
}

@test "a lost record is rebuilt from the kernel's grants: the container keeps its GPU" {
	start_daemon
	container c
	run -0 dg grant --pid "$CPID" --gpu 0 --container job
	stop_daemon KILL
	rm "$DG_TMP/state/leases/"*.json
	start_daemon
	grep -q "reconcile: rebuilt the lost record of $CID (1 GPU(s)) from its grants" \
		"$DG_TMP/daemon.log"
	run -0 dg status --json
	[ "$(echo "$output" | jq -r '.leases[0].cgroup')" = "/$CID" ]
	[ "$(echo "$output" | jq -r '.leases[0].gpus[0].index')" = 0 ]
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	# Rebuilt means owned: exclusive to it, and revoked the usual way.
	container d
	run -8 dg grant --pid "$CPID" --gpu 0
	run -0 dg revoke --cgroup "/${DG_CONTAINERS[0]}"
}

@test "a shared GPU whose records are all lost is rebuilt shared for every holder" {
	start_daemon
	container a
	pa=$CPID ca=$CID
	container b
	cb=$CID
	run -0 dg grant --pid "$pa" --gpu 0 --shared
	run -0 dg grant --pid "$CPID" --gpu 0 --shared
	container c
	cc=$CID
	run -0 dg grant --pid "$CPID" --gpu 0 --shared
	# An exclusive neighbour whose record is lost too stays exclusive.
	container x
	cx=$CID
	run -0 dg grant --pid "$CPID" --gpu 1
	stop_daemon KILL
	rm "$DG_TMP/state/leases/"*.json
	start_daemon
	for c in "$ca" "$cb" "$cc" "$cx"; do
		grep -q "reconcile: rebuilt the lost record of $c (1 GPU(s)) from its grants" \
			"$DG_TMP/daemon.log"
		run -1 probe "$c" /dev/nvidia0 /dev/nvidia1
		if [ "$c" = "$cx" ]; then
			[ "$output" = "$(printf '/dev/nvidia0 ENOENT\n/dev/nvidia1 ENXIO')" ]
		else
			[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/dev/nvidia1 ENOENT')" ]
		fi
	done
	run -0 dg list --json
	[ "$(echo "$output" | jq -r '.gpus[0].state')" = shared ]
	[ "$(echo "$output" | jq '.gpus[0].holders | length')" = 3 ]
	[ "$(echo "$output" | jq -r '.gpus[1].state')" != shared ]
	run -0 dg status --json
	[ "$(echo "$output" | jq '[.leases[] | select(.gpus[0].shared)] | length')" = 3 ]
	# Shared means shared: one more may join, nobody may take it alone.
	container d
	run -8 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == "devgatectl: GPU 0 shared by container "* ]]
	run -8 dg grant --pid "$CPID" --gpu 1 --shared
	run -0 dg grant --pid "$CPID" --gpu 0 --shared
	# Each rebuilt lease is revoked the usual way, the others keep the GPU.
	run -0 dg revoke --cgroup "/$cb"
	run -1 probe "$cb" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENOENT" ]
	run -1 probe "$ca" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
}

@test "a crash before the record commits rolls the grant back, its nodes too" {
	start_daemon
	container c
	original=$(cg_progs "$DG_CGROOT/$CID")
	stop_daemon
	for point in grant.nodes grant.grants grant.guard; do
		DEVGATE_FAULT=$point start_daemon
		run dg grant --pid "$CPID" --gpu 0
		[ "$status" -ne 0 ]
		wait "$DG_DAEMON_PID" || true
		DG_DAEMON_PID=
		start_daemon
		grep -q "reconcile: rolled back the unfinished grant to $CID" "$DG_TMP/daemon.log"
		[ "$(cg_progs "$DG_CGROOT/$CID")" = "$original" ]
		[ "$(grant_entries)" = 0 ]
		[ -z "$(ls "$DG_TMP/state/leases")" ]
		# No node is left behind in the container.
		run -1 probe "$CID" /dev/nvidia0 /dev/nvidiactl
		[ "$output" = "$(printf '/dev/nvidia0 ENOENT\n/dev/nvidiactl ENOENT')" ]
		stop_daemon
	done
}

@test "a damaged lease file is moved aside; devgated starts and serves the rest" {
	start_daemon
	container a
	ca=$CID
	run -0 dg grant --pid "$CPID" --gpu 0
	container b
	cb=$CID
	run -0 dg grant --pid "$CPID" --gpu 1
	stop_daemon TERM
	id_a=$(stat -c %i "$DG_CGROOT/$ca")
	truncate -s 20 "$DG_TMP/state/leases/$id_a.json"
	start_daemon
	grep -q "lease file .*/$id_a.json is damaged: not valid JSON (truncated or damaged); moved to" \
		"$DG_TMP/daemon.log"
	[ -f "$DG_TMP/state/leases/broken/$id_a.json" ]
	run -0 dg metrics
	[[ "$output" == *"devgate_state_records_broken_total 1"* ]]
	# Both keep their GPUs: b's record is whole, a's is proven by its grants.
	run -1 probe "$ca" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	run -1 probe "$cb" /dev/nvidia1
	[ "$output" = "/dev/nvidia1 ENXIO" ]
	run -0 dg status --json
	[ "$(echo "$output" | jq '.leases | length')" = 2 ]
	stop_daemon TERM
}

@test "two records booking one GPU, not both shared: the older keeps it" {
	start_daemon
	container a
	ca=$CID
	run -0 dg grant --pid "$CPID" --gpu 0 --shared
	sleep 1.1
	container b
	cb=$CID
	run -0 dg grant --pid "$CPID" --gpu 0 --shared
	stop_daemon TERM
	# b's record now claims GPU 0 for itself alone.
	f="$DG_TMP/state/leases/$(stat -c %i "$DG_CGROOT/$cb").json"
	jq '.gpus[0].shared = false' "$f" >"$f.new" && mv "$f.new" "$f"
	start_daemon
	grep -q "reconcile: GPU .* is booked by .*; $ca keeps it, $cb loses it" "$DG_TMP/daemon.log"
	run -1 probe "$ca" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	run -1 probe "$cb" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 EPERM" ]
	run -0 dg status --json
	[ "$(echo "$output" | jq '.leases | length')" = 1 ]
}

@test "an unfinished state write left by a crash is discarded on start" {
	mkdir -p "$DG_TMP/state/leases"
	echo '{"form' > "$DG_TMP/state/leases/.123.json.tmp"
	start_daemon
	[ ! -e "$DG_TMP/state/leases/.123.json.tmp" ]
	grep -q "removing unfinished state write" "$DG_TMP/daemon.log"
}

# second_daemon PIN STATE SOCKET [SETUP]: runs another devgated with these
# paths in a mount namespace of its own, after the shell commands SETUP (a
# bind mount made there goes with the namespace). It must stop by itself:
# one that starts and serves is ended after 30 s, and fails the test.
second_daemon() {
	run timeout 30 unshare -m sh -c "${4:-:}"'; exec "$0" --socket "$1" --state-dir "$2" \
		--pin-root "$3" --host-root "$4"' "$DEVGATE_BUILD/devgated" "$3" "$2" "$1" "$DG_HOST"
}

# The first devgated's grants, revokes and pins, to compare after each refusal.
first_daemon_view() {
	find "$DG_PINS" | sort
	bpftool -j map dump pinned "$DG_PINS/dg_grants_v1" | jq -c 'sort_by(.key)'
	dg status --json | jq -c '[.leases[] | [.cgroup, [.gpus[].index]]]'
	probe "$A" /dev/nvidia0 || true
	probe "$CID" /dev/nvidia1 /gpu1 || true
}

# first_daemon: this test's devgated, with one container holding GPU 0
# (exclusive) and one whose GPU 1 was revoked; BEFORE is what it holds.
first_daemon() {
	start_daemon
	container a
	A=$CID
	run -0 dg grant --pid "$CPID" --gpu 0
	container b
	run -0 dg grant --pid "$CPID" --gpu 1
	run -0 dg revoke --pid "$CPID"
	BPID=$CPID
	BEFORE=$(first_daemon_view 2>&1)
}

# The first devgated still holds what it held: its lease stands, the revoke
# stays done, GPU 0 stays exclusive, and it serves.
first_daemon_holds() {
	[ "$(first_daemon_view 2>&1)" = "$BEFORE" ]
	run -1 probe "$A" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	run -1 probe "$CID" /dev/nvidia1 /gpu1
	[ "${lines[0]}" = "/dev/nvidia1 ENOENT" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -8 dg grant --pid "$BPID" --gpu 0
}

# paths_to DIR: PATHS, three ways to DIR (itself, a symlink, a bind mount that
# the shell commands SETUP make in second_daemon's namespace).
paths_to() {
	mkdir "$1-bind"
	ln -s "$1" "$1-link"
	PATHS=("$1" "$1-link" "$1-bind")
	SETUP="mount --bind $1 $1-bind"
}

@test "two daemons cannot share a pin root, by any path: the second exits 13 and changes nothing" {
	first_daemon
	# A pin root's parent must be bpffs: the ways to it go through /sys/fs/bpf.
	mkdir "$DG_TMP/bpf"
	ln -s /sys/fs/bpf "$DG_TMP/bpflink"
	name=${DG_PINS##*/}
	for pins in "$DG_PINS" "$DG_TMP/bpflink/$name" "$DG_TMP/bpf/$name"; do
		second_daemon "$pins" "$DG_TMP/state2" "$DG_TMP/sock2" \
			"mount --bind /sys/fs/bpf $DG_TMP/bpf"
		[ "$status" = 13 ]
		[[ "$output" == *"pin root $pins is in use by another devgated"* ]]
		[[ "$output" == *"hint: two daemons on one pin root undo each other's grants: stop the other one, or give this one its own --pin-root"* ]]
		# It stopped before anything of its own, too.
		[ ! -e "$DG_TMP/state2" ]
		[ ! -e "$DG_TMP/sock2" ]
		first_daemon_holds
	done
}

@test "two daemons cannot share a state directory, by any path: the second exits 13" {
	first_daemon
	paths_to "$DG_TMP/state"
	for state in "${PATHS[@]}"; do
		second_daemon "$DG_PINS-other" "$state" "$DG_TMP/other.sock" "$SETUP"
		[ "$status" = 13 ]
		[[ "$output" == *"state directory $state is in use by another devgated"* ]]
		first_daemon_holds
	done
}

@test "two daemons cannot share a socket, by any path: the second exits 13 before its state" {
	DG_SOCK="$DG_TMP/run/sock"
	first_daemon
	paths_to "$DG_TMP/run"
	for dir in "${PATHS[@]}"; do
		second_daemon "$DG_PINS-other" "$DG_TMP/state2" "$dir/sock" "$SETUP"
		[ "$status" = 13 ]
		[[ "$output" == *"socket $dir/sock is in use by another devgated"* ]]
		[[ "$output" == *"hint: stop the other daemon, or give this one its own --socket"* ]]
		# Refused before it read or made a state directory (it could not serve).
		[ ! -e "$DG_TMP/state2" ]
		first_daemon_holds
	done
}

@test "watch streams lease changes as they happen" {
	start_daemon
	dg watch --json >"$DG_TMP/watch.out" 2>&1 &
	watcher=$!
	sleep 0.3
	container c
	run -0 dg grant --pid "$CPID" --gpu 0,1
	run -0 dg revoke --pid "$CPID" --gpu 1
	dg_runc kill "$CID" KILL
	wait_until 1 no_leases
	sleep 0.2
	kill "$watcher"
	run -0 jq -r '.type + " " + (.gpus | length | tostring)' "$DG_TMP/watch.out"
	[ "$output" = "$(printf 'granted 2\nrevoked 1\nreleased 1')" ]
	run -0 jq -r '.lease.cgroup' "$DG_TMP/watch.out"
	[ "${lines[0]}" = "/$CID" ]
}

@test "counters of a cgroup that no lease holds are swept on start" {
	start_daemon
	# A key left by a crash between a release's steps: cgroup 12345, c 195:0, r.
	zeros=()
	for _ in $(seq 32); do zeros+=(00); done
	bpftool map update pinned "$DG_PINS/dg_counters_v1" \
		key hex 39 30 00 00 00 00 00 00 c3 00 00 00 00 00 00 00 02 00 02 00 00 00 00 00 \
		value hex "${zeros[@]}"
	[ "$(bpftool -j map dump pinned "$DG_PINS/dg_counters_v1" | jq length)" = 1 ]
	stop_daemon
	start_daemon
	grep -q "reconcile: removed 1 counter(s) of cgroups that no lease holds" "$DG_TMP/daemon.log"
	[ "$(bpftool -j map dump pinned "$DG_PINS/dg_counters_v1" | jq length)" = 0 ]
}

@test "leases hold no file descriptors: more leases than the fd limit allows" {
	start_daemon
	sleep 0.1 # idle: the spare gate and helper exist, and their fds count
	# Room for the daemon's own fds and a grant's (a gate copy loading: its
	# maps, BTF and programs), not for one fd per lease.
	limit=$(($(ls "/proc/$DG_DAEMON_PID/fd" | wc -l) + 32))
	prlimit --pid "$DG_DAEMON_PID" --nofile="$limit:$limit"
	n=$((limit + 16))
	root="$DG_TMP/shared/rootfs"
	mkdir -p "$root/bin"
	cp /bin/busybox "$root/bin/"
	ln -s busybox "$root/bin/sleep"
	pids=()
	for i in $(seq "$n"); do
		DG_CGROUPS+=("$DG_CGROOT/$DG_ID-m$i")
		pids+=("$(dg_plain "$DG_CGROOT/$DG_ID-m$i" "$root")")
		dg grant --pid "${pids[-1]}" --gpu 0 --shared >/dev/null
	done
	[ "$(dg status --json | jq '.leases | length')" = "$n" ]
	[ "$(ls "/proc/$DG_DAEMON_PID/fd" | wc -l)" -lt "$limit" ]
	run -1 grep -q "Too many open files" "$DG_TMP/daemon.log"
	# The watch still sees every container end.
	for i in $(seq "$n"); do echo 1 >"$DG_CGROOT/$DG_ID-m$i/cgroup.kill"; done
	wait_until 3 no_leases
	[ "$(grant_entries)" = 0 ]
}

@test "pins removed, devgated restarted: one grants map, an exclusive GPU stays exclusive" {
	start_daemon
	container c2
	c2=$CID
	original=$(cg_progs "$DG_CGROOT/$c2")
	run -0 dg grant --pid "$CPID" --gpu 1
	stop_daemon TERM
	rm -rf "$DG_PINS"
	start_daemon
	grep -q "adopted the BPF maps of the gates on leased cgroups" "$DG_TMP/daemon.log"
	run -1 probe "$c2" /dev/nvidia1
	[ "$output" = "/dev/nvidia1 ENXIO" ]
	run -0 dg revoke --cgroup "/$c2"
	# The revoke reached the map the gate reads, and put the runtime back.
	run -1 probe "$c2" /gpu1
	[ "$output" = "/gpu1 EPERM" ]
	[ "$(cg_progs "$DG_CGROOT/$c2")" = "$original" ]
	container c3
	run -0 dg grant --pid "$CPID" --gpu 1
	run -1 probe "$CID" /dev/nvidia1
	[ "$output" = "/dev/nvidia1 ENXIO" ]
	run -1 probe "$c2" /gpu1
	[ "$output" = "/gpu1 EPERM" ]
}

# opens CID PATH: PATH opens in the container.
opens() {
	[ "$(probe "$1" "$2" 2>/dev/null)" = "$2 ok" ]
}

@test "pins removed while devgated runs: the runtime's devices keep working, pins come back" {
	start_daemon --recheck-ms 200
	container c
	original=$(cg_progs "$DG_CGROOT/$CID")
	run -0 dg grant --pid "$CPID" --gpu 0
	rm -rf "$DG_PINS"
	# devgated holds the shared programs and their slots, and pins them again
	# at the next re-check. With the pins gone and devgated stopped, the
	# kernel empties the slots; the next devgated adopts the gates from the
	# leased cgroup and refills the slots from the keeper.
	wait_until 3 opens "$CID" /dev/null
	wait_until 3 test -e "$DG_PINS/dg_grants_v1"
	wait_until 3 sh -c "ls '$DG_PINS'/dg_gate0_* '$DG_PINS'/dg_slots0_v1 '$DG_PINS'/dg_beside_v1 >/dev/null 2>&1"
	sleep 0.5
	run -0 probe "$CID" /dev/null
	[ "$output" = "/dev/null ok" ]
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	# And across a restart with the pins gone again.
	stop_daemon TERM
	rm -rf "$DG_PINS"
	start_daemon
	run -0 probe "$CID" /dev/null
	[ "$output" = "/dev/null ok" ]
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	# The beside form in effect, the runtime's program unchanged (the tally may
	# be the one from before the pins were lost: it counts in the adopted maps).
	[ "$(cg_foreign "$DG_CGROOT/$CID")" = "$original" ]
	[ "$(bpftool -j cgroup show "$DG_CGROOT/$CID" effective | jq -r '[.[].name] | join(" ")')" = \
		"devgate_mark  devgate_beside devgate_tally" ]
	run -0 dg revoke --pid "$CPID"
	[ "$(cg_progs "$DG_CGROOT/$CID")" = "$original" ]
}

# The record of container $1 as devgated wrote it, or nothing.
record_of() {
	cat "$DG_TMP/state/leases/$(stat -c %i "$DG_CGROOT/$1").json" 2>/dev/null
}

@test "a state directory removed or moved away under devgated is made again, with every record" {
	start_daemon
	container a
	ca=$CID
	run -0 dg grant --pid "$CPID" --gpu 0 --container job-a --ttl 1h
	for how in rm-dir rm-leases mv-dir; do
		case $how in
		rm-dir) rm -rf "$DG_TMP/state" ;;
		rm-leases) rm -rf "$DG_TMP/state/leases" ;;
		mv-dir) mv "$DG_TMP/state" "$DG_TMP/state.old" ;;
		esac
		[ -z "$(record_of "$ca")" ]
		# The next grant works, and a's record is written again with what
		# the grants map could not tell (its name and expiry).
		container "b-$how"
		run -0 dg grant --pid "$CPID" --gpu 1 --shared
		grep -q "state directory $DG_TMP/state/leases was removed or replaced while devgated ran; made it again" \
			"$DG_TMP/daemon.log"
		[ "$(record_of "$ca" | jq -r .container)" = job-a ]
		[ "$(record_of "$ca" | jq 'has("expires")')" = true ]
		[ "$(record_of "$CID" | jq -r '.gpus[0].shared')" = true ]
		run -0 dg revoke --pid "$CPID"
		[ -z "$(record_of "$CID")" ]
		rm -rf "$DG_TMP/state.old"
	done
	# A restart adopts a's lease from its record; nothing is rebuilt.
	stop_daemon KILL
	start_daemon
	run ! grep -q "rebuilt the lost record" "$DG_TMP/daemon.log"
	run -0 dg status --json
	[ "$(echo "$output" | jq -r '.leases[0].container')" = job-a ]
	[ "$(echo "$output" | jq '.leases | length')" = 1 ]
	run -1 probe "$ca" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
}
