#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# devgate-k8s, the kubelet device plugin, against a kubelet stand-in that
# speaks the real protocol (tests/helpers/kubelet-standin: Debian's
# python3-grpcio, stubs from the same k8s/api.proto), and a real container
# started the way containerd would, from the CDI names Allocate returns.

load helpers

setup_file() { dg_podman_setup_file; }
teardown_file() { dg_podman_teardown_file; }

setup() {
	dg_setup
	requires k8s
	# kubelet's directory is root's, 0700 (the plugin reaches it with
	# CAP_DAC_OVERRIDE when it runs as another user).
	K8S_DIR="$DG_TMP/device-plugins"
	mkdir -m 0700 "$K8S_DIR"
	K8S_LOG="$DG_TMP/kubelet.log"
	PLUGIN_LOG="$DG_TMP/plugin.log"
	PLUGIN_SOCK="$K8S_DIR/devgate.io_gpu.sock"
	STANDIN_PID=
	PLUGIN_PID=
	DG_CDI=
	start_daemon
}

teardown() {
	local status=0
	stop_plugin || status=1
	stop_standin
	[ -n "$DG_CDI" ] && rm -f "$DG_CDI"
	# Sanitizer builds (make check-asan) report into the plugin's log too.
	if [ -f "${PLUGIN_LOG:-}" ] &&
		grep -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$PLUGIN_LOG" >&2; then
		status=1
	fi
	dg_teardown || status=1
	return "$status"
}

standin() {
	/usr/bin/python3 "$DG_ROOT/tests/helpers/kubelet-standin" --stubs "$DEVGATE_BUILD/k8s/py" "$@"
}

# kubelet's start: its socket removed with every other one, and made anew.
# Background processes close bats's fd 3, or bats waits for them at the end.
start_standin() {
	/usr/bin/python3 "$DG_ROOT/tests/helpers/kubelet-standin" --stubs "$DEVGATE_BUILD/k8s/py" \
		serve "$K8S_DIR" >>"$K8S_LOG" 2>&1 3>&- &
	STANDIN_PID=$!
	wait_until 20 grep -q '"event": "serving"' "$K8S_LOG" || fail "the stand-in did not start: $(cat "$K8S_LOG")"
}

stop_standin() {
	[ -n "$STANDIN_PID" ] || return 0
	kill "$STANDIN_PID" 2>/dev/null || true
	wait "$STANDIN_PID" 2>/dev/null || true
	STANDIN_PID=
	# The next start counts only its own lines.
	sed -i 's/"event": "serving"/"event": "served"/' "$K8S_LOG"
}

start_plugin() {
	"$DEVGATE_BUILD/devgate-k8s" -s "$DG_SOCK" -d "$K8S_DIR" "$@" >>"$PLUGIN_LOG" 2>&1 3>&- &
	PLUGIN_PID=$!
}

# After SIGTERM the plugin must exit 0 and take its socket with it.
stop_plugin() {
	local status=0
	[ -n "$PLUGIN_PID" ] || return 0
	kill "$PLUGIN_PID" 2>/dev/null || true
	wait "$PLUGIN_PID" 2>/dev/null || status=$?
	PLUGIN_PID=
	[ "$status" = 0 ] || fail "devgate-k8s exited $status after SIGTERM: $(tail -5 "$PLUGIN_LOG")"
	[ ! -e "$PLUGIN_SOCK" ] || fail "devgate-k8s left $PLUGIN_SOCK behind"
}

# events TYPE: the stand-in's lines of that event, one JSON object each.
events() {
	grep '^{' "$K8S_LOG" | jq -c --arg e "$1" 'select(.event == $e)'
}

n_events() {
	events "$1" | wc -l
}

# The devices kubelet was told last: "ID HEALTH ID HEALTH ...".
last_devices() {
	events devices | tail -1 | jq -r '[.devices[] | "\(.id) \(.health)"] | join(" ")'
}

devices_are() {
	[ "$(last_devices)" = "$1" ]
}

