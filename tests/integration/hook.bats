#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# devgate as an OCI hook (runc, podman hooks.d) and through CDI (podman).

load helpers

setup_file() { dg_podman_setup_file; }
teardown_file() { dg_podman_teardown_file; }

setup() {
	dg_setup
	start_daemon
	DG_CDI=
}

teardown() {
	[ -n "$DG_CDI" ] && rm -f "$DG_CDI"
	dg_teardown
}

@test "runc: the entrypoint's first open reaches the GPU; poststop releases the lease" {
	requires runc
	hooked_bundle c '.annotations = {"devgate.io/gpus": "0"} |
		.process.args = ["probe", "/dev/nvidia0", "/dev/nvidiactl", "/gpu1"]'
	run -1 run_bundle c
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/dev/nvidiactl ENXIO\n/gpu1 EPERM')" ]
	no_leases
	grep -q "granted 1 GPU(s) to $CID" "$DG_TMP/daemon.log"
	# The container's end (inotify) or its poststop hook, whichever comes first.
	grep -Eq "(released 1 GPU\(s\) of|revoked 1 GPU\(s\) from) $CID" "$DG_TMP/daemon.log"
	[ -z "$(gate_leftovers)" ] || fail "$(gate_leftovers; cat "$DG_TMP/daemon.log")"
}

@test "runc: annotations ask for a count with constraints, or a shared GPU" {
	requires runc
	hooked_bundle a '.annotations = {"devgate.io/gpu-count": "2", "devgate.io/gpu-arch": "hopper"} |
		.process.args = ["probe", "/dev/nvidia0", "/dev/nvidia1"]'
	run -1 run_bundle a
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/dev/nvidia1 ENXIO')" ]
	hooked_bundle s '.annotations = {"devgate.io/gpus": "1", "devgate.io/shared": "true"} |
		.process.args = ["sh", "-c", "probe /dev/nvidia1; sleep 100000"]'
	dg_runc run -d -b "$DG_TMP/s" "$CID" </dev/null >/dev/null
	run -0 dg status --json
	[ "$(echo "$output" | jq -r '.leases[0].gpus[0].shared')" = true ]
}

@test "runc: a name reused at once finds its GPU free, with no poststop to release it" {
	requires runc
	hooked_bundle r '.annotations = {"devgate.io/gpus": "0"} | del(.hooks.poststop) |
		.process.args = ["probe", "/dev/nvidia0"]'
	# Each run's grant may come before the watch has seen the last one end.
	for _ in 1 2 3 4 5; do
		run -1 run_bundle r
		[ "$output" = "/dev/nvidia0 ENXIO" ]
	done
	[ "$(grep -c "granted 1 GPU(s) to $CID" "$DG_TMP/daemon.log")" = 5 ]
}

@test "runc: a GPU held elsewhere fails the container's creation, with the reason" {
	requires runc
	container holder
	run -0 dg grant --pid "$CPID" --gpu 0
	holder=$CID
	hooked_bundle c '.annotations = {"devgate.io/gpus": "0"} | .process.args = ["probe", "/dev/null"]'
	run ! run_bundle c
	[[ "$output" == *"hook createRuntime for container $CID: GPU 0 held by container $holder"* ]]
	[[ "$output" != *"/dev/null ok"* ]] # the entrypoint never ran
	run -0 dg status --json
	[ "$(echo "$output" | jq '.leases | length')" = 1 ]
	[ "$(echo "$output" | jq -r '.leases[0].container')" = "$holder" ]
}

@test "runc: with devgated down the container does not start, and says why" {
	requires runc
	stop_daemon
	hooked_bundle c '.annotations = {"devgate.io/gpus": "0"} | .process.args = ["probe", "/dev/null"]'
	run ! run_bundle c
	[[ "$output" == *"hook createRuntime for container $CID: cannot reach devgated at $DG_SOCK"* ]]
	[[ "$output" != *"/dev/null ok"* ]]
}

