#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# grant --driver against a container that fights back. devgate writes the
# driver's files only on the container's root mount (never across a mount:
# a volume reached directly, through a symlink, or from a nested namespace
# the container's first process moved into), only what the container's
# own root could write, and only mounts the kernel will not propagate out
# of the container. Each test asserts the attack refused with the host
# untouched, and the legitimate grant still working.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	make_host --driver "550.54.14:$DEVGATE_BUILD/fakedrv.so"
	start_daemon
}
teardown() {
	[ -z "${NS_VOL:-}" ] || dg_in_ns umount "$NS_VOL" 2>/dev/null || true
	[ -z "${HOLDER:-}" ] || kill "$HOLDER" 2>/dev/null || true
	dg_teardown
}

DOCKER_CAPS='["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"]'

# new_vol: a host directory $DG_TMP/vol with a marker, as a volume; VOL_SNAP
# is what it looks like.
new_vol() {
	VOL="$DG_TMP/vol"
	mkdir -p "$VOL"
	echo marker >"$VOL/marker"
	touch -d '2020-01-01' "$VOL/marker" "$VOL"
	VOL_SNAP=$(vol_state)
}

vol_state() {
	find "$VOL" -printf '%p %u %m %T@\n' | sort
}

# bundle NAME JQ-FILTER [APPLET...]: a runc bundle edited by the filter
# (with $vol, $caps), busybox APPLETs linked; sets B.
bundle() {
	local a
	B="$DG_TMP/$1"
	dg_bundle "$B" "$DEVGATE_BUILD/probe"
	for a in "${@:3}"; do ln -sf busybox "$B/rootfs/bin/$a"; done
	jq --arg vol "${VOL:-}" --argjson caps "$DOCKER_CAPS" "$2" "$B/config.json" >"$B/c.json"
	mv "$B/c.json" "$B/config.json"
}

# start_bundle NAME: starts the bundle made by bundle(); sets CID, CPID.
start_bundle() {
	requires runc
	CID="$DG_ID-$1"
	CPID=$(dg_run "$CID" "$DG_TMP/$1")
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	[ -n "$CPID" ] && [ "$CPID" != null ]
}

# devgate_mounts PID: the mount points of devgate's marked (unbindable)
# mounts in PID's mount namespace, space separated.
devgate_mounts() {
	awk '/ unbindable / { print $5 }' "/proc/$1/mountinfo" | sort | tr '\n' ' '
}

VOL_AT='.mounts += [{"destination": "/data", "type": "bind", "source": $vol, "options": ["rbind", "rw"]}]'

@test "a symlink from /usr into a host volume: refused, nothing written there; without it the driver mounts" {
	new_vol
	bundle s "$VOL_AT"
	ln -s /data "$B/rootfs/usr"
	start_bundle s
	run -6 dg grant --pid "$CPID" --gpu 0 --driver compute,utility
	[[ "$output" == *"in the container of PID $CPID: /usr is on another mount than the container's root"* ]]
	[[ "$output" == *"never across a mount"* ]]
	[ "$(vol_state)" = "$VOL_SNAP" ]
	no_leases
	[ "$(grant_entries)" = 0 ]
	[ "$(devgate_mounts "$CPID")" = "" ]
	# Without the symlink the image gets its /usr, and loses it again at revoke.
	rm "$B/rootfs/usr"
	run -0 dg grant --pid "$CPID" --gpu 0 --driver compute,utility
	[[ "$(devgate_mounts "$CPID")" == *"/usr/lib/x86_64-linux-gnu/libcuda.so.1 "* ]]
	run -0 dg revoke --pid "$CPID"
	[ "$(devgate_mounts "$CPID")" = "" ]
	[ ! -e "$B/rootfs/usr" ]
	[ "$(vol_state)" = "$VOL_SNAP" ]
}

@test "a host volume bound rshared on a driver directory: refused; nothing in it or in the runtime's mount table; unmounted, the driver mounts" {
	new_vol
	# The volume is a shared mount where runc runs; the container's bind is its peer.
	NS_VOL=$VOL
	dg_in_ns sh -c 'mount --bind "$1" "$1" && mount --make-shared "$1"' _ "$VOL"
	table=$(dg_in_ns cat /proc/self/mountinfo | grep -c "$VOL")
	bundle v '.mounts += [{"destination": "/usr/lib/x86_64-linux-gnu", "type": "bind",
		"source": $vol, "options": ["rbind", "rw", "rshared"]}]' umount
	start_bundle v
	run -6 dg grant --pid "$CPID" --gpu 0 --driver compute
	[[ "$output" == *": /usr/lib/x86_64-linux-gnu is on another mount than the container's root"* ]]
	[ "$(vol_state)" = "$VOL_SNAP" ]
	[ "$(dg_in_ns cat /proc/self/mountinfo | grep -c "$VOL")" = "$table" ]
	no_leases
	# The volume taken off inside, the directory is the image's again.
	nsenter -t "$CPID" -m umount /usr/lib/x86_64-linux-gnu
	run -0 dg grant --pid "$CPID" --gpu 0 --driver compute
	[[ "$(devgate_mounts "$CPID")" == *"/usr/lib/x86_64-linux-gnu/libcuda.so.1 "* ]]
	[ "$(dg_in_ns cat /proc/self/mountinfo | grep -c "$VOL")" = "$table" ]
	run -0 dg revoke --pid "$CPID"
	[ "$(devgate_mounts "$CPID")" = "" ]
	[ "$(vol_state)" = "$VOL_SNAP" ]
}

