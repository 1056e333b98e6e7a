#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Who may talk to devgated, and a socket that keeps serving when clients
# misbehave: read-only and admin groups, a cap on connections, idle and
# half-sent requests cut, clients that stop reading, no descriptors left.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	# nobody must reach the socket's directory, which devgated makes.
	chmod 0711 "$DG_TMP"
	DG_SOCK="$DG_TMP/run/sock"
}
teardown() {
	[ -z "${HOLDER:-}" ] || kill "$HOLDER" 2>/dev/null || true
	dg_teardown
}

# as_nobody GROUPS CMD...: runs CMD as uid/gid 65534 with only GROUPS.
as_nobody() {
	local groups=$1
	shift
	setpriv --reuid 65534 --regid 65534 --groups "$groups" "$@"
}

# hold N [TEXT]: N connections that send TEXT (default nothing) and never read.
hold() {
	python3 - "$DG_SOCK" "$1" "${2:-}" <<'PY' &
import socket, sys, time
socks = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    if sys.argv[3]:
        s.send(sys.argv[3].encode())
    socks.append(s)
time.sleep(60)
PY
	HOLDER=$!
	sleep 0.5
}

@test "socket-group reads, admin-group also grants, everyone else is refused" {
	start_daemon --socket-group 4242 --admin-group 4343
	[ "$(stat -c '%a %u %g' "$DG_SOCK")" = "660 0 4242" ]
	[ "$(stat -c '%a %u %g' "$DG_TMP/run")" = "750 0 4242" ]
	container c
	run -0 as_nobody 4242 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" list
	[[ "${lines[0]}" == IDX* ]]
	run -0 as_nobody 4242 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" status
	run -4 as_nobody 4242 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" grant --pid "$CPID" --gpu 0
	[[ "${lines[0]}" == *"'grant' changes leases: root or devgated's admin-group only"* ]]
	[ "$(grant_entries)" = 0 ]
	# The socket has one group: admins reach it as members of socket-group too.
	run -0 as_nobody 4242,4343 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" grant --pid "$CPID" \
		--gpu 0
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	run -0 as_nobody 4242,4343 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" revoke --pid "$CPID"
	# In neither group: the socket's mode keeps it out before devgated must.
	run -4 as_nobody 65534 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" list
	# admin-group alone: the socket is that group's (a new directory: devgated
	# re-owns only a directory it made, or /run/devgate).
	stop_daemon
	DG_SOCK="$DG_TMP/run2/sock"
	start_daemon --admin-group 4343
	[ "$(stat -c '%a %u %g' "$DG_SOCK")" = "660 0 4343" ]
	run -0 as_nobody 4343 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" grant --pid "$CPID" --gpu 1
	# Without either the socket is root's alone.
	stop_daemon
	start_daemon
	[ "$(stat -c '%a %u' "$DG_SOCK")" = "600 0" ]
}

@test "a peer devgated does not serve hears why, also when devgated closes before it sends" {
	start_daemon --socket-group 4242
	# uid 65534 in no group of devgated's, past the socket's mode (as
	# devgate-k8s with CAP_DAC_OVERRIDE alone): devgated refuses it itself.
	refused_peer() {
		setpriv --reuid 65534 --regid 65534 --clear-groups --inh-caps +dac_override \
			--ambient-caps +dac_override "$@"
	}
	run -4 refused_peer "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" list
	[[ "${lines[0]}" == "devgatectl: devgated does not serve uid 65534" ]]
	# The request held back 300 ms after connect: devgated has written the
	# reason and closed by then, so the send fails (EPIPE) and the reason
	# must be read from what is left in the socket.
	run -4 refused_peer strace -f -qq -o /dev/null -e trace=sendmsg \
		-e inject=sendmsg:delay_enter=300000 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" status
	[[ "${lines[0]}" == "devgatectl: devgated does not serve uid 65534" ]] || fail "$output"
	[[ "${lines[1]}" == "hint: run devgatectl as root, or join devgated's socket-group"* ]]
	# Its members are served as before.
	run -0 setpriv --reuid 65534 --regid 65534 --groups 4242 "$DEVGATE_BUILD/devgatectl" \
		-s "$DG_SOCK" status
}

@test "max-clients: idle connections are cut after client-timeout-ms, then others are served" {
	start_daemon --max-clients 4 --client-timeout-ms 300 --recheck-ms 100
	hold 4
	# The four hold every slot until the timeout cuts them; list then gets one.
	run -0 timeout 5 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" -t 4 list
	[[ "${lines[0]}" == IDX* ]]
	wait_until 5 grep -q "no complete request for 300 ms" "$DG_TMP/daemon.log"
}