@test "image env NVIDIA_VISIBLE_DEVICES=all: no GPU by default, all GPUs by policy" {
	requires runc
	hooked_bundle c '.process.env += ["NVIDIA_VISIBLE_DEVICES=all"] |
		.process.args = ["probe", "/dev/nvidia0", "/dev/nvidia1"]'
	run -1 run_bundle c
	[ "$output" = "$(printf '/dev/nvidia0 ENOENT\n/dev/nvidia1 ENOENT')" ]
	run -1 grep -q "granted" "$DG_TMP/daemon.log"

	stop_daemon
	start_daemon --hook-allow-env
	dg_rm "$CID"
	run -1 run_bundle c
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/dev/nvidia1 ENXIO')" ]
}

@test "image env: none, void and empty mean no GPU even when allowed" {
	requires runc
	stop_daemon
	start_daemon --hook-allow-env
	for v in none void ""; do
		hooked_bundle "c$v" '.process.env += ["NVIDIA_VISIBLE_DEVICES='"$v"'"] |
			.process.args = ["probe", "/dev/nvidiactl"]'
		run -1 run_bundle "c$v"
		[ "$output" = "/dev/nvidiactl ENOENT" ]
	done
}

@test "a client cannot claim an image request when the policy is off" {
	container c
	req="{\"v\":1,\"op\":\"grant\",\"args\":{\"pid\":$CPID,\"gpus\":\"0\",\"from_image\":true}}"
	run -0 sh -c "printf '%s\n' '$req' | socat -t 2 - UNIX-CONNECT:$DG_SOCK"
	[ "$(echo "$output" | jq -r .error.code)" = permission_denied ]
	[[ "$(echo "$output" | jq -r .error.message)" == *"hook-allow-env is off"* ]]
	[ "$(grant_entries)" = 0 ]
}

# hk ARGS...: devgate-hook, as runtimes run it.
hk() { "$DEVGATE_BUILD/devgate-hook" -s "$DG_SOCK" "$@"; }

state_json() { # ID STATUS BUNDLE PID
	printf '{"ociVersion":"1.0.2","id":"%s","status":"%s","bundle":"%s","pid":%s}' "$@"
}

