#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# An inventory that stays true: architecture, compute capability and memory
# of every GPU; the admin's gpu-allow list, aliases and profiles; GPUs that
# vanish and appear while devgated runs. Grants are checked from inside live
# runc containers: the granted GPU reaches the driver (ENXIO), the others
# stay denied (EPERM).

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; }
teardown() {
	[ -n "${WATCH_PID:-}" ] && kill "$WATCH_PID" 2>/dev/null
	dg_teardown
}

# gpus_container NAME MINOR...: a runc container with /gpuM (195:M) made in
# its rootfs before start for each MINOR, nodes the runtime denies.
gpus_container() {
	requires runc
	local name=$1 m
	shift
	CID="$DG_ID-$name"
	dg_bundle "$DG_TMP/$name" "$DEVGATE_BUILD/probe"
	for m in "$@"; do
		[ -e "$DG_TMP/$name/rootfs/gpu$m" ] || mknod -m 666 "$DG_TMP/$name/rootfs/gpu$m" c 195 "$m"
	done
	CPID=$(dg_run "$CID" "$DG_TMP/$name")
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	[ -n "$CPID" ] && [ "$CPID" != null ]
}

# The PCI bus id mkfixture gives GPU I.
fixture_pci() {
	printf '0000:%02x:00.0' $(((0x18 + $1 * 0x23) % 256))
}

uuid_of() {
	dg list --json | jq -r ".gpus[] | select(.index == $1) | .uuid"
}

state_of() {
	dg list --json | jq -r ".gpus[] | select(.index == $1) | .state"
}

write_conf() {
	printf '%s\n' "$@" >"$DG_TMP/devgate.conf"
}

no_refusal_logged() {
	! grep -q "refused grant" "$DG_TMP/daemon.log"
}

@test "list: architecture from Fermi to Blackwell, compute capability and memory, text and JSON" {
	make_host -g "Tesla M2090=1091" -g "Tesla K80=102d" -g "NVIDIA H100 80GB HBM3=2330" \
		-g "NVIDIA B200=2901" -g "NVIDIA A100-SXM4-40GB=20b0"
	start_daemon
	run -0 dg list --json
	[ "$(echo "$output" | jq -c '[.gpus[] | [.arch, .cc, .memory_mib]]')" = \
		'[["fermi","2.0",null],["kepler","3.7",null],["hopper","9.0",81920],["blackwell","10.0",null],["ampere","8.0",40960]]' ]
	run -0 dg list
	[[ "${lines[0]}" == "IDX  VENDOR  MINOR  UUID"*"ARCH       CC    MEM  NUMA  STATE  MODEL" ]]
	[[ "${lines[1]}" == *"10de:1091  fermi      2.0   -    -     free   Tesla M2090" ]]
	[[ "${lines[3]}" == *"10de:2330  hopper     9.0   80G  -     free   NVIDIA H100 80GB HBM3" ]]
	[[ "${lines[4]}" == *"10de:2901  blackwell  10.0  -    -     free   NVIDIA B200" ]]
}

@test "grant: --arch and --model in any case, --min-memory and --min-cc pick what the driver tells" {
	make_host -g "Tesla M2090=1091" -g "Tesla K80=102d" -g "NVIDIA H100 80GB HBM3=2330" \
		-g "NVIDIA A100-SXM4-40GB=20b0"
	start_daemon
	gpus_container a 0 1 2 3
	run -0 dg grant --pid "$CPID" --gpus 1 --arch Hopper
	[[ "$output" == "granted GPU 2 ("* ]]
	run -0 dg grant --pid "$CPID" --gpus 1 --arch FERMI --model m2090
	[[ "$output" == "granted GPU 0 ("* ]]
	run -1 probe "$CID" /dev/nvidia2 /dev/nvidia0 /gpu1 /gpu3
	[ "$output" = "$(printf '/dev/nvidia2 ENXIO\n/dev/nvidia0 ENXIO\n/gpu1 EPERM\n/gpu3 EPERM')" ]

	gpus_container b 0 1 2 3
	# 48G: only the H100 has that much, and a holds it.
	run -8 dg grant --pid "$CPID" --gpus 1 --min-memory 48G
	[[ "$output" == *"requested 1 GPU with min-memory=48G: 0 free"* ]]
	run -0 dg grant --pid "$CPID" --gpus 1 --min-memory 40GiB
	[[ "$output" == "granted GPU 3 ("* ]]
	# The K80 (3.7) is the only free one at 3.7 or more; the M2090 (2.0) is not.
	run -0 dg grant --pid "$CPID" --gpus 2 --min-cc 3.7
	[[ "$output" == "granted GPU 1 ("* ]]
	run -1 probe "$CID" /dev/nvidia3 /dev/nvidia1 /gpu0 /gpu2
	[ "$output" = "$(printf '/dev/nvidia3 ENXIO\n/dev/nvidia1 ENXIO\n/gpu0 EPERM\n/gpu2 EPERM')" ]
	run -7 dg grant --pid "$CPID" --gpus 1 --min-cc 12.0
	[[ "$output" == *"no GPU on this host matches min-cc=12.0"* ]]
}

