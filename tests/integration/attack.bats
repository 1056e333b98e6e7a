#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Attacks from inside a container on where devgated makes nodes: each must
# leave the host untouched and grant nothing it should not.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; start_daemon; }
teardown() { dg_teardown; }

DOCKER_CAPS='["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"]'

# A container with a writable host volume on /vol, whose entrypoint starts a
# process that unshares a user and mount namespace and bind-mounts /vol on
# its /dev (what Docker's default capabilities allow). Sets CID, CPID (the
# init) and EVIL (the process with the host volume as its /dev).
volume_container() {
	local b="$DG_TMP/a"
	dg_bundle "$b" "$DEVGATE_BUILD/probe"
	ln -sf busybox "$b/rootfs/bin/unshare"
	ln -sf busybox "$b/rootfs/bin/mount"
	mkdir -p "$DG_TMP/vol"
	echo marker >"$DG_TMP/vol/marker"
	# Docker's default capability set, CAP_SETFCAP included.
	jq --arg vol "$DG_TMP/vol" '.mounts += [{"destination": "/vol", "type": "bind",
		"source": $vol, "options": ["rbind", "rw"]}] |
		.process.capabilities |= with_entries(select(.key != "ambient") | .value = $caps) |
		.process.args = ["sh", "-c", "unshare -r -m sh -c \"mount --bind /vol /dev && exec sleep 100001\" & exec sleep 100000"]' \
		--argjson caps "$DOCKER_CAPS" "$b/config.json" >"$b/c.json"
	mv "$b/c.json" "$b/config.json"
	CID="$DG_ID-a"
	CPID=$(dg_run "$CID" "$b")
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	EVIL=
	for _ in $(seq 100); do
		EVIL=$(pgrep -f 'sleep 100001' || true)
		[ -n "$EVIL" ] && [ "$(readlink "/proc/$EVIL/ns/mnt")" != "$(readlink "/proc/$CPID/ns/mnt")" ] && break
		sleep 0.05
	done
	[ -n "$EVIL" ] || fail "the unsharing process did not start"
}

@test "a process with a host volume bind-mounted on its own /dev gets no node in the volume" {
	volume_container
	before=$(stat -c '%Y' "$DG_TMP/vol")
	run -6 dg grant --pid "$EVIL" --gpu 0
	[[ "$output" == *"PID $EVIL is in a mount namespace of its own, not its container's"* ]]
	[ "$(ls "$DG_TMP/vol")" = marker ]
	[ "$(stat -c '%Y' "$DG_TMP/vol")" = "$before" ]
	[ "$(grant_entries)" = 0 ]
	# By cgroup: the container's init is the target, and only its /dev gets nodes.
	run -0 dg grant --cgroup "/$CID" --gpu 0
	[[ "$output" == *"PID $CPID"* ]]
	[ "$(ls "$DG_TMP/vol")" = marker ]
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
}

# plant KIND PATH: something other than our node at PATH, made from the host.
plant() {
	local p=$1
	case $2 in
	symlink-host) ln -s "$DG_TMP/host-marker/file" "$p" ;;
	symlink-dangling) ln -s /nonexistent "$p" ;;
	file) echo x >"$p" ;;
	dir) mkdir "$p" ;;
	fifo) mkfifo "$p" ;;
	chardev) mknod -m 666 "$p" c 1 3 ;;
	esac
}

@test "odd files at every node path: refused (exit 9), never followed, host marker untouched" {
	container c
	mkdir "$DG_TMP/host-marker"
	echo secret >"$DG_TMP/host-marker/file"
	touch -d '2020-01-01' "$DG_TMP/host-marker/file" "$DG_TMP/host-marker"
	snap=$(stat -c '%s %Y %a' "$DG_TMP/host-marker/file" "$DG_TMP/host-marker"; ls -a "$DG_TMP/host-marker")
	dev="/proc/$CPID/root/dev"
	for node in nvidia0 nvidiactl; do
		for kind in symlink-host symlink-dangling file dir fifo chardev; do
			plant "$dev/$node" "$kind"
			run -9 dg grant --pid "$CPID" --gpu 0
			[ "$(grant_entries)" = 0 ] || fail "$kind at $node: grants left"
			[ ! -e "$dev/nvidia0" ] || [ "$node" = nvidia0 ] || fail "$kind at $node: node made"
			rm -rf "${dev:?}/$node"
			[ "$(stat -c '%s %Y %a' "$DG_TMP/host-marker/file" "$DG_TMP/host-marker"; \
				ls -a "$DG_TMP/host-marker")" = "$snap" ] || fail "$kind at $node touched the host"
		done
	done
	# At revoke time: the container swapped its node for a symlink to a host file.
	run -0 dg grant --pid "$CPID" --gpu 0
	rm "$dev/nvidia0"
	ln -s "$DG_TMP/host-marker/file" "$dev/nvidia0"
	run -0 dg revoke --pid "$CPID"
	[ -L "$dev/nvidia0" ]
	[ "$(cat "$DG_TMP/host-marker/file")" = secret ]
	[ "$(stat -c '%s %Y %a' "$DG_TMP/host-marker/file" "$DG_TMP/host-marker"; \
		ls -a "$DG_TMP/host-marker")" = "$snap" ]
}

