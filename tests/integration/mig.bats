#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# NVIDIA MIG instances granted to live runc containers. The fixture has GPU 0
# in MIG mode with GPU instances 1 and 2 (each with compute instance 0), as
# the driver shows them under /proc, and their capability nodes under
# /dev/nvidia-caps with a dynamic "nvidia-caps" major no driver here uses: an
# allowed node gives ENXIO, a denied one EPERM.
#
# Fixture (mkfixture -n 2 --mig "0:1,2"):
#   GPU 0  /dev/nvidia0  instance 0:1 nvidia-cap12 (CI 0: nvidia-cap13)
#                        instance 0:2 nvidia-cap21 (CI 0: nvidia-cap22)
#   GPU 1  /dev/nvidia1  not in MIG mode

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	make_host -n 2 --mig "0:1,2"
	start_daemon
}
teardown() { dg_teardown; }

# The fixture's nvidia-caps major.
caps_major() {
	awk '$2 == "nvidia-caps" { print $1 }' "$DG_HOST/proc/devices"
}

# mig_container NAME: a runc container (container NAME) with the four
# capability nodes made in its rootfs (/c12 /c13 /c21 /c22), which the
# runtime denies; sets CID, CPID.
mig_container() {
	local caps m
	container "$1"
	caps=$(caps_major)
	for m in 12 13 21 22; do
		mknod -m 666 "$DG_TMP/$1/rootfs/c$m" c "$caps" $m
	done
}

@test "list: a GPU's MIG instances under it, with capability minors, compute instances and state; text and JSON" {
	run -0 dg list --json
	[ "$(echo "$output" | jq -c '[.gpus[] | .mig]')" = '[true,false]' ]
	[ "$(echo "$output" | jq -c '[.gpus[0].instances[] | [.gi, .minor, .state, [.compute_instances[] | [.ci, .minor]]]]')" = \
		'[[1,12,"free",[[0,13]]],[2,21,"free",[[0,22]]]]' ]
	[ "$(echo "$output" | jq -c '.gpus[1].instances // []')" = '[]' ]
	# No NVML here: the profile is not known and left out, and list says why.
	[ "$(echo "$output" | jq -c '[.gpus[0].instances[] | .profile]')" = '[null,null]' ]
	[ "$(echo "$output" | jq -c '[.gpus[0].instances[] | .uuid]')" = '[null,null]' ]
	[[ "$(echo "$output" | jq -r .nvml_problem)" == *"driver's version is not known"* ]]
	run -0 dg list
	[[ "${lines[1]}" == "0    nvidia  0 "*"free"* ]]
	[[ "${lines[2]}" == "0:1  mig     cap12"*"free"*"profile unknown, compute instances 0 (cap13)" ]]
	[[ "$output" == *"MIG profiles and UUIDs unknown: the NVIDIA driver's version is not known"* ]]
	[[ "${lines[3]}" == "0:2  mig     cap21"*"free"*"compute instances 0 (cap22)" ]]
	[[ "${lines[4]}" == "1    nvidia  1 "* ]]
}

@test "grant --gpu 0:1: the parent's node, control nodes and the instance's capability nodes; the other instance stays denied" {
	mig_container a
	local ca=$CID apid=$CPID
	run -1 probe "$ca" /c12 /c21
	[ "${lines[0]}" = "/c12 EPERM" ]
	[ "${lines[1]}" = "/c21 EPERM" ]

	run -0 dg grant --pid "$apid" --gpu 0:1
	[[ "$output" == "granted GPU 0 ("* ]]
	run -1 probe "$ca" /dev/nvidia0 /dev/nvidiactl /dev/nvidia-caps/nvidia-cap12 /dev/nvidia-caps/nvidia-cap13 /c12 /c13
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidiactl ENXIO" ]
	[ "${lines[2]}" = "/dev/nvidia-caps/nvidia-cap12 ENXIO" ]
	[ "${lines[3]}" = "/dev/nvidia-caps/nvidia-cap13 ENXIO" ]
	[ "${lines[4]}" = "/c12 ENXIO" ]
	[ "${lines[5]}" = "/c13 ENXIO" ]
	# The other instance's nodes, GPU 1's, and no node made for them.
	run -1 probe "$ca" /c21 /c22 /gpu1
	[ "${lines[0]}" = "/c21 EPERM" ]
	[ "${lines[1]}" = "/c22 EPERM" ]
	[ "${lines[2]}" = "/gpu1 EPERM" ]
	run -1 dg_runc exec "$ca" test -e /dev/nvidia-caps/nvidia-cap21
	run -0 dg_runc exec "$ca" ls /dev/nvidia-caps
	[ "$output" = "$(printf 'nvidia-cap12\nnvidia-cap13')" ]

	run -0 dg status --json
	[ "$(echo "$output" | jq -c '[.leases[0].gpus[] | [.index, .gi]]')" = '[[0,1]]' ]
	run -0 dg list --json
	[ "$(echo "$output" | jq -r '.gpus[0].state')" = split ]
	[ "$(echo "$output" | jq -c '[.gpus[0].instances[] | .state]')" = '["held","free"]' ]
	[ "$(echo "$output" | jq -r '.gpus[0].instances[0].holder.cgroup')" = "/$ca" ]
	[ "$(echo "$output" | jq -c '.gpus[0].holders')" = '[]' ]
	[ "$(jq -c '.gpus[0] | [.gi, .caps]' "$DG_TMP"/state/leases/*.json)" = '[1,[12,13]]' ]
}