@test "bad sizes, capabilities and architectures: a clear error with a hint, nothing granted" {
	start_daemon
	gpus_container a 0 1
	run -2 dg grant --pid "$CPID" --gpus 1 --min-memory 40
	[[ "$output" == *"--min-memory wants a size with a unit (40G, 16GiB, 512M), not '40'"* ]]
	run -2 dg grant --pid "$CPID" --gpus 1 --min-cc eight
	[[ "$output" == *"--min-cc wants a compute capability MAJOR.MINOR (8.0), not 'eight'"* ]]
	# Usage errors never reach devgated.
	no_refusal_logged
	run -2 dg grant --pid "$CPID" --gpus 1 --arch tesla
	[ "${lines[0]}" = "devgatectl: unknown architecture 'tesla'" ]
	[ "${lines[1]}" = "hint: known (any case): fermi kepler maxwell pascal volta turing ampere ada hopper blackwell" ]
	no_leases
	run -1 probe "$CID" /gpu0 /gpu1
	[ "$output" = "$(printf '/gpu0 EPERM\n/gpu1 EPERM')" ]
}

@test "gpu-allow: GPUs outside the list are 'excluded', listed and counted, and never granted" {
	make_host -g "NVIDIA H100 80GB HBM3=2330" -g "NVIDIA A100-SXM4-40GB=20b0"
	write_conf "gpu-allow = 10de:2330"
	start_daemon --config "$DG_TMP/devgate.conf"
	[ "$(state_of 1)" = excluded ]
	run -0 dg list
	[[ "$output" == *"GPU 1: not in devgated's gpu-allow list; never granted"* ]]
	dg metrics | grep -qx 'devgate_gpus{state="excluded"} 1'
	gpus_container a 0 1
	run -8 dg grant --pid "$CPID" --gpu 1
	[ "${lines[0]}" = "devgatectl: GPU 1 (10de:20b0) is excluded by the admin's gpu-allow list" ]
	[[ "${lines[1]}" == "hint: gpu-allow in devgate.conf lists the GPUs devgate may grant"* ]]
	run -8 dg grant --pid "$CPID" --gpus 1 --arch ampere
	[[ "$output" == *"excluded by the admin's gpu-allow list"* ]]
	no_leases
	run -1 probe "$CID" /gpu1
	[ "$output" = "/gpu1 EPERM" ]
	run -0 dg grant --pid "$CPID" --gpus 1
	[[ "$output" == "granted GPU 0 ("* ]]
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/gpu1 EPERM')" ]
	# The CDI spec offers no device that devgated would refuse.
	run -0 --separate-stderr dg cdi generate
	[ "$(echo "$output" | jq -r '[.devices[].name] | join(" ")')" = "0 $(uuid_of 0) all" ]
	# shellcheck disable=SC2154 # bats sets stderr with --separate-stderr
	[[ "$stderr" == *"leaving GPU 1 out: not in devgated's gpu-allow list"* ]]
	# Its "all" asks for the GPUs it carries nodes of, not devgated's all.
	[ "$(echo "$output" | jq -r '.devices[2].containerEdits.hooks[0].args | join(" ")')" = \
		"devgate-hook --socket $DG_SOCK createRuntime --gpu $(uuid_of 0)" ]
}

