#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Every refused request: a clear message, its documented exit code, and no
# change to containers, maps or programs.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; start_daemon; }
teardown() { dg_teardown; }

@test "unknown PID: exit 5" {
	run -5 dg grant --pid 999999 --gpu 0
	[ "${lines[0]}" = "devgatectl: no process with PID 999999" ]
	# Every error carries a hint, in text and in JSON.
	[[ "${lines[1]}" == "hint: "* ]]
	run -5 dg --json grant --pid 999999 --gpu 0
	[ -n "$(echo "$output" | jq -r '.error.hint // empty')" ]
}

@test "revoke of a label no container carries: exit 5, not 10" {
	run -5 dg revoke --container nosuch
	[ "${lines[0]}" = "devgatectl: no container is labelled 'nosuch'" ]
	[[ "${lines[1]}" == "hint: 'devgatectl status' lists the labels"* ]]
	run -0 dg revoke --container nosuch --missing-ok
}

@test "PID in the root cgroup (not on a container's cgroup v2): exit 6" {
	sleep 100 &
	pid=$!
	echo "$pid" > "$DG_CGROOT/cgroup.procs"
	run -6 dg grant --pid "$pid" --gpu 0
	kill -KILL "$pid"
	[[ "${lines[0]}" == *"is in the root cgroup of cgroup v2"* ]]
	[[ "${lines[1]}" == "hint: "* ]]
}

@test "PID sharing devgated's own cgroup: exit 6" {
	stop_daemon
	cg="$DG_CGROOT/$DG_ID-daemon"
	mkdir "$cg"
	DG_CGROUPS+=("$cg")
	sh -c 'echo $$ > "$1/cgroup.procs"; exec sleep 100' _ "$cg" &
	sleeper=$!
	(echo $BASHPID > "$cg/cgroup.procs" && exec "$DEVGATE_BUILD/devgated" --socket "$DG_SOCK" \
		--state-dir "$DG_TMP/state" --pin-root "$DG_PINS" --host-root "$DG_HOST" \
		>>"$DG_TMP/daemon.log" 2>&1) &
	DG_DAEMON_PID=$!
	wait_for_daemon
	run -6 dg grant --pid "$sleeper" --gpu 0
	[[ "$output" == *"which holds devgated itself"* ]]
	[ -z "$(cg_progs "$cg")" ]
}

@test "selector that matches nothing: exit 7; malformed: exit 2" {
	container c
	run -7 dg grant --pid "$CPID" --gpu 5
	[ "${lines[0]}" = "devgatectl: no GPU with index 5: this host has 2 GPUs" ]
	[ "${lines[1]}" = "hint: run 'devgatectl list' to see this host's GPUs" ]
	run -7 dg grant --pid "$CPID" --gpu GPU-ffff
	run -7 dg grant --pid "$CPID" --gpu 0000:99:00.0
	run -2 dg grant --pid "$CPID" --gpu '0,;rm'
	run -2 dg grant --pid "$CPID" --gpu MIG-1234
	run -2 dg grant --pid "$CPID" --gpu '0,,1'
	[ "${lines[0]}" = "devgatectl: malformed GPU selector '0,,1': empty element" ]
	run -2 dg grant --pid "$CPID" --gpu ,
	[ "$(grant_entries)" = 0 ]
	[ -z "$(gate_leftovers)" ]
}

@test "daemon not running: exit 3 with how to start it" {
	stop_daemon
	run -3 dg list
	[ "${lines[0]}" = "devgatectl: cannot reach devgated at $DG_SOCK: No such file or directory" ]
	[[ "${lines[1]}" == "hint: start it with 'systemctl start devgated'"* ]]
	run -3 dg --json list
	[ "$(echo "$output" | jq -r .error.code)" = daemon_unreachable ]
}

@test "caller not root: exit 4" {
	chmod 755 "$DG_TMP"
	run -4 setpriv --reuid=65534 --regid=65534 --clear-groups "$DEVGATE_BUILD/devgatectl" \
		-s "$DG_SOCK" list
	[[ "${lines[0]}" == "devgatectl: permission denied on devgated's socket"* ]]
	[ "$(stat -c %a "$DG_SOCK")" = 600 ]
}