registered() {
	[ "$(n_events register)" -ge "$1" ]
}

uuid() {
	dg list --json | jq -r ".gpus[$1].uuid"
}

# cdi_spec: devgate's generated spec under a kind of this test's own.
cdi_spec() {
	DG_KIND="devgate-$DG_ID.test/gpu"
	DG_CDI="/var/run/cdi/devgate-$DG_ID.json"
	mkdir -p /var/run/cdi
	dg cdi generate --host-root "$DG_HOST" --kind "$DG_KIND" \
		--hook "$DEVGATE_BUILD/devgate-hook" --output "$DG_CDI"
}

preferred() { # SIZE AVAILABLE [MUST]: the IDs picked, space separated
	standin preferred "$PLUGIN_SOCK" "$@" | jq -r '.container_responses[0].deviceIDs | join(" ")'
}

@test "kubelet stand-in: Register, ListAndWatch, preferred pick and Allocate; podman runs the CDI names" {
	requires podman
	cdi_spec
	u0=$(uuid 0)
	u1=$(uuid 1)
	start_standin
	start_plugin --cdi-kind "$DG_KIND"
	wait_until 10 registered 1 || fail "no Register: $(cat "$PLUGIN_LOG")"
	run -0 events register
	echo "$output" | jq -e '.version == "v1beta1" and .resource_name == "devgate.io/gpu" and
		.endpoint == "devgate.io_gpu.sock" and .options.get_preferred_allocation_available and
		(.options.pre_start_required | not)'
	wait_until 5 devices_are "$u0 Healthy $u1 Healthy" || fail "devices: $(last_devices)"
	[ -S "$PLUGIN_SOCK" ]

	# Both free: the lowest index. GPU 0 held (the plugin sees it through
	# devgated's watch): the free one. must_include first.
	[ "$(preferred 1 "$u1,$u0")" = "$u0" ]
	container holder
	run -0 dg grant --pid "$CPID" --gpu 0
	wait_until 2 eval '[ "$(preferred 1 "$u0,$u1")" = "$u1" ]' || fail "preferred: $(preferred 1 "$u0,$u1")"
	[ "$(preferred 2 "$u1,$u0" "$u0")" = "$u0 $u1" ]
	run -1 standin preferred "$PLUGIN_SOCK" 1 "$u0,$u1" "$u0,$u1"
	[ "$(echo "$output" | jq -r .error)" = StatusCode.INVALID_ARGUMENT ]
	run -0 dg revoke --pid "$CPID"
	wait_until 2 eval '[ "$(preferred 1 "$u1,$u0")" = "$u0" ]'

	# Allocate: the CDI name 'devgatectl cdi generate' gave the GPU, and the
	# annotation the hook reads; an unknown ID is refused.
	run -0 standin allocate "$PLUGIN_SOCK" "$u0"
	resp=$output
	echo "$resp" | jq -e --arg n "$DG_KIND=$u0" '.container_responses[0].cdi_devices == [{"name": $n}]'
	echo "$resp" | jq -e --arg u "$u0" '.container_responses[0].annotations == {"devgate.io/gpus": $u}'
	jq -e --arg u "$u0" '[.devices[].name] | index($u) != null' "$DG_CDI"
	run -1 standin allocate "$PLUGIN_SOCK" "GPU-not-here"
	[ "$(echo "$output" | jq -r .error)" = StatusCode.NOT_FOUND ]
	# A container that asks for none gets nothing, not an empty annotation.
	run -0 standin allocate "$PLUGIN_SOCK" ""
	[ "$output" = '{"container_responses": [{}]}' ]
	run -0 standin prestart "$PLUGIN_SOCK" "$u0"
	[ "$output" = "{}" ]

	# containerd's part: the CDI names, applied. The hook asks devgated,
	# devgated gates: the granted GPU reaches the (absent) driver, the other
	# one is denied by the gate.
	name=$(echo "$resp" | jq -r '.container_responses[0].cdi_devices[0].name')
	# shellcheck disable=SC2086
	run -1 dg_podman run $DG_PODMAN_RUN --device "$name" localhost/devgate-test \
		probe /dev/nvidia0 /dev/nvidiactl /gpu1
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/dev/nvidiactl ENXIO\n/gpu1 EPERM')" ]
	grep -q "granted 1 GPU(s) to " "$DG_TMP/daemon.log"
	wait_until 2 no_leases
	# Kubelet's stream saw no health change through all of it.
	[ "$(events devices | jq -r '.devices[].health' | sort -u)" = Healthy ]
}