@test "alias and profile from devgate.conf: grant --alias, --profile; unknown names have a hint" {
	make_host -g "NVIDIA H100 80GB HBM3=2330" -g "NVIDIA A100-SXM4-40GB=20b0" \
		-g "NVIDIA H100 80GB HBM3=2330"
	write_conf "alias small = 10de:20b0" "profile pair = gpus=2 arch=hopper min-cc=9.0"
	start_daemon --config "$DG_TMP/devgate.conf"
	gpus_container a 0 1 2
	run -0 dg grant --pid "$CPID" --alias small
	[[ "$output" == "granted GPU 1 ("* ]]
	run -1 probe "$CID" /dev/nvidia1 /gpu0 /gpu2
	[ "$output" = "$(printf '/dev/nvidia1 ENXIO\n/gpu0 EPERM\n/gpu2 EPERM')" ]

	gpus_container b 0 1 2
	run -2 dg grant --pid "$CPID" --alias big
	[ "${lines[0]}" = "devgatectl: no alias 'big' in devgate.conf" ]
	[ "${lines[1]}" = "hint: 'devgated --check-config' lists the aliases (1, e.g. 'small')" ]
	run -2 dg grant --pid "$CPID" --profile quad
	[ "${lines[0]}" = "devgatectl: no profile 'quad' in devgate.conf" ]
	run -0 dg grant --pid "$CPID" --profile pair
	[[ "$output" == "granted GPU 0 ("*"), GPU 2 ("* ]]
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidia2 /gpu1
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/dev/nvidia2 ENXIO\n/gpu1 EPERM')" ]
	[ "$(dg status --json | jq '.leases | length')" = 2 ]
}

# inventory_bundle NAME JQ-FILTER MINOR...: hooked_bundle, its cgroup
# removed at teardown.
inventory_bundle() {
	hooked_bundle "$@"
	DG_CGROUPS+=("$DG_CGROOT/$CID")
}

@test "OCI hook: annotations devgate.io/alias and devgate.io/profile grant what devgate.conf names" {
	requires runc
	make_host -g "NVIDIA H100 80GB HBM3=2330" -g "NVIDIA A100-SXM4-40GB=20b0" \
		-g "NVIDIA H100 80GB HBM3=2330"
	write_conf "alias small = 10de:20b0" "profile pair = gpus=2 arch=hopper"
	start_daemon --config "$DG_TMP/devgate.conf"
	inventory_bundle a '.annotations = {"devgate.io/alias": "small"} |
		.process.args = ["probe", "/dev/nvidia1", "/gpu0", "/gpu2"]' 0 2
	run -1 run_bundle a
	[ "$output" = "$(printf '/dev/nvidia1 ENXIO\n/gpu0 EPERM\n/gpu2 EPERM')" ]
	inventory_bundle b '.annotations = {"devgate.io/profile": "pair"} |
		.process.args = ["probe", "/dev/nvidia0", "/dev/nvidia2", "/gpu1"]' 1
	run -1 run_bundle b
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/dev/nvidia2 ENXIO\n/gpu1 EPERM')" ]
	grep -q "granted 2 GPU(s) to $CID" "$DG_TMP/daemon.log"
	# An unknown name fails the container's start, with devgate's reason.
	inventory_bundle c '.annotations = {"devgate.io/profile": "nope"} |
		.process.args = ["probe", "/gpu1"]' 1
	run ! run_bundle c
	[[ "$output" == *"no profile 'nope' in devgate.conf"* ]]
	wait_until 5 no_leases
}

