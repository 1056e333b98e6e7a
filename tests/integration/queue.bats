#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Containers and clients are named NAME_PID, NAME_CID, NAME_CLIENT, set with
# printf -v, which shellcheck cannot follow:
# shellcheck disable=SC2154
# The wait queue (grant --wait, --priority, devgatectl queue, devgate.io/wait)
# against live runc containers and the fixture's GPUs: a waiter is served the
# moment the holder's lease ends (container exit, revoke, expiry), in
# priority then arrival order; a timeout, a client that leaves and a request
# that could never be served leave nothing queued. Every served waiter's
# container opens the GPU (ENXIO, the driver answers) and the previous
# holder's, where it lives, cannot (EPERM).

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	DG_BG=()
}
teardown() {
	local p
	for p in "${DG_BG[@]}"; do kill "$p" 2>/dev/null || true; done
	dg_teardown
}

# gpu_container NAME: container NAME with a node of GPU 0 (195:0) at /gpu0;
# sets CPID and CID, and NAME_PID / NAME_CID for later.
gpu_container() {
	container "$1"
	mknod -m 666 "$DG_TMP/$1/rootfs/gpu0" c 195 0
	printf -v "${1}_PID" %s "$CPID"
	printf -v "${1}_CID" %s "$CID"
}

opens() {
	[ "$(probe "$1" /gpu0)" = "/gpu0 ENXIO" ]
}

denied() {
	[ "$(probe "$1" /gpu0)" = "/gpu0 EPERM" ]
}

# waiter NAME ARGS...: grant --wait to container NAME in the background; its
# stdout, stderr and exit status go to $DG_TMP/NAME.{out,err,rc} and the
# time it ended (ns) to NAME.end.
waiter() {
	local name=$1 pid_var="${1}_PID"
	shift
	(
		rc=0
		# SIGINT as a terminal's Ctrl-C sends it: bash ignores it in background jobs.
		env --default-signal=INT "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" grant \
			--pid "${!pid_var}" --container "$name" --wait "$@" \
			>"$DG_TMP/$name.out" 2>"$DG_TMP/$name.err" &
		echo $! >"$DG_TMP/$name.pid"
		wait $! || rc=$?
		date +%s%N >"$DG_TMP/$name.end"
		echo $rc >"$DG_TMP/$name.rc"
	) &
	DG_BG+=($!)
	wait_until 2 test -s "$DG_TMP/$name.pid"
	printf -v "${name}_CLIENT" %s "$(cat "$DG_TMP/$name.pid")"
	DG_BG+=("$(cat "$DG_TMP/$name.pid")")
}

queue_len() {
	dg queue --json | jq '.waiters | length'
}

queued() {
	[ "$(queue_len)" = "$1" ]
}

# served NAME: its grant returned 0.
served() {
	wait_until 5 test -s "$DG_TMP/$1.rc" || fail "$1 was not answered: $(cat "$DG_TMP/$1.err")"
	[ "$(cat "$DG_TMP/$1.rc")" = 0 ] || fail "$1: $(cat "$DG_TMP/$1.err")"
}

still_waiting() {
	[ ! -e "$DG_TMP/$1.rc" ]
}

# kill_and_serve HOLDER WAITER: kills HOLDER's init while WAITER waits for
# GPU 0; prints and returns (in MS) how long after the kill WAITER's grant
# returned.
kill_and_serve() {
	local holder_pid="${1}_PID" t0
	waiter "$2" --gpu 0
	wait_until 5 queued 1 || fail "$2 is not queued: $(cat "$DG_TMP/$2.err")"
	t0=$(date +%s%N)
	kill -9 "${!holder_pid}"
	served "$2"
	MS=$((($(cat "$DG_TMP/$2.end") - t0) / 1000000))
}

