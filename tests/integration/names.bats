#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# grant/revoke --container NAME: devgated finds the container in Docker's,
# podman's, LXD's and runc's own state (a private dockerd and LXD started
# here), proves the PID and cgroup from the kernel, and labels the lease
# with the runtime's name. All runtimes run in the file's private mount
# namespace (cgroup2 on /sys/fs/cgroup), where their device policy is a
# cgroup v2 BPF program.

load helpers

# Names of this run: containers' cgroups (LXD's lxc.payload.NAME) are
# global. setup_file exports it to the tests (each runs in its own process).
NM=${NM:-${DEVGATE_TEST_PREFIX:-dgnm}$$}

setup_file() {
	export NM
	dg_podman_setup_file
	[ "$(id -u)" = 0 ] && [ -d "$DG_NSDIR" ] || return 0
	export DG_DOCKER_NS="$DG_NSDIR/mnt" DG_LXD_NS="$DG_NSDIR/mnt"
	local root
	root=$(mktemp -d)
	dg_bundle "$root" "$DEVGATE_BUILD/probe" >/dev/null
	if command -v dockerd >/dev/null; then
		dg_docker_start "$NM" && dg_docker_image "$NM-img" "$root/rootfs"
	fi
	if command -v lxd >/dev/null; then
		dg_lxd_start "$NM" && dg_lxd_image "$NM-img" "$root/rootfs"
	fi
	rm -rf "$root"
}

teardown_file() {
	dg_docker_stop "$NM"
	dg_lxd_stop "$NM"
	dg_podman_teardown_file
}

setup() {
	dg_setup
	dg_docker_paths "$NM"
	dg_lxd_paths "$NM"
	DG_DOCKERS=()
	DG_RUNCS=()
	DG_CRIS=()
	DG_HOSTRUNCS=()
	FAKE_PIDS=()
}

teardown() {
	local c
	for c in "${DG_DOCKERS[@]}"; do dg_docker rm -f "$c" >/dev/null 2>&1 || true; done
	for c in "${DG_RUNCS[@]}"; do dg_in_ns runc delete -f "$c" >/dev/null 2>&1 || true; done
	for c in "${DG_HOSTRUNCS[@]}"; do runc delete -f "$c" >/dev/null 2>&1 || true; done
	# runc made its containers' cgroups below them in every v1 controller.
	for c in "${DG_V1DIRS[@]}"; do wait_until 10 v1_rmdirs "${c##*/}" || true; done
	[ -z "${FAKE_PID:-}" ] || kill "$FAKE_PID" 2>/dev/null || true
	for c in "${FAKE_PIDS[@]}"; do kill "$c" 2>/dev/null || true; done
	for c in "${DG_CRIS[@]}"; do
		dg_in_ns runc --root "$DG_TMP/cri" delete -f "$c" >/dev/null 2>&1 || true
	done
	dg_teardown
}

# names_daemon: devgated that looks names up in this file's runtimes only.
names_daemon() {
	start_daemon --docker-socket "$DG_DOCKER_SOCK" --lxd-socket "$DG_LXD_SOCK" \
		--podman-storage "$DG_NSDIR/storage" --runc-root /run/runc \
		--lxc-path "$DG_TMP/lxc" --cri-runc-root "$DG_TMP/cri" "$@"
}

# cri_ct ID POD CONTAINER JQ: a runc container under the CRI root as
# containerd or CRI-O leaves it: in a kubepods-like cgroup, its bundle's
# annotations edited by JQ (with $ns, $pod and $ctr). Sets CRIPID.
cri_ct() {
	requires runc
	local id=$1 pod=$2 ctr=$3 filter=$4
	DG_CRIS+=("$id")
	DG_CGROUPS+=("$DG_CGROOT/$NM-kubepods")
	dg_bundle "$DG_TMP/$id" "$DEVGATE_BUILD/probe"
	jq --arg ns "$NM" --arg pod "$pod" --arg ctr "$ctr" \
		--arg cg "/$NM-kubepods/burstable/pod$NM-$pod/$id" \
		".linux.cgroupsPath = \$cg | $filter" "$DG_TMP/$id/config.json" >"$DG_TMP/$id/c.json"
	mv "$DG_TMP/$id/c.json" "$DG_TMP/$id/config.json"
	dg_in_ns runc --root "$DG_TMP/cri" run -d -b "$DG_TMP/$id" "$id" </dev/null \
		>"$DG_TMP/$id.log" 2>&1 || fail "runc run: $(cat "$DG_TMP/$id.log")"
	CRIPID=$(dg_in_ns runc --root "$DG_TMP/cri" state "$id" | jq .pid)
}