@test "two containers hold two instances of one GPU; an instance and the whole GPU exclude each other (exit 8)" {
	mig_container a
	local ca=$CID apid=$CPID
	mig_container b
	local cb=$CID bpid=$CPID
	mig_container c
	local cc=$CID cpid=$CPID

	run -0 dg grant --pid "$apid" --gpu 0:1
	run -0 dg grant --pid "$bpid" --gpu 0:2
	run -1 probe "$cb" /dev/nvidia0 /dev/nvidia-caps/nvidia-cap21 /c22 /c12
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidia-caps/nvidia-cap21 ENXIO" ]
	[ "${lines[2]}" = "/c22 ENXIO" ]
	[ "${lines[3]}" = "/c12 EPERM" ]
	run -1 probe "$ca" /c12 /c21
	[ "${lines[0]}" = "/c12 ENXIO" ]
	[ "${lines[1]}" = "/c21 EPERM" ]

	# The whole GPU, or a held instance, to a third container: busy, the holder named.
	run -8 dg grant --pid "$cpid" --gpu 0
	[[ "$output" == *"GPU 0 held by container $ca"* ]]
	run -8 dg grant --pid "$cpid" --gpus 2
	run -8 dg grant --pid "$cpid" --gpu 0:2
	[[ "$output" == *"GPU instance 0:2 is held by container $cb"* ]]
	# One container: one instance of a GPU or all of it.
	run -2 dg grant --pid "$apid" --gpu 0:2
	[[ "$output" == *"holds another instance of GPU 0 already"* ]]
	run -8 dg grant --pid "$apid" --gpu 0
	[[ "$output" == *"GPU 0 held by container $ca"* ]]
	run -1 probe "$cc" /dev/nvidia0 /c12 /c21
	[ "${lines[0]}" = "/dev/nvidia0 ENOENT" ]
	[ "${lines[1]}" = "/c12 EPERM" ]
	[ "${lines[2]}" = "/c21 EPERM" ]
	# GPU 1 is free; a count finds it.
	run -0 dg grant --pid "$cpid" --gpus 1
	[[ "$output" == "granted GPU 1 ("* ]]

	# Revoked instances come back; then the whole GPU goes, and excludes instances.
	run -0 dg revoke --pid "$apid" --gpu 0:1
	run -1 probe "$ca" /c12 /dev/nvidia-caps/nvidia-cap12 /dev/nvidia0
	[ "${lines[0]}" = "/c12 EPERM" ]
	[ "${lines[1]}" = "/dev/nvidia-caps/nvidia-cap12 ENOENT" ]
	[ "${lines[2]}" = "/dev/nvidia0 ENOENT" ]
	run -0 dg revoke --pid "$bpid"
	run -0 dg grant --pid "$cpid" --gpu 0
	run -8 dg grant --pid "$apid" --gpu 0:1
	[[ "$output" == *"GPU 0 is held whole by container $cc"* ]]
	run -1 probe "$ca" /c12
	[ "${lines[0]}" = "/c12 EPERM" ]
	run -0 dg list --json
	[ "$(echo "$output" | jq -c '[.gpus[0].state, [.gpus[0].instances[] | .state]]')" = '["held",["free","free"]]' ]
}

