#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Who may talk to devgated, and a socket that keeps serving when clients
# misbehave: read-only and admin groups, a cap on connections, idle and
# half-sent requests cut, clients that stop reading, no descriptors left,
# limits by uid and authority that keep root and admins served, and a
# connection's authority that stays with the uid that made it.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	# nobody must reach the socket's directory, which devgated makes.
	chmod 0711 "$DG_TMP"
	DG_SOCK="$DG_TMP/run/sock"
	# Where the other uids' helpers write what they report.
	mkdir -m 1777 "$DG_TMP/st"
}
teardown() {
	local p
	for p in ${HOLDER:-} "${BACKGROUND[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	dg_teardown
}

# as_nobody GROUPS CMD...: runs CMD as uid/gid 65534 with only GROUPS.
as_nobody() {
	local groups=$1
	shift
	setpriv --reuid 65534 --regid 65534 --groups "$groups" "$@"
}

# as_uid UID GROUPS CMD...: runs CMD as UID (gid 65534) with only GROUPS.
as_uid() {
	local uid=$1 groups=$2
	shift 2
	setpriv --reuid "$uid" --regid 65534 --groups "$groups" "$@"
}

# Background processes a test started (teardown kills them).
BACKGROUND=()

# flood MODE N UID: tests/helpers/sockflood.py MODE with N connections as
# UID, a socket-group member, in the background; it makes a new connection
# for each one devgated cuts. Its status: $DG_TMP/st/MODE.UID.
flood() {
	# setpriv itself in the background (not as_uid's subshell), so that
	# teardown's kill reaches the flood.
	setpriv --reuid "$3" --regid 65534 --groups 4242 /usr/bin/python3 "$DG_ROOT/tests/helpers/sockflood.py" \
		--status "$DG_TMP/st/$1.$3" "$1" "$DG_SOCK" "$2" &
	BACKGROUND+=($!)
}

# flood_has MODE UID FIELD MIN: the flood's FIELD (open, made, cut) is MIN or more.
flood_has() {
	local v
	v=$(awk -v f="$3" '{ for (i = 1; i < NF; i++) if ($i == f) print $(i + 1) }' \
		"$DG_TMP/st/$1.$2" 2>/dev/null)
	[ -n "$v" ] && [ "$v" -ge "$4" ]
}

# hold_as UID GROUPS N TEXT: N connections as UID that send TEXT and never
# read, in the background; returns once all N are connected.
hold_as() {
	setpriv --reuid "$1" --regid 65534 --groups "$2" /usr/bin/python3 - "$DG_SOCK" "$3" "$4" \
		"$DG_TMP/st/held.$1" <<'PY' &
import os, socket, sys, time
socks = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.send(sys.argv[3].encode())
    socks.append(s)
open(sys.argv[4], "w").close()
time.sleep(120)
PY
	BACKGROUND+=($!)
	wait_until 30 test -e "$DG_TMP/st/held.$1"
}

# hold_start N [TEXT]: N connections as root that send TEXT (default
# nothing) and never read, in the background (HOLDER); it writes
# $DG_TMP/st/held.0 once all N are connected.
hold_start() {
	python3 - "$DG_SOCK" "$1" "${2:-}" "$DG_TMP/st/held.0" <<'PY' &
import socket, sys, time
socks = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    if sys.argv[3]:
        s.send(sys.argv[3].encode())
    socks.append(s)
open(sys.argv[4], "w").close()
time.sleep(60)
PY
	HOLDER=$!
}

# hold N [TEXT]: hold_start, then waits until all N are connected.
hold() {
	hold_start "$@"
	wait_until 30 test -e "$DG_TMP/st/held.0" || fail "the $1 connections were not made"
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
	# must be read from what is left in the socket. (An ASan build's leak
	# check cannot run under ptrace: off for this one run.)
	run -4 refused_peer env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
		strace -f -qq -o /dev/null -e trace=sendmsg -e inject=sendmsg:delay_enter=300000 \
		"$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" status
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
	wait_until 20 grep -q "it stopped reading" "$DG_TMP/daemon.log"
}

