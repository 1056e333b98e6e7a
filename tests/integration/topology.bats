#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Topology-aware picking: grant --gpus N on a fixture host with four GPUs on
# two NUMA nodes (GPUs 0,1 on node 0 with CPU 0; GPUs 2,3 on node 1 with
# CPU 1), against live runc containers. Each grant is checked from inside:
# the picked GPUs open with ENXIO, the others stay EPERM.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	make_host -n 4 --numa 0,0,1,1 --node-cpus "0;1"
	start_daemon
}
teardown() { dg_teardown; }

# numa_container NAME: a container with /gpu0../gpu3 (195:0-3) made before
# start: each opens with ENXIO once granted, EPERM otherwise.
numa_container() {
	container "$1"
	for m in 0 2 3; do
		mknod -m 666 "$DG_TMP/$1/rootfs/gpu$m" c 195 "$m"
	done
}

# opens CID GRANTED: the GPUs in GRANTED ("2 3") open, the other ones of 0-3 are denied.
opens() {
	local cid=$1 granted=" $2 " m want
	run -1 probe "$cid" /gpu0 /gpu1 /gpu2 /gpu3
	for m in 0 1 2 3; do
		want=EPERM
		[[ "$granted" == *" $m "* ]] && want=ENXIO
		[ "${lines[$m]}" = "/gpu$m $want" ] || fail "GPU $m: '${lines[$m]}', want $want"
	done
}

@test "list shows each GPU's NUMA node, in text and JSON" {
	run -0 dg list
	[[ "${lines[0]}" == *"MEM  NUMA  STATE"* ]]
	[[ "${lines[1]}" == *"80G  0     free"* ]]
	[[ "${lines[4]}" == *"80G  1     free"* ]]
	[ "$(dg list --json | jq -c '[.gpus[].numa_node]')" = "[0,0,1,1]" ]
}

@test "--gpus 2 takes two GPUs of one node and says why; the pair opens, the rest EPERM" {
	numa_container c
	t0=$(date +%s%N)
	run -0 dg grant --pid "$CPID" --gpus 2
	echo "# grant --gpus 2 with topology: $((($(date +%s%N) - t0) / 1000)) us (devgatectl included)" >&3
	[[ "${lines[0]}" == "granted GPU 0 ("*"), GPU 1 ("* ]]
	# Its CPUs (0-1) span both nodes: no preference, the roomiest node, lowest first.
	[[ "$output" == *"why: picked GPU 0,1: on NUMA node 0, the node with the most free GPUs; the container's CPUs (0-1, by affinity: no cpuset controller) span nodes 0,1, no preference"* ]]
	opens "$CID" "0 1"
}

@test "with one GPU of node 0 taken, --gpus 2 takes node 1's pair rather than split" {
	numa_container a
	run -0 dg grant --pid "$CPID" --gpu 0
	numa_container b
	run -0 dg --json grant --pid "$CPID" --gpus 2
	[ "$(echo "$output" | jq -r '.reason')" != null ]
	[[ "$(echo "$output" | jq -r '.reason')" == "picked GPU 2,3: on NUMA node 1, the node with the most free GPUs;"* ]]
	uuids=$(dg list --json | jq -c '[.gpus[2].uuid, .gpus[3].uuid]')
	[ "$(echo "$output" | jq -c '.granted')" = "$uuids" ]
	opens "$CID" "2 3"
	# Only GPU 1 is left: a count of 1 gets it, a count of 2 now must spread.
	numa_container d
	run -0 dg grant --pid "$CPID" --gpus 1
	[[ "$output" == *"why: picked GPU 1: on NUMA node 0"* ]]
	opens "$CID" "1"
}