@test "a restart of devgated keeps instance leases: nodes, gate and exclusivity" {
	mig_container a
	local ca=$CID apid=$CPID
	mig_container b
	local bpid=$CPID
	run -0 dg grant --pid "$apid" --gpu 0:2
	stop_daemon
	start_daemon
	run -1 probe "$ca" /dev/nvidia-caps/nvidia-cap21 /c22 /c12
	[ "${lines[0]}" = "/dev/nvidia-caps/nvidia-cap21 ENXIO" ]
	[ "${lines[1]}" = "/c22 ENXIO" ]
	[ "${lines[2]}" = "/c12 EPERM" ]
	run -8 dg grant --pid "$bpid" --gpu 0
	run -8 dg grant --pid "$bpid" --gpu 0:2
	run -0 dg grant --pid "$bpid" --gpu 0:1
	# A container holds one instance of a GPU: not a second by a move.
	run -8 dg move --gpu 0:2 --from "$apid" --to "$bpid"
	[[ "$output" == *"holds an instance of GPU 0 already"* ]]
	run -1 probe "$ca" /c22
	[ "${lines[0]}" = "/c22 ENXIO" ]
	# Moved as an instance: the destination gets its capability nodes, not the whole GPU.
	run -0 dg revoke --pid "$bpid" --gpu 0:1
	run -0 dg move --gpu 0:2 --from "$apid" --to "$bpid"
	run -1 probe "$ca" /c22 /dev/nvidia0
	[ "${lines[0]}" = "/c22 EPERM" ]
	[ "${lines[1]}" = "/dev/nvidia0 ENOENT" ]
	run -1 probe "$CID" /c21 /c22 /c12
	[ "${lines[0]}" = "/c21 ENXIO" ]
	[ "${lines[1]}" = "/c22 ENXIO" ]
	[ "${lines[2]}" = "/c12 EPERM" ]
	[ "$(dg status --json | jq -c '[.leases[] | [.pid, [.gpus[] | .gi]]]')" = "[[$bpid,[2]]]" ]
	run -0 dg list --json
	[ "$(echo "$output" | jq -r '.gpus[0].instances[1].holder.pid')" = "$bpid" ]
	run -0 dg revoke --pid "$bpid" --gpu 0:2
	run -1 probe "$CID" /c22
	[ "${lines[0]}" = "/c22 EPERM" ]
}

@test "bad instance selectors: a clear error, nothing granted" {
	mig_container a
	run -7 dg grant --pid "$CPID" --gpu 1:1
	[[ "$output" == *"GPU 1 is not in MIG mode"* ]]
	run -7 dg grant --pid "$CPID" --gpu 0:5
	[[ "$output" == *"GPU 0 has no GPU instance 5"* ]]
	run -2 dg grant --pid "$CPID" --gpu 0:x
	[[ "$output" == *"'0:x' is not a MIG instance"* ]]
	run -2 dg grant --pid "$CPID" --gpu 0:1,1
	run -2 dg grant --pid "$CPID" --gpu 0:1 --shared
	[[ "$output" == *"granted exclusively"* ]]
	run -0 dg status --json
	[ "$(echo "$output" | jq -c '.leases')" = '[]' ]
	run -1 probe "$CID" /c12 /dev/nvidia0
	[ "${lines[0]}" = "/c12 EPERM" ]
	[ "${lines[1]}" = "/dev/nvidia0 ENOENT" ]
}

@test "cdi generate: a device KIND=INDEX:GI per instance, with the parent's and the instance's nodes" {
	run -0 dg cdi generate --host-root "$DG_HOST" -o "$DG_TMP/spec.json"
	[ "$(jq -c '[.devices[].name]' "$DG_TMP/spec.json")" = '["0","GPU-5e1f0a00-1000-2000-3000-4d0000000000","1","GPU-5e200b01-1001-2001-3001-4d0000000001","0:1","0:2","all"]' ]
	[ "$(jq -c '.devices[] | select(.name == "0:2") | [.containerEdits.deviceNodes[].path]' "$DG_TMP/spec.json")" = \
		'["/dev/nvidia0","/dev/nvidia-caps/nvidia-cap21","/dev/nvidia-caps/nvidia-cap22"]' ]
	[ "$(jq -r '.devices[] | select(.name == "0:2") | .containerEdits.hooks[0].args | index("--gpu") as $i | .[$i + 1]' "$DG_TMP/spec.json")" = \
		"GPU-5e1f0a00-1000-2000-3000-4d0000000000:2" ]
}