# The bound of the issue, 50 ms from the holder's exit to the waiter's
# reply, holds on an idle 2-core host (18-34 ms measured); on one loaded by
# other work, scheduling the exit, the client and this shell alone can
# exceed it. So five holders exit in turn, and both figures are printed:
# devgated's own (from its wake-up on the exit to the reply, which must be
# within 50 ms every time) and the end-to-end one (which must be within the
# 1 s periodic check: the waiter is served on the exit's event).
@test "a waiter is served as soon as the holder's container exits (measured)" {
	start_daemon
	gpu_container c0
	run -0 dg grant --pid "$CPID" --gpu 0
	gpu_container w
	waiter w --gpu 0
	wait_until 5 queued 1 || fail "the waiter is not queued: $(cat "$DG_TMP/w.err")"
	wait_until 2 grep -q "waiting: position 1 of 1 (GPU 0 held by container $c0_CID)" \
		"$DG_TMP/w.err" || fail "$(cat "$DG_TMP/w.err")"
	still_waiting w
	run -0 dg queue
	[[ "${lines[0]}" == POS*PRIORITY*CONTAINER*REQUEST*WAITED*TIMEOUT ]]
	[[ "${lines[1]}" == "1    0        w "*"--gpu 0"*none ]]
	denied "$w_CID"
	kill -9 "$w_CLIENT"
	wait_until 5 queued 0

	all=() best=100000 worst=0
	for i in 1 2 3 4 5; do
		gpu_container "c$i"
		kill_and_serve "c$((i - 1))" "c$i"
		all+=("$MS")
		[ "$MS" -lt "$best" ] && best=$MS
		[ "$MS" -gt "$worst" ] && worst=$MS
		grep -q "granted GPU 0 (GPU-" "$DG_TMP/c$i.out"
	done
	echo "# waiter's reply after the holder's container was killed: ${all[*]} ms (load: $(cut -d' ' -f1 /proc/loadavg))" >&3
	inside=$(sed -n 's/.*served the waiting grant for c[1-5] .*, \([0-9.]*\) ms after the event that freed.*/\1/p' \
		"$DG_TMP/daemon.log" | xargs)
	echo "# devgated, from its wake-up on the exit to the reply: $inside ms" >&3
	[ "$(echo "$inside" | wc -w)" = 5 ]
	for t in $inside; do
		awk -v t="$t" 'BEGIN { exit !(t < 50) }' || fail "devgated served a waiter $t ms after the exit"
	done
	[ "$worst" -lt 1000 ] || fail "a waiter was served ${worst} ms after the holder's exit"
	echo "# fastest end to end: ${best} ms" >&3
	opens "$c5_CID"
	denied "$w_CID"
	queued 0
	run -0 dg metrics
	grep -qx 'devgate_queue_length 0' <<<"$output"
	grep -qx 'devgate_queue_served_total 5' <<<"$output"
	grep -qx 'devgate_queue_wait_seconds_count 5' <<<"$output"
	grep -qx 'devgate_queue_cancelled_total 1' <<<"$output"
	! grep -q "refused grant" "$DG_TMP/daemon.log"
}

@test "waiters are served by priority, then in arrival order; revoke frees the GPU" {
	start_daemon
	gpu_container holder
	run -0 dg grant --pid "$CPID" --gpu 0
	gpu_container first
	gpu_container second
	gpu_container urgent
	waiter first --gpu 0
	wait_until 5 queued 1
	waiter second --gpu 0 --priority 0
	wait_until 5 queued 2
	waiter urgent --gpu 0 --priority 5
	wait_until 5 queued 3
	run -0 dg queue --json
	[ "$(jq -r '[.waiters[] | "\(.position):\(.container):\(.priority)"] | join(" ")' <<<"$output")" = \
		"1:urgent:5 2:first:0 3:second:0" ]
	[ "$(jq -r '.waiters[0].request' <<<"$output")" = "--gpu 0" ]
	[ "$(jq -r '.waiters[0].pid' <<<"$output")" = "$urgent_PID" ]
	wait_until 2 grep -q "waiting: position 2 of 3" "$DG_TMP/first.err" ||
		fail "$(cat "$DG_TMP/first.err")"

	run -0 dg revoke --pid "$holder_PID"
	served urgent
	opens "$urgent_CID"
	denied "$holder_CID"
	still_waiting first
	still_waiting second
	queued 2
	wait_until 2 grep -q "waiting: position 1 of 2" "$DG_TMP/first.err"

	run -0 dg revoke --pid "$urgent_PID"
	served first
	opens "$first_CID"
	denied "$urgent_CID"
	still_waiting second

	run -0 dg revoke --pid "$first_PID"
	served second
	opens "$second_CID"
	denied "$first_CID"
	queued 0
}