@test "hook with garbage, empty or huge stdin: a clear error, nothing granted" {
	# devgate-hook and 'devgatectl hook' are one code: check both.
	for form in "$DEVGATE_BUILD/devgate-hook -s $DG_SOCK" "$DEVGATE_BUILD/devgatectl -s $DG_SOCK hook"; do
		prog=${form%% *}
		prog=${prog##*/}
		run -15 $form createRuntime <<<"garbage"
		[ "$output" = "$prog: invalid OCI state on stdin: not a JSON object
hint: devgate-hook (devgatectl hook) is run by a container runtime, which passes the container's state as JSON on stdin" ]
		run -15 $form createRuntime </dev/null
		[[ "$output" == "$prog: invalid OCI state on stdin: it is empty"* ]]
		run -15 sh -c "head -c 3000000 /dev/zero | tr '\\0' ' ' | $form createRuntime"
		[[ "$output" == "$prog: invalid OCI state on stdin: larger than 1048576 bytes"* ]]
		run -15 $form createRuntime <<<'{"id":"x","status":"creating","bundle":"relative","pid":1}'
		[[ "$output" == *"'bundle' must be an absolute path"* ]]
		run -15 $form createRuntime <<<"$(state_json x creating "$DG_TMP/nope" 1)"
		[[ "$output" == *"cannot open bundle $DG_TMP/nope"* ]]
		run -15 $form createContainer <<<"$(state_json x creating /tmp 1)"
		[[ "$output" == *"hook stage 'createContainer' is not supported"* ]]
	done
	no_leases
	[ "$(grant_entries)" = 0 ]
}

@test "hook refuses a root.path that climbs out of the bundle, and a symlinked config.json" {
	dg_bundle "$DG_TMP/b" "$DEVGATE_BUILD/probe"
	jq '.root.path = "../../etc" | .annotations = {"devgate.io/gpus": "0"}' \
		"$DG_TMP/b/config.json" >"$DG_TMP/b/c.json"
	mv "$DG_TMP/b/c.json" "$DG_TMP/b/config.json"
	run -15 hk createRuntime <<<"$(state_json x creating "$DG_TMP/b" $$)"
	[[ "$output" == *"root.path must not contain '..'"* ]]
	mv "$DG_TMP/b/config.json" "$DG_TMP/b/real.json"
	ln -s real.json "$DG_TMP/b/config.json"
	run -15 hk createRuntime <<<"$(state_json x creating "$DG_TMP/b" $$)"
	[[ "$output" == *"cannot open $DG_TMP/b/config.json: Too many levels of symbolic links"* ]]
	no_leases
}

@test "the hook ignores DEVGATE_SOCKET from its environment" {
	for form in "$DEVGATE_BUILD/devgate-hook" "$DEVGATE_BUILD/devgatectl hook"; do
		run -3 env DEVGATE_SOCKET="$DG_SOCK" $form poststop <<<"$(state_json x stopped /tmp 0)"
		[[ "$output" == *"cannot reach devgated at /run/devgate/devgated.sock"* ]]
	done
}

@test "poststop releases the lease of its container by id" {
	container c
	run -0 dg grant --pid "$CPID" --gpu 0 --container oci-id-1
	run -0 hk poststop <<<"$(state_json oci-id-1 stopped /tmp 0)"
	no_leases
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENOENT" ]
}

@test "poststop for a container that holds nothing is harmless" {
	run -0 hk poststop <<<"$(state_json never-granted stopped /tmp 0)"
	run -0 hk <<<"$(state_json x stopped /tmp 0)"
	run -0 "$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" hook <<<"$(state_json x stopped /tmp 0)"
}

@test "podman with the shipped hooks.d file and devgate's annotation" {
	requires podman
	mkdir "$DG_TMP/hooks.d"
	jq --arg hook "$DEVGATE_BUILD/devgate-hook" --arg s "$DG_SOCK" \
		'.hook.path = $hook | .hook.args = ["devgate-hook", "-s", $s]' \
		"$DG_ROOT/packaging/hooks.d/devgate.json" >"$DG_TMP/hooks.d/devgate.json"
	# shellcheck disable=SC2086
	run -1 dg_podman --hooks-dir "$DG_TMP/hooks.d" run $DG_PODMAN_RUN \
		--annotation devgate.io/gpus=0 localhost/devgate-test probe /dev/nvidia0 /gpu1
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/gpu1 EPERM')" ]
	wait_until 1 no_leases
	grep -q "granted 1 GPU(s) to " "$DG_TMP/daemon.log"
	# Without the annotation the hook does not run at all.
	# shellcheck disable=SC2086
	run -1 dg_podman --hooks-dir "$DG_TMP/hooks.d" run $DG_PODMAN_RUN \
		localhost/devgate-test probe /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENOENT" ]
	[ "$(grep -c "granted" "$DG_TMP/daemon.log")" = 1 ]
}

# cdi_spec: the generated spec under a kind of this test's own.
cdi_spec() {
	DG_KIND="devgate-$DG_ID.test/gpu"
	DG_CDI="/var/run/cdi/devgate-$DG_ID.json"
	mkdir -p /var/run/cdi
	dg cdi generate --host-root "$DG_HOST" --kind "$DG_KIND" \
		--hook "$DEVGATE_BUILD/devgate-hook" --output "$DG_CDI"
}

@test "podman with the generated CDI spec: --device KIND=0, =UUID and =all" {
	requires podman
	cdi_spec
	# shellcheck disable=SC2086
	run -1 dg_podman run $DG_PODMAN_RUN --device "$DG_KIND=0" localhost/devgate-test \
		probe /dev/nvidia0 /dev/nvidiactl /dev/nvidia-uvm /gpu1
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/dev/nvidiactl ENXIO\n/dev/nvidia-uvm ENXIO\n/gpu1 EPERM')" ]
	wait_until 1 no_leases
	uuid=$(dg list --json | jq -r '.gpus[1].uuid')
	# shellcheck disable=SC2086
	run -1 dg_podman run $DG_PODMAN_RUN --device "$DG_KIND=$uuid" localhost/devgate-test \
		probe /dev/nvidia1
	[ "$output" = "/dev/nvidia1 ENXIO" ]
	# shellcheck disable=SC2086
	run -1 dg_podman run $DG_PODMAN_RUN --device "$DG_KIND=all" localhost/devgate-test \
		probe /dev/nvidia0 /dev/nvidia1
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/dev/nvidia1 ENXIO')" ]
	wait_until 1 no_leases
}

@test "podman + CDI: the GPU is leased while the container runs, and can be revoked" {
	requires podman
	cdi_spec
	# shellcheck disable=SC2086
	id=$(dg_podman run -d ${DG_PODMAN_RUN/--rm/} --device "$DG_KIND=0" localhost/devgate-test \
		sleep 100000)
	run -0 dg list --json
	[ "$(echo "$output" | jq -r '.gpus[0].holders[0].container')" = "$id" ]
	container other
	run -8 dg grant --pid "$CPID" --gpu 0
	run -0 dg revoke --container "$id"
	# The node is the runtime's (the CDI device made it): it stays, and opens nothing.
	[[ "$output" == *"/dev/nvidia0"*"kept"* ]]
	run -1 dg_podman exec "$id" probe /dev/nvidia0
	[ "$output" = "/dev/nvidia0 EPERM" ]
	run -0 dg grant --pid "$CPID" --gpu 0
	dg_podman rm -f -t 0 "$id" >/dev/null
}

@test "the generated CDI spec has the shape runtimes expect" {
	run -0 "$DEVGATE_BUILD/devgatectl" cdi generate --host-root "$DG_HOST"
	spec=$output
	[ "$(echo "$spec" | jq -r .cdiVersion)" = 0.5.0 ]
	[ "$(echo "$spec" | jq -r .kind)" = devgate.io/gpu ]
	uuid0=$(dg list --json | jq -r '.gpus[0].uuid')
	[ "$(echo "$spec" | jq -r '[.devices[].name] | join(" ")')" = \
		"0 $uuid0 1 $(dg list --json | jq -r '.gpus[1].uuid') all" ]
	# Device names and the kind match CDI's grammar.
	echo "$spec" | jq -e '.kind | test("^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9_-]*$")'
	echo "$spec" | jq -e 'all(.devices[]; .name | test("^[A-Za-z0-9][A-Za-z0-9_.:-]*$"))'
	# Each device: its node (mknod only), and a createRuntime hook naming its GPU.
	echo "$spec" | jq -e '.devices[0].containerEdits.deviceNodes ==
		[{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0, "permissions": "m"}]'
	echo "$spec" | jq -e --arg u "$uuid0" '.devices[0].containerEdits.hooks ==
		[{"hookName": "createRuntime", "path": "/usr/bin/devgate-hook",
		  "args": ["devgate-hook", "createRuntime", "--gpu", $u],
		  "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]}]'
	echo "$spec" | jq -e '.devices[-1].containerEdits.hooks[0].args[-1] == "all"'
	echo "$spec" | jq -e '[.devices[-1].containerEdits.deviceNodes[].path] ==
		["/dev/nvidia0", "/dev/nvidia1"]'
	# Spec-wide: control nodes and the poststop hook.
	echo "$spec" | jq -e '[.containerEdits.deviceNodes[].path] ==
		["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]'
	echo "$spec" | jq -e '.containerEdits.hooks[0].hookName == "poststop"'
	echo "$spec" | jq -e 'all(.. | objects | select(has("hookName")); .path | startswith("/"))'
	# A non-default socket is passed to the hook; a bad kind is refused.
	run -0 dg cdi generate --host-root "$DG_HOST"
	echo "$output" | jq -e --arg s "$DG_SOCK" '.containerEdits.hooks[0].args[1:3] == ["--socket", $s]'
	run -2 dg cdi generate --host-root "$DG_HOST" --kind nokind
}

@test "unusable GPUs are left out of the CDI spec" {
	rm "$DG_HOST/dev/nvidia1"
	echo junk >"$DG_HOST/dev/nvidia1"
	run -0 dg cdi generate --host-root "$DG_HOST" -o "$DG_TMP/spec.json"
	[[ "$output" == *"leaving GPU 1 out: host node /dev/nvidia1 is not character device 195:1"* ]]
	[ "$(jq -r '[.devices[].name] | length' "$DG_TMP/spec.json")" = 3 ]
}

@test "hook: a state naming another container's pid is refused, nothing granted there" {
	requires runc
	container c1
	c1=$CID
	c1pid=$CPID
	progs=$(cg_progs "$DG_CGROOT/$c1")
	dg_bundle "$DG_TMP/b2" "$DEVGATE_BUILD/probe"
	jq '.annotations = {"devgate.io/gpus": "0"}' "$DG_TMP/b2/config.json" >"$DG_TMP/b2/c.json"
	mv "$DG_TMP/b2/c.json" "$DG_TMP/b2/config.json"
	# C1's owner makes bundle 2's rootfs path, with a /dev, inside C1.
	dg_runc exec "$c1" busybox mkdir -p "$DG_TMP/b2/rootfs/dev"
	run -6 hk createRuntime <<<"$(state_json "$DG_ID-b2" creating "$DG_TMP/b2" "$c1pid")"
	[[ "$output" == *"the mount namespace of PID $c1pid does not hold the bundle's rootfs"* ]]
	run -0 dg list --json
	[ "$(echo "$output" | jq '[.gpus[].holders[]] | length')" = 0 ]
	no_leases
	[ "$(grant_entries)" = 0 ]
	run -0 dg_runc exec "$c1" ls -A "$DG_TMP/b2/rootfs/dev"
	[ -z "$output" ]
	[ -z "$(ls -A "$DG_TMP/b2/rootfs/dev" 2>/dev/null)" ]
	[ "$(cg_progs "$DG_CGROOT/$c1")" = "$progs" ]
	# A hooked container of its own still gets the GPU: the identities match.
	hooked_bundle b3 '.annotations = {"devgate.io/gpus": "0"} | .process.args = ["probe", "/dev/nvidia0"]'
	run -1 run_bundle b3
	[ "$output" = "/dev/nvidia0 ENXIO" ]
}

@test "hook: the lease keeps the bundle's rootfs; once the container pivoted into it, a revoke and a grant reach its /dev" {
	requires runc
	hooked_bundle k '.annotations = {"devgate.io/gpus": "0"} | .process.args = ["sleep", "100000"]'
	dg_runc run -d -b "$DG_TMP/k" "$CID" </dev/null >/dev/null
	CPID=$(dg_runc state "$CID" | jq -r .pid)
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	[ "$(jq -r .root "$DG_TMP"/state/leases/*.json)" = "$DG_TMP/k/rootfs" ]
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	# The rootfs path means nothing inside the pivoted root; its identity does.
	run -0 dg grant --pid "$CPID" --gpu 1
	[[ "$output" == *"/dev/nvidia1"*"created"* ]]
	run -0 dg revoke --container "$CID"
	[[ "$output" == *"/dev/nvidia0"*"removed"* ]]
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidia1
	[ "${lines[0]}" = "/dev/nvidia0 ENOENT" ]
	[ "${lines[1]}" = "/dev/nvidia1 ENOENT" ]
}

@test "hook: a bundle whose /dev is the rootfs's own directory (no tmpfs) gets no node there" {
	requires runc
	hooked_bundle n '.annotations = {"devgate.io/gpus": "0"} |
		.mounts |= map(select(.destination != "/dev")) | .process.args = ["probe", "/dev/null"]'
	run ! run_bundle n
	[[ "$output" == *"hook createRuntime for container $CID: $DG_TMP/n/rootfs/dev in the container of PID "*" is on "*"devgated's own mount namespace has at /"* ]]
	[[ "$output" != *"/dev/null ok"* ]]
	[ -z "$(find "$DG_TMP/n/rootfs/dev" -name 'nvidia*')" ]
	no_leases
	[ "$(grant_entries)" = 0 ]
}