@test "out of file descriptors: devgated does not spin, and serves again once they free" {
	# devgated's own descriptors (its maps and programs) and 12 more: they run out quickly.
	start_daemon --client-timeout-ms 60000
	own=$(find "/proc/$DG_DAEMON_PID/fd" -mindepth 1 | wc -l)
	prlimit --pid "$DG_DAEMON_PID" --nofile=$((own + 12)):$((own + 12))
	# Not all connect: devgated stops accepting, and the listen queue fills.
	hold_start 60
	wait_until 20 grep -q "out of file descriptors" "$DG_TMP/daemon.log"
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
	wait_until 30 test -S "$DG_SOCK"
	# It gives up after 1 s; the fake daemon would hold it for 30.
	start=$(date +%s)
	run -3 dg -t 1 list
	[ $(($(date +%s) - start)) -le 10 ]
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
	start_daemon --client-timeout-ms 60000 --recheck-ms 100
	has_pidfds 0
	hold 2
	wait_until 30 has_pidfds 2 || fail "devgated holds $(pidfds_of_daemon) pidfds"
	kill "$HOLDER"
	HOLDER=
	wait_until 30 has_pidfds 0
	# The process that connected exits; its child, which keeps the
	# connection, then sends a line devgated refuses.
	python3 - "$DG_SOCK" "$DG_TMP/connector" <<'PY'
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
open(sys.argv[2], "w").write(str(os.getpid()))
parent = os.getpid()
if os.fork() == 0:
    while os.getppid() == parent:
        time.sleep(0.01)
    s.sendall(b"x\n")
    s.recv(4096)
    os._exit(0)
PY
	connector=$(cat "$DG_TMP/connector")
	wait_until 10 grep -q "refused a malformed request from uid 0 pid $connector (exited)" \
		"$DG_TMP/daemon.log"
	wait_until 30 has_pidfds 0
	run -0 dg list
	wait_until 30 has_pidfds 0
}

@test "a reader's 256 streams and 500 half-sent requests lock out neither root, the hook nor admins" {
	start_daemon --socket-group 4242 --admin-group 4343
	# One reader opens 256 watch streams; five others send half a request on
	# 100 connections each. Both make a new connection for each one cut.
	flood watch 256 65534
	for u in 60001 60002 60003 60004 60005; do flood half 100 "$u"; done
	# Each has made all its connections (more, where devgated cut some).
	for u in 60001 60002 60003 60004 60005; do wait_until 30 flood_has half "$u" made 100; done
	wait_until 30 flood_has watch 65534 made 256
	# Root: every request served (devgatectl gives up after 5 s).
	for _ in $(seq 20); do
		run -0 dg -t 5 list
		[[ "${lines[0]}" == IDX* ]]
	done
	# The OCI hook (root) grants at createRuntime: the container starts.
	hooked_bundle h '.annotations = {"devgate.io/gpus": "0"} | .process.args = ["probe", "/dev/nvidia0"]'
	run -1 run_bundle h
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	# An admin-group member and a reader who is not attacking are served too.
	container c
	run -0 as_uid 60100 4242,4343 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" -t 5 grant \
		--pid "$CPID" --gpu 1
	run -1 probe "$CID" /dev/nvidia1
	[ "$output" = "/dev/nvidia1 ENXIO" ]
	run -0 as_uid 60200 4242 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" -t 5 status
	# Each half-sending reader was held to its 32 connections.
	grep -q "uid 6000[1-5] holds 32 connections to devgated already (max-clients-per-uid)" \
		"$DG_TMP/daemon.log"
	# The streaming reader holds no more than its 8 streams.
	run -0 cat "$DG_TMP/st/watch.65534"
	[ "$(echo "$output" | awk '{ print $2 }')" -le 8 ]
	run -3 as_nobody 4242 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" -t 5 watch
	[[ "$output" == *"max-clients-per-uid"* || "$output" == *"max-streams-per-uid"* ]]
}