@test "an expired lease is revoked and its GPU goes to the next waiter" {
	start_daemon
	gpu_container holder
	# Both containers first: a slow start must not outlast the lease.
	gpu_container w
	run -0 dg grant --pid "$holder_PID" --gpu 0 --ttl 2s
	waiter w --gpu 0 --json
	wait_until 5 queued 1
	opens "$holder_CID"
	served w
	[ "$(jq -r .container "$DG_TMP/w.out")" = w ]
	[ "$(jq -r '.granted | length' "$DG_TMP/w.out")" = 1 ]
	# --json: the places are not printed; the reply is one JSON document.
	[ ! -s "$DG_TMP/w.err" ]
	opens "$w_CID"
	denied "$holder_CID"
	grep -q "the lease of $holder_CID expired at" "$DG_TMP/daemon.log"
	grep -q "served the waiting grant for w after" "$DG_TMP/daemon.log"
}

@test "--wait=TIMEOUT gives up with gpu_unavailable (8) and leaves nothing queued" {
	start_daemon
	gpu_container holder
	run -0 dg grant --pid "$CPID" --gpu 0
	gpu_container w
	t0=$(date +%s%N)
	run -8 dg grant --pid "$w_PID" --gpu 0 --wait=1s
	ms=$((($(date +%s%N) - t0) / 1000000))
	echo "# --wait=1s answered after ${ms} ms" >&3
	[ "$ms" -ge 1000 ] && [ "$ms" -lt 3000 ]
	[[ "$output" == *"waiting: position 1 of 1"* ]]
	[[ "$output" == *"devgatectl: waited 1s in the queue and no GPU became free: GPU 0 held by container $holder_CID"* ]]
	[[ "$output" == *"hint: wait longer"* ]]
	queued 0
	denied "$w_CID"
	dg metrics | grep -qx 'devgate_queue_timeouts_total 1'
	run -8 dg --json grant --pid "$w_PID" --gpu 0 --wait=1s
	[ "$(jq -r .error.code <<<"$output")" = gpu_unavailable ]
	# Without --wait a busy GPU is refused at once, as before.
	run -8 dg grant --pid "$w_PID" --gpu 0
	[[ "$output" == *"GPU 0 held by container $holder_CID"* ]]
	queued 0
}

@test "Ctrl-C on a waiting client takes it out of the queue" {
	start_daemon
	gpu_container holder
	run -0 dg grant --pid "$CPID" --gpu 0
	gpu_container a
	gpu_container b
	waiter a --gpu 0
	wait_until 5 queued 1
	waiter b --gpu 0
	wait_until 5 queued 2
	kill -INT "$a_CLIENT"
	wait_until 5 queued 1 || fail "the cancelled waiter is still queued"
	wait_until 2 test -s "$DG_TMP/a.rc"
	[ "$(cat "$DG_TMP/a.rc")" = 130 ]
	[ "$(dg queue --json | jq -r '.waiters[0].container')" = b ]
	wait_until 2 grep -q "waiting: position 1 of 1" "$DG_TMP/b.err"
	grep -q "the waiting grant for a was cancelled: the client left" "$DG_TMP/daemon.log"
	dg metrics | grep -qx 'devgate_queue_cancelled_total 1'
	run -0 dg revoke --pid "$holder_PID"
	served b
	opens "$b_CID"
	denied "$a_CID"
}

@test "a waiter whose container ends leaves the queue with no_such_target" {
	start_daemon
	gpu_container holder
	run -0 dg grant --pid "$CPID" --gpu 0
	gpu_container w
	waiter w --gpu 0
	wait_until 5 queued 1
	t0=$(date +%s%N)
	kill -9 "$w_PID"
	wait_until 5 test -s "$DG_TMP/w.rc" || fail "the waiter was not dropped"
	ms=$((($(cat "$DG_TMP/w.end") - t0) / 1000000))
	echo "# dropped ${ms} ms after its container ended" >&3
	# On the pidfd's event, not the 1 s periodic check.
	[ "$ms" -lt 900 ] || fail "dropped ${ms} ms after its container ended"
	[ "$(cat "$DG_TMP/w.rc")" = 5 ]
	grep -q "devgatectl: the container ended while its grant waited in the queue" "$DG_TMP/w.err"
	queued 0
}