# host_runc_ct ID [JQ]: a runc container in the host's own view of the
# hybrid layout, where runc keeps its device policy in v1 devices.
host_runc_ct() {
	requires runc cgroup1
	DG_HOSTRUNCS+=("$1")
	DG_CGROUPS+=("$DG_CGROOT/$1")
	dg_bundle "$DG_TMP/$1" "$DEVGATE_BUILD/probe"
	mknod -m 666 "$DG_TMP/$1/rootfs/gpu0" c 195 0
	jq "${2:-.}" "$DG_TMP/$1/config.json" >"$DG_TMP/$1/c.json"
	mv "$DG_TMP/$1/c.json" "$DG_TMP/$1/config.json"
	runc run -d -b "$DG_TMP/$1" "$1" </dev/null >"$DG_TMP/$1.log" 2>&1 ||
		fail "runc run: $(cat "$DG_TMP/$1.log")"
}

# The doctor --containers entry of NAME in the last JSON output: FIELD.
found() {
	echo "$output" | jq -r --arg n "$1" ".containers[] | select(.name == \$n) | .$2"
}

cri_probe() {
	local id=$1
	shift
	dg_in_ns runc --root "$DG_TMP/cri" exec "$id" probe "$@"
}

needs_docker() {
	command -v dockerd >/dev/null || missing "needs dockerd (docker.io)"
	dg_docker version >/dev/null 2>&1 || fail "the file's dockerd is not running"
}

# docker_ct NAME: a running Docker container; sets DPID (its init) and DID.
docker_ct() {
	DG_DOCKERS+=("$1")
	DID=$(dg_docker run -d --name "$1" --network none "$NM-img" sleep 100000)
	DPID=$(dg_docker inspect -f '{{.State.Pid}}' "$1")
	[ "$DPID" -gt 0 ]
}

# runc_ct ID: a runc container in runc's default root (/run/runc, podman's too).
runc_ct() {
	requires runc
	DG_RUNCS+=("$1")
	dg_bundle "$DG_TMP/$1" "$DEVGATE_BUILD/probe"
	dg_in_ns runc run -d -b "$DG_TMP/$1" "$1" </dev/null >"$DG_TMP/$1.log" 2>&1 ||
		fail "runc run: $(cat "$DG_TMP/$1.log")"
}

no_lease() { [ "$(dg status --json | jq '.leases | length')" = 0 ]; }

@test "docker: grant by name reaches the driver, the neighbour stays denied; status, list and metrics say docker; revoke by name" {
	needs_docker
	names_daemon
	docker_ct "$NM-web"
	run -0 dg grant --container "$NM-web" --gpu 0
	[[ "$output" == "granted GPU 0 ("*") to $NM-web (cgroup /$NM-docker/$DID, PID $DPID)"* ]]
	run -1 dg_docker exec "$NM-web" probe /dev/nvidia0 /gpu1 /mem
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "${lines[2]}" = "/mem EPERM" ]
	run -0 dg status
	[[ "${lines[1]}" == "$NM-web"*"docker"*"/$NM-docker/$DID"*"GPU 0"* ]]
	[ "$(dg status --json | jq -r '.leases[0].runtime')" = docker ]
	run -0 dg list --json
	[ "$(echo "$output" | jq -r '.gpus[0].holders[0].runtime')" = docker ]
	run -0 dg list
	[[ "$output" == *"docker:$NM-web"* ]]
	run -0 dg metrics
	[[ "$output" == *"devgate_gpu_seconds_total{container=\"$NM-web\",cgroup=\"/$NM-docker/$DID\",gpu=\"GPU-"*"\",runtime=\"docker\"}"* ]]
	run -0 dg revoke --container "$NM-web"
	no_lease
	run -1 dg_docker exec "$NM-web" probe /gpu1
	[ "${lines[0]}" = "/gpu1 EPERM" ]
}