@test "OCI hook: devgate.io/gpus=0:2 grants the instance for the container's life" {
	requires runc
	local caps
	hooked_bundle h '.annotations = {"devgate.io/gpus": "0:2"} |
		.process.args = ["probe", "/dev/nvidia-caps/nvidia-cap21", "/dev/nvidia-caps/nvidia-cap22", "/c12"]'
	caps=$(caps_major)
	mknod -m 666 "$DG_TMP/h/rootfs/c12" c "$caps" 12
	run -1 run_bundle h
	[ "$output" = "$(printf '/dev/nvidia-caps/nvidia-cap21 ENXIO\n/dev/nvidia-caps/nvidia-cap22 ENXIO\n/c12 EPERM')" ]
	grep -q "granted 1 GPU(s) to $CID" "$DG_TMP/daemon.log"
}

@test "metrics: each instance held or not, and a denied capability node named with its GPU" {
	mig_container a
	run -0 dg grant --pid "$CPID" --gpu 0:1
	run -1 probe "$CID" /dev/nvidia-caps/nvidia-cap12 /c21
	run -0 dg metrics
	echo "$output" | grep -E '^devgate_device_accesses_granted_total\{.*node="/dev/nvidia-caps/nvidia-cap12",gpu="GPU-5e1f0a00-1000-2000-3000-4d0000000000",access="r"\} 1$'
	echo "$output" | grep -E '^devgate_device_accesses_denied_total\{.*node="/dev/nvidia-caps/nvidia-cap21",gpu="GPU-5e1f0a00-1000-2000-3000-4d0000000000",access="r"\} 1$'
	echo "$output" | grep -qx 'devgate_mig_instance_held{gpu="GPU-5e1f0a00-1000-2000-3000-4d0000000000",gi="1"} 1'
	echo "$output" | grep -qx 'devgate_mig_instance_held{gpu="GPU-5e1f0a00-1000-2000-3000-4d0000000000",gi="2"} 0'
	echo "$output" | grep -qx 'devgate_gpus{state="split"} 1'
}

@test "rescan: a new MIG layout is listed and granted; a held instance keeps its nodes; a moved nvidia-caps major moves them" {
	mig_container a
	local ca=$CID apid=$CPID
	mig_container b
	local cb=$CID bpid=$CPID
	run -0 dg grant --pid "$apid" --gpu 0:1
	# The admin replaces instance 2 by instance 3 (nvidia-smi mig -dgi / -cgi).
	rm -rf "$DG_HOST/proc/driver/nvidia/capabilities"
	make_host -n 2 --mig "0:1,3"
	run -0 dg rescan
	run -0 dg list --json
	[ "$(echo "$output" | jq -c '[.gpus[0].instances[] | [.gi, .minor, .state]]')" = '[[1,12,"held"],[3,30,"free"]]' ]
	run -7 dg grant --pid "$bpid" --gpu 0:2
	run -0 dg grant --pid "$bpid" --gpu 0:3
	run -1 probe "$ca" /dev/nvidia-caps/nvidia-cap12 /c21
	[ "${lines[0]}" = "/dev/nvidia-caps/nvidia-cap12 ENXIO" ]
	[ "${lines[1]}" = "/c21 EPERM" ]

	local caps new=500
	caps=$(caps_major)
	# A driver reload moves nvidia-caps to a major no driver here uses.
	while awk -v m=$new '$1 == m { f = 1 } END { exit !f }' /proc/devices "$DG_HOST/proc/devices"; do
		new=$((new - 1))
	done
	sed -i "s/^$caps nvidia-caps\$/$new nvidia-caps/" "$DG_HOST/proc/devices"
	run -0 dg rescan
	run -0 dg list --json
	[ "$(echo "$output" | jq -r '.control_problem // ""')" = "" ]
	# The held instances' capability nodes follow; the old major is denied.
	[ "$(dg_runc exec "$ca" stat -c '%t:%T' /dev/nvidia-caps/nvidia-cap12)" = "$(printf '%x:c' "$new")" ]
	run -1 probe "$ca" /dev/nvidia-caps/nvidia-cap12 /c12
	[ "$output" = "$(printf '/dev/nvidia-caps/nvidia-cap12 ENXIO\n/c12 EPERM')" ]
	run -0 dg revoke --pid "$bpid"
	run -0 dg grant --pid "$bpid" --gpu 0:3
	run -1 probe "$cb" /dev/nvidia-caps/nvidia-cap30 /dev/nvidia-caps/nvidia-cap12
	[ "$output" = "$(printf '/dev/nvidia-caps/nvidia-cap30 ENXIO\n/dev/nvidia-caps/nvidia-cap12 ENOENT')" ]
}