@test "a request that could never be served is refused at once, not queued" {
	start_daemon
	gpu_container w
	run -7 dg grant --pid "$CPID" --gpus 3 --wait
	[[ "$output" == *"not queued: the request could not be served even with every GPU free"* ]]
	[[ "$output" == *"requested 3 GPUs"* ]]
	queued 0
	run -7 dg grant --pid "$CPID" --gpu 7 --wait
	queued 0
	# Usage errors: nothing is sent.
	run -2 dg grant --pid "$CPID" --gpu 0 --priority 1
	[[ "$output" == *"--priority is a place in the queue: it needs --wait"* ]]
	run -2 dg grant --pid "$CPID" --gpu 0 --wait --priority 1001
	run -2 dg grant --pid "$CPID" --gpu 0 --wait=soon
	[[ "$output" == *"--wait wants a duration, not 'soon'"* ]]
	no_leases
	# A free GPU: --wait serves at once, and nothing is printed on stderr.
	run -0 --separate-stderr dg grant --pid "$CPID" --gpu 0 --wait --priority -3
	[ -z "$stderr" ]
	opens "$w_CID"
}

@test "the hook's devgate.io/wait holds the container's start until the GPU frees" {
	start_daemon
	gpu_container holder
	run -0 dg grant --pid "$CPID" --gpu 0
	hooked_bundle h '.annotations = {"devgate.io/gpus": "0", "devgate.io/wait": "30s"}' 0
	h_CID=$CID
	(
		dg_runc run -d -b "$DG_TMP/h" "$h_CID" </dev/null >"$DG_TMP/h.out" 2>&1
		echo $? >"$DG_TMP/h.rc"
	) &
	DG_BG+=($!)
	wait_until 10 queued 1 || fail "the hook is not queued: $(cat "$DG_TMP/h.out")"
	run -0 dg queue --json
	[ "$(jq -r '.waiters[0].container' <<<"$output")" = "$h_CID" ]
	[ "$(jq -r '.waiters[0].timeout' <<<"$output")" = 30 ]
	[ ! -e "$DG_TMP/h.rc" ]
	run -0 dg revoke --pid "$holder_PID"
	wait_until 10 test -s "$DG_TMP/h.rc" || fail "the container did not start"
	[ "$(cat "$DG_TMP/h.rc")" = 0 ] || fail "$(cat "$DG_TMP/h.out")"
	opens "$h_CID"
	denied "$holder_CID"
	queued 0

	# A wait that runs out fails the container's start with the reason.
	hooked_bundle t '.annotations = {"devgate.io/gpus": "0", "devgate.io/wait": "1s"} |
		.process.args = ["probe", "/dev/null"]'
	run ! dg_runc run -b "$DG_TMP/t" "$CID" </dev/null
	[[ "$output" == *"waited 1s in the queue and no GPU became free"* ]]
	queued 0
	hooked_bundle b '.annotations = {"devgate.io/gpus": "0", "devgate.io/wait": "soon"} |
		.process.args = ["probe", "/dev/null"]'
	run ! dg_runc run -b "$DG_TMP/b" "$CID" </dev/null
	[[ "$output" == *"annotation devgate.io/wait='soon' is not a duration"* ]]
}

@test "a devgated that stops tells its waiters the request was not served" {
	start_daemon
	gpu_container holder
	run -0 dg grant --pid "$CPID" --gpu 0
	gpu_container w
	waiter w --gpu 0 --wait=1h
	wait_until 5 queued 1
	[ "$(dg queue --json | jq .waiters[0].timeout)" = 3600 ]
	stop_daemon TERM
	grep -q "the waiting grant for w was cancelled: devgated stops" "$DG_TMP/daemon.log"
	# The client asks the devgated that comes back what w holds: nothing new.
	start_daemon
	wait_until 15 test -s "$DG_TMP/w.rc" || fail "the waiter did not end"
	[ "$(cat "$DG_TMP/w.rc")" = 3 ]
	grep -q "devgated closed the connection while the grant waited; the request was not served (devgated is back, and the container holds nothing it did not hold before)" \
		"$DG_TMP/w.err"
	grep -q "hint: devgated may have restarted" "$DG_TMP/w.err"
	# Nothing of the waiter is kept: after a start the queue is empty.
	queued 0
	denied "$w_CID"
}