@test "devgated itself refuses to run without root: exit 4" {
	run -4 setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
		"$DEVGATE_BUILD/devgated" --socket "$DG_TMP/other.sock" --state-dir "$DG_TMP/s2"
	[[ "$output" == *"devgated must run as root"* ]]
}

@test "node path occupied in the container: exit 9, nothing changed" {
	container c
	original=$(cg_progs "$DG_CGROOT/$CID")
	dg_runc exec "$CID" sh -c 'echo data > /dev/nvidiactl'
	run -9 dg grant --pid "$CPID" --gpu 0
	[[ "${lines[0]}" == *"/dev/nvidiactl in the container of PID $CPID is a regular file"* ]]
	[ "$(cg_progs "$DG_CGROOT/$CID")" = "$original" ]
	[ "$(grant_entries)" = 0 ]
	run -1 dg_runc exec "$CID" test -e /dev/nvidia0
	run -0 dg status --json
	[ "$(echo "$output" | jq '.leases | length')" = 0 ]
}

@test "a symlink planted at a node path is refused and never followed" {
	container c
	dg_runc exec "$CID" ln -s /etc/passwd /dev/nvidia0
	before=$(stat -c %i:%s /etc/passwd)
	run -9 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"/dev/nvidia0 in the container of PID $CPID is a symlink"* ]]
	[ "$(stat -c %i:%s /etc/passwd)" = "$before" ]
	run -0 dg_runc exec "$CID" ls /dev
	[[ "$output" != *nvidiactl* ]]
}

@test "usage errors: exit 2 with a pointer to --help" {
	run -2 dg grant --gpu 0
	[ "${lines[1]}" = "hint: see 'devgatectl grant --help'" ]
	run -2 dg grant --pid 1 --gpus 0
	run -2 dg grant --pid notapid --gpu 0
	run -2 dg frobnicate
	run -2 dg list extra
	container c
	run -2 dg grant --pid "$CPID" --gpu 0 --gpus 1
	[[ "$output" == *"either GPU selectors or a count"* ]]
	# -s is the global --socket; after the command it is a mistake, not --shared.
	run -2 dg grant --pid "$CPID" --gpu 0 -s
	[[ "${lines[0]}" == *"share GPUs with -S (--shared)"* ]]
	run -2 dg lsit
	[ "${lines[0]}" = "devgatectl: no command 'lsit'" ]
	[ "${lines[1]}" = "hint: did you mean 'devgatectl list'? See 'devgatectl --help'" ]
	[ "$(grant_entries)" = 0 ]
}

@test "a bad count after a good selector sends nothing: exit 2, one JSON document" {
	container c
	run -2 dg grant --pid "$CPID" --gpu 0 --gpus 99
	[[ "${lines[0]}" == *"--gpus wants a count from 1 to 64, not '99'"* ]]
	run -2 dg --json grant --pid "$CPID" --gpu 0 --gpus 99
	[ "$(echo "$output" | jq -s length)" = 1 ]
	[ "$(echo "$output" | jq -r .error.code)" = invalid ]
	[ "$(grant_entries)" = 0 ]
	run -0 dg --json status
	[ "$(echo "$output" | jq '.leases | length')" = 0 ]
}

@test "garbage on the socket gets a protocol error, and the daemon lives on" {
	run -0 sh -c "printf 'not json\n' | socat -t 2 - UNIX-CONNECT:$DG_SOCK"
	[ "$(echo "$output" | jq -r .error.code)" = protocol ]
	run -0 sh -c "printf '{\"v\":1,\"op\":\"grant\",\"args\":{\"pid\":1,\"evil\":1}}\n' |
		socat -t 2 - UNIX-CONNECT:$DG_SOCK"
	[ "$(echo "$output" | jq -r .error.message)" = "operation 'grant': unknown field 'evil'" ]
	# Duplicate keys (json-c keeps the last: this was a grant) and NULs.
	container c
	run -0 sh -c "printf '{\"v\":1,\"op\":\"list\",\"op\":\"grant\",\"args\":{\"pid\":$CPID,\"gpus\":\"0\"}}\n' |
		socat -t 2 - UNIX-CONNECT:$DG_SOCK"
	[ "$(echo "$output" | jq -r .error.code)" = protocol ]
	run -0 sh -c "printf '{\"v\":1,\"op\":\"grant\",\"args\":{\"pid\":$CPID,\"gpus\":\"0\",\"container\":\"a\\\\u0000b\"}}\n' |
		socat -t 2 - UNIX-CONNECT:$DG_SOCK"
	[ "$(echo "$output" | jq -r .error.code)" = protocol ]
	[ "$(grant_entries)" = 0 ]
	run -0 sh -c "printf '{\"v\":9,\"op\":\"list\"}\n' | socat -t 2 - UNIX-CONNECT:$DG_SOCK"
	[[ "$(echo "$output" | jq -r .error.message)" == "protocol version 9 is not supported"* ]]
	# Oversized: the daemon says so and drops the client (socat may see EPIPE).
	run sh -c "head -c 2000000 /dev/zero | tr '\\0' x | socat -t 2 - UNIX-CONNECT:$DG_SOCK"
	run -0 dg list
	[[ "${lines[0]}" == IDX* ]]
}