@test "--same-numa: refused when no node has 2 free, exit 8 and a hint; accepted otherwise" {
	numa_container a
	run -0 dg grant --pid "$CPID" --gpu 0,2
	numa_container b
	run -8 dg grant --pid "$CPID" --gpus 2 --same-numa
	[ "${lines[0]}" = "devgatectl: --same-numa: no NUMA node has 2 free GPUs that match (node 0: 1 free of 2, node 1: 1 free of 2)" ]
	[[ "${lines[1]}" == "hint: "*"drop --same-numa"* ]]
	[ "$(dg status --json | jq '[.leases[] | select(.container == "'"$CID"'")] | length')" = 0 ]
	opens "$CID" ""
	# Never possible: no node has 3 GPUs at all.
	run -7 dg grant --pid "$CPID" --gpus 3 --same-numa
	[[ "${lines[0]}" == *"no NUMA node has 3 GPUs that match, so this request can never be met"* ]]
	# Without the requirement the two spread over both nodes.
	run -0 dg grant --pid "$CPID" --gpus 2
	[[ "$output" == *"why: picked GPU 1,3: no NUMA node has 2 free, spread over the fewest"* ]]
	opens "$CID" "1 3"
	# Once node 1 is free again, --same-numa is met there.
	run -0 dg revoke --pid "$CPID"
	run -0 dg revoke --container "$DG_ID-a" --gpu 2
	run -0 dg grant --pid "$CPID" --gpus 2 --same-numa
	[[ "$output" == *"why: picked GPU 2,3: on NUMA node 1"* ]]
	opens "$CID" "2 3"
	# Selectors are taken as named: --same-numa does not go with them.
	run -2 dg grant --pid "$CPID" --gpu 1 --same-numa
	[[ "${lines[0]}" == *"--same-numa goes with a count of GPUs"* ]]
}

@test "the node of the container's CPUs wins: CPU 1 picks node 1, CPU 0 node 0" {
	numa_container one
	taskset -p -c 1 "$CPID" >/dev/null
	run -0 dg grant --pid "$CPID" --gpus 2
	[[ "$output" == *"why: picked GPU 2,3: on NUMA node 1; the container's CPUs (1, by affinity: no cpuset controller) are on node 1"* ]]
	opens "$CID" "2 3"
	numa_container zero
	taskset -p -c 0 "$CPID" >/dev/null
	run -0 dg grant --pid "$CPID" --gpus 1
	[[ "$output" == *"why: picked GPU 0: on NUMA node 0; the container's CPUs (0, "*") are on node 0"* ]]
	opens "$CID" "0"
	# Node 0 still has GPU 1: the CPUs' node wins over lower-numbered choices elsewhere.
	numa_container again
	taskset -p -c 0 "$CPID" >/dev/null
	run -0 dg grant --pid "$CPID" --gpus 1
	[[ "$output" == *"why: picked GPU 1: on NUMA node 0; the container's CPUs (0, "* ]]
	opens "$CID" "1"
}

@test "a host whose sysfs lists no NUMA: lowest free indices, said so" {
	stop_daemon
	rm -rf "$DG_HOST"
	make_host -n 4
	start_daemon
	run -0 dg list --json
	[ "$(echo "$output" | jq -c '[.gpus[] | has("numa_node")] | unique')" = "[false]" ]
	numa_container c
	run -0 dg grant --pid "$CPID" --gpus 2
	[[ "$output" == *"why: picked GPU 0,1: NUMA nodes not known, lowest free indices; the host lists no NUMA nodes"* ]]
	opens "$CID" "0 1"
	numa_container d
	run -7 dg grant --pid "$CPID" --gpus 1 --same-numa
	[[ "${lines[0]}" == *"(no GPU says its NUMA node)"* ]]
}

@test "OCI hook: devgate.io/same-numa=true with a count; a bad value is refused" {
	hooked_bundle h '.annotations = {"devgate.io/gpu-count": "2", "devgate.io/same-numa": "true"}' 0 2 3
	dg_runc run -d -b "$DG_TMP/h" "$CID" </dev/null >"$DG_TMP/h/run.log" 2>&1 ||
		fail "$(cat "$DG_TMP/h/run.log")"
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	[ "$(dg status --json | jq -r '.leases[] | select(.container == "'"$CID"'") | .gpus | length')" = 2 ]
	opens "$CID" "0 1"
	hooked_bundle bad '.annotations = {"devgate.io/gpu-count": "1", "devgate.io/same-numa": "yes"}'
	run ! run_bundle bad
	[[ "$output" == *"annotation devgate.io/same-numa must be true or false"* ]]
}
