#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# A driver reload that renumbers nvidia-uvm, seen by a rescan while devgated
# runs: the leases of live runc containers move to the new major (grants
# and /dev nodes) without a restart; the old major stays denied, a
# neighbour without a lease is denied the new one; a crash in the middle
# of the move is finished at the next start. And a devgate.conf reloaded at
# SIGHUP that root alone cannot change: refused, the policy stays.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	WATCH_PID=
}
teardown() {
	[ -n "$WATCH_PID" ] && kill "$WATCH_PID" 2>/dev/null
	dg_teardown
}

# The numbers of a node inside the container, as "MAJOR:MINOR" (decimal).
node_of() {
	local t
	t=$(dg_runc exec "$1" stat -c '%t %T' "$2") || return 1
	set -- $t
	echo "$((0x$1)):$((0x$2))"
}

# uvm_container NAME OLD NEW: a container with /old and /new, nodes of
# nvidia-uvm under either major made in its rootfs by the host.
uvm_container() {
	container "$1"
	mknod -m 666 "$DG_TMP/$1/rootfs/old" c "$2" 0
	mknod -m 666 "$DG_TMP/$1/rootfs/new" c "$3" 0
}

record_uvm() {
	jq '.majors["nvidia-uvm"]' "$DG_TMP/state/leases/$1.json"
}

@test "a reload that moves nvidia-uvm: the live lease's grants and nodes follow without a restart" {
	start_daemon
	old=$(uvm_major) new=$(free_major)
	dg watch --json >"$DG_TMP/watch.out" &
	WATCH_PID=$!
	uvm_container a "$old" "$new"
	ca=$CID pa=$CPID
	uvm_container b "$old" "$new"
	cb=$CID pb=$CPID
	cgid=$(stat -c %i "$DG_CGROOT/$ca")
	run -0 dg grant --pid "$pa" --gpu 0
	[ "$(node_of "$ca" /dev/nvidia-uvm)" = "$old:0" ]
	[ "$(record_uvm "$cgid")" = "$old" ]
	run -1 probe "$ca" /dev/nvidia-uvm /old /new
	[ "$output" = "$(printf '/dev/nvidia-uvm ENXIO\n/old ENXIO\n/new EPERM')" ]
	pid=$DG_DAEMON_PID

	reload_uvm "$new"
	t0=$(date +%s%N)
	run -0 dg rescan
	echo "# rescan with one lease refreshed: $((($(date +%s%N) - t0) / 1000000)) ms" >&3
	[ "$DG_DAEMON_PID" = "$pid" ] && kill -0 "$pid"
	# The container's node has the new major and reaches the driver; the old
	# major is denied, by a node made in the container with it too.
	[ "$(node_of "$ca" /dev/nvidia-uvm)" = "$new:0" ]
	[ "$(node_of "$ca" /dev/nvidia-uvm-tools)" = "$new:1" ]
	run -1 probe "$ca" /dev/nvidia-uvm /dev/nvidia-uvm-tools /dev/nvidia0 /new /old
	[ "$output" = "$(printf '/dev/nvidia-uvm ENXIO\n/dev/nvidia-uvm-tools ENXIO\n/dev/nvidia0 ENXIO\n/new ENXIO\n/old EPERM')" ]
	# A neighbour without a lease is denied both.
	run -1 probe "$cb" /new /old
	[ "$output" = "$(printf '/new EPERM\n/old EPERM')" ]
	# The record, the inventory, the log, the metrics and watch say so.
	[ "$(record_uvm "$cgid")" = "$new" ]
	[ "$(dg list --json | jq -r '.control_problem // ""')" = "" ]
	[ "$(dg list --json | jq -r '[.gpus[].state] | join(",")')" = "held,free" ]
	grep -q "refreshed $ca after a driver reload: nvidia-uvm $old:0 -> $new:0, nvidia-uvm-tools $old:1 -> $new:1" "$DG_TMP/daemon.log"
	dg metrics | grep -qx 'devgate_lease_refreshes_total 1'
	wait_until 5 grep -q '"type":"refreshed"' "$DG_TMP/watch.out"
	[ "$(grep '"type":"refreshed"' "$DG_TMP/watch.out" | jq -r .lease.container)" = "$ca" ]
	# The grants map holds the new numbers only.
	bpftool -j map dump pinned "$DG_PINS/dg_grants_v1" >"$DG_TMP/grants.json"
	[ "$(jq --argjson id "$cgid" --argjson m "$old" '[.[] | select(.formatted.key.cgroup_id == $id and .formatted.key.major == $m)] | length' "$DG_TMP/grants.json")" = 0 ]
	[ "$(jq --argjson id "$cgid" --argjson m "$new" '[.[] | select(.formatted.key.cgroup_id == $id and .formatted.key.major == $m)] | length' "$DG_TMP/grants.json")" = 2 ]

	# A new grant uses the new major at once.
	run -0 dg grant --pid "$pb" --gpu 1
	[ "$(node_of "$cb" /dev/nvidia-uvm)" = "$new:0" ]
	run -1 probe "$cb" /dev/nvidia-uvm /new /old /dev/nvidia1
	[ "$output" = "$(printf '/dev/nvidia-uvm ENXIO\n/new ENXIO\n/old EPERM\n/dev/nvidia1 ENXIO')" ]
	# A rescan with nothing new moves nothing.
	run -0 dg rescan
	dg metrics | grep -qx 'devgate_lease_refreshes_total 1'

	# Revoke takes everything away.
	run -0 dg revoke --pid "$pa"
	run -0 dg revoke --pid "$pb"
	run -1 dg_runc exec "$ca" stat /dev/nvidia-uvm
	run -1 dg_runc exec "$cb" stat /dev/nvidia-uvm
	run -1 probe "$ca" /new /old
	[ "$output" = "$(printf '/new EPERM\n/old EPERM')" ]
	[ "$(grant_entries)" = 0 ]
	no_leases
}