@test "a process that shares the host's /dev is refused: exit 6, host /dev untouched" {
	cg="$DG_CGROOT/$DG_ID-hostdev"
	mkdir "$cg"
	DG_CGROUPS+=("$cg")
	# Own cgroup and mount namespace, but the host's root and devtmpfs.
	setsid sh -c 'echo $$ > "$1/cgroup.procs"; exec unshare --mount sleep 100' _ "$cg" \
		</dev/null >/dev/null 2>&1 &
	for _ in $(seq 400); do
		pid=$(tail -1 "$cg/cgroup.procs")
		[ -n "$pid" ] && [ "$(cat /proc/"$pid"/comm)" = sleep ] && break
		sleep 0.05
	done
	before=$(ls /dev | sort)
	run -6 dg grant --pid "$pid" --gpu 0
	[[ "$output" == *"the container's /dev is the host's /dev"* ]]
	[ "$(ls /dev | sort)" = "$before" ]
	[ -z "$(cg_progs "$cg")" ]
	[ "$(grant_entries)" = 0 ]
}

@test "a root path for a process in devgated's own mount namespace is refused: exit 6" {
	cg="$DG_CGROOT/$DG_ID-samens"
	mkdir "$cg" "$DG_TMP/fake" "$DG_TMP/fake/dev"
	DG_CGROUPS+=("$cg")
	# Own cgroup, but devgated's mount namespace: a root path is a host directory.
	setsid sh -c 'echo $$ > "$1/cgroup.procs"; exec sleep 100' _ "$cg" </dev/null >/dev/null 2>&1 &
	for _ in $(seq 400); do
		pid=$(tail -1 "$cg/cgroup.procs")
		[ -n "$pid" ] && [ "$(cat /proc/"$pid"/comm)" = sleep ] && break
		sleep 0.05
	done
	run -6 dg grant --pid "$pid" --gpu 0 --root "$DG_TMP/fake"
	[[ "$output" == *"shares devgated's mount namespace: a root path"* ]]
	[ -z "$(ls "$DG_TMP/fake/dev")" ]
	[ "$(grant_entries)" = 0 ]
}

# conf_check PATH: devgated --check-config on PATH, ended after 10 s (a FIFO
# must not block it).
conf_check() {
	run timeout 10 "$DEVGATE_BUILD/devgated" --config "$1" --check-config
}

# conf_refused PATH WHY: --check-config refuses PATH with exit 14, saying WHY.
conf_refused() {
	conf_check "$1"
	[ "$status" = 14 ] || fail "$1: exit $status: $output"
	[[ "$output" == *"devgated: error: $1 is not trusted: $2"* ]] || fail "$1: $output"
	[[ "$output" == *"hint: devgate.conf must be a regular file that only root can change"* ]]
}

