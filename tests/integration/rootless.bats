#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Containers in a user namespace of their own: a runc container with uid
# mappings, run by root, and a real rootless one (runc --rootless as an
# unprivileged user, in a cgroup delegated to that user). Their /dev is a
# tmpfs mounted in that namespace: root cannot make a node there at all
# (EOVERFLOW: it owns nothing the namespace maps), and a node made there
# could not be opened (nodev). devgate binds nodes of its own in instead.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	# Processes of the namespace (host uid 100000, 4321) walk into the bundles.
	chmod 0711 "$DG_TMP"
	start_daemon
}
teardown() {
	[ -n "${RL_CID:-}" ] && rl_runc delete -f "$RL_CID" >/dev/null 2>&1
	dg_teardown
}

RL_UID=4321 # the rootless user; no passwd entry needed

LC=/dev/loop-control

# userns_container NAME: a runc container whose ids 0-65535 are 100000-165535
# on the host; sets CPID and CID.
userns_container() {
	requires runc
	CID="$DG_ID-$1"
	dg_bundle "$DG_TMP/$1" "$DEVGATE_BUILD/probe"
	jq "$DG_USERNS_JQ" "$DG_TMP/$1/config.json" >"$DG_TMP/$1/c.json"
	mv "$DG_TMP/$1/c.json" "$DG_TMP/$1/config.json"
	chown -R 100000:100000 "$DG_TMP/$1/rootfs"
	CPID=$(dg_run "$CID" "$DG_TMP/$1")
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	[ -n "$CPID" ] && [ "$CPID" != null ]
}

# rl_runc ARGS...: runc as RL_UID, started from the delegated cgroup so that
# it may move its processes into the container's cgroup below it.
rl_runc() {
	dg_in_ns sh -c 'echo $$ >"/sys/fs/cgroup/$1/cgroup.procs" && shift &&
		exec setpriv --reuid '"$RL_UID"' --regid '"$RL_UID"' --clear-groups \
		env HOME="$0" XDG_RUNTIME_DIR="$0" runc --root "$0/runc" "$@"' \
		"$DG_TMP/rl" "$RL_DELEG" "$@"
}

# rootless_container: the real thing; sets CPID, CID and RL_CID.
rootless_container() {
	requires runc
	local b="$DG_TMP/rl/bundle"
	RL_DELEG="$DG_ID-deleg"
	CID=ctr
	RL_CID=$DG_ID-rl
	mkdir -p "$DG_TMP/rl"
	dg_bundle "$b" "$DEVGATE_BUILD/probe" >/dev/null
	(cd "$b" && rm config.json && runc spec --rootless)
	jq --arg cg "/$RL_DELEG/$CID" --argjson id "$RL_UID" \
		'.process.terminal = false | .process.args = ["sleep", "100000"] |
		.root.readonly = false | .linux.cgroupsPath = $cg |
		.linux.uidMappings[0].hostID = $id | .linux.gidMappings[0].hostID = $id' \
		"$b/config.json" >"$b/c.json"
	mv "$b/c.json" "$b/config.json"
	chown -R "$RL_UID:$RL_UID" "$DG_TMP/rl"
	# Delegation: the user owns its cgroup and may make and fill cgroups below.
	mkdir "$DG_CGROOT/$RL_DELEG"
	DG_CGROUPS+=("$DG_CGROOT/$RL_DELEG")
	chown -R "$RL_UID:$RL_UID" "$DG_CGROOT/$RL_DELEG"
	rl_runc run -d -b "$b" "$RL_CID" </dev/null >"$DG_TMP/rl/run.log" 2>&1 ||
		fail "rootless runc: $(cat "$DG_TMP/rl/run.log")"
	CPID=$(rl_runc state "$RL_CID" | jq -r .pid)
	[ -n "$CPID" ] && [ "$CPID" != null ]
	[ "$(stat -c %u "/proc/$CPID")" = "$RL_UID" ]
	grep -q "^0::/$RL_DELEG/$CID\$" "/proc/$CPID/cgroup"
}

rl_probe() {
	rl_runc exec "$RL_CID" probe "$@"
}

# node_mounts PID: the nodes under the container's /dev that are mounts.
node_mounts() {
	awk '$5 ~ "^/dev/" { print $5 }' "/proc/$1/mountinfo" | grep -E 'nvidia|loop' | sort | tr '\n' ' '
}

