#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# grant --device: host character devices, live, into a runc container.
#
# The device that opens for real is /dev/loop-control (10:237): runc's
# default rules deny it, and open() needs no driver state. It is outside the
# classes devgate grants to any container, so every devgated here is told
# device-allow = /dev/loop-control, as an admin who wants it would (a test
# that sets its own device-allow names it again when it needs it). /dev/full
# (1:7) is safe for any container and on runc's own allow list (and in its
# /dev), so it cannot show a grant making a difference.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	DG_DAEMON_ARGS=(--device-allow "$LC")
	start_daemon
}
teardown() { dg_teardown; }

LC=/dev/loop-control

# The gate's flag for device grants (dg_devgrants_v1, index 0).
devflag() {
	bpftool -j map dump pinned "$DG_PINS/dg_devgrants_v1" | jq '.[0].formatted.value'
}

@test "grant --device: the denied device opens, revoke denies it again" {
	container c
	mknod -m 666 "$DG_TMP/c/rootfs/lc" c 10 237
	original=$(cg_progs "$DG_CGROOT/$CID")
	run -1 probe "$CID" /lc $LC
	[ "${lines[0]}" = "/lc EPERM" ]
	[ "${lines[1]}" = "$LC ENOENT" ]
	[ "$(devflag)" = 0 ]

	run -0 dg grant --pid "$CPID" --device $LC
	[[ "$output" == "granted device $LC to $CID (cgroup /$CID, PID $CPID)"* ]]
	[[ "$output" == *"$LC"*"created"* ]]
	[ "$(devflag)" = 1 ]
	[ "$(grants_of "$DG_CGROOT/$CID")" = 1 ]
	run -0 probe "$CID" /lc $LC /dev/null
	[ "${lines[0]}" = "/lc ok" ]
	[ "${lines[1]}" = "$LC ok" ]
	run -0 dg_runc exec "$CID" stat -c '%F %t:%T %a' $LC
	[ "$output" = "character special file a:ed 666" ]
	run -1 probe "$CID" /mem /gpu1
	[ "${lines[0]}" = "/mem EPERM" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -0 dg --json status
	[ "$(echo "$output" | jq -c '.leases[0].devices')" = \
		'[{"path":"/dev/loop-control","host":"/dev/loop-control","type":"c","major":10,"minor":237,"access":"rw"}]' ]
	[ "$(echo "$output" | jq '.leases[0].gpus | length')" = 0 ]
	run -0 dg status
	[[ "$output" == *"device $LC"* ]]

	run -0 dg revoke --pid "$CPID"
	[[ "$output" == *"revoked 1 device from $CID: $LC"* ]]
	[[ "$output" == *"$LC"*"removed"* ]]
	run -1 probe "$CID" /lc $LC
	[ "${lines[0]}" = "/lc EPERM" ]
	[ "${lines[1]}" = "$LC ENOENT" ]
	run -0 probe "$CID" /dev/null /dev/zero /dev/full
	[ "$(grants_of "$DG_CGROOT/$CID")" = 0 ]
	[ "$(cg_progs "$DG_CGROOT/$CID")" = "$original" ]
	[ "$(devflag)" = 0 ]
	no_leases
}

@test "revoke reports a process holding a revoked --device; --kill ends it" {
	container c
	run -0 dg grant --pid "$CPID" --device $LC
	dg_runc exec -d "$CID" sh -c "exec 3<$LC; exec sleep 100003"
	wait_until 5 pgrep -f 'sleep 100003'
	holder=$(pgrep -f 'sleep 100003')
	run -0 --separate-stderr dg revoke --pid "$CPID" --device $LC
	[[ "$output" == *"still open: PID $holder (sleep) holds $LC"* ]]
	# shellcheck disable=SC2154 # bats sets stderr with --separate-stderr
	[[ "$stderr" == *"hint: revoke again with --kill to end them"* ]]
	kill -0 "$holder"
	run -0 dg grant --pid "$CPID" --device $LC
	run -0 dg --json revoke --pid "$CPID" --device $LC --kill=TERM
	[ "$(echo "$output" | jq '.holders[0].pid')" = "$holder" ]
	[ "$(echo "$output" | jq -r '.holders[0].node')" = "$LC" ]
	[ "$(echo "$output" | jq -r '.revoked_devices[0]')" = "$LC" ]
	[ "$(echo "$output" | jq '.killed')" = 1 ]
	wait_until 5 sh -c "! kill -0 $holder 2>/dev/null"
}

@test "HOST:PATH names the node; revoke by container or host path; with --gpu" {
	container c
	run -0 dg grant --pid "$CPID" --device $LC:/dev/myloop --device /dev/full:/dev/myfull \
		--gpu 0
	[[ "$output" == "granted GPU 0 ("*"), device /dev/myloop, device /dev/myfull to $CID"* ]]
	run -1 probe "$CID" /dev/myloop /dev/myfull /dev/nvidia0 $LC
	[ "${lines[0]}" = "/dev/myloop ok" ]
	[ "${lines[1]}" = "/dev/myfull ok" ]
	[ "${lines[2]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[3]}" = "$LC ENOENT" ]
	run -0 dg_runc exec "$CID" stat -c '%F %t:%T' /dev/myloop /dev/myfull
	[ "${lines[0]}" = "character special file a:ed" ]
	[ "${lines[1]}" = "character special file 1:7" ]
	# Again: nothing new.
	run -0 dg grant --pid "$CPID" --device $LC:/dev/myloop
	[[ "$output" == *"already holds what was asked"* ]]
	# The same device under a second name is refused.
	run -2 dg grant --pid "$CPID" --device $LC:/dev/other
	[[ "$output" == *"holds that device or that node name already"* ]]

	run -0 dg revoke --pid "$CPID" --device /dev/myloop
	run -1 probe "$CID" /dev/myloop /dev/myfull /dev/nvidia0
	[ "${lines[0]}" = "/dev/myloop ENOENT" ]
	[ "${lines[1]}" = "/dev/myfull ok" ]
	[ "${lines[2]}" = "/dev/nvidia0 ENXIO" ]
	run -0 dg revoke --pid "$CPID" --gpu 0
	[[ "$output" == *"holds no GPU now"* ]]
	[[ "$output" != *"device programs are restored"* ]]
	run -0 dg --json status
	[ "$(echo "$output" | jq -r '.leases[0].devices[0].path')" = /dev/myfull ]
	run -10 dg revoke --pid "$CPID" --device /dev/myloop
	[[ "$output" == *"does not hold device '/dev/myloop'"* ]]
	# By its host path.
	run -0 dg revoke --pid "$CPID" --device /dev/full
	[[ "$output" == *"device programs are restored"* ]]
	no_leases
	[ "$(devflag)" = 0 ]
}

@test "refused: block device, regular file, GPU node, bad PATH, missing HOST" {
	container c
	mknod "$DG_TMP/blk" b 7 0
	touch "$DG_TMP/file"
	ln -s "$DG_TMP/file" "$DG_TMP/filelink"
	mknod "$DG_TMP/gpu" c 195 0
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/blk:/dev/blk"
	[[ "$output" == *"(b 7:0) is a block device: devgate grants disks only where the admin allows them"* ]]
	[[ "$output" == *"hint: the admin names it in devgate.conf: device-allow = $DG_TMP/blk (or b:7:0)"* ]]
	run -2 dg grant --pid "$CPID" --device "$DG_TMP/file:/dev/file"
	[[ "$output" == *"'$DG_TMP/file' is not a device node"* ]]
	run -2 dg grant --pid "$CPID" --device "$DG_TMP/filelink:/dev/file"
	[[ "$output" == *"is not a device node"* ]]
	run -2 dg grant --pid "$CPID" --device "$DG_TMP/gpu:/dev/gpu"
	[[ "$output" == *"(195:0) is a GPU-class device devgate manages"* ]]
	[[ "$output" == *"hint: grant GPUs with --gpu"* ]]
	run -2 dg grant --pid "$CPID" --device $LC:/dev/a/b
	[[ "$output" == *"container path '/dev/a/b' is not /dev/NAME with a single name"* ]]
	run -2 dg grant --pid "$CPID" --device $LC:/dev/..
	run -2 dg grant --pid "$CPID" --device $LC:/dev/../etc/x
	run -2 dg grant --pid "$CPID" --device $LC:/tmp/x
	[[ "$output" == *"is not under /dev"* ]]
	run -2 dg grant --pid "$CPID" --device $LC:/dev/nvidia9
	[[ "$output" == *"is a GPU node's name"* ]]
	# A HOST outside /dev needs a PATH; the default PATH is HOST.
	ln -s $LC "$DG_TMP/lclink"
	run -2 dg grant --pid "$CPID" --device "$DG_TMP/lclink"
	[[ "$output" == *"is not under /dev"* ]]
	run -2 dg grant --pid "$CPID" --device /dev/no-such-device
	[[ "$output" == *"'/dev/no-such-device': No such file or directory"* ]]
	run -2 dg grant --pid "$CPID" --device dev/full
	[[ "$output" == *"the host path must be absolute"* ]]
	# One bad device spoils the whole request, GPUs included.
	run -4 dg grant --pid "$CPID" --gpu 0 --device $LC --device "$DG_TMP/blk:/dev/blk"
	[ "$(grants_of "$DG_CGROOT/$CID")" = 0 ]
	no_leases
	run -1 probe "$CID" /dev/blk /dev/nvidia0
	[ "${lines[0]}" = "/dev/blk ENOENT" ]
	[ "${lines[1]}" = "/dev/nvidia0 ENOENT" ]
	[ "$(devflag)" = 0 ]
	# Usage errors send nothing.
	run -2 dg grant --pid "$CPID" --device ''
	[[ "$output" == *"--device wants a path"* ]]
}

@test "a symlink HOST is resolved: the device it names is granted" {
	container c
	ln -s $LC "$DG_TMP/lclink"
	run -0 dg grant --pid "$CPID" --device "$DG_TMP/lclink:/dev/viaLink"
	run -0 probe "$CID" /dev/viaLink
	run -0 dg_runc exec "$CID" stat -c '%t:%T' /dev/viaLink
	[ "$output" = "a:ed" ]
	run -0 dg --json status
	[ "$(echo "$output" | jq -r '.leases[0].devices[0].host')" = "$DG_TMP/lclink" ]
}

@test "restart keeps a device lease; the flag is recomputed at start" {
	container c
	run -0 dg grant --pid "$CPID" --device $LC
	record=$(ls "$DG_TMP/state/leases/"*.json)
	[ "$(jq -c '.devices' "$record")" = \
		'[{"path":"/dev/loop-control","host":"/dev/loop-control","type":"c","major":10,"minor":237}]' ]
	stop_daemon
	# devgated down: the grant holds (kernel objects outlive it).
	run -0 probe "$CID" $LC
	# A wrong flag is put right at start.
	bpftool map update pinned "$DG_PINS/dg_devgrants_v1" key 0 0 0 0 value 0 0 0 0
	[ "$(devflag)" = 0 ]
	start_daemon
	[ "$(devflag)" = 1 ]
	run -0 probe "$CID" $LC
	run -0 dg --json status
	[ "$(echo "$output" | jq -r '.leases[0].devices[0].path')" = $LC ]
	run -0 dg revoke --pid "$CPID"
	[ "$(devflag)" = 0 ]
	stop_daemon
	bpftool map update pinned "$DG_PINS/dg_devgrants_v1" key 0 0 0 0 value 1 0 0 0
	start_daemon
	[ "$(devflag)" = 0 ]
}

@test "a record with a malformed devices field goes to leases/broken/" {
	container c
	run -0 dg grant --pid "$CPID" --device $LC
	record=$(ls "$DG_TMP/state/leases/"*.json)
	stop_daemon
	jq '.devices[0].path = "/dev/a/b"' "$record" >"$record.new"
	mv "$record.new" "$record"
	start_daemon
	[ -f "$DG_TMP/state/leases/broken/${record##*/}" ]
	# Not provable from the grants map alone (no path): the grant goes.
	[ "$(grants_of "$DG_CGROOT/$CID")" = 0 ]
	run -1 probe "$CID" $LC
	[ "$output" = "$LC EPERM" ]
	[ "$(devflag)" = 0 ]
}

# crash_at POINT CMD...: the running devgated replaced by one armed to die at POINT.
crash_at() {
	stop_daemon
	crash_with "$@"
}

@test "a crash mid-grant of a device is rolled back, mid-revoke finished; the flag follows" {
	container c
	crash_at grant.grants dg grant --pid "$CPID" --device $LC
	# Died after the grant went in: the flag was set before it.
	[ "$(devflag)" = 1 ]
	start_daemon
	no_leases
	[ "$(grants_of "$DG_CGROOT/$CID")" = 0 ]
	[ "$(devflag)" = 0 ]
	run -1 probe "$CID" $LC
	[ "$output" = "$LC ENOENT" ]

	run -0 dg grant --pid "$CPID" --device $LC --device /dev/full:/dev/myfull
	crash_at revoke.grants dg revoke --pid "$CPID" --device $LC
	[ "$(grants_of "$DG_CGROOT/$CID")" = 1 ]
	start_daemon
	run -0 dg --json status
	[ "$(echo "$output" | jq -c '[.leases[0].devices[].path]')" = '["/dev/myfull"]' ]
	run -1 probe "$CID" $LC
	[ "$output" = "$LC ENOENT" ]
	[ "$(devflag)" = 1 ]
	crash_at revoke.record dg revoke --pid "$CPID"
	start_daemon
	no_leases
	[ "$(devflag)" = 0 ]
	[ "$(grants_of "$DG_CGROOT/$CID")" = 0 ]
}

@test "admin-group may grant GPUs but not host devices: root only" {
	container c
	stop_daemon
	chmod 0711 "$DG_TMP" # nobody must reach the socket's directory
	DG_SOCK="$DG_TMP/run/sock"
	start_daemon --socket-group 4242 --admin-group 4343
	run -4 setpriv --reuid 65534 --regid 65534 --groups 4242,4343 \
		"$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" grant --pid "$CPID" --device $LC
	[[ "${lines[0]}" == *"granting host devices (--device) is for root only"* ]]
	[ "$(grants_of "$DG_CGROOT/$CID")" = 0 ]
	no_leases
	run -0 setpriv --reuid 65534 --regid 65534 --groups 4242,4343 \
		"$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" grant --pid "$CPID" --gpu 0
}

@test "--access r: a read opens, a write is denied; another grant changes it; a restart keeps it" {
	container c
	run -0 dg grant --pid "$CPID" --device $LC --access r
	[[ "$output" == "granted device $LC to $CID"* ]]
	run -0 probe "$CID" $LC
	run -1 probe "$CID" -w $LC
	[ "$output" = "$LC EPERM" ]
	run -0 dg status
	[[ "$output" == *"device $LC (r)"* ]]
	run -0 dg --json status
	[ "$(echo "$output" | jq -r '.leases[0].devices[0].access')" = r ]
	record=$(ls "$DG_TMP/state/leases/"*.json)
	[ "$(jq -r '.devices[0].access' "$record")" = 2 ] # DG_ACC_READ
	stop_daemon
	start_daemon
	run -0 probe "$CID" $LC
	run -1 probe "$CID" -w $LC
	[ "$output" = "$LC EPERM" ]

	# The same device again with the default: read and write, no access field.
	run -0 dg grant --pid "$CPID" --device $LC
	run -0 probe "$CID" -w $LC
	[ "$(jq -r '.devices[0].access // "none"' "$record")" = none ]
	run -0 dg --json status
	[ "$(echo "$output" | jq -r '.leases[0].devices[0].access')" = rw ]

	run -2 dg grant --pid "$CPID" --device /dev/full:/dev/f2 --access rx
	[[ "$output" == *"access 'rx' is not a set of r, w and m"* ]]
	run -2 dg grant --pid "$CPID" --device /dev/full:/dev/f2 --access rr
	run -2 dg grant --pid "$CPID" --gpu 0 --access r
	[[ "$output" == *"--access sets the access of --device nodes"* ]]
	run -0 dg --json status
	[ "$(echo "$output" | jq '.leases[0].devices | length')" = 1 ]
}

@test "devices past the container's walls: refused by their numbers unless device-allow names them" {
	container c
	mknod "$DG_TMP/mem" c 1 1
	mknod "$DG_TMP/innocent" c 1 1
	mknod "$DG_TMP/port" c 1 4
	mknod "$DG_TMP/sg3" c 21 3
	mknod "$DG_TMP/msr" c 202 0
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/mem:/dev/mem"
	[[ "$output" == *"(1:1) is the host's physical memory (/dev/mem)"* ]]
	[[ "$output" == *"hint: if this container must have it, the admin names it in devgate.conf: device-allow = $DG_TMP/mem"* ]]
	# A node by another name is the same device.
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/innocent:/dev/innocent"
	[[ "$output" == *"physical memory"* ]]
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/port:/dev/port"
	[[ "$output" == *"I/O ports"* ]]
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/sg3:/dev/sg3"
	[[ "$output" == *"raw SCSI commands"* ]]
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/msr:/dev/msr"
	[[ "$output" == *"model-specific registers"* ]]
	# One refused device spoils the request: /dev/full does not go in either.
	run -4 dg grant --pid "$CPID" --device /dev/full:/dev/f2 --device "$DG_TMP/mem:/dev/mem"
	no_leases
	[ "$(grants_of "$DG_CGROOT/$CID")" = 0 ]
	run -1 probe "$CID" /dev/mem /dev/f2
	[ "${lines[0]}" = "/dev/mem ENOENT" ]

	stop_daemon
	start_daemon --device-allow "$DG_TMP/mem, 21:*"
	run -0 "$DEVGATE_BUILD/devgated" --check-config --device-allow "$DG_TMP/mem, 21:*" \
		--host-root "$DG_HOST" --state-dir "$DG_TMP/state" --pin-root "$DG_PINS"
	[[ "$output" == *"device-allow = $DG_TMP/mem, 21:*"* ]]
	run -0 dg grant --pid "$CPID" --device "$DG_TMP/mem:/dev/mem" --device "$DG_TMP/sg3:/dev/sg3"
	# ENXIO: the gate let the open through (this kernel has no /dev/mem driver, no sg).
	run -1 probe "$CID" /dev/mem /dev/sg3
	[ "${lines[0]}" = "/dev/mem ENXIO" ]
	[ "${lines[1]}" = "/dev/sg3 ENXIO" ]
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/port:/dev/port"
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/msr:/dev/msr"
	run -1 probe "$CID" /dev/port
	[ "$output" = "/dev/port ENOENT" ]

	run -2 "$DEVGATE_BUILD/devgated" --check-config --device-allow "21:x" \
		--host-root "$DG_HOST" --state-dir "$DG_TMP/state" --pin-root "$DG_PINS"
	[[ "$output" == *"'21:x' is not a device: give an absolute host path, MAJOR:MINOR or MAJOR:*"* ]]
}

# char_major NAME: the major /proc/devices gives the character driver NAME,
# or a major no driver holds here (a node of it is refused all the same).
char_major() {
	local m
	m=$(sed -n '/^Character devices:/,/^$/p' /proc/devices | awk -v n="$1" '$2 == n { print $1; exit }')
	[ -n "$m" ] && echo "$m" && return 0
	for m in 511 510 509 508 507; do
		grep -q "^ *$m " /proc/devices || {
			echo "$m"
			return 0
		}
	done
	return 1
}

# What an older devgate granted without a word: NAME MAJOR MINOR WHAT (the
# words of the refusal; "-" where the driver is not loaded here).
dangerous_nodes() {
	local dyn
	cat <<-EOF
		kmsg 1 11 kernel's log
		tty0 4 0 virtual console
		tty1 4 1 virtual console
		ttyS0 4 64 serial line
		console 5 1 system console
		vcs 7 0 screen contents
		vcsa 7 128 screen contents
		loop-control 10 237 loop control
		uinput 10 223 /dev/uinput
		event0 13 64 /dev/input
		mice 13 63 /dev/input
		watchdog 10 130 watchdog
		tpm0 10 224 TPM
		vfio 10 196 VFIO
		usbdev 189 0 USB
		usb0 180 0 USB
	EOF
	for dyn in watchdog:watchdog tpm:TPM tpmrm:TPM ipmidev:management hidraw:HID dax:persistent \
		vfio:VFIO usbmon:USB; do
		if grep -q " ${dyn%%:*}\$" /proc/devices; then
			echo "dyn-${dyn%%:*} $(char_major "${dyn%%:*}") 0 ${dyn#*:}"
		else
			echo "dyn-${dyn%%:*} $(char_major "${dyn%%:*}") 0 -"
		fi
	done
}

@test "without device-allow only devices safe in any container are granted; every other class is refused, naming device-allow" {
	container c
	stop_daemon
	DG_DAEMON_ARGS=()
	start_daemon
	mkdir "$DG_TMP/dev"
	# The host's own nodes, where it has them, and a node for each class.
	for host in /dev/kmsg /dev/tty0 /dev/console /dev/vcs /dev/loop-control /dev/uinput; do
		[ -c "$host" ] || continue
		run -4 dg grant --pid "$CPID" --device "$host:/dev/x"
		[[ "$output" == *"hint: if this container must have it, the admin names it in devgate.conf: device-allow = $host"* ]]
	done
	n=0
	while read -r name maj min what; do
		mknod "$DG_TMP/dev/$name" c "$maj" "$min"
		run -4 dg grant --pid "$CPID" --device "$DG_TMP/dev/$name:/dev/$name"
		[[ "$output" == *"device '$DG_TMP/dev/$name' ($maj:$min"* ]] || fail "$name: $output"
		[ "$what" = - ] || [[ "$output" == *"$what"* ]] || fail "$name: $output"
		[[ "$output" == *"hint: if this container must have it, the admin names it in devgate.conf: device-allow = $DG_TMP/dev/$name (or $maj:$min); without it devgate grants only /dev/null, /dev/zero, /dev/full, /dev/random, /dev/urandom, /dev/tty, /dev/ptmx, /dev/net/tun, /dev/fuse"* ]] ||
			fail "$name: $output"
		n=$((n + 1))
	done < <(dangerous_nodes)
	[ "$n" -ge 24 ]
	# A driver devgate knows nothing of: refused, by its name in /proc/devices.
	mknod "$DG_TMP/dev/new" c "$(char_major no-such-driver)" 3
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/dev/new:/dev/new"
	[[ "$output" == *"driver 'unknown') is not one that devgate hands to a container unless the admin allows it"* ]]
	no_leases
	[ "$(grants_of "$DG_CGROOT/$CID")" = 0 ]
	[ "$(devflag)" = 0 ]
	run -1 probe "$CID" /dev/kmsg /dev/loop-control /dev/event0
	[ "$output" = "$(printf '%s ENOENT\n' /dev/kmsg /dev/loop-control /dev/event0)" ]

	# The safe ones, by any path to them, go in without a word.
	mknod "$DG_TMP/dev/tun" c 10 200
	mknod "$DG_TMP/dev/fuse" c 10 229
	ln -s /dev/urandom "$DG_TMP/dev/ur"
	run -0 dg grant --pid "$CPID" --device /dev/null:/dev/n2 --device /dev/zero:/dev/z2 \
		--device /dev/full:/dev/f2 --device /dev/random:/dev/r2 --device "$DG_TMP/dev/ur:/dev/u2" \
		--device /dev/tty:/dev/t2 --device /dev/ptmx:/dev/p2 --device "$DG_TMP/dev/tun:/dev/tun2" \
		--device "$DG_TMP/dev/fuse:/dev/fuse2"
	run -0 probe "$CID" /dev/n2 /dev/z2 /dev/f2 /dev/r2 /dev/u2
	run -0 dg_runc exec "$CID" stat -c '%t:%T' /dev/t2 /dev/p2 /dev/tun2 /dev/fuse2
	[ "$(echo "$output" | tr '\n' ' ')" = "5:0 5:2 a:c8 a:e5 " ]
	run -0 dg --json status
	[ "$(echo "$output" | jq '.leases[0].devices | length')" = 9 ]

	# Named in device-allow (by path or numbers), the same classes go in.
	stop_daemon
	start_daemon --device-allow "$DG_TMP/dev/kmsg, 4:*, 13:64"
	run -0 dg grant --pid "$CPID" --device "$DG_TMP/dev/kmsg:/dev/kmsg" \
		--device "$DG_TMP/dev/ttyS0:/dev/ttyS0" --device "$DG_TMP/dev/event0:/dev/event0"
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/dev/console:/dev/console"
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/dev/mice:/dev/mice"
	run -0 dg_runc exec "$CID" stat -c '%t:%T' /dev/kmsg /dev/ttyS0 /dev/event0
	[ "$(echo "$output" | tr '\n' ' ')" = "1:b 4:40 d:40 " ]
	run -1 probe "$CID" /dev/console /dev/mice
	[ "${lines[0]}" = "/dev/console ENOENT" ]
	[ "${lines[1]}" = "/dev/mice ENOENT" ]
}

# A block major no driver holds here: an allowed open gives ENXIO, as a GPU's does.
free_blk_major() {
	local m
	for m in 240 241 242 243 244; do
		sed -n '/^Block devices:/,$p' /proc/devices | grep -q "^ *$m " || {
			echo "$m"
			return 0
		}
	done
	return 1
}

# blk_key_type CGROUP: the type field of the cgroup's one grant key (1 block, 2 char).
blk_key_type() {
	local id
	id=$(stat -c %i "$1")
	bpftool -j map dump pinned "$DG_PINS/dg_grants_v1" |
		jq "[.[] | select(.formatted.key.cgroup_id == $id) | .formatted.key.type] | .[0]"
}

@test "a block device: refused unless device-allow names it; the gate tells block from char" {
	container c
	M=$(free_blk_major)
	mknod "$DG_TMP/disk" b "$M" 0
	# The same numbers as char nodes, in the container (made by root) and on the host.
	mknod -m 666 "$DG_TMP/c/rootfs/cdisk" c "$M" 0
	mknod -m 666 "$DG_TMP/c/rootfs/bdisk" b "$M" 0
	run -1 probe "$CID" /cdisk /bdisk
	[ "${lines[0]}" = "/cdisk EPERM" ]
	[ "${lines[1]}" = "/bdisk EPERM" ]

	# No device-allow: refused, nothing changed.
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/disk:/dev/disk"
	[[ "$output" == *"device '$DG_TMP/disk' (b $M:0) is a block device"* ]]
	[[ "$output" == *"hint: the admin names it in devgate.conf: device-allow = $DG_TMP/disk"* ]]
	no_leases
	[ "$(grants_of "$DG_CGROOT/$CID")" = 0 ]
	[ "$(devflag)" = 0 ]
	run -1 probe "$CID" /dev/disk
	[ "$output" = "/dev/disk ENOENT" ]
	# Numbers without b: are a char device's: they do not allow the disk.
	stop_daemon
	start_daemon --device-allow "$M:0"
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/disk:/dev/disk"
	no_leases

	stop_daemon
	start_daemon --device-allow "b:$M:*"
	run -0 dg grant --pid "$CPID" --device "$DG_TMP/disk:/dev/disk"
	[[ "$output" == *"/dev/disk"*"created"* ]]
	[ "$(blk_key_type "$DG_CGROOT/$CID")" = 1 ] # BPF_DEVCG_DEV_BLOCK
	[ "$(devflag)" = 1 ]
	# ENXIO: the gate let the block open through; the char node with the same
	# numbers stays denied, and so does a block node of another minor.
	mknod -m 666 "$DG_TMP/c/rootfs/bdisk1" b "$M" 1
	run -1 probe "$CID" /dev/disk /bdisk /cdisk /bdisk1
	[ "${lines[0]}" = "/dev/disk ENXIO" ]
	[ "${lines[1]}" = "/bdisk ENXIO" ]
	[ "${lines[2]}" = "/cdisk EPERM" ]
	[ "${lines[3]}" = "/bdisk1 EPERM" ]
	run -0 dg_runc exec "$CID" stat -c '%F %t:%T %a' /dev/disk
	[ "$output" = "block special file $(printf %x "$M"):0 666" ]
	run -0 dg --json status
	[ "$(echo "$output" | jq -c '.leases[0].devices[0] | [.type, .major, .minor]')" = "[\"b\",$M,0]" ]
	run -0 dg status
	[[ "$output" == *"block device /dev/disk"* ]]
	record=$(ls "$DG_TMP/state/leases/"*.json)
	[ "$(jq -r '.devices[0].type' "$record")" = b ]

	# A restart keeps it: the record reads back as block, the key stays block.
	stop_daemon
	run -1 probe "$CID" /dev/disk /cdisk
	[ "${lines[0]}" = "/dev/disk ENXIO" ]
	start_daemon --device-allow "b:$M:*"
	[ "$(blk_key_type "$DG_CGROOT/$CID")" = 1 ]
	[ "$(grants_of "$DG_CGROOT/$CID")" = 1 ]
	run -1 probe "$CID" /dev/disk /cdisk
	[ "${lines[0]}" = "/dev/disk ENXIO" ]
	[ "${lines[1]}" = "/cdisk EPERM" ]
	run -0 dg --json status
	[ "$(echo "$output" | jq -r '.leases[0].devices[0].type')" = b ]

	run -0 dg revoke --pid "$CPID"
	[[ "$output" == *"/dev/disk"*"removed"* ]]
	run -1 probe "$CID" /dev/disk /bdisk
	[ "${lines[0]}" = "/dev/disk ENOENT" ]
	[ "${lines[1]}" = "/bdisk EPERM" ]
	[ "$(grants_of "$DG_CGROOT/$CID")" = 0 ]
	[ "$(devflag)" = 0 ]
	no_leases
}

@test "a block device allowed by path; a record without a type reads as char" {
	container c
	M=$(free_blk_major)
	mknod "$DG_TMP/disk" b "$M" 3
	mknod "$DG_TMP/other" b "$M" 4
	stop_daemon
	start_daemon --device-allow "$DG_TMP/disk, $LC"
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/other:/dev/other"
	[[ "$output" == *"(b $M:4) is a block device"* ]]
	run -0 dg grant --pid "$CPID" --device "$DG_TMP/disk:/dev/disk" --device $LC
	run -0 probe "$CID" $LC
	run -1 probe "$CID" /dev/disk
	[ "$output" = "/dev/disk ENXIO" ]
	run -0 dg revoke --pid "$CPID" --device /dev/disk

	# Records written before block devices lack the type: char.
	record=$(ls "$DG_TMP/state/leases/"*.json)
	stop_daemon
	jq 'del(.devices[0].type)' "$record" >"$record.new"
	mv "$record.new" "$record"
	start_daemon
	run -0 dg --json status
	[ "$(echo "$output" | jq -c '.leases[0].devices[0] | [.path, .type]')" = '["/dev/loop-control","c"]' ]
	run -0 probe "$CID" $LC
}

@test "reload: device-allow takes effect for the next grant; a held disk stays until revoked" {
	M=$(free_blk_major)
	mknod "$DG_TMP/disk" b "$M" 0
	printf '%s\n' "# no device-allow" >"$DG_TMP/devgate.conf"
	stop_daemon
	# The file's device-allow alone: the command line's would win over it.
	DG_DAEMON_ARGS=()
	start_daemon --config "$DG_TMP/devgate.conf"
	container c
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/disk:/dev/disk"
	no_leases

	printf '%s\n' "device-allow = b:$M:0" >"$DG_TMP/devgate.conf"
	kill -HUP "$DG_DAEMON_PID"
	wait_until 5 grep -q "SIGHUP: policy reloaded:.*1 device-allow entries" "$DG_TMP/daemon.log"
	run -0 dg grant --pid "$CPID" --device "$DG_TMP/disk:/dev/disk"
	run -1 probe "$CID" /dev/disk
	[ "$output" = "/dev/disk ENXIO" ]

	# Taken off the list: the lease keeps its disk, a new grant is refused.
	printf '%s\n' "device-allow = " >"$DG_TMP/devgate.conf"
	run -0 dg reload
	[[ "$output" == *"0 device-allow entries"* ]]
	run -1 probe "$CID" /dev/disk
	[ "$output" = "/dev/disk ENXIO" ]
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/disk:/dev/disk2"
	run -1 probe "$CID" /dev/disk2
	[ "$output" = "/dev/disk2 ENOENT" ]
	run -0 dg revoke --pid "$CPID"
	run -1 probe "$CID" /dev/disk
	[ "$output" = "/dev/disk ENOENT" ]
}