@test "devgated --check-config prints the policy; an error names FILE:LINE, exits 14, changes nothing" {
	write_conf "gpu-allow = 10de:2330,10de:20b0" "alias h100 = 10DE:2330" \
		"profile big = gpus=2 alias=h100 min-memory=80G shared=true"
	run -0 "$DEVGATE_BUILD/devgated" --config "$DG_TMP/devgate.conf" --check-config
	[[ "$output" == *"gpu-allow = 10de:2330, 10de:20b0"* ]]
	[[ "$output" == *"alias h100 = 10de:2330"* ]]
	[[ "$output" == *"profile big = gpus=2 alias=h100 min-memory=80G shared=true"* ]]
	write_conf "# devgate.conf" "alias h100 = 10de:2330" "profile big = gpus=two"
	run -14 "$DEVGATE_BUILD/devgated" --config "$DG_TMP/devgate.conf" --check-config
	[[ "$output" == *"$DG_TMP/devgate.conf:3: gpus=two is not a count from 1 to 64"* ]]
	write_conf "profile big = alias=h100" "alias h100 = 10de:2330"
	run -14 "$DEVGATE_BUILD/devgated" --config "$DG_TMP/devgate.conf" --check-config
	[[ "$output" == *"devgate.conf:1: alias 'h100' is not defined above this profile"* ]]
	# The shipped file's examples, uncommented, are valid.
	sed -n 's/^#   \(gpu-allow\|alias\|profile\) /\1 /p' "$DG_ROOT/packaging/devgate.conf" >"$DG_TMP/ex.conf"
	[ "$(wc -l <"$DG_TMP/ex.conf")" = 5 ]
	run -0 "$DEVGATE_BUILD/devgated" --config "$DG_TMP/ex.conf" --check-config
	[[ "$output" == *"profile infer = gpus=1 alias=a100 shared=true"* ]]
	write_conf "gpu-allow = nvidia"
	run -14 "$DEVGATE_BUILD/devgated" --config "$DG_TMP/devgate.conf" --check-config
	[[ "$output" == *"devgate.conf:1: gpu-allow: 'nvidia' is not VENDOR:DEVICE"* ]]
	[[ "$output" == *"hint: PCI ids in hex, comma separated"* ]]
	# A daemon that cannot read its policy does not start.
	run -14 "$DEVGATE_BUILD/devgated" --config "$DG_TMP/devgate.conf" --socket "$DG_SOCK" \
		--state-dir "$DG_TMP/state" --pin-root "$DG_PINS"
	[ ! -e "$DG_SOCK" ]
	[ ! -e "$DG_TMP/state" ]
}

@test "rescan: a vanished GPU turns unusable, keeps its lease and tells its holder; a new one is grantable at once" {
	make_host -n 3
	start_daemon
	dg watch --json >"$DG_TMP/watch.out" &
	WATCH_PID=$!
	gpus_container a 0 1 2
	cid_a=$CID pid_a=$CPID
	run -0 dg grant --pid "$CPID" --gpu 1
	wait_until 5 grep -q '"type":"granted"' "$DG_TMP/watch.out"
	u1=$(uuid_of 1)

	# GPU 1 falls off the bus: the driver stops listing it.
	rm -rf "$DG_HOST/proc/driver/nvidia/gpus/$(fixture_pci 1)" "$DG_HOST/sys/bus/pci/devices/$(fixture_pci 1)"
	run -0 dg rescan
	[ "${lines[0]}" = "3 GPU(s) listed; 0 appeared, 1 vanished, 0 changed" ]
	[ "${lines[1]}" = "vanished: $u1" ]
	[ "$(state_of 1)" = unusable ]
	dg list --json | jq -e ".gpus[1].problem | startswith(\"vanished: no longer listed by the driver\")"
	[ "$(dg list --json | jq -r '.gpus[1].holders[0].container')" = "$cid_a" ]
	dg metrics | grep -qx 'devgate_gpus{state="unusable"} 1'
	# The lease is kept, and its holder is told.
	[ "$(dg status --json | jq -r ".leases[0].gpus[0].uuid")" = "$u1" ]
	# Kept means kept: the grant stays in the gate until a revoke.
	run -1 probe "$cid_a" /dev/nvidia1 /gpu2
	[ "$output" = "$(printf '/dev/nvidia1 ENXIO\n/gpu2 EPERM')" ]
	wait_until 5 grep -q '"type":"vanished"' "$DG_TMP/watch.out"
	[ "$(grep '"type":"vanished"' "$DG_TMP/watch.out" | jq -c '[.lease.container, .gpus]')" = "[\"$cid_a\",[\"$u1\"]]" ]
	# CDI leaves it out.
	run -0 dg cdi generate
	[[ "$output" != *"$u1"* ]]

	# A new GPU appears; SIGHUP re-reads, and it is grantable without a restart.
	"$DG_ROOT/tests/helpers/mkfixture" "$DG_HOST" --gpus-only --first 3 -g "NVIDIA A100-SXM4-40GB=20b0" >/dev/null
	kill -HUP "$DG_DAEMON_PID"
	wait_until 5 sh -c "[ \"\$($DEVGATE_BUILD/devgatectl -s $DG_SOCK list --json | jq '.gpus | length')\" = 4 ]"
	[ "$(state_of 3)" = free ]
	gpus_container b 0 1 2 3
	run -0 dg grant --pid "$CPID" --gpus 1 --arch ampere
	[[ "$output" == "granted GPU 3 ("* ]]
	run -1 probe "$CID" /dev/nvidia3 /gpu1 /gpu2
	[ "$output" = "$(printf '/dev/nvidia3 ENXIO\n/gpu1 EPERM\n/gpu2 EPERM')" ]
	# The vanished GPU is not handed out, and "all" means those on the host.
	run -8 dg grant --pid "$CPID" --gpu 1
	[[ "$output" == *"GPU 1 unusable: vanished"* ]]
	run -0 dg grant --pid "$CPID" --gpu all
	[[ "$output" == "granted GPU 0 ("*"), GPU 2 ("*") to $CID "* ]]
	run -1 probe "$CID" /gpu1
	[ "$output" = "/gpu1 EPERM" ]

	# GPU 1 comes back: held again by a, which hears of it.
	"$DG_ROOT/tests/helpers/mkfixture" "$DG_HOST" --gpus-only --first 1 -g "NVIDIA H100 80GB HBM3=2330" >/dev/null
	run -0 dg rescan --json
	[ "$(echo "$output" | jq -c .appeared)" = "[\"$u1\"]" ]
	[ "$(state_of 1)" = held ]
	wait_until 5 grep -q '"type":"restored"' "$DG_TMP/watch.out"
	run -0 dg revoke --pid "$pid_a" --gpu 1
	run -1 probe "$cid_a" /gpu1
	[ "$output" = "/gpu1 EPERM" ]
}