@test "a waiter whose grant devgated made before it died hears that it was served" {
	# The third grant's commit is the waiter's: devgated dies right after it.
	DEVGATE_FAULT=grant.record:3 start_daemon
	gpu_container holder
	run -0 dg grant --pid "$CPID" --gpu 0
	gpu_container w
	run -0 dg grant --pid "$CPID" --gpu 1
	waiter w --gpu 0 --wait=1h
	wait_until 5 queued 1
	dg revoke --pid "$holder_PID" >/dev/null 2>&1 || true
	wait_until 10 sh -c "! kill -0 $DG_DAEMON_PID 2>/dev/null" || fail "devgated did not die"
	wait "$DG_DAEMON_PID" 2>/dev/null || true
	DG_DAEMON_PID=
	grep -q "fault point grant.record: SIGKILL" "$DG_TMP/daemon.log"
	start_daemon
	served w
	# What w gained, not what it held before (GPU 1), and why there was no reply.
	grep -q "^granted GPU 0 (GPU-[^)]*) to w (cgroup /$w_CID, PID $w_PID)$" "$DG_TMP/w.out" ||
		fail "$(cat "$DG_TMP/w.out" "$DG_TMP/w.err")"
	grep -q "warning: devgated stopped after it made this grant, before it answered; this reply is rebuilt from its status" \
		"$DG_TMP/w.err"
	opens "$w_CID"
	denied "$holder_CID"
}

@test "a waiter whose devgated does not come back says that it cannot know" {
	start_daemon
	gpu_container holder
	run -0 dg grant --pid "$CPID" --gpu 0
	gpu_container w
	dg -t 1 grant --pid "$CPID" --gpu 0 --wait >"$DG_TMP/w.out" 2>"$DG_TMP/w.err" &
	local client=$!
	DG_BG+=("$client")
	wait_until 5 queued 1
	stop_daemon KILL
	local rc=0
	wait "$client" || rc=$?
	[ "$rc" = 3 ]
	grep -q "devgated closed the connection while the grant waited and is not back within 1 s: whether the request was served is not known" \
		"$DG_TMP/w.err"
	grep -q "hint: 'devgatectl status' shows what the container holds" "$DG_TMP/w.err"
}

@test "a GPU that appears (rescan) serves a waiter" {
	start_daemon
	gpu_container holder
	run -0 dg grant --pid "$CPID" --gpus 2
	gpu_container w
	mknod -m 666 "$DG_TMP/w/rootfs/gpu2" c 195 2
	waiter w --gpus 1
	wait_until 5 queued 1
	"$DG_ROOT/tests/helpers/mkfixture" "$DG_HOST" --gpus-only --first 2 -g "NVIDIA H100 80GB HBM3=2330" >/dev/null
	run -0 dg rescan
	served w
	grep -q "granted GPU 2 (GPU-" "$DG_TMP/w.out"
	[ "$(probe "$w_CID" /gpu2)" = "/gpu2 ENXIO" ]
	denied "$w_CID"
	queued 0
}

@test "a waiter named by its cgroup: listed, dropped when the container ends, or served" {
	start_daemon
	gpu_container holder
	run -0 dg grant --pid "$CPID" --gpu 0
	gpu_container a
	gpu_container b
	( dg grant --cgroup "/$a_CID" --gpu 0 --wait >"$DG_TMP/a.out" 2>&1 || echo $? >"$DG_TMP/a.rc" ) &
	DG_BG+=($!)
	wait_until 5 queued 1
	(
		rc=0
		dg grant --cgroup "/$b_CID" --gpu 0 --wait=1m >"$DG_TMP/b.out" 2>&1 || rc=$?
		echo $rc >"$DG_TMP/b.rc"
	) &
	DG_BG+=($!)
	wait_until 5 queued 2
	run -0 dg queue --json
	[ "$(jq -r '.waiters[0].cgroup' <<<"$output")" = "/$a_CID" ]
	[ "$(jq -r '.waiters[0] | has("pid")' <<<"$output")" = false ]
	kill -9 "$a_PID"
	wait_until 5 test -s "$DG_TMP/a.rc" || fail "the waiter of an ended cgroup stays"
	[ "$(cat "$DG_TMP/a.rc")" = 5 ]
	queued 1
	run -0 dg revoke --pid "$holder_PID"
	wait_until 5 test -s "$DG_TMP/b.rc"
	[ "$(cat "$DG_TMP/b.rc")" = 0 ] || fail "$(cat "$DG_TMP/b.out")"
	opens "$b_CID"
	denied "$holder_CID"
}