@test "docker: grant by short ID labels the lease with the name; extend by short ID, revoke by full ID" {
	needs_docker
	names_daemon
	docker_ct "$NM-short"
	run -0 dg grant --container "${DID:0:12}" --gpu 1 --ttl 1h
	[[ "$output" == "granted GPU 1 ("*") to $NM-short (cgroup /$NM-docker/$DID,"* ]]
	run -1 dg_docker exec "$NM-short" probe /dev/nvidia1 /gpu1
	[ "${lines[0]}" = "/dev/nvidia1 ENXIO" ]
	run -0 dg extend --container "${DID:0:12}" --ttl 2h
	[ "$(dg status --json | jq '.leases[0].expires_in > 3700')" = true ]
	run -0 dg revoke --container "$DID"
	no_lease
}

@test "docker: a renamed container is found by its new name; the lease keeps the name it was granted by" {
	needs_docker
	names_daemon
	docker_ct "$NM-old"
	run -0 dg grant --container "$NM-old" --gpu 0
	dg_docker rename "$NM-old" "$NM-new"
	DG_DOCKERS+=("$NM-new")
	run -0 dg revoke --container "$NM-new" --gpu 0
	no_lease
	run -1 dg_docker exec "$NM-new" probe /gpu1
	run -0 dg grant --container "$NM-new" --gpu 0
	[ "$(dg status --json | jq -r '.leases[0].container')" = "$NM-new" ]
	run -5 dg grant --container "$NM-old" --gpu 1
	[ "${lines[0]}" = "devgatectl: no container is named '$NM-old'" ]
}

@test "docker: a stopped container is refused and nothing changes" {
	needs_docker
	names_daemon
	docker_ct "$NM-stop"
	dg_docker stop -t 0 "$NM-stop" >/dev/null
	run -5 dg grant --container "$NM-stop" --gpu 0
	[[ "${lines[0]}" == "devgatectl: docker container '$NM-stop' (ID ${DID:0:12}) is not running"* ]]
	no_lease
	[ -z "$(ls "$DG_TMP/state/leases" 2>/dev/null)" ]
}

@test "an unknown name: the error lists what was searched; nothing changes" {
	needs_docker
	names_daemon
	run -5 dg grant --container "$NM-nosuch" --gpu 0
	[ "${lines[0]}" = "devgatectl: no container is named '$NM-nosuch'" ]
	[[ "${lines[1]}" == "hint: searched docker $DG_DOCKER_SOCK, podman $DG_NSDIR/storage, lxd $DG_LXD_SOCK, lxc $DG_TMP/lxc, cri $DG_TMP/cri, runc /run/runc"* ]]
	run -5 dg revoke --container "$NM-nosuch"
	[ "${lines[0]}" = "devgatectl: no container is labelled '$NM-nosuch'" ]
	[[ "${lines[1]}" == *"no runtime has that name either: searched docker $DG_DOCKER_SOCK"* ]]
	run -0 dg revoke --container "$NM-nosuch" --missing-ok
	no_lease
	run -2 dg grant --container "$NM-nosuch" --runtime nosuch --gpu 0
	[ "${lines[0]}" = "devgatectl: unknown runtime 'nosuch'" ]
}

@test "the same name in Docker and runc is ambiguous until --runtime says which" {
	needs_docker
	names_daemon
	docker_ct "$NM-twin"
	runc_ct "$NM-twin"
	run -2 dg grant --container "$NM-twin" --gpu 0
	[ "${lines[0]}" = "devgatectl: '$NM-twin' names 2 containers: docker (ID ${DID:0:12}), runc (ID $NM-twin)" ]
	[ "${lines[1]}" = "hint: say which: --runtime docker (or name it by --pid)" ]
	no_lease
	run -0 dg grant --container "$NM-twin" --runtime runc --gpu 0
	[[ "$output" == *"to $NM-twin (cgroup /$NM-twin,"* ]]
	run -1 dg_in_ns runc exec "$NM-twin" probe /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "$(dg status --json | jq -r '.leases[0].runtime')" = runc ]
	run -0 dg revoke --container "$NM-twin" --runtime runc
	no_lease
}