# refused CODE TEXT ARGS...: the stand-in's preferred call ARGS is refused
# with gRPC status CODE, its details holding TEXT, and the plugin lives on.
refused() {
	local code=$1 text=$2
	shift 2
	run -1 standin preferred "$@"
	[ "$(echo "$output" | jq -r .error)" = "StatusCode.$code" ] || fail "$*: $output"
	[[ "$(echo "$output" | jq -r .details)" == *"$text"* ]] || fail "$*: $output"
	kill -0 "$PLUGIN_PID"
}

@test "GetPreferredAllocation: lists past the bounds, a size near 2^31 refused at once; picks go on; SIGTERM stops it" {
	u0=$(uuid 0)
	u1=$(uuid 1)
	start_standin
	start_plugin
	wait_until 10 registered 1 || fail "no Register: $(cat "$PLUGIN_LOG")"
	wait_until 5 devices_are "$u0 Healthy $u1 Healthy" || fail "devices: $(last_devices)"
	# Each refused within the stand-in's 5 s deadline, before any work.
	refused INVALID_ARGUMENT "offers at most 64 devices" --many 3000 "$PLUGIN_SOCK" 3000 "$u0,$u1"
	refused INVALID_ARGUMENT "allocation_size 2147483647 with 2 available IDs" \
		"$PLUGIN_SOCK" 2147483647 "$u0,$u1"
	refused INVALID_ARGUMENT "65 container requests" --containers 65 "$PLUGIN_SOCK" 1 "$u0,$u1"
	refused RESOURCE_EXHAUSTED "" --many 100000 "$PLUGIN_SOCK" 1 "$u0,$u1"
	# The bounds themselves are kubelet's own: 64 IDs, 64 picked, 64 containers.
	run -0 standin preferred --many 62 --containers 64 "$PLUGIN_SOCK" 64 "$u1,$u0"
	[ "$(echo "$output" | jq '.container_responses | length')" = 64 ]
	[ "$(echo "$output" | jq -r '.container_responses[63].deviceIDs[:2] | join(" ")')" = "$u0 $u1" ]
	[ "$(preferred 1 "$u1,$u0")" = "$u0" ]
	grep -q "GetPreferredAllocation: allocation_size 2147483647" "$PLUGIN_LOG"
	# Allocate takes no more IDs than that either.
	run -1 standin allocate "$PLUGIN_SOCK" "$(seq -f "GPU-made-up-%g" 65 | paste -sd,)"
	[ "$(echo "$output" | jq -r .error)" = StatusCode.INVALID_ARGUMENT ]
	[ "$(echo "$output" | jq -r .details)" = "Allocate: 65 device IDs: devgate-k8s offers at most 64 devices" ]
	run -0 standin allocate "$PLUGIN_SOCK" "$u1"

	# SIGTERM with such calls arriving: the plugin stops at once, socket removed.
	local callers=()
	for _ in 1 2 3 4; do
		standin preferred --many 3000 "$PLUGIN_SOCK" 3000 "$u0" >/dev/null 2>&1 3>&- &
		callers+=($!)
	done
	kill -TERM "$PLUGIN_PID"
	gone() { ! kill -0 "$PLUGIN_PID" 2>/dev/null; }
	wait_until 5 gone || fail "devgate-k8s still runs 5 s after SIGTERM: $(tail -3 "$PLUGIN_LOG")"
	wait "$PLUGIN_PID"
	PLUGIN_PID=
	[ ! -e "$PLUGIN_SOCK" ]
	wait "${callers[@]}" || true
}