@test "a devgate.conf anyone but root could change is refused at start and by --check-config: exit 14, the reason named" {
	c=$DG_TMP/conf
	mkdir -m 0755 "$c" "$c/etc"
	printf 'device-allow = /dev/mem\n' >"$c/good.conf"
	chmod 0644 "$c/good.conf"
	# Root's file, in a root directory, by a symlink, in a sticky one (as /tmp): read.
	ln -s good.conf "$c/link.conf"
	mkdir -m 1777 "$c/sticky"
	install -m 0644 "$c/good.conf" "$c/sticky/root.conf"
	for f in "$c/good.conf" "$c/link.conf" "$c/sticky/root.conf"; do
		conf_check "$f"
		[ "$status" = 0 ] || fail "$f: $output"
		[[ "$output" == *"device-allow = /dev/mem"* ]]
	done
	# The null device reads as an empty file: the defaults.
	conf_check /dev/null
	[ "$status" = 0 ]
	[[ "$output" == *"device-allow = "* && "$output" != *"device-allow = /dev/mem"* ]]

	# nobody's file, writable by all, behind a symlink: the attack as found.
	install -o 65534 -m 0666 "$c/good.conf" "$c/nobody.conf"
	ln -s nobody.conf "$c/devgate.conf"
	conf_refused "$c/devgate.conf" "the file $c/nobody.conf is owned by uid 65534, not root"
	install -o 65534 -m 0644 "$c/good.conf" "$c/sticky/nobody.conf"
	conf_refused "$c/sticky/nobody.conf" "the file $c/sticky/nobody.conf is owned by uid 65534"
	# Root's, but others or its group may write it.
	install -m 0666 "$c/good.conf" "$c/all.conf"
	conf_refused "$c/all.conf" "the file $c/all.conf is writable by its group or others (mode 0666)"
	install -m 0664 "$c/good.conf" "$c/group.conf"
	conf_refused "$c/group.conf" "the file $c/group.conf is writable by its group or others (mode 0664)"
	# A directory on the way others may change: nobody's, open to all, reached
	# by a symlink, or bind-mounted over a root one.
	mkdir -m 0755 "$c/nobodys"
	install -m 0644 "$c/good.conf" "$c/nobodys/x.conf"
	chown 65534 "$c/nobodys"
	conf_refused "$c/nobodys/x.conf" "the directory $c/nobodys is owned by uid 65534, not root"
	ln -s nobodys "$c/dirlink"
	conf_refused "$c/dirlink/x.conf" "the directory $c/nobodys is owned by uid 65534, not root"
	# A symlink to root's own file, but where nobody may change it: in nobody's
	# directory, or nobody's own in a sticky one.
	ln -s "$c/good.conf" "$c/nobodys/link.conf"
	conf_refused "$c/nobodys/link.conf" "the directory $c/nobodys is owned by uid 65534, not root"
	ln -s ../good.conf "$c/sticky/link.conf"
	chown -h 65534 "$c/sticky/link.conf"
	conf_refused "$c/sticky/link.conf" "the symlink $c/sticky/link.conf is owned by uid 65534, not root"
	mkdir -m 0777 "$c/open"
	install -m 0644 "$c/good.conf" "$c/open/x.conf"
	conf_refused "$c/open/x.conf" "the directory $c/open is writable by its group or others (mode 0777)"
	install -m 0644 "$c/good.conf" "$c/etc/x.conf"
	run -14 timeout 10 unshare -m sh -c 'mount --bind "$1/nobodys" "$1/etc" &&
		exec "$0" --config "$1/etc/x.conf" --check-config' "$DEVGATE_BUILD/devgated" "$c"
	[[ "$output" == *"$c/etc/x.conf is not trusted: the directory $c/etc is owned by uid 65534"* ]]
	# Not a regular file: a FIFO is never opened (nothing blocks), nor a device.
	mkfifo -m 0644 "$c/fifo"
	conf_refused "$c/fifo" "$c/fifo is a FIFO, not a regular file"
	conf_refused /dev/zero "/dev/zero is a character device, not a regular file"
	conf_refused "$c/etc" "$c/etc is a directory, not a regular file"

	# At start: refused before devgated makes anything (state, pins, socket).
	for f in "$c/devgate.conf" "$c/fifo" "$c/dirlink/x.conf"; do
		run -14 timeout 10 "$DEVGATE_BUILD/devgated" --config "$f" --socket "$DG_TMP/s2" \
			--state-dir "$DG_TMP/state2" --pin-root "$DG_PINS/second" --host-root "$DG_HOST"
		[[ "$output" == *"devgated: error: $f is not trusted: "* ]]
		[ ! -e "$DG_TMP/state2" ]
		[ ! -e "$DG_PINS/second" ]
		[ ! -e "$DG_TMP/s2" ]
	done
}