@test "the driver goes (GPUs unusable, leases kept) and comes back with another major (leases follow)" {
	start_daemon
	old=$(uvm_major) new=$(free_major)
	uvm_container a "$old" "$new"
	ca=$CID pa=$CPID
	uvm_container b "$old" "$new"
	pb=$CPID
	run -0 dg grant --pid "$pa" --gpu 0
	cp "$DG_HOST/proc/devices" "$DG_TMP/devices"

	# Unloaded: no nvidia lines. Nothing is granted; the lease and its node stay.
	grep -v nvidia "$DG_TMP/devices" >"$DG_HOST/proc/devices"
	run -0 dg rescan
	run -0 dg list --json
	[ "$(echo "$output" | jq -r .control_problem)" = "the NVIDIA driver is not loaded (/proc/devices)" ]
	[ "$(echo "$output" | jq -r '[.gpus[].state] | join(",")')" = "unusable,unusable" ]
	run ! dg grant --pid "$pb" --gpu 1
	[[ "$output" == *"not loaded"* || "$output" == *"vanished"* ]]
	[ "$(node_of "$ca" /dev/nvidia-uvm)" = "$old:0" ]
	run -1 probe "$ca" /dev/nvidia-uvm /new
	[ "$output" = "$(printf '/dev/nvidia-uvm ENXIO\n/new EPERM')" ]
	grep -q "the NVIDIA driver is not loaded" "$DG_TMP/daemon.log"

	# Back, with nvidia-uvm elsewhere: the lease follows, grants work again.
	cp "$DG_TMP/devices" "$DG_HOST/proc/devices"
	reload_uvm "$new"
	run -0 dg rescan
	[ "$(dg list --json | jq -r '[.gpus[].state] | join(",")')" = "held,free" ]
	[ "$(node_of "$ca" /dev/nvidia-uvm)" = "$new:0" ]
	run -1 probe "$ca" /dev/nvidia-uvm /dev/nvidia0 /new /old
	[ "$output" = "$(printf '/dev/nvidia-uvm ENXIO\n/dev/nvidia0 ENXIO\n/new ENXIO\n/old EPERM')" ]
	run -0 dg grant --pid "$pb" --gpu 1
	run -1 probe "$CID" /dev/nvidia-uvm /old
	[ "$output" = "$(printf '/dev/nvidia-uvm ENXIO\n/old EPERM')" ]
	run -0 dg revoke --pid "$pa"
	run -1 probe "$ca" /new /dev/nvidia0
	[ "$output" = "$(printf '/new EPERM\n/dev/nvidia0 ENOENT')" ]
}