@test "kubelet restart (its socket removed and made anew): the plugin serves and registers again" {
	start_standin
	start_plugin
	wait_until 10 registered 1
	wait_until 5 eval '[ "$(n_events devices)" -ge 1 ]'
	stop_standin
	start_standin # removes every socket, the plugin's too, as kubelet does
	wait_until 10 registered 2 || fail "no second Register: $(cat "$PLUGIN_LOG")"
	wait_until 5 eval '[ "$(n_events devices)" -ge 2 ]'
	[ "$(last_devices)" = "$(uuid 0) Healthy $(uuid 1) Healthy" ]
	grep -q "$PLUGIN_SOCK was removed (kubelet restarting?): serving again" "$PLUGIN_LOG"
	[ -S "$PLUGIN_SOCK" ]
	# One Register per kubelet start, not one per inotify event.
	sleep 0.5
	[ "$(n_events register)" = 2 ]
}

@test "a GPU made unusable in the fixture: the stand-in sees it Unhealthy within 1 s of devgated's restart" {
	u0=$(uuid 0)
	u1=$(uuid 1)
	start_standin
	start_plugin --unreachable-ms 60000
	wait_until 10 devices_are "$u0 Healthy $u1 Healthy"
	stop_daemon
	# devgated checks its inventory at start: GPU 1's node is now a file.
	rm "$DG_HOST/dev/nvidia1"
	echo junk >"$DG_HOST/dev/nvidia1"
	t0=$(date +%s%3N)
	start_daemon
	t_up=$(date +%s%3N)
	wait_until 5 devices_are "$u0 Healthy $u1 Unhealthy" || fail "devices: $(last_devices)"
	t1=$(events devices | tail -1 | jq .ms)
	echo "# Unhealthy seen $((t1 - t0)) ms after devgated was started again" \
		"(devgatectl had an answer after $((t_up - t0)) ms)" >&3
	# From devgated answering again (its start is devgated's, on a loaded CI host).
	[ $((t1 - t_up)) -lt 1000 ]
	grep -q "not character device 195:1" "$PLUGIN_LOG"
	# Allocate refuses it, with devgated's reason.
	run -1 standin allocate "$PLUGIN_SOCK" "$u1"
	[ "$(echo "$output" | jq -r .error)" = StatusCode.FAILED_PRECONDITION ]
	[[ "$(echo "$output" | jq -r .details)" == *"not character device 195:1"* ]]
}

@test "devgated unreachable for --unreachable-ms: every GPU Unhealthy; healthy again when it is back" {
	u0=$(uuid 0)
	u1=$(uuid 1)
	start_standin
	start_plugin --unreachable-ms 400
	wait_until 10 devices_are "$u0 Healthy $u1 Healthy"
	t0=$(date +%s%3N)
	stop_daemon
	wait_until 3 devices_are "$u0 Unhealthy $u1 Unhealthy" || fail "devices: $(last_devices)"
	t1=$(events devices | tail -1 | jq .ms)
	echo "# all Unhealthy $((t1 - t0)) ms after devgated was stopped (--unreachable-ms 400)" >&3
	# Not before: a devgated restart shorter than that goes unnoticed by kubelet.
	[ $((t1 - t0)) -ge 400 ]
	grep -q "devgated unreachable for" "$PLUGIN_LOG"
	start_daemon
	wait_until 3 devices_are "$u0 Healthy $u1 Healthy"
}