@test "podman: grant and revoke by name and by ID" {
	requires podman
	names_daemon
	id=$(dg_podman run -d ${DG_PODMAN_RUN/--rm/} --name "$NM-pod" localhost/devgate-test sleep 100000)
	run -0 dg grant --container "$NM-pod" --gpu 0
	[[ "$output" == *"to $NM-pod (cgroup "*"$id"* ]]
	run -1 dg_podman exec "$NM-pod" probe /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "$(dg status --json | jq -r '.leases[0].runtime')" = podman ]
	run -0 dg revoke --container "$id"
	no_lease
	dg_podman rm -f "$NM-pod" >/dev/null
}

@test "LXD: grant and revoke by name" {
	command -v lxd >/dev/null || missing "needs lxd"
	names_daemon
	dg_lxd init "$NM-img" "$NM-lxd" -c security.privileged=true >/dev/null 2>&1
	dg_lxd start "$NM-lxd"
	run -0 dg grant --container "$NM-lxd" --gpu 0
	[[ "$output" == *"to $NM-lxd (cgroup /lxc.payload.$NM-lxd,"* ]]
	run -1 dg_lxd exec "$NM-lxd" -- probe /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "$(dg status --json | jq -r '.leases[0].runtime')" = lxd ]
	run -0 dg revoke --container "$NM-lxd"
	no_lease
	dg_lxd delete -f "$NM-lxd"
}

@test "a label given with --pid works as before, and is not looked up in runtimes" {
	container c
	names_daemon
	run -0 dg grant --pid "$CPID" --container my-label --gpu 0
	[ "$(dg status --json | jq -r '.leases[0].runtime')" = null ]
	run -0 dg revoke --container my-label
	no_lease
	run -2 dg grant --pid "$CPID" --runtime docker --gpu 0
}

@test "LXC: grant by name (from LXC's command socket) reaches the driver, the neighbour stays denied; status says lxc; revoke by name; a stopped one is refused" {
	names_daemon
	lxc_container web
	run -0 dg grant --container "$CID" --gpu 0
	[[ "$output" == "granted GPU 0 ("*") to $CID (cgroup /lxc.payload.$CID, PID $CPID)"* ]]
	run -1 lxc_probe "$CID" /dev/nvidia0 /gpu1 /mem
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "${lines[2]}" = "/mem EPERM" ]
	[ "$(dg status --json | jq -r '.leases[0].runtime')" = lxc ]
	run -0 dg list
	[[ "$output" == *"lxc:$CID"* ]]
	run -0 dg revoke --container "$CID"
	no_lease
	run -1 lxc_probe "$CID" /gpu0
	[ "${lines[0]}" = "/gpu0 EPERM" ]
	dg_lxc lxc-stop -n "$CID" -k
	run -5 dg grant --container "$CID" --gpu 0
	[ "${lines[0]}" = "devgatectl: lxc container '$CID' (ID ${CID:0:12}) is not running: no LXC monitor answers on @$DG_TMP/lxc/$CID/command in devgated's network namespace (it is stopped, or its monitor runs in another one)" ]
	no_lease
}

