#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# The /dev devgated keeps per container (daemon/node/devcache.c): after a
# helper's first job, grants and revokes are single names made or removed
# in the kept descriptor, with no helper. Whatever the container (or the
# host) does to that /dev afterwards, devgated either works in the /dev the
# container sees now, through a helper, or refuses; it never makes a node
# where the container does not see it, nor where the host does.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	DG_DAEMON_ARGS=(-v)
	start_daemon
}
teardown() {
	if [ -n "${DG_TMP:-}" ]; then
		umount -R -l "$DG_TMP/shared" 2>/dev/null
		umount -R -l "$DG_TMP/own" 2>/dev/null
	fi
	dg_teardown
}

# kept: how many node jobs devgated did in a kept /dev, without a helper.
kept() {
	grep -c "worked on in the /dev devgated keeps for it, no helper" "$DG_TMP/daemon.log" || true
}

# in_ct CMD...: runs busybox CMD in the container's mount namespace with the
# host's privileges (a privileged container could do the same).
in_ct() {
	nsenter -t "$CPID" -m /bin/busybox "$@"
}

# primed: GPU 0 granted and revoked once, so devgated keeps the /dev of
# CPID: the revoke went without a helper.
primed() {
	local before
	run -0 dg grant --pid "$CPID" --gpu 0
	before=$(kept)
	run -0 dg revoke --pid "$CPID"
	[ "$(kept)" = "$((before + 1))" ]
}

# ns_moved USERNS: whether CPID is in another user namespace than USERNS now.
ns_moved() {
	[ "$(readlink "/proc/$CPID/ns/user")" != "$1" ]
}

# sleeper CGROUP: the PID of the process in CGROUP that runs sleep; fails while none does.
sleeper() {
	local p
	for p in $(cat "$1/cgroup.procs"); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = sleep ] && echo "$p" && return 0
	done
	return 1
}

# leaky_container: a container made by hand (its cgroup, mount and PID
# namespaces, chrooted into ROOT) with a private tmpfs on /dev, whose mount
# namespace keeps $DG_TMP/shared a peer of devgated's: what it mounts there
# shows in devgated's namespace too. Sets ROOT, CG and CPID.
leaky_container() {
	ROOT="$DG_TMP/own/root"
	CG="$DG_CGROOT/$DG_ID-leaky"
	mkdir -p "$ROOT/bin" "$ROOT/dev" "$DG_TMP/shared"
	cp /bin/busybox "$ROOT/bin/"
	ln -sf busybox "$ROOT/bin/sleep"
	mount --bind "$DG_TMP/own" "$DG_TMP/own"
	mount --make-private "$DG_TMP/own"
	mount --bind "$DG_TMP/shared" "$DG_TMP/shared"
	mount --make-shared "$DG_TMP/shared"
	mkdir "$CG"
	DG_CGROUPS+=("$CG")
	# shellcheck disable=SC2016 # expanded by the shells started here
	setsid sh -c 'echo $$ >"$1/cgroup.procs" && exec unshare --mount --pid --fork \
		--propagation unchanged sh -c "mount -t tmpfs -o mode=755 tmpfs \"\$0/dev\" &&
		exec chroot \"\$0\" /bin/sleep 100000" "$2"' _ "$CG" "$ROOT" \
		</dev/null >/dev/null 2>&1 &
	wait_until 10 sleeper "$CG" >/dev/null
	CPID=$(sleeper "$CG")
}

# ramfs_container: a container made by hand (its cgroup, mount and PID
# namespaces, chrooted) whose /dev is a ramfs, standing for any /dev that is
# not tmpfs (FUSE, NFS): sets ROOT, CG and CPID.
ramfs_container() {
	ROOT="$DG_TMP/rf/root"
	CG="$DG_CGROOT/$DG_ID-ramfs"
	mkdir -p "$ROOT/bin" "$ROOT/dev"
	cp /bin/busybox "$ROOT/bin/"
	ln -sf busybox "$ROOT/bin/sleep"
	mkdir "$CG"
	DG_CGROUPS+=("$CG")
	# shellcheck disable=SC2016 # expanded by the shells started here
	setsid sh -c 'echo $$ >"$1/cgroup.procs" && exec unshare --mount --pid --fork \
		sh -c "mount -t ramfs -o mode=755 ramfs \"\$0/dev\" &&
		exec chroot \"\$0\" /bin/sleep 100000" "$2"' _ "$CG" "$ROOT" \
		</dev/null >/dev/null 2>&1 &
	wait_until 10 sleeper "$CG" >/dev/null
	CPID=$(sleeper "$CG")
}

