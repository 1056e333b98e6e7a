#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Where devgate makes and removes nodes, against a container that fights
# back: the /dev it writes into must be the container's own (never a file
# system devgated's mount namespace has too: a host volume, a directory of
# the rootfs, a mount that propagates), whatever the container did to get
# there (its first process moved into a namespace of its own, a nested user
# namespace, a symlink, a bind mount, shared propagation); a root path
# (--root) is root's alone and stays with the lease; a node devgate did not
# make stays at revoke.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
# Some tests grant /dev/loop-control as a device that is not a GPU, which
# takes device-allow since devgate grants only the safe devices without it.
setup() {
	dg_setup
	DG_DAEMON_ARGS=(--device-allow /dev/loop-control)
	start_daemon
}
teardown() {
	# A shared mount of one test: off before the directory goes.
	[ -n "${DG_TMP:-}" ] && umount -R -l "$DG_TMP/shared" 2>/dev/null
	dg_teardown
}

DOCKER_CAPS='["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"]'

# edit BUNDLE JQ-ARGS...: edits the bundle's config.json with jq.
edit() {
	local b=$1
	shift
	jq "$@" "$b/config.json" >"$b/c.json"
	mv "$b/c.json" "$b/config.json"
}

# tree DIR: every entry below DIR (DIR too) with its type, mode, owner and
# times: any node, file or directory made or removed there changes it.
tree() {
	find "$1" -printf '%P %y %m %U %T@ %C@\n' | sort
}

# vol_bundle NAME [APPLET...]: a runc bundle with the host directory
# $DG_TMP/vol (a marker in it) bind-mounted on /vol, busybox APPLETs and
# Docker's default capabilities. Sets B (the bundle) and CID.
vol_bundle() {
	local a
	requires runc
	B="$DG_TMP/$1"
	CID="$DG_ID-$1"
	dg_bundle "$B" "$DEVGATE_BUILD/probe"
	for a in "${@:2}"; do ln -sf busybox "$B/rootfs/bin/$a"; done
	mkdir -p "$DG_TMP/vol"
	[ -e "$DG_TMP/vol/marker" ] || echo marker >"$DG_TMP/vol/marker"
	edit "$B" --arg vol "$DG_TMP/vol" --argjson caps "$DOCKER_CAPS" \
		'.mounts += [{"destination": "/vol", "type": "bind", "source": $vol,
			"options": ["rbind", "rw"]}] |
		.process.capabilities |= with_entries(select(.key != "ambient") | .value = $caps)'
}

# sleeping_in CGROUP: the PID of the process of CGROUP that runs sleep.
sleeping_in() {
	local p
	for p in $(cat "$1/cgroup.procs"); do
		if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = sleep ]; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# start_bundle: runs bundle B as CID and waits until its first process has
# become the workload (sleep); sets CPID.
start_bundle() {
	CPID=$(dg_run "$CID" "$B")
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	wait_until 10 sleeping_in "$DG_CGROOT/$CID" >/dev/null
	[ "$(sleeping_in "$DG_CGROOT/$CID")" = "$CPID" ]
}

# hand_container NAME ROOT PROPAGATION SETUP [CMD]: a container made by
# hand in cgroup $DG_ID-NAME with mount and PID namespaces of its own
# (mount propagation PROPAGATION), no device program: SETUP runs there (ROOT
# is $0), then CMD (default: chroot into ROOT and sleep). Sets CPID and CG.
hand_container() {
	local cmd=${5:-'chroot "$0" /bin/sleep 100000'}
	CG="$DG_CGROOT/$DG_ID-$1"
	mkdir -p "$2/bin"
	cp /bin/busybox "$2/bin/"
	ln -sf busybox "$2/bin/sleep"
	mkdir "$CG"
	DG_CGROUPS+=("$CG")
	# shellcheck disable=SC2016 # expanded by the shells started here
	setsid sh -c 'echo $$ >"$1/cgroup.procs" && exec unshare --mount --pid --fork \
		--propagation "$3" sh -c "$4 && exec $5" "$2"' _ "$CG" "$2" "$3" "$4" "$cmd" \
		</dev/null >/dev/null 2>&1 &
	wait_until 10 sleeping_in "$CG" >/dev/null
	CPID=$(sleeping_in "$CG")
}

# refused_on_host DIR: a grant to CPID is refused (exit 6) because its /dev
# is on the host's root file system, and DIR (where that /dev is on the
# host) stays as it was.
refused_on_host() {
	local snap
	snap=$(tree "$1")
	run -6 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"/dev in the container of PID $CPID is on "*", the file system devgated's own mount namespace has at / (a host volume"* ]] ||
		fail "grant said: $output"
	[ "$(tree "$1")" = "$snap" ]
	[ "$(grant_entries)" = 0 ]
	no_leases
}