@test "a half-sent request is cut, and never delays anyone else" {
	start_daemon --client-timeout-ms 300 --recheck-ms 100
	hold 3 '{"v":1,"op":"li'
	start=$(date +%s%N)
	run -0 dg list
	[ $(($(date +%s%N) - start)) -lt 1000000000 ]
	wait_until 5 grep -q "no complete request for 300 ms" "$DG_TMP/daemon.log"
}

@test "a client that pipelines requests and stops reading waits, is cut, never delays others" {
	start_daemon --client-timeout-ms 1000 --recheck-ms 100
	# 20000 list requests written, no reply read: about 20 MiB of replies.
	python3 - "$DG_SOCK" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.setblocking(False)
req = b'{"v":1,"op":"list"}\n' * 20000
try:
    while req:
        n = s.send(req)
        req = req[n:]
except OSError:
    pass
time.sleep(30)
PY
	HOLDER=$!
	sleep 1
	start=$(date +%s%N)
	run -0 dg list
	[ $(($(date +%s%N) - start)) -lt 1000000000 ]
	# Its requests wait while its replies pile up; then the timeout cuts it.
	wait_until 5 grep -q "it stopped reading" "$DG_TMP/daemon.log"
}

@test "out of file descriptors: devgated does not spin, and serves again once they free" {
	# 40 descriptors: a few are devgated's own, the rest run out quickly.
	start_daemon --client-timeout-ms 60000
	prlimit --pid "$DG_DAEMON_PID" --nofile=40:40
	hold 60
	wait_until 5 grep -q "out of file descriptors" "$DG_TMP/daemon.log"
	t0=$(awk '{ print $14 + $15 }' "/proc/$DG_DAEMON_PID/stat")
	sleep 2
	t1=$(awk '{ print $14 + $15 }' "/proc/$DG_DAEMON_PID/stat")
	# Spinning would burn ~200 ticks in 2 s; an idle loop burns next to none.
	[ $((t1 - t0)) -lt 20 ]
	kill "$HOLDER"
	HOLDER=
	run -0 timeout 10 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" list
}

@test "devgatectl --timeout: a daemon that never answers is an error, not a hang" {
	python3 - "$DG_SOCK" <<'PY' &
import os, socket, sys, time
os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(1)
c, _ = s.accept()
time.sleep(30)
PY
	HOLDER=$!
	wait_until 5 test -S "$DG_SOCK"
	start=$(date +%s)
	run -3 dg -t 1 list
	[ $(($(date +%s) - start)) -le 3 ]
	[ "${lines[0]}" = "devgatectl: devgated did not answer within 1 s" ]
	run -2 dg -t 0 list
}

# pidfds devgated holds for clients: not the one of its spare node helper.
pidfds_of_daemon() {
	local f pid n=0
	for f in "/proc/$DG_DAEMON_PID"/fd/*; do
		[ "$(readlink "$f" 2>/dev/null)" = "anon_inode:[pidfd]" ] || continue
		pid=$(awk '/^Pid:/ { print $2 }' "/proc/$DG_DAEMON_PID/fdinfo/${f##*/}" 2>/dev/null)
		[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = devgated-node ] || n=$((n + 1))
	done
	echo "$n"
}

has_pidfds() { [ "$(pidfds_of_daemon)" = "$1" ]; }

@test "devgated holds each client's pidfd while it is connected, and logs a PID that exited" {
	# Idle clients are cut after 3 s: long enough to count them first.
	start_daemon --client-timeout-ms 3000 --recheck-ms 100
	has_pidfds 0
	hold 2
	wait_until 2 has_pidfds 2 || fail "devgated holds $(pidfds_of_daemon) pidfds"
	kill "$HOLDER"
	HOLDER=
	wait_until 2 has_pidfds 0
	# The process that connected exits; a child keeps the connection open.
	python3 - "$DG_SOCK" "$DG_TMP/connector" <<'PY'
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
open(sys.argv[2], "w").write(str(os.getpid()))
if os.fork() == 0:
    time.sleep(10)
    os._exit(0)
PY
	connector=$(cat "$DG_TMP/connector")
	wait_until 8 grep -q "cut client uid 0 pid $connector (exited): no complete request" \
		"$DG_TMP/daemon.log"
	wait_until 2 has_pidfds 0
	run -0 dg list
	wait_until 2 has_pidfds 0
}