@test "without openat2 (forced): the same refusals, by a component-by-component walk" {
	stop_daemon
	DEVGATE_TEST_NO_OPENAT2=1 start_daemon
	grep -q "walked without openat2" "$DG_TMP/daemon.log"
	container c
	dev="/proc/$CPID/root/dev"
	mkdir "$DG_TMP/host-marker"
	# A symlink at the node path, and then /dev itself a symlink to a host directory.
	ln -s "$DG_TMP/host-marker/file" "$dev/nvidia0"
	run -9 dg grant --pid "$CPID" --gpu 0
	[ -z "$(ls "$DG_TMP/host-marker")" ]
	rm "$dev/nvidia0"
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	run -0 dg revoke --pid "$CPID"
	# A root path may not climb out: the walk refuses "..".
	run -11 dg grant --pid "$CPID" --gpu 0 --root /../../../tmp
	[[ "$output" == *"cannot open the container's root filesystem"* ]]
	[ -z "$(ls "$DG_TMP/host-marker")" ]
}

# vol_container NAME [APPLET...]: a runc container with the host directory
# $DG_TMP/vol (a marker in it) bind-mounted on /vol, and busybox APPLETs.
# Sets CID and CPID.
vol_container() {
	local b="$DG_TMP/$1" a
	dg_bundle "$b" "$DEVGATE_BUILD/probe"
	for a in "${@:2}"; do ln -sf busybox "$b/rootfs/bin/$a"; done
	mkdir -p "$DG_TMP/vol"
	echo marker >"$DG_TMP/vol/marker"
	touch -d '2020-01-01' "$DG_TMP/vol/marker" "$DG_TMP/vol"
	jq --arg vol "$DG_TMP/vol" '.mounts += [{"destination": "/vol", "type": "bind",
		"source": $vol, "options": ["rbind", "rw"]}]' "$b/config.json" >"$b/c.json"
	mv "$b/c.json" "$b/config.json"
	CID="$DG_ID-$1"
	CPID=$(dg_run "$CID" "$b")
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
}

@test "a container swapping its /dev entries with renameat2 while devgate grants and revokes: the host stays untouched" {
	local rounds=${DEVGATE_RACE_ROUNDS:-200}
	vol_container r
	snap=$(stat -c '%s %Y' "$DG_TMP/vol/marker" "$DG_TMP/vol"; ls -a "$DG_TMP/vol")
	# Symlinks into the host volume, swapped with whatever devgate puts there.
	dg_runc exec "$CID" ln -s /vol/nvidia0 /dev/.evil0
	dg_runc exec "$CID" ln -s /vol/nvidiactl /dev/.evilctl
	dg_runc exec -d "$CID" probe -X /dev/nvidia0 /dev/.evil0
	dg_runc exec -d "$CID" probe -X /dev/nvidiactl /dev/.evilctl
	granted=0
	for _ in $(seq "$rounds"); do
		if dg grant --pid "$CPID" --gpu 0 >/dev/null 2>&1; then granted=$((granted + 1)); fi
		dg revoke --pid "$CPID" --missing-ok >/dev/null 2>&1 || true
	done
	echo "# $granted of $rounds grants won the race" >&3
	[ "$(stat -c '%s %Y' "$DG_TMP/vol/marker" "$DG_TMP/vol"; ls -a "$DG_TMP/vol")" = "$snap" ]
	[ "$(cat "$DG_TMP/vol/marker")" = marker ]
	run -0 dg list
}

