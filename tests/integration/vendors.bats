#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# AMD and Intel GPUs next to an NVIDIA one, granted to live runc containers.
# The fixture has the DRM sysfs layout and nodes with the real DRM major 226
# (and a dynamic kfd major); no DRM driver is loaded on the test machines, so
# an allowed node gives ENXIO, as NVIDIA's do, and a denied one EPERM.
#
# Fixture (mkfixture -n 1 --amd 2 --intel 1), in PCI order:
#   GPU 0  nvidia  0000:18:00.0  /dev/nvidia0
#   GPU 1  amd     0000:80:00.0  /dev/dri/renderD128 (+ /dev/kfd)
#   GPU 2  amd     0000:90:00.0  /dev/dri/renderD129 (+ /dev/kfd)
#   GPU 3  intel   0000:a0:00.0  /dev/dri/renderD130

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	make_host -n 1 --amd 2 --intel 1
	start_daemon
}
teardown() { dg_teardown; }

# drm_container NAME: a runc container with DRM nodes for all three DRM GPUs,
# the kfd, GPU 1's and GPU 2's card nodes and card7, a DRM device that is no
# GPU (/r128 /r129 /r130 /kfd /card0 /card1 /card7) made in its rootfs, which
# the runtime denies.
drm_container() {
	requires runc
	local kfd
	CID="$DG_ID-$1"
	dg_bundle "$DG_TMP/$1" "$DEVGATE_BUILD/probe"
	kfd=$(awk '$2 == "kfd" { print $1 }' "$DG_HOST/proc/devices")
	for m in 128 129 130; do
		mknod -m 666 "$DG_TMP/$1/rootfs/r$m" c 226 $m
	done
	mknod -m 666 "$DG_TMP/$1/rootfs/kfd" c "$kfd" 0
	for m in 0 1 7; do
		mknod -m 666 "$DG_TMP/$1/rootfs/card$m" c 226 $m
	done
	CPID=$(dg_run "$CID" "$DG_TMP/$1")
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	[ -n "$CPID" ] && [ "$CPID" != null ]
}

@test "list: vendor, stable id (PCI bus id), product and model of every GPU, text and JSON" {
	run -0 dg list --json
	[ "$(echo "$output" | jq -c '[.gpus[] | [.index, .vendor, .pci, .product, .model]]')" = \
		'[[0,"nvidia","0000:18:00.0","10de:2330","NVIDIA H100 80GB HBM3"],[1,"amd","0000:80:00.0","1002:740f","AMD Instinct MI210"],[2,"amd","0000:90:00.0","1002:740f","AMD Instinct MI210"],[3,"intel","0000:a0:00.0","8086:0bd5","Intel Data Center GPU Max 1550"]]' ]
	# Without a driver UUID, the stable id is the PCI bus id.
	[ "$(echo "$output" | jq -r '.gpus[1].uuid')" = "0000:80:00.0" ]
	[ "$(echo "$output" | jq -c '[.gpus[] | .node.path]')" = \
		'["/dev/nvidia0","/dev/dri/renderD128","/dev/dri/renderD129","/dev/dri/renderD130"]' ]
	echo "$output" | jq -e '.control_nodes | map(.path) | index("/dev/kfd")'
	run -0 dg list
	[[ "${lines[0]}" == "IDX  VENDOR  MINOR  UUID"* ]]
	[[ "${lines[2]}" == "1    amd     128    0000:80:00.0"*"1002:740f"*"free"*"AMD Instinct MI210" ]]
	[[ "${lines[4]}" == "3    intel   130"*"8086:0bd5"*"free"*"Intel Data Center GPU Max 1550" ]]
}

@test "list: amdgpu's unique_id is the stable id where the driver gives one" {
	make_host -n 1 --amd 2 --intel 1 --amd-unique-id
	stop_daemon
	start_daemon
	run -0 dg list --json
	[ "$(echo "$output" | jq -r '.gpus[1].uuid')" = "AMD-00005e1f0a000000" ]
	[ "$(echo "$output" | jq -r '.gpus[3].uuid')" = "0000:a0:00.0" ]
}

