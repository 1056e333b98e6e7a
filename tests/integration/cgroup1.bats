#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# cgroup v1 devices: runtimes in the host's own view of a hybrid host keep
# their device policy in the v1 devices controller, which the kernel checks
# after any v2 program. A grant must open it there too, and a revoke must
# leave the runtime's list exactly as it was. runc and podman run here
# without the private cgroup2 namespace of tests/lib/runc.sh.

load helpers

setup_file() {
	export DG_V1RUN="/run/dg27v1-test.$$"
	mkdir -p "$DG_V1RUN"
	if [ "$(id -u)" = 0 ] && command -v podman >/dev/null && [ -n "$(v1_mount)" ]; then
		v1_podman_image
	fi
}

teardown_file() {
	v1_podman rm -af -t 0 >/dev/null 2>&1 || true
	rm -rf "$DG_V1RUN"
}

setup() {
	dg_setup
	requires runc cgroup1
	DG_ID="dg27v1-$DG_ID"
	DG_PINS="/sys/fs/bpf/$DG_ID"
	DG_V1=$(v1_mount)
	V1_RUNCS=()
	V1_PODS=()
	V1_DIRS=()
	V1_DOCKER=
	start_daemon
}

teardown() {
	local c d
	for c in "${V1_RUNCS[@]}"; do v1_runc delete -f "$c" >/dev/null 2>&1 || true; done
	for c in "${V1_PODS[@]}"; do v1_podman rm -f -t 0 "$c" >/dev/null 2>&1 || true; done
	[ -z "$V1_DOCKER" ] || dg_docker_stop "$V1_DOCKER"
	for d in "${V1_DIRS[@]}"; do
		# conmon's cgroup goes a moment after podman rm returns.
		wait_until 10 v1_rmdirs "$d" || echo "teardown: cgroups $d are still there" >&2
	done
	dg_teardown
}

v1_podman() {
	podman --root "$DG_V1RUN/storage" --runroot "$DG_V1RUN/runroot" --storage-driver vfs \
		--cgroup-manager cgroupfs --runtime runc --events-backend file "$@"
}

# The probe's image, with /gpu0 (195:0) and the /gpu1 and /mem of dg_bundle.
v1_podman_image() {
	local dir
	dir=$(mktemp -d)
	dg_bundle "$dir" "$DEVGATE_BUILD/probe" >/dev/null
	mknod -m 666 "$dir/rootfs/gpu0" c 195 0
	tar -C "$dir/rootfs" -c . | v1_podman import - localhost/dg27v1-probe >/dev/null
	rm -rf "$dir"
}

# Both sides through the v1 layer: the granted GPU reaches the driver, the
# neighbour stays denied; revoke denies it again and leaves the list as it was.
# v1_grant_revoke PROBE-COMMAND...
v1_grant_revoke() {
	local probe=("$@") before
	before=$(cat "$V1DIR/devices.list")
	run -1 "${probe[@]}" /gpu0 /gpu1
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]

	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 "${probe[@]}" /gpu0 /dev/nvidia0 /dev/nvidiactl /gpu1 /mem
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[2]}" = "/dev/nvidiactl ENXIO" ]
	[ "${lines[3]}" = "/gpu1 EPERM" ]
	[ "${lines[4]}" = "/mem EPERM" ]
	run -0 "${probe[@]}" /dev/null
	grep -qx 'c 195:0 rw' "$V1DIR/devices.list"
	! grep -q '^c 195:1 ' "$V1DIR/devices.list"
	[ "$(jq -r .cgroup1 "$DG_TMP"/state/leases/*.json)" = "${V1DIR#"$DG_V1"}" ]

	run -0 dg revoke --pid "$CPID"
	run -1 "${probe[@]}" /gpu0 /gpu1
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -0 "${probe[@]}" /dev/null
	[ "$(cat "$V1DIR/devices.list")" = "$before" ]
}

@test "runc in the host's view: the grant opens the v1 devices list; revoke leaves it as it was" {
	v1_container c
	v1_grant_revoke v1_probe "$CID"
}

@test "podman (cgroupfs) in the host's view: grant and revoke through v1 devices" {
	requires podman
	CID="$DG_ID-p"
	V1_PODS+=("$CID")
	V1_DIRS+=("$DG_ID-pod")
	run -0 v1_podman run -d --name "$CID" --cgroup-parent "/$DG_ID-pod" --network none \
		--pids-limit 0 --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 \
		localhost/dg27v1-probe sleep 100000 || { echo "$output" >&2; false; }
	CPID=$(v1_podman inspect "$CID" | jq -r '.[0].State.Pid')
	v1_where "$CPID"
	[[ "$V1DIR" == "$DG_V1/$DG_ID-pod/libpod-"* ]]
	v1_grant_revoke v1_podman exec "$CID" probe
}