@test "CRI: NAMESPACE/POD/CONTAINER (CRI-O's and containerd's annotations) in kubepods cgroups; the pod's sandbox is not a match; status and metrics say cri; revoke by name and by ID" {
	names_daemon
	cri_ct "$NM-sandbox" web-0 POD \
		'.annotations = {"io.kubernetes.pod.namespace": $ns, "io.kubernetes.pod.name": $pod, "io.kubernetes.container.name": $ctr}'
	cri_ct "$NM-app" web-0 app \
		'.annotations = {"io.kubernetes.pod.namespace": $ns, "io.kubernetes.pod.name": $pod, "io.kubernetes.container.name": $ctr}'
	APP=$CRIPID
	cri_ct "$NM-pause" db-0 "" \
		'.annotations = {"io.kubernetes.cri.container-type": "sandbox", "io.kubernetes.cri.sandbox-namespace": $ns, "io.kubernetes.cri.sandbox-name": $pod}'
	cri_ct "$NM-db" db-0 db \
		'.annotations = {"io.kubernetes.cri.container-type": "container", "io.kubernetes.cri.sandbox-namespace": $ns, "io.kubernetes.cri.sandbox-name": $pod, "io.kubernetes.cri.container-name": $ctr}'
	run -0 dg grant --container "$NM/web-0/app" --gpu 0
	[[ "$output" == "granted GPU 0 ("*") to $NM/web-0/app (cgroup /$NM-kubepods/burstable/pod$NM-web-0/$NM-app, PID $APP)"* ]]
	run -1 cri_probe "$NM-app" /dev/nvidia0 /gpu1 /mem
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	[ "${lines[2]}" = "/mem EPERM" ]
	run -1 cri_probe "$NM-sandbox" /gpu1
	[ "${lines[0]}" = "/gpu1 EPERM" ]
	[ "$(dg status --json | jq -r '.leases[0].runtime')" = cri ]
	run -0 dg metrics
	[[ "$output" == *"devgate_gpu_seconds_total{container=\"$NM/web-0/app\","*"runtime=\"cri\"}"* ]]
	run -0 dg grant --container "$NM-db" --gpu 1
	[[ "$output" == *" to $NM/db-0/db (cgroup /$NM-kubepods/burstable/pod$NM-db-0/$NM-db,"* ]]
	run -0 dg revoke --container "$NM/web-0/app"
	run -0 dg revoke --container "$NM/db-0/db"
	no_lease
	run -5 dg grant --container "$NM/web-0/POD" --gpu 0
	[ "${lines[0]}" = "devgatectl: no container is named '$NM/web-0/POD'" ]
	run -5 dg grant --container "$NM/web-0" --gpu 0
	[ "${lines[0]}" = "devgatectl: '$NM/web-0' is not a container name" ]
	no_lease
}

@test "move by runtime names: the destination gets the GPU and its runtime's name, the source loses it; a name no runtime has is refused and nothing moves" {
	names_daemon
	runc_ct "$NM-from"
	runc_ct "$NM-to"
	run -0 dg grant --container "$NM-from" --gpu 1
	run -0 dg move --gpu 1 --from "$NM-from" --to "$NM-to"
	[[ "${lines[0]}" == "moved GPU 1 ("*") from $NM-from to $NM-to (cgroup /$NM-to, PID "* ]]
	run -1 dg_in_ns runc exec "$NM-to" probe /gpu1 /mem
	[ "${lines[0]}" = "/gpu1 ENXIO" ]
	[ "${lines[1]}" = "/mem EPERM" ]
	run -1 dg_in_ns runc exec "$NM-from" probe /gpu1
	[ "${lines[0]}" = "/gpu1 EPERM" ]
	[ "$(dg status --json | jq -r '.leases[] | select(.gpus | length > 0) | .container + " " + .runtime')" = "$NM-to runc" ]
	run -5 dg move --gpu 1 --from "$NM-to" --to "$NM-nosuch"
	[[ "${lines[0]}" == "devgatectl: no container is labelled '$NM-nosuch'" ]]
	run -1 dg_in_ns runc exec "$NM-to" probe /gpu1
	[ "${lines[0]}" = "/gpu1 ENXIO" ]
	run -0 dg revoke --container "$NM-to"
	run -1 dg_in_ns runc exec "$NM-to" probe /gpu1
	[ "${lines[0]}" = "/gpu1 EPERM" ]
}