# vol_container NAME: a runc container with the host directory
# $DG_TMP/vol (a marker in it) bound on /vol; sets CPID and CID.
vol_container() {
	requires runc
	CID="$DG_ID-$1"
	dg_bundle "$DG_TMP/$1" "$DEVGATE_BUILD/probe"
	mkdir -p "$DG_TMP/vol"
	echo marker >"$DG_TMP/vol/marker"
	jq --arg vol "$DG_TMP/vol" '.mounts += [{"destination": "/vol", "type": "bind",
		"source": $vol, "options": ["rbind", "rw"]}]' "$DG_TMP/$1/config.json" \
		>"$DG_TMP/$1/c.json"
	mv "$DG_TMP/$1/c.json" "$DG_TMP/$1/config.json"
	CPID=$(dg_run "$CID" "$DG_TMP/$1")
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
}

@test "after the first job, grants and revokes in the same /dev need no helper; the node reaches the driver, the neighbour stays denied" {
	container c
	primed
	n=$(kept)
	run -0 dg grant --pid "$CPID" --gpu 0
	[ "$(kept)" = "$((n + 1))" ]
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidiactl /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidiactl ENXIO" ]
	[ "${lines[2]}" = "/gpu1 EPERM" ]
	# Exactly the job's mode, not devgated's umask.
	[ "$(stat -c %a "/proc/$CPID/root/dev/nvidia0")" = 666 ]
	run -0 dg revoke --pid "$CPID"
	[ "$(kept)" = "$((n + 2))" ]
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidiactl
	[ "${lines[0]}" = "/dev/nvidia0 ENOENT" ]
	[ "${lines[1]}" = "/dev/nvidiactl ENOENT" ]
	# A second container has a kept /dev of its own: no node of one in the other.
	c1=$CID p1=$CPID
	container d
	run -0 dg grant --pid "$CPID" --gpu 1
	[ -c "/proc/$CPID/root/dev/nvidia1" ]
	[ ! -e "/proc/$p1/root/dev/nvidia1" ]
	run -1 probe "$c1" /dev/nvidia1
	[ "$output" = "/dev/nvidia1 ENOENT" ]
}

@test "a tmpfs mounted over the kept /dev: the grant goes to a helper and the node to the /dev the container sees, none to the hidden one" {
	container c
	primed
	n=$(kept)
	in_ct mount -t tmpfs -o mode=755 tmpfs /dev
	in_ct mknod -m 666 /dev/null c 1 3
	run -0 dg grant --pid "$CPID" --gpu 0
	[ "$(kept)" = "$n" ]
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	# The /dev below it, which devgated kept, got nothing.
	in_ct umount /dev
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENOENT" ]
	# The revoke after that: the helper's /dev is kept now, and it is the one seen.
	run -0 dg revoke --pid "$CPID"
}

@test "a host directory bound over the kept /dev: refused, the directory untouched" {
	vol_container v
	primed
	snap=$(ls -la --time-style=full-iso "$DG_TMP/vol")
	in_ct mount --bind /vol /dev
	run -6 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"/dev in the container of PID $CPID is on "*"devgated's own mount namespace has at / "* ]] ||
		fail "grant said: $output"
	[ "$(ls -la --time-style=full-iso "$DG_TMP/vol")" = "$snap" ]
	[ "$(grant_entries)" = 0 ]
	no_leases
}

@test "the kept /dev unmounted, renamed and made again as a rootfs directory: refused, nothing made in either" {
	container c
	primed
	in_ct umount -l /dev
	in_ct mv /dev /olddev
	in_ct mkdir /dev
	run -6 dg grant --pid "$CPID" --gpu 0
	[ -z "$(ls -A "$DG_TMP/c/rootfs/dev")" ]
	[ -z "$(ls -A "$DG_TMP/c/rootfs/olddev")" ]
	[ "$(grant_entries)" = 0 ]
	no_leases
}