@test "grant an AMD GPU: its render node and /dev/kfd reach the driver, the other AMD GPU's stays denied" {
	drm_container c
	run -1 probe "$CID" /r128 /r129 /kfd
	[ "${lines[0]}" = "/r128 EPERM" ]
	[ "${lines[1]}" = "/r129 EPERM" ]
	[ "${lines[2]}" = "/kfd EPERM" ]

	run -0 dg grant --pid "$CPID" --gpu 1
	[[ "$output" == "granted GPU 1 ("* ]]
	run -1 probe "$CID" /dev/dri/renderD128 /dev/kfd /r128
	[ "${lines[0]}" = "/dev/dri/renderD128 ENXIO" ]
	[ "${lines[1]}" = "/dev/kfd ENXIO" ]
	[ "${lines[2]}" = "/r128 ENXIO" ]
	# The neighbour, the Intel GPU and the host's other DRM devices stay denied.
	run -1 probe "$CID" /r129 /r130 /card0
	[ "${lines[0]}" = "/r129 EPERM" ]
	[ "${lines[1]}" = "/r130 EPERM" ]
	[ "${lines[2]}" = "/card0 EPERM" ]
	run -0 probe "$CID" /dev/null
	# Only the AMD control node: no nvidiactl for an AMD lease.
	run -0 dg_runc exec "$CID" stat -c '%n %t:%T %a' /dev/dri/renderD128
	[ "$output" = "/dev/dri/renderD128 e2:80 666" ]
	run -1 dg_runc exec "$CID" test -e /dev/nvidiactl
	run -1 dg_runc exec "$CID" test -e /dev/dri/renderD129

	run -0 dg revoke --pid "$CPID" --gpu 1
	run -1 probe "$CID" /r128 /kfd
	[ "${lines[0]}" = "/r128 EPERM" ]
	[ "${lines[1]}" = "/kfd EPERM" ]
	run -1 dg_runc exec "$CID" test -e /dev/dri/renderD128
}

@test "grant an Intel GPU: its render node reaches the driver; no kfd, AMD's nodes denied" {
	drm_container c
	run -0 dg grant --pid "$CPID" --gpu 0000:a0:00.0
	[[ "$output" == "granted GPU 3 ("* ]]
	run -1 probe "$CID" /dev/dri/renderD130 /r128 /kfd
	[ "${lines[0]}" = "/dev/dri/renderD130 ENXIO" ]
	[ "${lines[1]}" = "/r128 EPERM" ]
	[ "${lines[2]}" = "/kfd EPERM" ]
	run -1 dg_runc exec "$CID" test -e /dev/kfd
}

@test "--vendor picks by vendor; --arch is NVIDIA's and says so" {
	drm_container a
	run -0 dg grant --pid "$CPID" --gpus 1 --vendor AMD
	[[ "$output" == "granted GPU 1 ("* ]]
	run -0 dg grant --pid "$CPID" --gpus 2 --vendor amd
	[[ "$output" == "granted GPU"*"2"* ]]
	run -1 probe "$CID" /r128 /r129 /r130
	[ "${lines[0]}" = "/r128 ENXIO" ]
	[ "${lines[1]}" = "/r129 ENXIO" ]
	[ "${lines[2]}" = "/r130 EPERM" ]
	run -0 dg list --json
	[ "$(echo "$output" | jq -c '[.gpus[] | .state]')" = '["free","held","held","free"]' ]

	run ! dg grant --pid "$CPID" --gpus 1 --vendor amd --arch hopper
	[[ "$output" == *"--arch names NVIDIA architectures"* ]]
	run ! dg grant --pid "$CPID" --gpus 1 --vendor matrox
	[[ "$output" == *"unknown vendor 'matrox'"* ]]
	run ! dg grant --pid "$CPID" --gpus 3 --vendor amd
	run -0 dg list --json
	[ "$(echo "$output" | jq -c '[.gpus[] | .state]')" = '["free","held","held","free"]' ]
	# A count with constraints counts the GPUs held that meet them.
	run -0 dg grant --pid "$CPID" --gpus 1 --vendor intel
	[[ "$output" == "granted GPU 3 ("* ]]
	run -1 probe "$CID" /r130
	[ "${lines[0]}" = "/r130 ENXIO" ]
}