@test "rescan is for root or the admin group, and a SIGHUP no longer says 'nothing to reload'" {
	DG_SOCK="$DG_TMP/run/sock"
	chmod 0711 "$DG_TMP"
	start_daemon --socket-group 4242
	kill -HUP "$DG_DAEMON_PID"
	wait_until 5 grep -q "inventory re-read (SIGHUP): 2 GPU(s), 0 appeared, 0 vanished, 0 changed" \
		"$DG_TMP/daemon.log"
	run ! grep -q "nothing to reload" "$DG_TMP/daemon.log"
	run -4 setpriv --reuid 65534 --regid 65534 --groups 4242 "$DEVGATE_BUILD/devgatectl" \
		-s "$DG_SOCK" rescan
	[[ "$output" == *"'rescan' changes leases: root or devgated's admin-group only"* ]]
	run -0 dg rescan
	run -4 setpriv --reuid 65534 --regid 65534 --groups 4242 "$DEVGATE_BUILD/devgatectl" \
		-s "$DG_SOCK" reload
	[[ "$output" == *"'reload' changes leases: root or devgated's admin-group only"* ]]
}

@test "rescan after a driver reload that moved a major before its nodes: nothing granted with either number" {
	start_daemon
	gpus_container a 0 1
	uvm=$(awk '$2 == "nvidia-uvm" { print $1 }' "$DG_HOST/proc/devices")
	sed -i "s/^$uvm nvidia-uvm\$/$((uvm - 1)) nvidia-uvm/" "$DG_HOST/proc/devices"
	run -0 dg rescan
	[ "${lines[0]}" = "2 GPU(s) listed; 0 appeared, 0 vanished, 0 changed" ]
	# The new major is taken (reload.bats: leases follow it); the host's node
	# still carries the old one until the driver's tools make it again.
	run -0 dg list --json
	[ "$(echo "$output" | jq -r .control_problem)" = "host node /dev/nvidia-uvm is not character device $((uvm - 1)):0 (found char device $uvm:0)" ]
	[ "$(echo "$output" | jq .driver.uvm_major)" = "$((uvm - 1))" ]
	run ! dg grant --pid "$CPID" --gpu 0
	[[ "$output" == *"cannot grant: host node /dev/nvidia-uvm is not character device"* ]]
	no_leases
	run -1 probe "$CID" /gpu0 /gpu1
	[ "$output" = "$(printf '/gpu0 EPERM\n/gpu1 EPERM')" ]
}