@test "a uid-mapped container: the instance's capability nodes bind-mounted into /dev/nvidia-caps, gone at revoke" {
	requires runc
	local caps
	chmod 0711 "$DG_TMP" # the namespace's processes walk into the bundle
	CID="$DG_ID-u"
	dg_bundle "$DG_TMP/u" "$DEVGATE_BUILD/probe"
	jq "$DG_USERNS_JQ" "$DG_TMP/u/config.json" >"$DG_TMP/u/c.json"
	mv "$DG_TMP/u/c.json" "$DG_TMP/u/config.json"
	caps=$(caps_major)
	mknod -m 666 "$DG_TMP/u/rootfs/c21" c "$caps" 21
	chown -R 100000:100000 "$DG_TMP/u/rootfs"
	CPID=$(dg_run "$CID" "$DG_TMP/u")
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	run -0 dg grant --pid "$CPID" --gpu 0:1
	[[ "$output" == *"/dev/nvidia-caps/nvidia-cap12"*"created"* ]]
	run -1 probe "$CID" /dev/nvidia-caps/nvidia-cap12 /dev/nvidia-caps/nvidia-cap13 /c21
	[ "${lines[0]}" = "/dev/nvidia-caps/nvidia-cap12 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidia-caps/nvidia-cap13 ENXIO" ]
	[ "${lines[2]}" = "/c21 EPERM" ]
	run -0 dg revoke --pid "$CPID"
	run -1 probe "$CID" /dev/nvidia-caps/nvidia-cap12
	[ "$output" = "/dev/nvidia-caps/nvidia-cap12 ENOENT" ]
}

@test "reconcile: records booking an instance and its whole GPU (edited by hand) - the older lease keeps it" {
	mig_container a
	local ca=$CID apid=$CPID
	run -0 dg grant --pid "$apid" --gpu 0:1
	sleep 1.1
	mig_container b
	local cb=$CID bpid=$CPID
	mknod -m 666 "$DG_TMP/b/rootfs/nv0" c 195 0
	run -0 dg grant --pid "$bpid" --gpu 1
	stop_daemon TERM
	# b's record now claims all of GPU 0.
	f="$DG_TMP/state/leases/$(stat -c %i "$DG_CGROOT/$cb").json"
	jq --arg u "$(jq -r '.gpus[0].uuid' "$DG_TMP/state/leases/$(stat -c %i "$DG_CGROOT/$ca").json")" \
		'.gpus[0].uuid = $u | .gpus[0].minor = 0' "$f" >"$f.new" && mv "$f.new" "$f"
	start_daemon
	grep -q "reconcile: GPU .* is booked by .*; $ca keeps it, $cb loses it" "$DG_TMP/daemon.log"
	run -1 probe "$ca" /dev/nvidia-caps/nvidia-cap12 /c13
	[ "${lines[0]}" = "/dev/nvidia-caps/nvidia-cap12 ENXIO" ]
	[ "${lines[1]}" = "/c13 ENXIO" ]
	run -1 probe "$cb" /nv0 /c12
	[ "${lines[0]}" = "/nv0 EPERM" ]
	[ "${lines[1]}" = "/c12 EPERM" ]
	run -0 dg list --json
	[ "$(echo "$output" | jq -c '[.gpus[0].state, [.gpus[0].instances[] | .state]]')" = '["split",["held","free"]]' ]
}

waiters() {
	[ "$(dg queue --json | jq '.waiters | length')" = "$1" ]
}