@test "a mixed lease: NVIDIA, AMD and Intel GPUs in one container, each vendor's control nodes" {
	drm_container c
	mknod -m 666 "$DG_TMP/c/rootfs/nv0" c 195 0
	run -0 dg grant --pid "$CPID" --gpu 0,2,3
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidiactl /dev/dri/renderD129 /dev/dri/renderD130 /dev/kfd
	[ "${lines[0]}" = "/dev/nvidia0 ENXIO" ]
	[ "${lines[1]}" = "/dev/nvidiactl ENXIO" ]
	[ "${lines[2]}" = "/dev/dri/renderD129 ENXIO" ]
	[ "${lines[3]}" = "/dev/dri/renderD130 ENXIO" ]
	[ "${lines[4]}" = "/dev/kfd ENXIO" ]
	run -1 probe "$CID" /r128
	[ "${lines[0]}" = "/r128 EPERM" ]
	run -0 dg status --json
	[ "$(echo "$output" | jq -c '[.leases[0].gpus[] | .vendor]')" = '["nvidia","amd","intel"]' ]
	# The record keeps each GPU's vendor; a restart rebuilds the same nodes.
	stop_daemon
	start_daemon
	run -0 dg revoke --pid "$CPID" --gpu 2
	run -1 probe "$CID" /r129 /dev/dri/renderD130 /dev/kfd
	[ "${lines[0]}" = "/r129 EPERM" ]
	[ "${lines[1]}" = "/dev/dri/renderD130 ENXIO" ]
	# No AMD GPU left in the lease: its control node goes with the last one.
	[ "${lines[2]}" = "/dev/kfd ENOENT" ]
}

@test "grant --device refuses a GPU's DRM nodes, even where device-allow names DRM; takes a DRM device that is no GPU where it does" {
	container c
	mknod -m 666 "$DG_HOST/dev/dri/card7" c 226 7
	# DRM is not among the devices safe in any container: device-allow names it.
	run -4 dg grant --pid "$CPID" --device "$DG_HOST/dev/dri/card7:/dev/card7"
	[[ "$output" == *"device-allow = $DG_HOST/dev/dri/card7"* ]]
	stop_daemon
	start_daemon --device-allow "226:*"
	run ! dg grant --pid "$CPID" --device "$DG_HOST/dev/dri/renderD128:/dev/gpuish"
	[[ "$output" == *"GPU-class device devgate manages"* ]]
	run ! dg grant --pid "$CPID" --device "$DG_HOST/dev/dri/card0:/dev/gpuish"
	[[ "$output" == *"GPU-class device devgate manages"* ]]
	run -0 dg grant --pid "$CPID" --device "$DG_HOST/dev/dri/card7:/dev/card7"
	run -1 probe "$CID" /dev/card7
	[ "${lines[0]}" = "/dev/card7 ENXIO" ]
}

@test "grant --card: the GPU's card node too; the neighbour's stays denied, a restart keeps it, revoke takes it" {
	drm_container c
	run -0 dg grant --pid "$CPID" --gpu 1 --card
	run -1 probe "$CID" /dev/dri/renderD128 /dev/dri/card0 /card0 /card1 /card7
	[ "${lines[0]}" = "/dev/dri/renderD128 ENXIO" ]
	[ "${lines[1]}" = "/dev/dri/card0 ENXIO" ]
	[ "${lines[2]}" = "/card0 ENXIO" ]
	[ "${lines[3]}" = "/card1 EPERM" ]
	[ "${lines[4]}" = "/card7 EPERM" ]
	# Without --card, no card node: GPU 3 (Intel) alone.
	run -0 dg grant --pid "$CPID" --gpu 3
	run -1 probe "$CID" /dev/dri/card2
	[ "${lines[0]}" = "/dev/dri/card2 ENOENT" ]
	# The record keeps the card: a restart neither loses nor widens it.
	[ "$(jq -c '.gpus[] | select(.vendor == "amd") | .card' "$DG_TMP"/state/leases/*.json)" = 0 ]
	stop_daemon
	start_daemon
	run -0 dg revoke --pid "$CPID" --gpu 1
	run -1 probe "$CID" /card0 /dev/dri/renderD130
	[ "${lines[0]}" = "/card0 EPERM" ]
	[ "${lines[1]}" = "/dev/dri/renderD130 ENXIO" ]
	run -1 dg_runc exec "$CID" test -e /dev/dri/card0
}

@test "metrics: AMD accesses counted per node, labelled with the GPU's stable id; the neighbour's denials too" {
	drm_container c
	run -0 dg grant --pid "$CPID" --gpu 1
	run -1 probe "$CID" /dev/dri/renderD128 /r129
	run -0 dg metrics
	echo "$output" | grep -E '^devgate_device_accesses_granted_total\{.*node="/dev/dri/renderD128",gpu="0000:80:00.0",access="r"\} 1$'
	echo "$output" | grep -E '^devgate_device_accesses_denied_total\{.*device="226:129",node="/dev/dri/renderD129",gpu="0000:90:00.0",access="r"\} 1$'
	# A DRM device that is no GPU (card7) is not GPU-class: not counted.
	run -1 probe "$CID" /card7
	run -0 dg metrics
	! echo "$output" | grep -q 'device="226:7"'
}