@test "CDI: a device per alias of devgated's; a container started with it gets one GPU of that id" {
	requires runc
	make_host -g "NVIDIA H100 80GB HBM3=2330" -g "NVIDIA A100-SXM4-40GB=20b0" \
		-g "NVIDIA H100 80GB HBM3=2330"
	write_conf "alias small = 10de:20b0" "alias 0 = 10de:2330" "alias none = 10de:27b8"
	start_daemon --config "$DG_TMP/devgate.conf"
	run -0 --separate-stderr dg cdi generate --hook "$DEVGATE_BUILD/devgate-hook"
	spec=$output
	dev=$(echo "$spec" | jq -c '.devices[] | select(.name == "small") | .containerEdits')
	[ "$(echo "$dev" | jq -c '[.deviceNodes[].path]')" = '["/dev/nvidia1"]' ]
	[ "$(echo "$dev" | jq -r '.hooks[0].args | join(" ")')" = \
		"devgate-hook --socket $DG_SOCK createRuntime --alias small" ]
	[[ "$stderr" == *"no device for alias 0: its name is a GPU's"* ]]
	[[ "$stderr" == *"no device for alias none: no usable GPU has its id"* ]]
	# What a CDI runtime does with devgate.io/gpu=small: run the device's hook.
	inventory_bundle a '.process.args = ["probe", "/dev/nvidia1", "/gpu0", "/gpu2"]' 0 2
	jq --argjson dev "$dev" '.hooks = {createRuntime: [$dev.hooks[0] | {path, args, env}]}' \
		"$DG_TMP/a/config.json" >"$DG_TMP/a/config.new"
	mv "$DG_TMP/a/config.new" "$DG_TMP/a/config.json"
	run -1 run_bundle a
	[ "$output" = "$(printf '/dev/nvidia1 ENXIO\n/gpu0 EPERM\n/gpu2 EPERM')" ]
	grep -q "granted 1 GPU(s) to $CID" "$DG_TMP/daemon.log"
	run -2 "$DEVGATE_BUILD/devgate-hook" createRuntime --gpu 0 --alias small </dev/null
	[[ "$output" == *"give --gpu or --alias, not both"* ]]
}

# reloaded WHY: the daemon log says a reload by WHY put a policy in force.
reloaded() {
	wait_until 5 grep -q "$1: policy reloaded" "$DG_TMP/daemon.log"
}