@test "a crash in the middle of a refresh: the next start finishes it" {
	for point in refresh.grants refresh.nodes refresh.old; do
		rm -rf "$DG_HOST"
		make_host
		old=$(uvm_major) new=$(free_major)
		DEVGATE_FAULT=$point start_daemon
		uvm_container "a-${point#refresh.}" "$old" "$new"
		ca=$CID pa=$CPID
		cgid=$(stat -c %i "$DG_CGROOT/$ca")
		run -0 dg grant --pid "$pa" --gpu 0
		reload_uvm "$new"
		run ! dg rescan
		wait_until 5 sh -c "! kill -0 $DG_DAEMON_PID 2>/dev/null" ||
			fail "devgated did not die at fault point $point"
		wait "$DG_DAEMON_PID" 2>/dev/null || true
		DG_DAEMON_PID=
		# Down: the record still names the old major.
		[ "$(record_uvm "$cgid")" = "$old" ]
		start_daemon
		grep -q "reconcile: adopted lease of $ca" "$DG_TMP/daemon.log"
		[ "$(record_uvm "$cgid")" = "$new" ]
		[ "$(node_of "$ca" /dev/nvidia-uvm)" = "$new:0" ]
		run -1 probe "$ca" /dev/nvidia-uvm /dev/nvidia0 /new /old
		[ "$output" = "$(printf '/dev/nvidia-uvm ENXIO\n/dev/nvidia0 ENXIO\n/new ENXIO\n/old EPERM')" ]
		[ "$(grants_of "$DG_CGROOT/$ca")" = 4 ]
		run -0 dg revoke --pid "$pa"
		[ "$(grant_entries)" = 0 ]
		stop_daemon
	done
}

@test "a uid-mapped container: the bind-mounted nvidia-uvm is replaced by one of the new major" {
	requires runc
	start_daemon
	old=$(uvm_major) new=$(free_major)
	chmod 0711 "$DG_TMP" # the namespace's processes walk into the bundle
	CID="$DG_ID-u"
	dg_bundle "$DG_TMP/u" "$DEVGATE_BUILD/probe"
	jq "$DG_USERNS_JQ" "$DG_TMP/u/config.json" >"$DG_TMP/u/c.json"
	mv "$DG_TMP/u/c.json" "$DG_TMP/u/config.json"
	mknod -m 666 "$DG_TMP/u/rootfs/old" c "$old" 0
	mknod -m 666 "$DG_TMP/u/rootfs/new" c "$new" 0
	chown -R 100000:100000 "$DG_TMP/u/rootfs"
	CPID=$(dg_run "$CID" "$DG_TMP/u")
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	run -0 dg grant --pid "$CPID" --gpu 0
	[ "$(node_of "$CID" /dev/nvidia-uvm)" = "$old:0" ]
	run -1 probe "$CID" /dev/nvidia-uvm /new
	[ "$output" = "$(printf '/dev/nvidia-uvm ENXIO\n/new EPERM')" ]

	reload_uvm "$new"
	run -0 dg rescan
	[ "$(node_of "$CID" /dev/nvidia-uvm)" = "$new:0" ]
	run -1 probe "$CID" /dev/nvidia-uvm /dev/nvidia-uvm-tools /new /old
	[ "$output" = "$(printf '/dev/nvidia-uvm ENXIO\n/dev/nvidia-uvm-tools ENXIO\n/new ENXIO\n/old EPERM')" ]
	run -0 dg revoke --pid "$CPID"
	run -1 probe "$CID" /dev/nvidia-uvm /new
	[ "$output" = "$(printf '/dev/nvidia-uvm ENOENT\n/new EPERM')" ]
}

