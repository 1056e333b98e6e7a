#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Resolving a request's PID (daemon/sys/target.c): a request to a container
# that has not changed reads no process's /proc/PID/stat again, and one
# that has is checked again in full.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	start_daemon
	plain_container c
	CG="$DG_CGROOT/$CID"
	# Twenty more processes in the container: its init is found among 22.
	for _ in $(seq 20); do
		in_cgroup "$CG" "$CPID" /bin/sleep 100020 </dev/null >/dev/null 2>&1 3>&- &
	done
	wait_until 10 sh -c "[ \$(wc -l <'$CG/cgroup.procs') -ge 22 ]"
}
teardown() { dg_teardown; }

# traced CMD...: runs CMD while strace records devgated's openat calls in
# $DG_TMP/trace.
traced() {
	dg_trace_start openat
	"$@"
	dg_trace_stop
}

stat_reads() {
	grep -cE '"/proc/[0-9]+/stat"' "$DG_TMP/trace" || true
}

@test "a repeated request to an unchanged container reads no /proc/PID/stat" {
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 dg revoke --pid "$CPID"
	traced dg grant --pid "$CPID" --gpu 0
	[ "$(grants_of "$CG")" -gt 0 ]
	[ "$(stat_reads)" = 0 ]
	traced dg revoke --pid "$CPID"
	[ "$(grants_of "$CG")" = 0 ]
	[ "$(stat_reads)" = 0 ]
	# A process more: the container changed, and its init is looked for again.
	in_cgroup "$CG" "$CPID" /bin/sleep 100021 </dev/null >/dev/null 2>&1 3>&- &
	wait_until 10 sh -c "[ \$(wc -l <'$CG/cgroup.procs') -ge 23 ]"
	traced dg grant --pid "$CPID" --gpu 0
	[ "$(stat_reads)" -ge 22 ]
}

@test "after requests to its init, a process of the container in a mount namespace of its own is still refused" {
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 dg revoke --pid "$CPID"
	run -0 dg grant --pid "$CPID" --gpu 0
	# Joins the cgroup, then leaves the container's mount namespace for one of its own.
	sh -c 'echo $$ > "$1/cgroup.procs" && exec nsenter -t "$2" -m unshare --mount \
		--propagation private /bin/sleep 100022' _ "$CG" "$CPID" </dev/null >/dev/null 2>&1 3>&- &
	wait_until 10 sh -c "pgrep -f '^/bin/sleep 100022\$' >/dev/null"
	evil=$(pgrep -f '^/bin/sleep 100022$')
	wait_until 10 sh -c "[ \$(readlink /proc/$evil/ns/mnt) != \$(readlink /proc/$CPID/ns/mnt) ]"
	run -6 dg revoke --pid "$evil"
	[[ "$output" == *"PID $evil is in a mount namespace of its own, not its container's"* ]]
	[ "$(grants_of "$CG")" -gt 0 ]
	run -0 dg revoke --pid "$CPID"
	[ "$(grants_of "$CG")" = 0 ]
}

# The init kept by its pidfd (target.c's memo): when it exits and another
# process takes its PID, in the cgroup, at the same place in cgroup.procs,
# and in the mount namespace of an escaped process, that PID is no longer
# taken for the container's init.
@test "the init replaced under its PID by a process of an escaped namespace: the escaped process is still refused" {
	# The container's init is the sleep (PID 1 of its PID namespace) once
	# unshare, its parent and the cgroup's first process, is set aside.
	mkdir "$CG-aside"
	DG_CGROUPS+=("$CG-aside")
	awk '/^PPid:/ { print $2 }' "/proc/$CPID/status" >"$CG-aside/cgroup.procs"
	sh -c 'echo $$ > "$1/cgroup.procs" && exec nsenter -t "$2" -m unshare --mount \
		--propagation private /bin/sleep 100023' _ "$CG" "$CPID" </dev/null >/dev/null 2>&1 3>&- &
	wait_until 10 sh -c "pgrep -f '^/bin/sleep 100023\$' >/dev/null"
	evil=$(pgrep -f '^/bin/sleep 100023$')
	wait_until 10 sh -c "[ \$(readlink /proc/$evil/ns/mnt) != \$(readlink /proc/$CPID/ns/mnt) ]"
	# The init last in cgroup.procs, where a new process lands.
	echo "$CPID" >"$CG-aside/cgroup.procs"
	echo "$CPID" >"$CG/cgroup.procs"
	[ "$(tail -1 "$CG/cgroup.procs")" = "$CPID" ]
	procs=$(cat "$CG/cgroup.procs")
	other=$(head -1 "$CG/cgroup.procs")
	run -0 dg grant --pid "$CPID" --gpu 0
	# The init goes; its PID comes back in the escaped namespace, in the cgroup.
	kill -9 "$CPID"
	wait_until 10 sh -c "[ ! -e /proc/$CPID ]"
	"$DEVGATE_BUILD/samepid" "$CPID" "$CG" "$evil" /bin/sleep 100024 </dev/null >/dev/null 3>&-
	wait_until 10 sh -c "[ \$(readlink /proc/$CPID/ns/mnt) = \$(readlink /proc/$evil/ns/mnt) ]"
	[ "$(cat "$CG/cgroup.procs")" = "$procs" ]
	run -6 dg revoke --pid "$evil"
	[[ "$output" == *"PID $evil is in a mount namespace of its own, not its container's"* ]]
	[ "$(grants_of "$CG")" -gt 0 ]
	run -0 dg revoke --pid "$other"
	[ "$(grants_of "$CG")" = 0 ]
}