@test "doctor --containers: each running container the runtimes list, and the mechanism a grant then really uses (v2 gate; v2 gate + v1 devices; cannot under a v1 parent that denies); nothing is granted" {
	requires podman cgroup1
	needs_docker
	names_daemon
	local v1 deny="$NM-denyp" rule
	v1=$(findmnt -rn -t cgroup -o TARGET,OPTIONS | awk '$2 ~ /(^|,)devices(,|$)/ { print $1 }')
	runc_ct "$NM-v2"
	dg_podman run -d ${DG_PODMAN_RUN/--rm/} --name "$NM-dpod" localhost/devgate-test sleep 100000 >/dev/null
	docker_ct "$NM-dk"
	host_runc_ct "$NM-v1"
	mkdir "$v1/$deny"
	DG_V1DIRS=("$v1/$deny")
	echo a >"$v1/$deny/devices.deny"
	# What runc allows its containers, and not the GPU.
	for rule in 'b *:* m' 'c *:* m' 'c 1:3 rwm' 'c 1:5 rwm' 'c 1:7 rwm' 'c 1:8 rwm' \
		'c 1:9 rwm' 'c 5:0 rwm' 'c 5:1 rwm' 'c 5:2 rwm' 'c 10:200 rwm' 'c 136:* rwm'; do
		echo "$rule" >"$v1/$deny/devices.allow"
	done
	host_runc_ct "$NM-deny" ".linux.cgroupsPath = \"/$deny/ctr\""
	DG_CGROUPS+=("$DG_CGROOT/$deny")

	run -1 dg doctor --containers --json
	[ "$(echo "$output" | jq -r '.checks[] | select(.name == "containers") | .status')" = fail ]
	[ "$(found "$NM-v2" runtime)" = runc ]
	[ "$(found "$NM-v2" mechanism)" = "v2 BPF gate" ]
	[ "$(found "$NM-dpod" runtime)" = podman ]
	[ "$(found "$NM-dpod" mechanism)" = "v2 BPF gate" ]
	[ "$(found "$NM-dk" runtime)" = docker ]
	[ "$(found "$NM-dk" cgroup)" = "/$NM-docker/$DID" ]
	[ "$(found "$NM-dk" mechanism)" = "v2 BPF gate" ]
	[ "$(found "$NM-v1" mechanism)" = "v2 gate + v1 devices /$NM-v1" ]
	[ "$(found "$NM-v1" cgroup)" = "/$NM-v1" ]
	[[ "$(found "$NM-deny" mechanism)" == "cannot: its v1 devices parent /$deny does not allow /dev/nvidia0 (c 195:0)"* ]]
	no_lease
	run -1 dg doctor --containers
	[[ "$output" == *"runc $NM-v1 (cgroup /$NM-v1, PID "*"): v2 gate + v1 devices /$NM-v1"* ]]

	# What a grant then uses: the lease's own mechanism, and the kernel's answer.
	run -0 dg grant --container "$NM-v2" --runtime runc --gpu 0
	run -0 dg grant --container "$NM-v1" --gpu 1
	run -0 dg doctor --json
	mech=$(echo "$output" | jq -r '.checks[] | select(.name == "mechanism") | .message')
	[[ "$mech" == *"($NM-v2): v2 BPF gate"* ]]
	[[ "$mech" != *"($NM-v2): v2 BPF gate and"* ]]
	[[ "$mech" == *"($NM-v1): v2 BPF gate and v1 devices /$NM-v1, which allows its GPUs"* ]]
	run -1 runc exec "$NM-v1" probe /dev/nvidia1 /gpu0
	[ "${lines[0]}" = "/dev/nvidia1 ENXIO" ]
	[ "${lines[1]}" = "/gpu0 EPERM" ]
	run -0 dg revoke --container "$NM-v2"
	run -11 dg grant --container "$NM-deny" --gpu 0
	[[ "$output" == *"the v1 devices cgroup /$deny/ctr refused 'c 195:0"* ]]
	dg_podman rm -f -t 0 "$NM-dpod" >/dev/null
}