@test "Docker 20.10 (cgroupfs) in the host's view: grant and revoke through v1 devices" {
	command -v dockerd >/dev/null || missing "needs dockerd (Debian's docker.io)"
	V1_DOCKER="dg27v1-$BATS_TEST_NUMBER-${DG_TMP##*.}"
	dg_docker_start "$V1_DOCKER"
	dg_bundle "$DG_TMP/dimg" "$DEVGATE_BUILD/probe" >/dev/null
	mknod -m 666 "$DG_TMP/dimg/rootfs/gpu0" c 195 0
	dg_docker_image dg27v1-probe "$DG_TMP/dimg/rootfs"
	CID=$(dg_docker run -d --network none dg27v1-probe sleep 100000)
	CPID=$(dg_docker inspect -f '{{.State.Pid}}' "$CID")
	v1_where "$CPID"
	[ "$V1DIR" = "$DG_V1$DG_DOCKER_CGPARENT/$CID" ]
	v1_grant_revoke dg_docker exec "$CID" probe
}

@test "a container the runtime allows everything (a *:* rwm) keeps it after the revoke" {
	v1_container priv '.linux.resources.devices = [{"allow": true, "access": "rwm"}]'
	[ "$(cat "$V1DIR/devices.list")" = "a *:* rwm" ]
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 jq -r '.cgroup1_added | length' "$DG_TMP"/state/leases/*.json
	[ "$output" = 0 ]
	run -0 dg revoke --pid "$CPID"
	[ "$(cat "$V1DIR/devices.list")" = "a *:* rwm" ]
	run -1 v1_probe "$CID" /gpu0 /gpu1
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 ENXIO" ]
}

@test "a device the runtime allowed itself stays allowed after the revoke" {
	v1_container own '.linux.resources.devices += [{"allow": true, "type": "c", "major": 195,
		"minor": 0, "access": "rw"}]'
	before=$(cat "$V1DIR/devices.list")
	grep -qx 'c 195:0 rw' "$V1DIR/devices.list"
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 dg revoke --pid "$CPID"
	[ "$(cat "$V1DIR/devices.list")" = "$before" ]
	run -1 v1_probe "$CID" /gpu0 /gpu1
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
}

@test "sub-cgroups holding the container's processes get the rule too, and lose it at revoke" {
	v1_container sub
	mkdir "$V1DIR/inner"
	before=$(cat "$V1DIR/inner/devices.list")
	# A process of the container in the sub-cgroup, probing from there.
	inner_probe() {
		sh -c 'echo $$ > "$1/inner/cgroup.procs" && exec nsenter -t "$2" -m -r /bin/probe /gpu0 /gpu1' \
			_ "$V1DIR" "$CPID"
	}
	run -0 dg grant --pid "$CPID" --gpu 0
	grep -qx 'c 195:0 rw' "$V1DIR/inner/devices.list"
	run -1 inner_probe
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -0 dg revoke --pid "$CPID"
	run -1 inner_probe
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	[ "$(cat "$V1DIR/inner/devices.list")" = "$before" ]
}

@test "devgated restarted: the grant holds, and rules lost meanwhile come back" {
	v1_container r
	before=$(cat "$V1DIR/devices.list")
	run -0 dg grant --pid "$CPID" --gpu 0
	stop_daemon TERM
	run -1 v1_probe "$CID" /gpu0
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	# Lost while devgated was down: the kernel's list is the truth at start.
	echo 'c 195:0 rw' >"$V1DIR/devices.deny"
	run -1 v1_probe "$CID" /gpu0
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	start_daemon
	grep -qx 'c 195:0 rw' "$V1DIR/devices.list"
	run -1 v1_probe "$CID" /gpu0 /gpu1
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -0 dg revoke --pid "$CPID"
	[ "$(cat "$V1DIR/devices.list")" = "$before" ]
}

# The runtime rewrote its list as runc 1.0 and older did on every update:
# deny all, then allow its own rules again.
v1_rewrite() {
	local rule
	echo a >"$V1DIR/devices.deny"
	while read -r rule; do echo "$rule" >"$V1DIR/devices.allow"; done <<<"$1"
}

v1_gpu0_open() {
	[ "$(v1_probe "$CID" /gpu0)" = "/gpu0 ENXIO" ]
}

@test "runc update keeps the grant; a rewritten list is healed within the heal check" {
	v1_container u
	before=$(cat "$V1DIR/devices.list")
	run -0 dg grant --pid "$CPID" --gpu 0
	# runc 1.1 leaves devices alone on update (SkipDevices): nothing to heal.
	run -0 v1_runc update --pids-limit 512 "$CID"
	run -1 v1_probe "$CID" /gpu0 /gpu1
	[ "${lines[0]}" = "/gpu0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]

	v1_rewrite "$before"
	wait_until 10 v1_gpu0_open
	grep -q "the v1 devices list of $CID (/$CID) lost" "$DG_TMP/daemon.log"
	run -1 v1_probe "$CID" /gpu1 /mem
	[ "${lines[0]}" = "/gpu1 EPERM" ]
	[ "${lines[1]}" = "/mem EPERM" ]
	run -0 dg revoke --pid "$CPID"
	[ "$(cat "$V1DIR/devices.list")" = "$before" ]
}

@test "a v1 parent that denies the GPU: the grant fails naming the cgroup and leaves nothing" {
	local parent="$DG_ID-deny" rule
	V1_DIRS+=("$parent")
	mkdir "$DG_V1/$parent"
	# Allows what runc allows its containers, and not the GPU.
	echo a >"$DG_V1/$parent/devices.deny"
	for rule in 'b *:* m' 'c *:* m' 'c 1:3 rwm' 'c 1:5 rwm' 'c 1:7 rwm' 'c 1:8 rwm' \
		'c 1:9 rwm' 'c 5:0 rwm' 'c 5:1 rwm' 'c 5:2 rwm' 'c 10:200 rwm' 'c 136:* rwm'; do
		echo "$rule" >"$DG_V1/$parent/devices.allow"
	done
	v1_container d ".linux.cgroupsPath = \"/$parent/ctr\""
	DG_CGROUPS+=("$DG_CGROOT/$parent")
	[ "$V1DIR" = "$DG_V1/$parent/ctr" ]
	before=$(cat "$V1DIR/devices.list")
	progs=$(cg_progs "$DG_CGROOT/$parent/ctr")

	run -11 dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"the v1 devices cgroup /$parent/ctr refused 'c 195:"* ]]
	[[ "$output" == *"a parent of /$parent/ctr"* ]]
	# Nothing left behind: no lease, no grant, no node, the list and programs as before.
	no_leases
	[ "$(grants_of "$DG_CGROOT/$parent/ctr")" = 0 ]
	[ "$(cat "$V1DIR/devices.list")" = "$before" ]
	[ "$(cg_progs "$DG_CGROOT/$parent/ctr")" = "$progs" ]
	run -1 v1_runc exec "$CID" test -e /dev/nvidia0
	run -1 v1_probe "$CID" /gpu0
	[ "${lines[0]}" = "/gpu0 EPERM" ]
}

@test "doctor tells which mechanism each leased container gets, and whether v1 allows its GPUs" {
	stop_daemon TERM
	# No heal: the list stays short until doctor has looked.
	start_daemon --heal-ms 0 --recheck-ms 3600000
	plain_container v2only
	run -0 dg grant --pid "$CPID" --gpu 1
	v1_container doc
	run -0 dg grant --pid "$CPID" --gpu 0
	mech() { echo "$output" | jq -r '.checks[] | select(.name == "mechanism") | .'"$1"; }
	run -0 dg doctor --host-root "$DG_HOST" --pin-root "$DG_PINS" --json
	[ "$(mech status)" = ok ]
	[[ "$(mech message)" == *"/$DG_ID-v2only ($DG_ID-v2only): v2 BPF gate"* ]]
	[[ "$(mech message)" == *"/$CID ($CID): v2 BPF gate and v1 devices /$CID, which allows its GPUs"* ]]
	echo 'c 195:0 rw' >"$V1DIR/devices.deny"
	run -1 dg doctor --host-root "$DG_HOST" --pin-root "$DG_PINS" --json
	[ "$(mech status)" = fail ]
	[[ "$(mech message)" == *"v1 devices /$CID, whose list does not allow /dev/nvidia0 (c 195:0)"* ]]
	[[ "$(mech message)" != *"$DG_ID-v2only ($DG_ID-v2only): v2 BPF gate and"* ]]
	[[ "$(mech hint)" == *"heal check"* ]]
}