@test "a user-namespaced container: GPU and device nodes are bind mounts that open; revoke unmounts" {
	# /dev/loop-control is outside the devices safe in any container: allowed here.
	stop_daemon
	start_daemon --device-allow "$LC"
	userns_container u
	run -1 probe "$CID" /gpu1 $LC
	[ "${lines[0]}" = "/gpu1 EPERM" ]
	[ "${lines[1]}" = "$LC ENOENT" ]
	run -0 dg grant --pid "$CPID" --gpu 0 --device $LC
	[[ "$output" == *"/dev/nvidia0"*"created"* ]]
	# ENXIO: the gate let the open through to the driver (none here); the
	# neighbour stays denied by runc's own program.
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidiactl /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidiactl ENXIO" ]
	[ "${lines[2]}" = "/gpu1 EPERM" ]
	run -0 probe "$CID" $LC
	[ "$(node_mounts "$CPID")" = "$LC /dev/nvidia-uvm /dev/nvidia-uvm-tools /dev/nvidia0 /dev/nvidiactl " ]
	run -0 dg_runc exec "$CID" stat -c '%F %t:%T %a' /dev/nvidia0
	[ "$output" = "character special file c3:0 666" ]

	run -0 dg revoke --pid "$CPID" --gpu 0
	[[ "$output" == *"/dev/nvidia0"*"removed"* ]]
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENOENT" ]
	[ "$(node_mounts "$CPID")" = "$LC " ]
	run -0 dg revoke --pid "$CPID"
	[ "$(node_mounts "$CPID")" = "" ]
	run -1 probe "$CID" $LC
	[ "$output" = "$LC ENOENT" ]
	# Nothing is left behind in its /dev: no mount point files either.
	run -0 dg_runc exec "$CID" ls /dev
	[[ "$output" != *nvidia* ]]
}

@test "a rootless runc container (unprivileged user, delegated cgroup): grant, restart, revoke" {
	make_host -n 3
	stop_daemon
	start_daemon
	rootless_container
	# Rootless runc attaches no device program: before devgate, nothing is denied.
	[ -z "$(cg_progs "$DG_CGROOT/$RL_DELEG/$CID")" ]
	run -0 dg grant --pid "$CPID" --gpu 1
	run -1 rl_probe /dev/nvidia1 /gpu1 /dev/nvidia0
	[ "${lines[0]}" = "/dev/nvidia1 ENXIO" ]
	[ "${lines[2]}" = "/dev/nvidia0 ENOENT" ]
	# /gpu1 (195:1) was made in the rootfs before start: the same GPU, granted.
	[ "${lines[1]}" = "/gpu1 ENXIO" ]
	mknod -m 666 "$DG_TMP/rl/bundle/rootfs/gpu2" c 195 2
	run -1 rl_probe /gpu2
	[ "$output" = "/gpu2 EPERM" ]
	run -0 dg --json status
	[ "$(echo "$output" | jq -r '.leases[0].cgroup')" = "/$RL_DELEG/$CID" ]

	# devgated down and up: the lease, its gate and its node stay.
	stop_daemon
	start_daemon
	run -1 rl_probe /dev/nvidia1 /gpu2
	[ "${lines[0]}" = "/dev/nvidia1 ENXIO" ]
	[ "${lines[1]}" = "/gpu2 EPERM" ]

	# Revoked: the node goes, and the cgroup is as rootless runc left it, with
	# no device program (so /gpu1, made by root in the rootfs, opens again).
	run -0 dg revoke --pid "$CPID"
	run -1 rl_probe /dev/nvidia1
	[ "$output" = "/dev/nvidia1 ENOENT" ]
	[ "$(node_mounts "$CPID")" = "" ]
	[ -z "$(cg_progs "$DG_CGROOT/$RL_DELEG/$CID")" ]
}

@test "a user-namespaced container: an allowed block device is a bind mount that opens" {
	local m
	for m in 240 241 242 243 244; do
		sed -n '/^Block devices:/,$p' /proc/devices | grep -q "^ *$m " || break
	done
	mknod "$DG_TMP/disk" b "$m" 0
	stop_daemon
	start_daemon --device-allow "b:$m:0"
	userns_container u
	run -0 dg grant --pid "$CPID" --device "$DG_TMP/disk:/dev/loopdisk"
	[[ "$output" == *"/dev/loopdisk"*"created"* ]]
	# ENXIO: the gate let the open through to the block layer (no driver).
	run -1 probe "$CID" /dev/loopdisk
	[ "$output" = "/dev/loopdisk ENXIO" ]
	[ "$(node_mounts "$CPID")" = "/dev/loopdisk " ]
	run -0 dg_runc exec "$CID" stat -c '%F' /dev/loopdisk
	[ "$output" = "block special file" ]
	run -0 dg revoke --pid "$CPID"
	[ "$(node_mounts "$CPID")" = "" ]
	run -1 probe "$CID" /dev/loopdisk
	[ "$output" = "/dev/loopdisk ENOENT" ]
}