@test "cdi generate: a device per AMD and Intel GPU with its render node, /dev/kfd with AMD's" {
	run -0 dg cdi generate --host-root "$DG_HOST" --kind devgate.test/gpu
	spec=$output
	[ "$(echo "$spec" | jq -c '[.devices[] | select(.name == "1") | .containerEdits.deviceNodes[].path]')" = \
		'["/dev/dri/renderD128","/dev/kfd"]' ]
	[ "$(echo "$spec" | jq -c '[.devices[] | select(.name == "0000:a0:00.0") | .containerEdits.deviceNodes[] | [.path, .major, .minor]]')" = \
		'[["/dev/dri/renderD130",226,130]]' ]
	[ "$(echo "$spec" | jq -r '.devices[] | select(.name == "3") | .containerEdits.hooks[0].args[-1]')" = "0000:a0:00.0" ]
	# NVIDIA's control nodes stay spec-wide, as before; the kfd is not among them.
	[ "$(echo "$spec" | jq -c '[.containerEdits.deviceNodes[].path]')" = \
		'["/dev/nvidiactl","/dev/nvidia-uvm","/dev/nvidia-uvm-tools"]' ]
	[ "$(echo "$spec" | jq -c '[.devices[] | select(.name == "all") | .containerEdits.deviceNodes[].path]')" = \
		'["/dev/nvidia0","/dev/dri/renderD128","/dev/dri/renderD129","/dev/dri/renderD130","/dev/kfd"]' ]
}

@test "doctor: per vendor what it found, and whether /dev/kfd is there" {
	run -0 dg doctor --host-root "$DG_HOST" --pin-root "$DG_PINS" --json
	[ "$(echo "$output" | jq -r '.checks[] | select(.name == "drm-gpus") | .message')" = \
		"2 AMD GPUs with /dev/kfd, 1 Intel GPU (DRM major 226, render nodes)" ]
	[ "$(echo "$output" | jq -r '.checks[] | select(.name == "nodes") | .message')" = \
		"8 device nodes in /dev with the right numbers" ]
	sed -i '/kfd/d' "$DG_HOST/proc/devices"
	run -0 dg doctor --host-root "$DG_HOST" --pin-root "$DG_PINS" --json
	[ "$(echo "$output" | jq -r '.checks[] | select(.name == "drm-gpus") | .status')" = warn ]
}

@test "rescan: an AMD GPU that appears is guarded and grantable at once" {
	stop_daemon
	rm -rf "$DG_HOST"
	make_host -n 1 --amd 1
	start_daemon
	drm_container c
	[ "$(dg list --json | jq '.gpus | length')" = 2 ]
	make_host -n 1 --amd 2
	run -0 dg rescan
	[ "$(dg list --json | jq -c '[.gpus[] | .vendor]')" = '["nvidia","amd","amd"]' ]
	run -0 dg grant --pid "$CPID" --gpu 0000:90:00.0
	[[ "$output" == "granted GPU 2 ("* ]]
	run -1 probe "$CID" /r129 /r128
	[ "${lines[0]}" = "/r129 ENXIO" ]
	[ "${lines[1]}" = "/r128 EPERM" ]
	# The new minor is GPU-class now: the tally counts the denial of its neighbour.
	run -0 dg metrics
	echo "$output" | grep -E '^devgate_device_accesses_denied_total\{.*device="226:128".*\} 1$'
}

@test "a container whose /dev/dri is a host directory bound in: refused, the host's directory untouched" {
	requires runc
	mkdir "$DG_TMP/hostdri"
	mknod -m 666 "$DG_TMP/hostdri/renderD129" c 226 129
	touch "$DG_TMP/hostdri/marker"
	CID="$DG_ID-b"
	dg_bundle "$DG_TMP/b" "$DEVGATE_BUILD/probe"
	jq --arg src "$DG_TMP/hostdri" '.mounts += [{destination: "/dev/dri", type: "bind",
		source: $src, options: ["rbind", "rw"]}]' "$DG_TMP/b/config.json" >"$DG_TMP/b/c.new"
	mv "$DG_TMP/b/c.new" "$DG_TMP/b/config.json"
	CPID=$(dg_run "$CID" "$DG_TMP/b")
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	run ! dg grant --pid "$CPID" --gpu 1
	[[ "$output" == *"cannot create /dev/dri/renderD128 in the container"*"cross-device link"* ]]
	[ "$(ls "$DG_TMP/hostdri" | tr '\n' ' ')" = "marker renderD129 " ]
	run -1 probe "$CID" /dev/dri/renderD129
	[ "${lines[0]}" = "/dev/dri/renderD129 EPERM" ]
	[ "$(dg list --json | jq -r '.gpus[1].state')" = free ]
}