@test "the first process itself unshares and binds a host volume on /dev: nothing in the volume, by PID or by cgroup" {
	vol_bundle a unshare mount
	# No process is left in the namespace runc made: the entrypoint moved.
	edit "$B" '.process.args = ["unshare", "-r", "-m", "sh", "-c",
		"mount --bind /vol /dev && exec sleep 100000"]'
	start_bundle
	[ -e "/proc/$CPID/root/dev/marker" ]
	snap=$(tree "$DG_TMP/vol")
	progs=$(cg_progs "$DG_CGROOT/$CID")
	refused_on_host "$DG_TMP/vol"
	[[ "$output" == *"hint: devgate makes nodes only in a /dev of the container's own"* ]]
	run -6 dg grant --cgroup "/$CID" --gpu 0
	[[ "$output" == *"/dev in the container of PID $CPID is on "* ]]
	[ "$(tree "$DG_TMP/vol")" = "$snap" ]
	[ "$(cg_progs "$DG_CGROOT/$CID")" = "$progs" ]
	# The other side: a container with the runtime's own /dev gets the GPU.
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
}

@test "the first process of a user-namespaced container binds a host volume on /dev in a nested user namespace: nothing in the volume" {
	vol_bundle u unshare mount
	edit "$B" "$DG_USERNS_JQ"
	edit "$B" '.process.args = ["unshare", "-r", "-m", "sh", "-c",
		"mount --bind /vol /dev && exec sleep 100000"]'
	# The volume is the container's to write (its root is host uid 100000).
	chmod 0711 "$DG_TMP"
	chown -R 100000:100000 "$B/rootfs" "$DG_TMP/vol"
	start_bundle
	[ -e "/proc/$CPID/root/dev/marker" ]
	refused_on_host "$DG_TMP/vol"
}

@test "the runtime binds a host directory on /dev: refused, the directory untouched" {
	vol_bundle b
	# runc sets up no /dev of its own on a bind mount: the host directory has what it needs.
	mkdir "$DG_TMP/hostdev"
	mknod -m 666 "$DG_TMP/hostdev/null" c 1 3
	edit "$B" --arg d "$DG_TMP/hostdev" '.mounts |= map(if .destination == "/dev" then
		{"destination": "/dev", "type": "bind", "source": $d, "options": ["rbind", "rw"]}
		else . end)'
	start_bundle
	[ -c "/proc/$CPID/root/dev/null" ]
	refused_on_host "$DG_TMP/hostdev"
}

@test "a /dev tmpfs that propagates into devgated's mount namespace: refused, nothing appears on the host" {
	mkdir -p "$DG_TMP/shared/root/dev" "$DG_TMP/own/root/dev"
	mount --bind "$DG_TMP/shared" "$DG_TMP/shared"
	mount --make-shared "$DG_TMP/shared"
	# The container's rootfs is below the shared mount: the tmpfs it mounts
	# on its /dev shows on the host too (runc's rootfsPropagation "shared",
	# or an rshared volume, does the same).
	hand_container s "$DG_TMP/shared/root" unchanged 'mount -t tmpfs -o mode=755 tmpfs "$0/dev"'
	wait_until 5 mountpoint -q "$DG_TMP/shared/root/dev"
	run -6 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"/dev in the container of PID $CPID is on tmpfs "*"devgated's own mount namespace has at $DG_TMP/shared/root/dev (a host volume, or a mount that propagates to the host)"* ]]
	[ -z "$(ls -A "$DG_TMP/shared/root/dev")" ]
	[ "$(grant_entries)" = 0 ]
	no_leases
	# The other side: the same container with its mounts kept to itself.
	hand_container p "$DG_TMP/own/root" private 'mount -t tmpfs -o mode=755 tmpfs "$0/dev"'
	run -0 dg grant --pid "$CPID" --gpu 0
	[ -c "/proc/$CPID/root/dev/nvidia0" ]
	[ -z "$(ls -A "$DG_TMP/own/root/dev")" ]
}

@test "/dev a directory of the rootfs, or a symlink: refused, nothing made on the host" {
	# No tmpfs: the rootfs's own /dev, a host directory.
	mkdir -p "$DG_TMP/d/root/dev"
	hand_container d "$DG_TMP/d/root" private true
	refused_on_host "$DG_TMP/d/root/dev"
	[ -z "$(ls -A "$DG_TMP/d/root/dev")" ]
	# /dev a symlink to a directory of the rootfs.
	mkdir -p "$DG_TMP/l/root/vol"
	ln -s vol "$DG_TMP/l/root/dev"
	hand_container l "$DG_TMP/l/root" private true
	run -9 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"cannot open /dev in the container (missing, or a symlink)"* ]]
	[ -z "$(ls -A "$DG_TMP/l/root/vol")" ]
	[ "$(grant_entries)" = 0 ]
	no_leases
}