@test "an image directory its root may not write: refused without CAP_DAC_OVERRIDE, made as root with it, and removed" {
	bundle n .
	mkdir "$B/rootfs/usr"
	chown 1234:1234 "$B/rootfs/usr"
	start_bundle n
	# runc's default capabilities: no CAP_DAC_OVERRIDE, so root may not write in /usr.
	run ! dg_runc exec "$CID" touch /usr/x
	[[ "$output" == *"Permission denied"* ]]
	run -6 dg grant --pid "$CPID" --gpu 0 --driver compute
	[[ "$output" == *"the container's root may not make /usr/lib (Permission denied)"* ]]
	[[ "$output" == *"devgate makes only what the container's own root could make"* ]]
	[ -z "$(ls -A "$B/rootfs/usr")" ]
	no_leases

	# Docker's capabilities include it: the container could, so devgate does.
	bundle d '.process.capabilities |= with_entries(select(.key != "ambient") | .value = $caps)'
	mkdir "$B/rootfs/usr"
	chown 1234:1234 "$B/rootfs/usr"
	start_bundle d
	run -0 dg grant --pid "$CPID" --gpu 0 --driver compute
	[ "$(stat -c %u:%g "$B/rootfs/usr/lib")" = 0:0 ]
	[[ "$(devgate_mounts "$CPID")" == *"/usr/lib/x86_64-linux-gnu/libcuda.so.1 "* ]]
	run -0 dg revoke --pid "$CPID"
	[ -z "$(ls -A "$B/rootfs/usr")" ]
	[ "$(stat -c %u:%g "$B/rootfs/usr")" = 1234:1234 ]
}

# nested_first NAME SCRIPT: a container whose first process itself unshares
# a user and mount namespace (Docker's capabilities allow it), runs SCRIPT
# there and execs sleep: no process is left in the namespaces runc made.
nested_first() {
	bundle "$1" "$VOL_AT"' | .process.capabilities |= with_entries(select(.key != "ambient") | .value = $caps) |
		.process.args = ["unshare", "-r", "-m", "sh", "-c", "'"$2"'"]' unshare mount chroot
	mkdir -p "$B/rootfs/usr"
	start_bundle "$1"
	wait_until 5 sh -c "[ \"\$(readlink /proc/$CPID/ns/mnt)\" != \"\$(readlink /proc/$$/ns/mnt)\" ] &&
		grep -q sleep /proc/$CPID/comm"
}

@test "the container's first process moves into a nested namespace with a host volume on /usr, or as its root: refused, the volume untouched" {
	new_vol
	nested_first m 'mount --bind /data /usr && exec sleep 100000'
	run -6 dg grant --pid "$CPID" --gpu 0 --driver compute
	[[ "$output" == *": /usr is on another mount than the container's root"* ]]
	[ "$(vol_state)" = "$VOL_SNAP" ]
	no_leases
	dg_rm "$CID"

	# The volume as its root, owned by another user: its root there may not write.
	mkdir -p "$VOL/bin" "$VOL/dev"
	cp /bin/busybox "$VOL/bin/"
	ln -s busybox "$VOL/bin/sleep"
	chown -R 1234:1234 "$VOL"
	VOL_SNAP=$(vol_state)
	nested_first r 'mount -t tmpfs dev /data/dev && exec chroot /data /bin/sleep 100000'
	run -6 dg grant --pid "$CPID" --gpu 0 --driver compute
	[[ "$output" == *"the container's root may not make /usr (Permission denied)"* ]]
	[ "$(vol_state)" = "$VOL_SNAP" ]
	no_leases
}

# shared_root NAME: a hand-made container whose root is a tmpfs shared with
# a namespace outside it (a peer, as a runtime's namespace would hold):
# HOLDER stays in that namespace, CPID is the container. The tmpfs gets
# busybox and a /dev of its own before it is shared.
shared_root() {
	local cg="$DG_CGROOT/$DG_ID-$1" root="$DG_TMP/$1"
	mkdir -p "$root" "$cg"
	DG_CGROUPS+=("$cg")
	setsid unshare -m --propagation private sh -c '
		mount -t tmpfs root "$1" && mkdir "$1/bin" "$1/dev" &&
		cp /bin/busybox "$1/bin/" && ln -s busybox "$1/bin/sleep" &&
		mount -t tmpfs dev "$1/dev" && mknod -m 666 "$1/dev/null" c 1 3 &&
		mount --make-shared "$1" &&
		{ sh -c "echo \$\$ >\"\$0/cgroup.procs\" && exec unshare -m --propagation unchanged \
			chroot \"\$1\" /bin/sleep 100000" "$2" "$1" & } &&
		exec sleep 100000' _ "$root" "$cg" </dev/null >/dev/null 2>&1 &
	HOLDER=$!
	wait_until 10 sh -c "p=\$(head -1 $cg/cgroup.procs) && [ -n \"\$p\" ] && grep -qx sleep /proc/\$p/comm" ||
		fail "the shared-root container did not start"
	CPID=$(head -1 "$cg/cgroup.procs")
	SROOT=$root
}