@test "grant --wait of an instance is served when its holder lets go; one that can never be served is not queued" {
	mig_container a
	local apid=$CPID
	mig_container b
	local cb=$CID bpid=$CPID
	run -0 dg grant --pid "$apid" --gpu 0:2
	("$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" grant --pid "$bpid" --gpu 0:2 --wait=30s \
		>"$DG_TMP/w.out" 2>&1
	echo $? >"$DG_TMP/w.rc") &
	wait_until 5 waiters 1
	run -0 dg queue
	[[ "$output" == *"--gpu 0:2"* ]]
	run -1 probe "$cb" /c21
	[ "${lines[0]}" = "/c21 EPERM" ]
	run -0 dg revoke --pid "$apid"
	wait_until 5 test -s "$DG_TMP/w.rc"
	[ "$(cat "$DG_TMP/w.rc")" = 0 ]
	run -1 probe "$cb" /c21 /c22 /c12
	[ "${lines[0]}" = "/c21 ENXIO" ]
	[ "${lines[1]}" = "/c22 ENXIO" ]
	[ "${lines[2]}" = "/c12 EPERM" ]
	# No such instance, or a GPU not in MIG mode: waiting would never end.
	run -7 dg grant --pid "$apid" --gpu 0:7 --wait=5s
	[[ "$output" == *"GPU 0 has no GPU instance 7"* ]]
	run -7 dg grant --pid "$apid" --gpu 1:1 --wait=5s
	[[ "$output" == *"GPU 1 is not in MIG mode"* ]]
	waiters 0
}

@test "a whole GPU in MIG mode comes with every instance's capability nodes (CUDA needs them); revoke takes them all" {
	mig_container a
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" /dev/nvidia0 /c12 /c13 /c21 /c22 /gpu1
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/c12 ENXIO" ]
	[ "${lines[2]}" = "/c13 ENXIO" ]
	[ "${lines[3]}" = "/c21 ENXIO" ]
	[ "${lines[4]}" = "/c22 ENXIO" ]
	[ "${lines[5]}" = "/gpu1 EPERM" ]
	run -0 dg_runc exec "$CID" ls /dev/nvidia-caps
	[ "$(echo "$output" | tr '\n' ' ')" = "nvidia-cap12 nvidia-cap13 nvidia-cap21 nvidia-cap22 " ]
	# Not a capability of another GPU's instance, nor MIG's config node.
	mknod -m 666 "$DG_TMP/a/rootfs/c1" c "$(caps_major)" 1
	run -1 probe "$CID" /c1
	[ "${lines[0]}" = "/c1 EPERM" ]
	run -0 dg revoke --pid "$CPID"
	run -1 probe "$CID" /c12 /c21
	[ "${lines[0]}" = "/c12 EPERM" ]
	[ "${lines[1]}" = "/c21 EPERM" ]
	run -1 dg_runc exec "$CID" test -e /dev/nvidia-caps/nvidia-cap12
}

# nvml_host [LINE]: the fixture again with its driver's libnvidia-ml
# (build/fakenvml.so): instance 1 is 1g.10gb, 2 is 2g.20gb; LINE is added
# to what the library answers ("crash", "hang"); devgated restarted on it.
nvml_host() {
	stop_daemon
	rm -rf "$DG_HOST"
	make_host -n 2 --mig "0:1,2" --driver "550.54.14:$DEVGATE_BUILD/fakedrv.so" \
		--nvml "$DEVGATE_BUILD/fakenvml.so:1=1g.10gb,2=2g.20gb"
	NVML_DATA=$DG_HOST/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.14.fixture
	[ -z "${1:-}" ] || echo "$1" >>"$NVML_DATA"
	start_daemon
}

MIG1=MIG-a1900000-0101-4000-8000-000000000001
MIG2=MIG-a1900000-0102-4000-8000-000000000002