@test "a reload that renumbers a held GPU: its node moves to the new minor, the old one is denied" {
	start_daemon
	container a
	mknod -m 666 "$DG_TMP/a/rootfs/gpu0" c 195 0
	mknod -m 666 "$DG_TMP/a/rootfs/gpu5" c 195 5
	ca=$CID pa=$CPID
	run -0 dg grant --pid "$pa" --gpu 0
	u0=$(dg list --json | jq -r '.gpus[0].uuid')
	run -1 probe "$ca" /dev/nvidia0 /gpu5
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/gpu5 EPERM')" ]

	# The driver came back numbering GPU 0 (same UUID) as minor 5.
	sed -i 's/^Device Minor:.*/Device Minor: \t 5/' "$DG_HOST/proc/driver/nvidia/gpus/0000:18:00.0/information"
	rm -f "$DG_HOST/dev/nvidia0"
	mknod -m 666 "$DG_HOST/dev/nvidia5" c 195 5
	run -0 dg rescan --json
	[ "$(echo "$output" | jq -c .changed)" = "[\"$u0\"]" ]
	[ "$(dg list --json | jq -r '.gpus[0] | "\(.uuid) \(.minor) \(.state)"')" = "$u0 5 held" ]
	run -1 probe "$ca" /dev/nvidia5 /dev/nvidia0 /gpu0 /gpu5
	[ "$output" = "$(printf '/dev/nvidia5 ENXIO\n/dev/nvidia0 ENOENT\n/gpu0 EPERM\n/gpu5 ENXIO')" ]
	grep -q "refreshed $ca after a driver reload: nvidia5 195:5" "$DG_TMP/daemon.log"
	run -0 dg revoke --pid "$pa"
	run -1 probe "$ca" /dev/nvidia5 /gpu5
	[ "$output" = "$(printf '/dev/nvidia5 ENOENT\n/gpu5 EPERM')" ]
	[ "$(grant_entries)" = 0 ]
}

@test "SIGHUP and reload refuse a devgate.conf root alone cannot change; the policy in force stays, a FIFO blocks nothing" {
	mknod "$DG_TMP/mem" c 1 1
	mkdir -m 0755 "$DG_TMP/etc"
	conf=$DG_TMP/etc/devgate.conf
	printf 'device-allow = /dev/loop-control\n' >"$conf"
	chmod 0644 "$conf"
	start_daemon --config "$conf"
	container c

	# nobody's device-allow = /dev/mem, writable by all, behind a symlink.
	printf 'device-allow = %s\n' "$DG_TMP/mem" >"$DG_TMP/nobody.conf"
	chown 65534 "$DG_TMP/nobody.conf"
	chmod 0666 "$DG_TMP/nobody.conf"
	ln -sf "$DG_TMP/nobody.conf" "$conf"
	kill -HUP "$DG_DAEMON_PID"
	wait_until 10 grep -qF "SIGHUP: configuration refused, the policy in force stays: $conf is not trusted: the file $DG_TMP/nobody.conf is owned by uid 65534, not root" "$DG_TMP/daemon.log"
	grep -qF "SIGHUP: hint: devgate.conf must be a regular file that only root can change" "$DG_TMP/daemon.log"
	run -14 dg reload
	[[ "$output" == *"$conf is not trusted: the file $DG_TMP/nobody.conf is owned by uid 65534, not root"* ]]
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/mem:/dev/mem"
	# The policy in force stays: loop-control, not /dev/mem.
	run -0 dg grant --pid "$CPID" --device /dev/loop-control
	run -1 probe "$CID" /dev/mem
	[ "$output" = "/dev/mem ENOENT" ]

	# A FIFO in its place: never opened, so devgated serves on.
	rm "$conf"
	mkfifo -m 0644 "$conf"
	kill -HUP "$DG_DAEMON_PID"
	wait_until 10 grep -qF "SIGHUP: configuration refused, the policy in force stays: $conf is not trusted: $conf is a FIFO" "$DG_TMP/daemon.log"
	run -0 timeout 10 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" status
	run -14 timeout 10 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" reload
	[[ "$output" == *"$conf is not trusted: $conf is a FIFO, not a regular file"* ]]
	run -4 dg grant --pid "$CPID" --device "$DG_TMP/mem:/dev/mem"

	# Root's own file, as it should be: taken.
	rm "$conf"
	printf 'device-allow = %s\n' "$DG_TMP/mem" >"$conf"
	chmod 0644 "$conf"
	run -0 dg reload
	[[ "$output" == *"1 device-allow entries"* ]]
	run -0 dg grant --pid "$CPID" --device "$DG_TMP/mem:/dev/mem"
	run -1 probe "$CID" /dev/mem
	[ "$output" = "/dev/mem ENXIO" ]
}