@test "a container root shared with a namespace outside: the driver's mounts are refused, none propagates; private, they mount" {
	shared_root sh
	run -6 dg grant --pid "$CPID" --gpu 0 --driver compute
	[[ "$output" == *"the mount it would go on is shared with other mount namespaces"* ]]
	[[ "$output" == *"rootfsPropagation"* ]]
	# Nothing reached the outside namespace, and nothing is left in the root.
	run -1 grep -q "$SROOT/usr" "/proc/$HOLDER/mountinfo"
	[ "$(ls "/proc/$HOLDER/root$SROOT")" = "$(printf 'bin\ndev')" ]
	no_leases
	# The same container with its root made private: the mounts are its own.
	nsenter -t "$CPID" -m mount --make-private "$SROOT"
	run -0 dg grant --pid "$CPID" --gpu 0 --driver compute
	[[ "$(devgate_mounts "$CPID")" == *"/usr/lib/x86_64-linux-gnu/libcuda.so.1 "* ]]
	run -1 grep -q "$SROOT/usr" "/proc/$HOLDER/mountinfo"
	run -0 dg revoke --pid "$CPID"
	[ "$(devgate_mounts "$CPID")" = "" ]
	[ "$(ls "/proc/$HOLDER/root$SROOT")" = "$(printf 'bin\ndev')" ]
}

@test "a runtime's own mount of a driver file (CDI) is the image's: grant --driver leaves it, revoke too" {
	lib=/usr/lib/x86_64-linux-gnu
	bundle c '.mounts += [{"destination": "'$lib'/libcuda.so.1", "type": "bind",
		"source": "'"$DG_HOST$lib"'/libcuda.so.550.54.14", "options": ["bind", "ro", "nosuid", "nodev"]}]'
	start_bundle c
	cdi=$(awk -v p="$lib/libcuda.so.1" '$5 == p' "/proc/$CPID/mountinfo")
	[ -n "$cdi" ]
	run -0 dg grant --pid "$CPID" --gpu 0 --driver compute
	[[ "$(devgate_mounts "$CPID")" == *"$lib/libcuda.so.550.54.14 "* ]]
	[[ "$(devgate_mounts "$CPID")" != *"$lib/libcuda.so.1 "* ]]
	record=$(ls "$DG_TMP/state/leases/"*.json)
	[ "$(jq --arg p "$lib/libcuda.so.1" '.driver_files | index($p)' "$record")" = null ]
	run -0 dg revoke --pid "$CPID"
	[ "$(devgate_mounts "$CPID")" = "" ]
	[ "$(awk -v p="$lib/libcuda.so.1" '$5 == p' "/proc/$CPID/mountinfo")" = "$cdi" ]
}

@test "revoke removes exactly what devgate made: the container's own file in its directory, and its own directory in the place of one, stay" {
	bundle e . mv mkdir
	start_bundle e
	run -0 dg grant --pid "$CPID" --gpu 0 --driver compute
	[ "$(stat -c %u:%g "$B/rootfs/usr/lib/x86_64-linux-gnu")" = 0:0 ]
	# The container puts a file of its own in a directory devgate made.
	run -0 dg_runc exec "$CID" touch /usr/lib/mine
	run -0 dg revoke --pid "$CPID"
	[ "$(devgate_mounts "$CPID")" = "" ]
	[ "$(ls -A "$B/rootfs/usr")" = lib ]
	[ "$(ls -A "$B/rootfs/usr/lib")" = mine ]
	rm -r "$B/rootfs/usr"

	# It moves devgate's /usr aside and makes an empty /usr of its own: that one stays.
	run -0 dg grant --pid "$CPID" --gpu 0 --driver compute
	run -0 dg_runc exec "$CID" sh -c 'mv /usr /usr.old && mkdir /usr'
	ino=$(stat -c %i "$B/rootfs/usr")
	run -0 dg revoke --pid "$CPID"
	[ "$(stat -c %i "$B/rootfs/usr")" = "$ino" ]
	[ -z "$(ls -A "$B/rootfs/usr")" ]
	# What it moved is its own now; a grant afterwards works as on a fresh image.
	run -0 dg grant --pid "$CPID" --gpu 0 --driver compute
	[[ "$(devgate_mounts "$CPID")" == *"/usr/lib/x86_64-linux-gnu/libcuda.so.1 "* ]]
	run -0 dg revoke --pid "$CPID"
	[ "$(stat -c %i "$B/rootfs/usr")" = "$ino" ]
	[ -z "$(ls -A "$B/rootfs/usr")" ]
}