# take_pid PID CGROUP: starts 'sleep 100' as a host process with PID PID,
# in CGROUP (made here), by setting ns_last_pid just before the fork; a
# few tries in case another process takes the PID first. Sets REUSER.
take_pid() {
	local want=$1 cg=$2 p
	mkdir -p "$cg"
	DG_CGROUPS+=("$cg")
	REUSER=
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		echo $((want - 1)) >/proc/sys/kernel/ns_last_pid
		sh -c 'echo $$ >"$1/cgroup.procs" && exec sleep 100' _ "$cg" </dev/null >/dev/null 2>&1 &
		p=$!
		if [ "$p" = "$want" ]; then
			REUSER=$p
			return 0
		fi
		# SIGKILL: a child not yet at its exec is still bash with bats' traps;
		# a SIGTERM there reports a failure and runs this test's teardown.
		kill -KILL "$p" 2>/dev/null || true
	done
	fail "PID $want was taken by others 10 times"
}

@test "the target exits and a host process takes its PID during a grant: no such target, no node, no grant" {
	stop_daemon
	DEVGATE_FAULT=grant.pending:pause=3000 start_daemon
	plain_container t
	tpid=$CPID
	nv_before=$(echo /dev/nvidia*)
	dg grant --pid "$tpid" --gpu 0 >"$DG_TMP/grant.out" 2>&1 &
	grant=$!
	# devgated holds the target's pidfd and pauses before the node step.
	wait_until 5 grep -q "fault point grant.pending: pausing" "$DG_TMP/daemon.log"
	kill -KILL "$tpid"
	wait_until 2 test ! -e "/proc/$tpid"
	take_pid "$tpid" "$DG_CGROOT/$DG_ID-reuser"
	[ "$(readlink /proc/"$REUSER"/ns/mnt)" = "$(readlink /proc/self/ns/mnt)" ]
	wait_until 2 grep -q "^0::/$DG_ID-reuser$" "/proc/$REUSER/cgroup"
	rc=0
	wait "$grant" || rc=$?
	output=$(cat "$DG_TMP/grant.out")
	[ "$rc" = 5 ] || fail "grant exited $rc: $output"
	[[ "$output" == *"PID $tpid exited before devgate could reach its /dev"* ]] || fail "grant said: $output"
	# No node in the host's /dev (the reuser's mount namespace) nor in the
	# dead target's root, which is a host directory now; no grant anywhere.
	[ "$(echo /dev/nvidia*)" = "$nv_before" ]
	[ -z "$(ls -A "$DG_TMP/t/rootfs/dev")" ]
	no_leases
	[ "$(grant_entries)" = 0 ]
	[ "$(grants_of "$DG_CGROOT/$DG_ID-reuser")" = 0 ]
	[ -z "$(cg_progs "$DG_CGROOT/$DG_ID-reuser")" ]
	[ -z "$(gate_leftovers)" ]
}

@test "a hostile /proc inside the container: devgate reads none of it" {
	vol_container p mount mkdir
	# What a container that may mount can do: its /proc becomes a tmpfs whose
	# self/root and 1/root lead to the host volume, with a /dev in it. A
	# helper that looked anything up in /proc after entering would land there.
	nsenter -t "$CPID" -m -- /bin/sh -c 'mount -t tmpfs fake /proc &&
		mkdir -p /proc/self /proc/1 /vol/dev &&
		ln -s /vol /proc/self/root && ln -s /vol /proc/1/root &&
		echo "fake / tmpfs rw 0 0" >/proc/mounts'
	snap=$(ls -la "$DG_TMP/vol" "$DG_TMP/vol/dev")
	run -0 dg grant --pid "$CPID" --gpu 0
	[ "$(ls -la "$DG_TMP/vol" "$DG_TMP/vol/dev")" = "$snap" ]
	# The nodes are in the container's own /dev (seen through the host's /proc).
	[ "$(stat -c '%F %t:%T' "/proc/$CPID/root/dev/nvidia0")" = "character special file c3:0" ]
	run -1 in_cgroup "$DG_CGROOT/$CID" "$CPID" /bin/probe /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -0 dg revoke --pid "$CPID"
	[ ! -e "/proc/$CPID/root/dev/nvidia0" ]
	[ "$(ls -la "$DG_TMP/vol" "$DG_TMP/vol/dev")" = "$snap" ]
}