@test "LXC: an init moved into a sub-cgroup of its container's (systemd's init.scope) is granted the container's cgroup; moved to a sibling, refused" {
	names_daemon
	lxc_container web
	mkdir "$CG/init.scope" "$DG_CGROOT/$CID-side"
	DG_CGROUPS+=("$DG_CGROOT/$CID-side")
	echo "$CPID" >"$CG/init.scope/cgroup.procs"
	run -0 dg grant --container "$CID" --gpu 0
	# The container's own cgroup, not its init's below it.
	[[ "$output" == "granted GPU 0 ("*") to $CID (cgroup /lxc.payload.$CID, PID "* ]]
	run -1 lxc_probe "$CID" /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	run -0 dg revoke --container "$CID"
	no_lease
	# A sibling of the container's cgroup is another container's, never its.
	echo "$CPID" >"$DG_CGROOT/$CID-side/cgroup.procs"
	run -5 dg grant --container "$CID" --gpu 0
	[[ "${lines[0]}" == *"is not running: PID $CPID is in cgroup /$CID-side, not in the one the state names (/lxc.payload.$CID)" ]]
	no_lease
	echo "$CPID" >"$CG/cgroup.procs"
	rmdir "$CG/init.scope"
}

@test "LXC: a monitor in another network namespace cannot be reached: the error says so, not just 'not running'" {
	names_daemon
	mkdir -p "$DG_TMP/lxc/$NM-netns"
	touch "$DG_TMP/lxc/$NM-netns/config"
	unshare --net "$DG_LXC_PY" -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1])
s.listen(4)
open(sys.argv[2], "w").close()
time.sleep(100000)' "$DG_TMP/lxc/$NM-netns/command" "$DG_TMP/bound" </dev/null >/dev/null 2>&1 3>&- &
	FAKE_PIDS+=("$!")
	wait_until 10 test -e "$DG_TMP/bound"
	run -5 dg grant --container "$NM-netns" --gpu 0
	local n="$NM-netns"
	[ "${lines[0]}" = "devgatectl: lxc container '$n' (ID ${n:0:12}) is not running: no LXC monitor answers on @$DG_TMP/lxc/$NM-netns/command in devgated's network namespace (it is stopped, or its monitor runs in another one)" ]
	no_lease
}

# fake_lxc SOCKNAME PID CGROUP: as uid 65534, a liblxc command socket that
# answers GET_INIT_PID with PID and GET_CGROUP with CGROUP; sets FAKE_PID.
fake_lxc() {
	setpriv --reuid=65534 --regid=65534 --clear-groups "$DG_LXC_PY" -c '
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1])
s.listen(4)
while True:
    c, _ = s.accept()
    req = c.recv(16)
    if len(req) < 16:
        c.close()
        continue
    cmd, n, _ = struct.unpack("iiQ", req)
    if n > 0:
        c.recv(n)
    if cmd == 4:
        c.sendall(struct.pack("iiQ", 0, 0, int(sys.argv[2])))
    else:
        p = sys.argv[3].encode() + b"\0"
        c.sendall(struct.pack("iiQ", 0, len(p), 0) + p)
    c.close()' "$@" &
	FAKE_PID=$!
	wait_until 10 grep -q "@$1\$" /proc/net/unix
}

@test "LXC: a command socket bound first by another uid is not LXC's: the name is refused and its answer (another container's PID) is not granted" {
	names_daemon
	runc_ct "$NM-victim"
	local pid
	pid=$(dg_in_ns runc state "$NM-victim" | jq .pid)
	mkdir -p "$DG_TMP/lxc/$NM-fake"
	touch "$DG_TMP/lxc/$NM-fake/config"
	fake_lxc "$DG_TMP/lxc/$NM-fake/command" "$pid" "/$NM-victim"
	run -5 dg grant --container "$NM-fake" --gpu 1
	[ "${lines[0]}" = "devgatectl: no container is named '$NM-fake'" ]
	[[ "${lines[1]}" == *"lxc $DG_TMP/lxc (its command socket is held by another uid than its owner's (0): not LXC's)"* ]]
	no_lease
	run -1 dg_in_ns runc exec "$NM-victim" probe /gpu1
	[ "${lines[0]}" = "/gpu1 EPERM" ]
}