@test "readers hold only their share: idle connections are cut first, never root's" {
	start_daemon --socket-group 4242 --admin-group 4343 --max-clients 8 --reserved-clients 4 \
		--max-clients-per-uid 8 --client-timeout-ms 60000
	# Reader 60001 fills the readers' four slots with half-sent requests.
	hold_as 60001 4242 4 '{"v":1,"op":"li'
	wait_until 30 has_pidfds 4
	# Another reader gets in: the longest idle of them is cut for it.
	wait_until 10 as_uid 60002 4242 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" -t 5 list
	grep -q "cut client uid 60001 pid [0-9]*: no complete request, to make room for uid 60002" \
		"$DG_TMP/daemon.log"
	wait_until 30 has_pidfds 3
	# An admin holds the four kept slots; root goes past max-clients.
	hold_as 60003 4242,4343 4 '{"v":1,"op":"li'
	hold_as 0 0 4 '{"v":1,"op":"li'
	wait_until 30 has_pidfds 11
	# Full: a reader's idle connection goes for an admin, never root's.
	wait_until 10 as_uid 60004 4242,4343 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" -t 5 status
	grep -q "cut client uid 60001 pid [0-9]*: no complete request, to make room for uid 60004" \
		"$DG_TMP/daemon.log"
	run -0 dg -t 5 list
	# A reader may cut only readers' connections: the last two of 60001's,
	# then it is refused, and no admin's or root's connection was cut.
	run -0 as_uid 60002 4242 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" -t 5 list
	run -0 as_uid 60002 4242 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" -t 5 list
	wait_until 30 has_pidfds 8
	run -3 as_uid 60002 4242 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" -t 5 list
	[[ "$output" == *"connections already, all busy (max-clients)"* ]] || fail "$output"
	run -1 grep -E "cut client uid (0|60003) " "$DG_TMP/daemon.log"
}

@test "a connection's authority stays with its uid: root's connection passed to nobody grants nothing" {
	start_daemon --socket-group 4242 --admin-group 4343
	container c
	req='{"v":1,"op":"grant","args":{"pid":'"$CPID"',"gpus":"0"}}'
	# Root connects, then a child that dropped to nobody writes on the connection.
	run -0 python3 - "$DG_SOCK" "$req" <<'PY'
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
if os.fork() == 0:
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    s.sendall(sys.argv[2].encode() + b"\n")
    print(s.makefile().readline().strip())
    os._exit(0)
os.wait()
PY
	[[ "$output" == *"this connection was made by uid 0; a process of uid 65534 may not write on it"* ]]
	# Root passes its connection (SCM_RIGHTS) to a process of nobody's.
	run -0 python3 - "$DG_SOCK" "$req" <<'PY'
import socket, subprocess, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
a, b = socket.socketpair()
child = subprocess.Popen(
    ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
     "/usr/bin/python3", "-c", """
import socket, sys
b = socket.socket(fileno=int(sys.argv[1]))
_, fds, _, _ = socket.recv_fds(b, 1, 1)
c = socket.socket(fileno=fds[0])
c.sendall(sys.argv[2].encode() + b"\\n")
print(c.makefile().readline().strip())
""", str(b.fileno()), sys.argv[2]], pass_fds=[b.fileno()])
socket.send_fds(a, [b"x"], [s.fileno()])
sys.exit(child.wait())
PY
	[[ "$output" == *"this connection was made by uid 0; a process of uid 65534 may not write on it"* ]]
	[ "$(grant_entries)" = 0 ]
	[ "$(dg status --json | jq '.leases | length')" = 0 ]
	grep -q "cut client uid 0 pid [0-9]*: a process of uid 65534 wrote on its connection" \
		"$DG_TMP/daemon.log"
	# Passed to another process of the same uid, a connection keeps serving;
	# root's own connections grant as ever.
	run -0 python3 - "$DG_SOCK" "$req" <<'PY'
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
if os.fork() == 0:
    s.sendall(sys.argv[2].encode() + b"\n")
    print(s.makefile().readline().strip())
    os._exit(0)
os.wait()
PY
	[[ "$output" == *'"ok":true'* ]]
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	run -0 dg revoke --pid "$CPID"
	run -0 as_uid 60100 4242,4343 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" grant --pid "$CPID" \
		--gpu 1
}