@test "NVML: profiles and MIG UUIDs in list; grant and revoke by MIG-<uuid>; --profile picks a free instance" {
	nvml_host
	run -0 dg list --json
	[ "$(echo "$output" | jq -c '[.gpus[0].instances[] | [.gi, .profile, .uuid, .compute_instances[0].uuid]]')" = \
		"[[1,\"1g.10gb\",\"$MIG1\",\"$MIG1\"],[2,\"2g.20gb\",\"$MIG2\",\"$MIG2\"]]" ]
	[ "$(echo "$output" | jq -r '.nvml_problem // "none"')" = none ]
	run -0 dg metrics
	echo "$output" | grep -qx 'devgate_mig_instance_held{gpu="GPU-5e1f0a00-1000-2000-3000-4d0000000000",gi="2",profile="2g.20gb"} 0'
	run -0 dg list
	[[ "${lines[2]}" == "0:1  mig     cap12  $MIG1"*"profile 1g.10gb, compute instances 0 (cap13)" ]]
	# CDI names the instances by MIG UUID too (devgatectl has them from devgated).
	run -0 dg cdi generate
	[ "$(echo "$output" | jq -c "[.devices[] | select(.name == \"$MIG2\") | .containerEdits.deviceNodes[].path, .containerEdits.hooks[0].args[-1]]")" = \
		"[\"/dev/nvidia0\",\"/dev/nvidia-caps/nvidia-cap21\",\"/dev/nvidia-caps/nvidia-cap22\",\"$MIG2\"]" ]

	mig_container a
	local ca=$CID apid=$CPID
	mig_container b
	local cb=$CID bpid=$CPID
	run -0 dg grant --pid "$apid" --gpu "$MIG2"
	run -1 probe "$ca" /c21 /c22 /c12
	[ "${lines[0]}" = "/c21 ENXIO" ]
	[ "${lines[1]}" = "/c22 ENXIO" ]
	[ "${lines[2]}" = "/c12 EPERM" ]
	[ "$(dg status --json | jq -c '[.leases[0].gpus[] | [.index, .gi]]')" = '[[0,2]]' ]

	# By profile: 2g.20gb's only instance is held; 1g.10gb's is free.
	run -8 dg grant --pid "$bpid" --profile 2g.20gb
	[[ "$output" == *"0 of the 1 MIG instances of profile 2g.20gb asked for are free"* ]]
	run -8 dg grant --pid "$bpid" --profile 1g.10gb --gpus 2
	[[ "$output" == *"1 of the 2 MIG instances of profile 1g.10gb"* ]]
	[[ "$output" == *"at most one instance of each GPU"* ]]
	run -7 dg grant --pid "$bpid" --profile 3g.40gb
	[[ "$output" == *"no MIG instance of profile 3g.40gb on this host"* ]]
	run -1 probe "$cb" /c12
	[ "${lines[0]}" = "/c12 EPERM" ]
	# Waiting for a profile: queued while its one instance is held; never for two.
	run -8 dg grant --pid "$bpid" --profile 2g.20gb --wait=1s
	[[ "$output" == *"waiting: position 1 of 1"* ]]
	[[ "$output" == *"waited 1s in the queue and no GPU became free: 0 of the 1 MIG instances of profile 2g.20gb"* ]]
	run -7 dg grant --pid "$bpid" --profile 2g.20gb --gpus 2 --wait=1s
	[[ "$output" == *"1 GPU has instances of profile 2g.20gb; 2 asked for"* ]]
	run -0 dg grant --pid "$bpid" --profile 1G.10GB
	run -1 probe "$cb" /c12 /c13 /c21
	[ "${lines[0]}" = "/c12 ENXIO" ]
	[ "${lines[1]}" = "/c13 ENXIO" ]
	[ "${lines[2]}" = "/c21 EPERM" ]
	[ "$(dg status --json | jq -c "[.leases[] | select(.container == \"$cb\") | .gpus[] | .gi]")" = '[1]' ]

	# Unknown UUIDs change nothing; revoke by UUID takes exactly that instance.
	run -7 dg grant --pid "$bpid" --gpu MIG-00000000-0000-0000-0000-000000000000
	[[ "$output" == *"no MIG instance has the UUID MIG-00000000-0000-0000-0000-000000000000"* ]]
	run -10 dg revoke --pid "$apid" --gpu "$MIG1"
	run -0 dg revoke --pid "$apid" --gpu "$MIG2"
	run -1 probe "$ca" /c21
	[ "${lines[0]}" = "/c21 EPERM" ]
	run -1 probe "$cb" /c12
	[ "${lines[0]}" = "/c12 ENXIO" ]
}

@test "NVML: a library that crashes or hangs costs its answer, not devgated; grants by GPU:GI still work" {
	nvml_host crash
	run -0 dg list --json
	[ "$(echo "$output" | jq -r .nvml_problem)" = "NVML: the NVML probe died of signal 6" ]
	[ "$(echo "$output" | jq -c '[.gpus[0].instances[] | .profile]')" = '[null,null]' ]
	mig_container a
	run -7 dg grant --pid "$CPID" --gpu "$MIG1"
	[[ "$output" == *"MIG UUIDs are not known: NVML: the NVML probe died"* ]]
	run -0 dg grant --pid "$CPID" --gpu 0:1
	run -1 probe "$CID" /c12
	[ "${lines[0]}" = "/c12 ENXIO" ]
	# devgated loads no vendor library itself, and its probe holds no capability.
	run -1 grep -q libnvidia-ml "/proc/$DG_DAEMON_PID/maps"
	local nvml
	nvml=$(awk '$2 == "devgated-nvml" { print $1 }' <(ps -o pid=,comm= --ppid "$DG_DAEMON_PID"))
	[ -n "$nvml" ]
	[ "$(awk '/^CapEff/ { print $2 }' "/proc/$nvml/status")" = 0000000000000000 ]
	[ "$(awk '/^NoNewPrivs/ { print $2 }' "/proc/$nvml/status")" = 1 ]

	# Mended library: the next rescan asks again.
	sed -i '/^crash$/d' "$NVML_DATA"
	run -0 dg rescan
	run -0 dg list --json
	[ "$(echo "$output" | jq -c '[.gpus[0].instances[] | .profile]')" = '["1g.10gb","2g.20gb"]' ]

	# One that hangs: devgated gives up on it and answers again.
	echo hang >>"$NVML_DATA"
	# A new layout, so the rescan must ask (an unchanged one keeps the answer).
	rm -r "$DG_HOST/proc/driver/nvidia/capabilities/gpu0/mig/gi2"
	local t0=$SECONDS
	run -0 dg rescan
	echo "# rescan with a hanging NVML: $((SECONDS - t0)) s" >&3
	run -0 dg list --json
	[[ "$(echo "$output" | jq -r .nvml_problem)" == "NVML: the NVML probe died of signal 14"* ]]
	[ "$(echo "$output" | jq -c '[.gpus[0].instances[] | .gi]')" = '[1]' ]
	run -0 dg status
}

# nvml_pid: the pid of devgated's NVML probe, or nothing.
nvml_pid() {
	ps -o pid=,comm= --ppid "$DG_DAEMON_PID" | awk '$2 == "devgated-nvml" { print $1 }'
}

# nvml_replaced OLD: a probe runs, and it is not OLD.
nvml_replaced() {
	local p
	p=$(nvml_pid)
	[ -n "$p" ] && [ "$p" != "$1" ]
}

# Zombies among devgated's children, one "pid comm" a line.
zombies() {
	ps -o pid=,stat=,comm= --ppid "$DG_DAEMON_PID" | awk '$2 ~ /^Z/ { print $1, $3 }'
}

@test "NVML: the probe runs under its own seccomp allow-list; what a library could abuse is refused" {
	nvml_host escape
	# The library tried execve, mknod, socket, unshare, ptrace and signals
	# to PID 1: each was refused, so it answered as usual.
	run -0 dg list --json
	[ "$(echo "$output" | jq -r '.nvml_problem // "none"')" = none ]
	[ "$(echo "$output" | jq -c '[.gpus[0].instances[] | .profile]')" = '["1g.10gb","2g.20gb"]' ]
	local nvml
	nvml=$(nvml_pid)
	[ -n "$nvml" ]
	[ "$(awk '/^Seccomp:/ { print $2 }' "/proc/$nvml/status")" = 2 ]
	# Its own abort() still reaches it (signals to itself pass).
	sed -i 's/^escape$/crash/' "$NVML_DATA"
	rm -r "$DG_HOST/proc/driver/nvidia/capabilities/gpu0/mig/gi2"
	run -0 dg rescan
	run -0 dg list --json
	[ "$(echo "$output" | jq -r .nvml_problem)" = "NVML: the NVML probe died of signal 6" ]
}

@test "NVML: a probe that is killed is reaped, logged and started again, still confined" {
	nvml_host
	local old
	old=$(nvml_pid)
	[ -n "$old" ]
	kill -KILL "$old"
	wait_until 10 nvml_replaced "$old"
	[ -z "$(zombies)" ]
	grep -q "the NVML probe (pid $old) died of signal 9 (Killed); it is started again" \
		"$DG_TMP/daemon.log"
	local new
	new=$(nvml_pid)
	[ "$(awk '/^Seccomp:/ { print $2 }' "/proc/$new/status")" = 2 ]
	[ "$(awk '/^CapEff/ { print $2 }' "/proc/$new/status")" = 0000000000000000 ]
	# The new probe answers: a new layout is asked about and named.
	rm -r "$DG_HOST/proc/driver/nvidia/capabilities/gpu0/mig/gi2"
	run -0 dg rescan
	run -0 dg list --json
	[ "$(echo "$output" | jq -r '.nvml_problem // "none"')" = none ]
	[ "$(echo "$output" | jq -c '[.gpus[0].instances[] | [.gi, .profile]]')" = '[[1,"1g.10gb"]]' ]
}