@test "a runtime API that trickles its answer a byte at a time is given up after its 3 s, not held for the whole answer" {
	"$DG_LXC_PY" -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(4)
while True:
    c, _ = s.accept()
    c.recv(4096)
    try:
        while True:
            c.send(b"H")
            time.sleep(0.5)
    except OSError:
        c.close()' "$DG_TMP/slow.sock" &
	FAKE_PID=$!
	wait_until 10 test -S "$DG_TMP/slow.sock"
	start_daemon --docker-socket "$DG_TMP/slow.sock" --lxd-socket "" --podman-storage "" \
		--runc-root "" --lxc-path "" --cri-runc-root ""
	run -5 timeout 40 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" -t 60 grant --container "$NM-slow" --gpu 0
	[ "${lines[0]}" = "devgatectl: cannot tell whether '$NM-slow' is a container: dockerd at $DG_TMP/slow.sock did not answer within 3 s" ]
	[ "${lines[1]}" = "hint: searched docker $DG_TMP/slow.sock (dockerd at $DG_TMP/slow.sock did not answer within 3 s); name the container by --pid or --cgroup meanwhile" ]
	no_lease
}

# hung_api PATH: a runtime API on PATH that accepts and never answers; it
# counts the connections it holds in PATH.n.
hung_api() {
	"$DG_LXC_PY" -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(16)
held = []
while True:
    c, _ = s.accept()
    held.append(c)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(len(held)))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1] + ".n")' "$1" </dev/null >/dev/null 2>&1 3>&- &
	FAKE_PIDS+=("$!")
	wait_until 10 test -S "$1"
}

# The name lookups devgated's forked workers run now.
lookups() { pgrep -P "$DG_DAEMON_PID" -x devgated-names | wc -l; }
no_lookups() { [ "$(lookups)" = 0 ]; }

@test "a runtime API that accepts and never answers holds only the request that asked it: status and a grant by PID are answered meanwhile; it then fails naming the runtime and its socket" {
	container c
	hung_api "$DG_TMP/hung.sock"
	start_daemon --docker-socket "$DG_TMP/hung.sock" --lxd-socket "" --podman-storage "" \
		--runc-root "" --lxc-path "" --cri-runc-root ""
	"$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" grant --container "$NM-hung" --gpu 1 \
		>"$DG_TMP/byname.out" 2>&1 &
	local byname=$! rc=0
	# dockerd holds the lookup now: from here on it answers nothing.
	wait_until 30 test -s "$DG_TMP/hung.sock.n"
	run -0 dg status
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/gpu1 EPERM" ]
	# Both were answered while the request by name still waited.
	kill -0 "$byname"
	[ ! -s "$DG_TMP/byname.out" ]
	wait "$byname" || rc=$?
	[ "$rc" = 5 ]
	run cat "$DG_TMP/byname.out"
	[ "${lines[0]}" = "devgatectl: cannot tell whether '$NM-hung' is a container: dockerd at $DG_TMP/hung.sock did not answer within 3 s" ]
	[ "${lines[1]}" = "hint: searched docker $DG_TMP/hung.sock (dockerd at $DG_TMP/hung.sock did not answer within 3 s); name the container by --pid or --cgroup meanwhile" ]
	[ "$(dg status --json | jq '.leases | length')" = 1 ]
	no_lookups
}

@test "a client that leaves while its lookup waits on a silent runtime: the lookup ends at once, devgated serves on" {
	hung_api "$DG_TMP/hung.sock"
	hung_api "$DG_TMP/hung2.sock"
	start_daemon --docker-socket "$DG_TMP/hung.sock" --lxd-socket "$DG_TMP/hung2.sock" \
		--podman-storage "" --runc-root "" --lxc-path "" --cri-runc-root ""
	"$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" grant --container "$NM-hung" --gpu 0 \
		>/dev/null 2>&1 &
	local byname=$!
	wait_until 30 test -s "$DG_TMP/hung.sock.n"
	[ "$(lookups)" = 1 ]
	kill "$byname"
	wait "$byname" || true
	wait_until 30 no_lookups
	# Killed when its client left: had it run on, it would have asked LXD after dockerd's 3 s.
	[ ! -e "$DG_TMP/hung2.sock.n" ]
	run -0 dg status
	no_lease
}