@test "--user nobody: lists through devgated's socket-group, keeps CAP_DAC_OVERRIDE alone" {
	stop_daemon
	start_daemon --socket-group nogroup
	u0=$(uuid 0)
	u1=$(uuid 1)
	start_standin
	start_plugin --user nobody
	wait_until 10 registered 1 || fail "no Register: $(cat "$PLUGIN_LOG")"
	wait_until 5 devices_are "$u0 Healthy $u1 Healthy" || fail "devices: $(last_devices) $(cat "$PLUGIN_LOG")"
	[ "$(awk '/^Uid:/ { print $2 $3 $4 $5 }' /proc/"$PLUGIN_PID"/status)" = 65534655346553465534 ]
	[ "$(awk '/^Gid:/ { print $2 }' /proc/"$PLUGIN_PID"/status)" = "$(getent group nogroup | cut -d: -f3)" ]
	for set in CapEff CapPrm CapBnd; do
		[ "$(awk -v s="$set:" '$1 == s { print $2 }' /proc/"$PLUGIN_PID"/status)" = 0000000000000002 ]
	done
	[ "$(awk '/^NoNewPrivs:/ { print $2 }' /proc/"$PLUGIN_PID"/status)" = 1 ]
	[ "$(stat -c %U "$PLUGIN_SOCK")" = nobody ]
	# It still serves kubelet's calls from the 0700 root directory.
	[ "$(preferred 1 "$u1,$u0")" = "$u0" ]
	stop_plugin

	# Outside the socket-group devgated refuses it: kubelet hears of no GPU.
	start_plugin --user nobody --group daemon
	wait_until 5 grep -q "devgated does not serve uid 65534" "$PLUGIN_LOG" || fail "$(cat "$PLUGIN_LOG")"
	wait_until 5 eval '[ "$(n_events register)" -ge 2 ]'
	wait_until 5 devices_are ""
}

@test "with the DaemonSet's capabilities alone it becomes nobody, and lists" {
	/usr/bin/python3 -c 'import yaml' 2>/dev/null || missing "needs Debian's python3-yaml"
	stop_daemon
	start_daemon --socket-group nogroup
	# The container's bounding set, as packaging/k8s/devgate-k8s.yaml asks for it.
	caps=$(/usr/bin/python3 -c 'import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))["spec"]["template"]["spec"]["containers"][0]
print(",".join("+" + a.lower() for a in c["securityContext"]["capabilities"]["add"]))' \
		"$DG_ROOT/packaging/k8s/devgate-k8s.yaml")
	[ "$caps" = "+dac_override,+setuid,+setgid,+setpcap" ]
	start_standin
	setpriv --bounding-set "-all,$caps" --inh-caps=-all "$DEVGATE_BUILD/devgate-k8s" -s "$DG_SOCK" \
		-d "$K8S_DIR" --user=65534 --group="$(getent group nogroup | cut -d: -f3)" \
		>>"$PLUGIN_LOG" 2>&1 3>&- &
	PLUGIN_PID=$!
	wait_until 10 registered 1 || fail "no Register: $(cat "$PLUGIN_LOG")"
	wait_until 5 devices_are "$(uuid 0) Healthy $(uuid 1) Healthy" || fail "$(cat "$PLUGIN_LOG")"
	[ "$(awk '/^Uid:/ { print $2 }' /proc/"$PLUGIN_PID"/status)" = 65534 ]
	[ "$(awk '/^CapBnd:/ { print $2 }' /proc/"$PLUGIN_PID"/status)" = 0000000000000002 ]
}

@test "devgate-k8s: usage errors exit 2 and change nothing" {
	run -2 "$DEVGATE_BUILD/devgate-k8s" --poll-ms 0
	[[ "$output" == *"--poll-ms wants milliseconds > 0, not '0'"* ]]
	run -2 "$DEVGATE_BUILD/devgate-k8s" --resource gpu
	run -2 "$DEVGATE_BUILD/devgate-k8s" --endpoint a/b
	run -2 "$DEVGATE_BUILD/devgate-k8s" extra
	run -1 "$DEVGATE_BUILD/devgate-k8s" -d "$K8S_DIR" --user no-such-user-here
	[[ "$output" == *"unknown user no-such-user-here"* ]]
	run -0 "$DEVGATE_BUILD/devgate-k8s" --help
	[[ "$output" == *"--unreachable-ms MS"* ]]
	[ -z "$(ls -A "$K8S_DIR")" ]
}