@test "/dev/dri a symlink to a host volume, or the volume bound on it: no DRM node in the volume" {
	stop_daemon
	rm -rf "$DG_HOST"
	make_host -n 1 --amd 1
	start_daemon
	vol_bundle r mount umount
	start_bundle
	snap=$(tree "$DG_TMP/vol")
	ln -s /vol "/proc/$CPID/root/dev/dri"
	run ! dg grant --pid "$CPID" --gpu 1
	[[ "$output" == *"/dev/dri/renderD128"* ]]
	rm "/proc/$CPID/root/dev/dri"
	mkdir "/proc/$CPID/root/dev/dri"
	nsenter -t "$CPID" -m -- /bin/mount --bind /vol /dev/dri
	run ! dg grant --pid "$CPID" --gpu 1
	[[ "$output" == *"cannot create /dev/dri/renderD128 in the container"*"cross-device link"* ]]
	[ "$(tree "$DG_TMP/vol")" = "$snap" ]
	[ "$(grant_entries)" = 0 ]
	no_leases
	# The directory of its own /dev: the render node is made there.
	nsenter -t "$CPID" -m -- /bin/umount /dev/dri
	run -0 dg grant --pid "$CPID" --gpu 1
	[ -c "/proc/$CPID/root/dev/dri/renderD128" ]
	[ "$(tree "$DG_TMP/vol")" = "$snap" ]
}

@test "a /dev swapped for a host volume after the grant: the revoke takes nothing from the volume" {
	vol_bundle s mount
	edit "$B" "$DG_USERNS_JQ"
	# Mounting in its own namespaces is what a user-namespaced root may do.
	edit "$B" '.process.capabilities |= with_entries(.value += ["CAP_SYS_ADMIN"])'
	chmod 0711 "$DG_TMP"
	chown -R 100000:100000 "$B/rootfs"
	# The host's own node of GPU 0, in a host directory.
	mknod -m 600 "$DG_TMP/vol/nvidia0" c 195 0
	start_bundle
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	snap=$(tree "$DG_TMP/vol")
	dg_runc exec "$CID" mount --bind /vol /dev
	[ -e "/proc/$CPID/root/dev/marker" ]
	run -0 dg revoke --pid "$CPID"
	[ "$(tree "$DG_TMP/vol")" = "$snap" ]
	grep -q "cannot remove nodes from $CID: /dev in the container of PID $CPID is on " \
		"$DG_TMP/daemon.log"
	[ "$(grant_entries)" = 0 ]
	no_leases
}

@test "--root is root's alone and needs its identity; the lease keeps the root, and its nodes go from there" {
	chmod 0711 "$DG_TMP"
	stop_daemon
	DG_SOCK="$DG_TMP/run/sock"
	start_daemon --socket-group 4242 --admin-group 4343
	# A container before pivot_root: a rootfs with a private tmpfs /dev; its
	# own root is still the host's.
	mkdir -p "$DG_TMP/r/rootfs/dev" "$DG_TMP/hostdir/dev"
	chmod -R 0755 "$DG_TMP/r" "$DG_TMP/hostdir"
	hand_container r "$DG_TMP/r/rootfs" private 'mount -t tmpfs -o mode=755 tmpfs "$0/dev"' \
		'sleep 100000'
	rdev="/proc/$CPID/root$DG_TMP/r/rootfs/dev"
	# An admin-group member who is not root: refused, for any directory.
	for root in "$DG_TMP/hostdir" "$DG_TMP/r/rootfs"; do
		run -4 setpriv --reuid 65534 --regid 65534 --groups 4242,4343 \
			"$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" grant --pid "$CPID" --gpu 0 --root "$root"
		[[ "$output" == *"a root path (--root) is for root only: the OCI hook's"* ]]
	done
	[ -z "$(ls -A "$DG_TMP/hostdir/dev")" ]
	[ -z "$(ls -A "$rdev")" ]
	# Root without the root's identity: refused.
	run -0 sh -c "printf '%s\n' '{\"v\":1,\"op\":\"grant\",\"args\":{\"pid\":$CPID,\"gpus\":\"0\",\"root\":\"$DG_TMP/r/rootfs\"}}' |
		socat -t 5 - UNIX-CONNECT:$DG_SOCK"
	[[ "$(echo "$output" | jq -r .error.message)" == "a root path ($DG_TMP/r/rootfs) needs its identity (root_id)"* ]]
	[ "$(grant_entries)" = 0 ]
	# Root, with it: the nodes go below the root, and the lease says where.
	run -0 dg grant --pid "$CPID" --gpu 0 --root "$DG_TMP/r/rootfs"
	[ -c "$rdev/nvidia0" ]
	[ -z "$(ls -A "$DG_TMP/r/rootfs/dev")" ]
	[ "$(jq -r .root "$DG_TMP"/state/leases/*.json)" = "$DG_TMP/r/rootfs" ]
	# Another root for the same lease: refused; none: the lease's.
	run -2 dg grant --pid "$CPID" --gpu 1 --root "$DG_TMP/hostdir"
	[[ "$output" == *"holds nodes made in $DG_TMP/r/rootfs/dev"* ]]
	run -0 dg grant --pid "$CPID" --gpu 1
	[ -c "$rdev/nvidia1" ]
	[ -z "$(ls -A "$DG_TMP/hostdir/dev")" ]
	# The revoke removes them from the same root (not from the host's /dev).
	run -0 dg revoke --pid "$CPID"
	[ -z "$(ls -A "$rdev")" ] || fail "left in the root: $(ls -A "$rdev")"
	no_leases
}

