#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# The parts of devgate that touch attacker-controlled paths are confined.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; start_daemon; }
teardown() { dg_teardown; }

# The zygote (devgated's child) and the spare node helper it forked.
zygote_and_helper() {
	for _ in $(seq 100); do
		zygote=$(pgrep -P "$DG_DAEMON_PID" -x devgated-zygote || true)
		helper=$( [ -z "$zygote" ] || pgrep -P "$zygote" -x devgated-node | head -1)
		[ -n "$helper" ] && return 0
		sleep 0.05
	done
	fail "no zygote ($zygote) or no spare helper"
}

@test "the node helper waits confined: seccomp filter, none of the daemon's fds" {
	zygote_and_helper
	grep -q "^Seccomp:[[:space:]]*2$" "/proc/$helper/status"
	grep -q "^NoNewPrivs:[[:space:]]*1$" "/proc/$helper/status"
	run -0 ls "/proc/$helper/fd"
	[ "$(echo "$output" | tr '\n' ' ')" = "0 1 2 3 " ]
	for fd in 0 1 2; do
		[ "$(readlink "/proc/$helper/fd/$fd")" = /dev/null ]
	done
	[[ "$(readlink "/proc/$helper/fd/3")" == socket:* ]]
}

@test "helpers come from a zygote that holds nothing of devgated's; without it devgated forks them" {
	zygote_and_helper
	run -0 ls "/proc/$zygote/fd"
	# Its socket to devgated, and the socket and pidfd of the helper it forked ahead.
	[ "$(echo "$output" | tr '\n' ' ')" = "0 1 2 3 4 5 " ]
	[[ "$(readlink "/proc/$zygote/fd/3")" == socket:* ]]
	[[ "$(readlink "/proc/$zygote/fd/4")" == socket:* ]]
	[ "$(readlink "/proc/$zygote/fd/5")" = "anon_inode:[pidfd]" ]
	ahead=$(awk '/^Pid:/ { print $2 }' "/proc/$zygote/fdinfo/5")
	[ "$(awk '/^PPid:/ { print $2 }' "/proc/$ahead/status")" = "$zygote" ]
	[ "$(cat "/proc/$ahead/comm")" = devgated-node ]
	# Forked before devgated loaded its BPF objects: no map or program fd, and smaller.
	rss() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
	[ "$(rss "$zygote")" -lt "$(rss "$DG_DAEMON_PID")" ]
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 dg revoke --pid "$CPID"
	# devgated forked no helper itself: its children are the zygote and the NVML
	# probe, which holds nothing of devgated's either (its socket, no capability).
	nvml=$(pgrep -P "$DG_DAEMON_PID" -x devgated-nvml)
	[ "$(pgrep -P "$DG_DAEMON_PID" | sort | tr '\n' ' ')" = \
		"$(printf '%s\n' "$zygote" "$nvml" | sort | tr '\n' ' ')" ]
	run -0 ls "/proc/$nvml/fd"
	[ "$(echo "$output" | tr '\n' ' ')" = "0 1 2 3 " ]
	[[ "$(readlink "/proc/$nvml/fd/3")" == socket:* ]]
	[ "$(awk '/^CapEff/ { print $2 }' "/proc/$nvml/status")" = 0000000000000000 ]
	kill -KILL "$zygote"
	# The spare it made serves this grant (a container whose /dev devgated
	# does not know yet: c's takes no helper); the next spare devgated forks itself.
	container d
	run -0 dg grant --pid "$CPID" --gpu 0
	wait_until 5 grep -q "the node helper zygote is gone" "$DG_TMP/daemon.log"
	wait_until 5 pgrep -P "$DG_DAEMON_PID" -x devgated-node
	run -0 dg revoke --pid "$CPID"
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	run -0 dg revoke --pid "$CPID"
}

@test "inside the container the node helper works without CAP_SYS_ADMIN" {
	stop_daemon
	start_daemon -v
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	caps=$(sed -n 's/.*node helper for PID .* worked with capabilities \(0x[0-9a-f]*\).*/\1/p' \
		"$DG_TMP/daemon.log" | tail -1)
	[ -n "$caps" ]
	# CAP_CHOWN (0), CAP_DAC_OVERRIDE (1), CAP_DAC_READ_SEARCH (2), CAP_FOWNER (3),
	# CAP_MKNOD (27); not CAP_SYS_ADMIN (21), CAP_SYS_CHROOT (18), CAP_BPF (39).
	[ "$caps" = "$(printf '%#x' $(((1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 27))))" ]
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
}

@test "devgated itself keeps only the capabilities it uses" {
	caps=$(awk '/^CapEff/ { print $2 }' "/proc/$DG_DAEMON_PID/status")
	# CAP_SYS_MODULE (16), CAP_SYS_RAWIO (17) and CAP_SYS_BOOT (22) are gone.
	for bit in 16 17 22; do
		[ $(((0x$caps >> bit) & 1)) = 0 ]
	done
	# CAP_SYS_ADMIN (21) and CAP_MKNOD (27) stay.
	[ $(((0x$caps >> 21) & 1)) = 1 ]
	[ $(((0x$caps >> 27) & 1)) = 1 ]
}