@test "the kept /dev then shows in devgated's own mount namespace (a mount that propagates): refused, nothing appears there" {
	leaky_container
	primed
	mkdir "$DG_TMP/shared/leak"
	nsenter -t "$CPID" -m mount --bind "$ROOT/dev" "$DG_TMP/shared/leak"
	wait_until 5 mountpoint -q "$DG_TMP/shared/leak"
	[ "$(stat -c %d "$DG_TMP/shared/leak")" = "$(stat -c %d "/proc/$CPID/root/dev")" ]
	run -6 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"devgated's own mount namespace has at $DG_TMP/shared/leak "* ]] ||
		fail "grant said: $output"
	[ ! -e "$DG_TMP/shared/leak/nvidia0" ]
	[ "$(grant_entries)" = 0 ]
	no_leases
	# Once it is gone from there, the container's own /dev serves again.
	umount "$DG_TMP/shared/leak"
	run -0 dg grant --pid "$CPID" --gpu 0
	[ -c "/proc/$CPID/root/dev/nvidia0" ]
	[ -z "$(ls -A "$DG_TMP/shared/leak")" ]
}

@test "a symlink at the node's name in the kept /dev: refused (exit 9) without a helper, never followed" {
	vol_container v
	primed
	n=$(kept)
	dg_runc exec "$CID" ln -s /vol/planted /dev/nvidia0
	run -9 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"/dev/nvidia0 in the container of PID $CPID is a symlink"* ]] ||
		fail "grant said: $output"
	[ "$(kept)" = "$((n + 1))" ]
	[ ! -e "$DG_TMP/vol/planted" ]
	[ -L "/proc/$CPID/root/dev/nvidia0" ]
	[ "$(grant_entries)" = 0 ]
}

@test "the first process moves into a nested user and mount namespace: no node in the /dev it left" {
	requires runc
	CID="$DG_ID-n"
	dg_bundle "$DG_TMP/n" "$DEVGATE_BUILD/probe"
	ln -sf busybox "$DG_TMP/n/rootfs/bin/unshare"
	# A process stays behind in the first namespace, to look at its /dev.
	jq '.process.args = ["sh", "-c", "sleep 100000 & until [ -e /go ]; do sleep 0.05; done;
		exec unshare -r -m sleep 100000"] |
		.process.capabilities |= with_entries(.value += ["CAP_SYS_ADMIN"])' \
		"$DG_TMP/n/config.json" >"$DG_TMP/n/c.json"
	mv "$DG_TMP/n/c.json" "$DG_TMP/n/config.json"
	CPID=$(dg_run "$CID" "$DG_TMP/n")
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	primed
	userns=$(readlink "/proc/$CPID/ns/user")
	touch "$DG_TMP/n/rootfs/go"
	wait_until 10 ns_moved "$userns"
	n=$(kept)
	run dg grant --pid "$CPID" --gpu 0
	[ "$(kept)" = "$n" ]
	# The first namespace's /dev, as the process left behind sees it.
	for p in $(cat "$DG_CGROOT/$CID/cgroup.procs"); do
		[ "$p" = "$CPID" ] && continue
		[ ! -e "/proc/$p/root/dev/nvidia0" ]
	done
	[ "$status" != 0 ] || [ -c "/proc/$CPID/root/dev/nvidia0" ]
}

@test "--node-owner and --node-mode: the same owner and mode from a helper and from the kept /dev" {
	stop_daemon
	start_daemon --node-owner 1000:1001 --node-mode 0660
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	[ "$(stat -c '%u:%g %a' "/proc/$CPID/root/dev/nvidia0")" = "1000:1001 660" ]
	n=$(kept)
	run -0 dg revoke --pid "$CPID"
	run -0 dg grant --pid "$CPID" --gpu 0
	[ "$(kept)" = "$((n + 2))" ]
	[ "$(stat -c '%u:%g %a' "/proc/$CPID/root/dev/nvidia0")" = "1000:1001 660" ]
	[ "$(stat -c '%u:%g %a' "/proc/$CPID/root/dev/nvidiactl")" = "1000:1001 660" ]
	# The container's root (no CAP_DAC_OVERRIDE under runc's defaults) is "other" now.
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 EACCES" ]
}

@test "a /dev that is not tmpfs (ramfs, as FUSE or NFS would be) is never kept: every job goes to a helper, and works" {
	ramfs_container
	[ "$(stat -f -c %T "/proc/$CPID/root/dev")" = ramfs ]
	for _ in 1 2; do
		run -0 dg grant --pid "$CPID" --gpu 0
		[ -c "/proc/$CPID/root/dev/nvidia0" ]
		run -0 dg revoke --pid "$CPID"
		[ ! -e "/proc/$CPID/root/dev/nvidia0" ]
	done
	[ "$(kept)" = 0 ]
}