@test "--device /dev/null:/dev/null adopts the runtime's node: revoke leaves it, and >/dev/null still reaches the device" {
	container c
	run -0 dg grant --pid "$CPID" --device /dev/null:/dev/null --device /dev/loop-control
	[[ "$output" == *"/dev/null"*"present"* ]]
	[[ "$output" == *"/dev/loop-control"*"created"* ]]
	[ "$(jq -c .kept "$DG_TMP"/state/leases/*.json)" = '["/dev/null"]' ]
	run -0 dg revoke --pid "$CPID"
	[[ "$output" == *"/dev/null"*"kept"* ]]
	[[ "$output" == *"/dev/loop-control"*"removed"* ]]
	run -0 dg_runc exec "$CID" sh -c 'echo x >/dev/null && stat -c "%F %t:%T" /dev/null'
	[ "$output" = "character special file 1:3" ]
	run -1 probe "$CID" /dev/loop-control
	[ "$output" = "/dev/loop-control ENOENT" ]
}

@test "in a user-namespaced container, /dev/null is the host's bound in: adopted, it stays bound at revoke" {
	vol_bundle n
	edit "$B" "$DG_USERNS_JQ"
	chmod 0711 "$DG_TMP"
	chown -R 100000:100000 "$B/rootfs"
	start_bundle
	# runc cannot make nodes there: it binds the host's.
	grep -q " /dev/null " "/proc/$CPID/mountinfo"
	run -0 dg grant --pid "$CPID" --device /dev/null --gpu 0
	[[ "$output" == *"/dev/null"*"present"* ]]
	run -0 dg revoke --pid "$CPID"
	[[ "$output" == *"/dev/null"*"kept"* ]]
	[[ "$output" == *"/dev/nvidia0"*"removed"* ]]
	grep -q " /dev/null " "/proc/$CPID/mountinfo"
	run -0 dg_runc exec "$CID" sh -c 'echo x >/dev/null && stat -c "%F %t:%T" /dev/null'
	[ "$output" = "character special file 1:3" ]
}

@test "a GPU node the runtime made stays at revoke; those devgate made go" {
	vol_bundle g
	edit "$B" '.linux.devices += [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0,
		"fileMode": 438, "uid": 0, "gid": 0}]'
	start_bundle
	run -0 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"/dev/nvidia0"*"present"* ]]
	[[ "$output" == *"/dev/nvidiactl"*"created"* ]]
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	run -0 dg revoke --pid "$CPID"
	[[ "$output" == *"/dev/nvidia0"*"kept"* ]]
	[[ "$output" == *"/dev/nvidiactl"*"removed"* ]]
	# The runtime's node is there, and opens nothing: the grant is gone.
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidiactl
	[ "${lines[0]}" = "/dev/nvidia0 EPERM" ]
	[ "${lines[1]}" = "/dev/nvidiactl ENOENT" ]
	# A node the container had removed is devgate's once devgate made it again.
	run -0 dg grant --pid "$CPID" --gpu 0
	rm "/proc/$CPID/root/dev/nvidia0"
	run -0 dg grant --pid "$CPID" --gpu 0 --device /dev/loop-control
	[[ "$output" == *"/dev/nvidia0"*"created"* ]]
	run -0 dg revoke --pid "$CPID"
	[[ "$output" == *"/dev/nvidia0"*"removed"* ]]
}

@test "a crash after the nodes of a grant that adopted /dev/null: the rollback leaves /dev/null" {
	container c
	stop_daemon
	crash_with grant.nodes dg grant --pid "$CPID" --device /dev/null --device /dev/loop-control
	start_daemon
	no_leases
	run -0 dg_runc exec "$CID" stat -c "%F %t:%T" /dev/null
	[ "$output" = "character special file 1:3" ]
	run -1 probe "$CID" /dev/loop-control
	[ "$output" = "/dev/loop-control ENOENT" ]
}