@test "devgated runs under its seccomp filter; --no-seccomp and seccomp = off run without" {
	grep -q "^Seccomp:[[:space:]]*2$" "/proc/$DG_DAEMON_PID/status"
	grep -q "^NoNewPrivs:[[:space:]]*1$" "/proc/$DG_DAEMON_PID/status"
	stop_daemon
	start_daemon --no-seccomp
	grep -q "^Seccomp:[[:space:]]*0$" "/proc/$DG_DAEMON_PID/status"
	stop_daemon
	echo "seccomp = off" >"$DG_TMP/devgate.conf"
	start_daemon --config "$DG_TMP/devgate.conf"
	grep -q "^Seccomp:[[:space:]]*0$" "/proc/$DG_DAEMON_PID/status"
	# The command line wins over the file.
	stop_daemon
	start_daemon --config "$DG_TMP/devgate.conf" --seccomp=on
	grep -q "^Seccomp:[[:space:]]*2$" "/proc/$DG_DAEMON_PID/status"
	run -0 "$DEVGATE_BUILD/devgated" --config "$DG_TMP/devgate.conf" --seccomp log --check-config
	[[ "$output" == *"seccomp = log"* ]]
	run -2 "$DEVGATE_BUILD/devgated" --seccomp=maybe --check-config
	[[ "$output" == *"not a seccomp mode"* ]]
}

@test "under the filter an unlisted call fails with EPERM; without it, it reaches the kernel" {
	# Without the filter the kernel answers (EFAULT): the refusal below is
	# the filter's, not a missing capability's.
	stop_daemon
	DEVGATE_TEST_SECCOMP_PROBE=io_setup start_daemon --no-seccomp
	stop_daemon
	DEVGATE_TEST_SECCOMP_PROBE=io_setup start_daemon
	run -0 grep "seccomp probe: io_setup:" "$DG_TMP/daemon.log"
	[ "${#lines[@]}" = 2 ]
	[[ "${lines[0]}" != *EPERM* ]]
	[[ "${lines[1]}" == *": EPERM" ]]
	# It still serves after the refusal: the call failed, devgated lives.
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
}

@test "execve from devgated kills it with SIGSYS; without the filter it runs" {
	stop_daemon
	[ -d "$DG_HOST" ] || make_host
	run -159 env DEVGATE_TEST_SECCOMP_PROBE=execve "$DEVGATE_BUILD/devgated" \
		--socket "$DG_SOCK" --state-dir "$DG_TMP/state" --pin-root "$DG_PINS" \
		--host-root "$DG_HOST"
	[[ "$output" == *"seccomp probe: execve /bin/true"* ]]
	[[ "$output" != *"seccomp probe: execve:"* ]]
	# The same call without the filter: devgated becomes true(1), exit 0.
	run -0 env DEVGATE_TEST_SECCOMP_PROBE=execve "$DEVGATE_BUILD/devgated" \
		--socket "$DG_SOCK" --state-dir "$DG_TMP/state" --pin-root "$DG_PINS" \
		--host-root "$DG_HOST" --no-seccomp
}

@test "devgate-hook confines itself before it reads the state, and loads no library" {
	# Sanitizer builds link dynamically and skip seccomp (their runtime needs
	# ptrace and clone at exit); the capabilities are dropped all the same.
	san=0
	readelf -d "$DEVGATE_BUILD/devgate-hook" | grep -q 'NEEDED.*libasan' && san=1
	mkfifo "$DG_TMP/state.fifo"
	# The fifo has no writer yet: the hook blocks reading the state, confined.
	"$DEVGATE_BUILD/devgate-hook" -s "$DG_SOCK" poststop <"$DG_TMP/state.fifo" &
	hook=$!
	exec {w}>"$DG_TMP/state.fifo"
	# CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, to read the bundle; nothing else.
	wait_until 3 grep -q "^CapEff:[[:space:]]*0000000000000006$" "/proc/$hook/status"
	grep -q "^CapPrm:[[:space:]]*0000000000000006$" "/proc/$hook/status"
	if [ "$san" = 0 ]; then
		wait_until 3 grep -q "^Seccomp:[[:space:]]*2$" "/proc/$hook/status"
		grep -q "^NoNewPrivs:[[:space:]]*1$" "/proc/$hook/status"
		# Static: nothing for ld.so to load at each start.
		run -1 grep -q '\.so' "/proc/$hook/maps"
	fi
	echo '{"ociVersion":"1.0.2","id":"x","status":"stopped","bundle":"/tmp"}' >&"$w"
	exec {w}>&-
	wait "$hook"
}