@test "reload: gpu-allow re-marks GPUs, a held one that turns excluded keeps its lease; aliases and profiles for the next grant" {
	make_host -g "NVIDIA H100 80GB HBM3=2330" -g "NVIDIA A100-SXM4-40GB=20b0" \
		-g "NVIDIA H100 80GB HBM3=2330"
	write_conf "alias small = 10de:20b0"
	start_daemon --config "$DG_TMP/devgate.conf"
	gpus_container a 0 1 2
	cid_a=$CID pid_a=$CPID
	run -0 dg grant --pid "$CPID" --alias small
	[[ "$output" == "granted GPU 1 ("* ]]
	gpus_container b 0 1 2
	run -2 dg grant --pid "$CPID" --profile two
	[ "${lines[0]}" = "devgatectl: no profile 'two' in devgate.conf" ]

	write_conf "gpu-allow = 10de:2330" "alias big = 10de:2330" "profile two = gpus=2 alias=big"
	kill -HUP "$DG_DAEMON_PID"
	reloaded SIGHUP
	grep -q "SIGHUP: policy reloaded: 1 of 3 GPU(s) excluded, 1 alias(es), 1 profile(s), 0 device-allow entries" \
		"$DG_TMP/daemon.log"
	grep -q "SIGHUP: GPU 1 ($(uuid_of 1)) is excluded now; its 1 lease(s) keep it until revoked" \
		"$DG_TMP/daemon.log"
	# Excluded and held: listed so, counted so, and the lease stays in force.
	[ "$(state_of 1)" = excluded ]
	[ "$(dg list --json | jq -r '.gpus[1].holders[0].container')" = "$cid_a" ]
	run -0 dg list
	[[ "$output" == *"GPU 1: not in devgated's gpu-allow list; never granted again (held until revoked)"* ]]
	dg metrics | grep -qx 'devgate_gpus{state="excluded"} 1'
	[ "$(dg status --json | jq -r ".leases[] | select(.container == \"$cid_a\") | .gpus[0].index")" = 1 ]
	run -1 probe "$cid_a" /dev/nvidia1 /gpu0
	[ "$output" = "$(printf '/dev/nvidia1 ENXIO\n/gpu0 EPERM')" ]
	# New grants of it are refused; the new alias and profile work at once.
	run -8 dg grant --pid "$CPID" --gpu 1
	[[ "${lines[0]}" == *"GPU 1 (10de:20b0) is excluded by the admin's gpu-allow list"* ]]
	run -2 dg grant --pid "$CPID" --alias small
	[[ "${lines[0]}" == *"no alias 'small' in devgate.conf"* ]]
	run -0 dg grant --pid "$CPID" --profile two
	[[ "$output" == "granted GPU 0 ("*"), GPU 2 ("* ]]
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidia2 /gpu1
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/dev/nvidia2 ENXIO\n/gpu1 EPERM')" ]
	# The holder revokes: the GPU is excluded and free of leases.
	run -0 dg revoke --pid "$pid_a"
	[ "$(dg list --json | jq '.gpus[1].holders | length')" = 0 ]
	[ "$(state_of 1)" = excluded ]
	# gpu-allow emptied: every GPU may be granted again.
	write_conf "alias small = 10de:20b0"
	run -0 dg reload
	[ "$output" = "policy reloaded: 0 GPU(s) excluded, 1 alias(es), 0 profile(s), 0 device-allow entries" ]
	[ "$(state_of 1)" = free ]
	run -0 dg grant --pid "$pid_a" --alias small
	[[ "$output" == "granted GPU 1 ("* ]]
}

@test "reload: a bad file is refused whole and the policy in force stays; command-line options stay over the file" {
	make_host -g "NVIDIA H100 80GB HBM3=2330" -g "NVIDIA A100-SXM4-40GB=20b0"
	write_conf "alias h = 10de:2330"
	start_daemon --config "$DG_TMP/devgate.conf" --gpu-allow 10de:2330
	[ "$(state_of 1)" = excluded ]
	gpus_container a 0 1

	# A line of nonsense among good ones: nothing of the file is taken.
	write_conf "gpu-allow = 10de:20b0" "alias a100 = 10de:20b0" "profile p = gpus=two"
	run -14 dg reload
	[[ "$output" == *"$DG_TMP/devgate.conf:3: gpus=two is not a count from 1 to 64"* ]]
	grep -q "devgatectl reload: configuration refused, the policy in force stays: $DG_TMP/devgate.conf:3:" \
		"$DG_TMP/daemon.log"
	kill -HUP "$DG_DAEMON_PID"
	wait_until 5 grep -q "SIGHUP: configuration refused, the policy in force stays" "$DG_TMP/daemon.log"
	run -2 dg grant --pid "$CPID" --alias a100
	[[ "${lines[0]}" == *"no alias 'a100' in devgate.conf"* ]]
	[ "$(state_of 1)" = excluded ]
	run -0 dg grant --pid "$CPID" --alias h
	[[ "$output" == "granted GPU 0 ("* ]]
	run -0 dg revoke --pid "$CPID"

	# Fixed: taken, but --gpu-allow on the command line still wins over the file's.
	write_conf "gpu-allow = 10de:20b0" "alias a100 = 10de:20b0" "recheck-ms = 700"
	run -0 dg reload
	[ "${lines[0]}" = "policy reloaded: 1 GPU(s) excluded, 1 alias(es), 0 profile(s), 0 device-allow entries" ]
	[ "${lines[1]}" = "changed, but in force only after a restart of devgated: recheck-ms" ]
	run -0 dg --json reload
	[ "$(echo "$output" | jq -c '[.excluded, .aliases, .restart]')" = '[1,1,"recheck-ms"]' ]
	[ "$(state_of 1)" = excluded ]
	[ "$(state_of 0)" = free ]
	run -8 dg grant --pid "$CPID" --alias a100
	[[ "$output" == *"excluded by the admin's gpu-allow list"* ]]
	run -1 probe "$CID" /gpu1
	[ "$output" = "/gpu1 EPERM" ]
	no_leases
}
