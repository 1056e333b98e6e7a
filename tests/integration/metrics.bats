#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Metrics (devgatectl metrics, HTTP /metrics, a real Prometheus) and denial
# events (devgatectl events).

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	PROM_PID=
	FOLLOW_PID=
}
teardown() {
	local p
	for p in "$FOLLOW_PID" "$PROM_PID"; do
		[ -n "$p" ] || continue
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	dg_teardown
}

# free_port: a loopback TCP port nobody listens on now.
free_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 40000))
		if [ -z "$(ss -Hltn "sport = :$p")" ]; then
			echo "$p"
			return 0
		fi
	done
	fail "no free TCP port found"
}

start_with_metrics() {
	METRICS_PORT=$(free_port)
	start_daemon --metrics-listen "127.0.0.1:$METRICS_PORT"
}

scrape() {
	curl -sSf "http://127.0.0.1:$METRICS_PORT/metrics"
}

# series NAME DEVICE [TEXT]: the sample lines of one device counter of $CID.
series() {
	local text=${3-$(dg metrics)}
	echo "$text" | grep "^$1{" | grep -F "container=\"$CID\"" | grep -F "device=\"$2\"" || true
}

# value NAME DEVICE [TEXT]: its value; fails unless there is exactly one series.
value() {
	local lines
	lines=$(series "$@")
	[ "$(echo "$lines" | grep -c .)" = 1 ] || fail "want one series of $1 $2, got: $lines"
	echo "${lines##* }"
}

@test "a container's opens of its granted GPU and of a denied one are counted exactly" {
	requires promtool
	start_with_metrics
	container c
	uuid0=$(dg list --json | jq -r '.gpus[0].uuid')
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" -n 3 /dev/nvidia0
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n%.0s' 1 2 3)" ]
	run -1 probe "$CID" -n 2 /gpu1
	[ "$output" = "$(printf '/gpu1 EPERM\n%.0s' 1 2)" ]

	text=$(dg metrics)
	[ "$(value devgate_device_accesses_granted_total 195:0 "$text")" = 3 ]
	[ "$(value devgate_device_accesses_allowed_total 195:0 "$text")" = 3 ]
	[ "$(value devgate_device_accesses_denied_total 195:0 "$text")" = 0 ]
	[ "$(value devgate_device_accesses_passed_total 195:1 "$text")" = 2 ]
	[ "$(value devgate_device_accesses_denied_total 195:1 "$text")" = 2 ]
	[ "$(value devgate_device_accesses_allowed_total 195:1 "$text")" = 0 ]
	# Labels name the container, its cgroup, the node and the GPU.
	line=$(series devgate_device_accesses_granted_total 195:0 "$text")
	[ "$line" = "devgate_device_accesses_granted_total{container=\"$CID\",cgroup=\"/$CID\",type=\"c\",device=\"195:0\",node=\"/dev/nvidia0\",gpu=\"$uuid0\",access=\"r\"} 3" ]
	echo "$text" | grep -qx 'devgate_leases 1'
	echo "$text" | grep -qx 'devgate_gpus{state="held"} 1'
	echo "$text" | grep -qx 'devgate_gpus{state="free"} 1'
	echo "$text" | grep -qx 'devgate_grants_total 1'
	echo "$text" | grep -qx 'devgate_grant_duration_seconds_count 1'
	echo "$text" | grep -qx 'devgate_bpf_counters_map_entries 2'
	echo "$text" | promtool check metrics

	# HTTP serves the same counters, and lints clean too.
	http=$(scrape)
	[ "$(value devgate_device_accesses_granted_total 195:0 "$http")" = 3 ]
	[ "$(value devgate_device_accesses_denied_total 195:1 "$http")" = 2 ]
	echo "$http" | promtool check metrics
	run -0 curl -sS -o /dev/null -w '%{http_code} %{content_type}' \
		"http://127.0.0.1:$METRICS_PORT/metrics"
	[ "$output" = "200 text/plain; version=0.0.4; charset=utf-8" ]
	run -0 curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$METRICS_PORT/"
	[ "$output" = 404 ]
	run -0 curl -sS -o /dev/null -w '%{http_code}' -X POST \
		"http://127.0.0.1:$METRICS_PORT/metrics"
	[ "$output" = 405 ]
}

@test "devgated serving metrics has exactly one thread" {
	start_with_metrics
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	for _ in 1 2 3; do scrape >/dev/null; done
	# A slow client holds a connection open while others are served.
	exec {slow}<>/dev/tcp/127.0.0.1/"$METRICS_PORT"
	scrape >/dev/null
	[ "$(awk '$1 == "Threads:" { print $2 }' "/proc/$DG_DAEMON_PID/status")" = 1 ]
	exec {slow}>&-
	# The node helper still forks and enters the container (setns needs one thread).
	run -0 dg revoke --pid "$CPID"
	run -0 dg grant --pid "$CPID" --gpu 1
	[ "$(awk '$1 == "Threads:" { print $2 }' "/proc/$DG_DAEMON_PID/status")" = 1 ]
}

@test "a Prometheus server scrapes devgated and its query API returns the counter" {
	requires prometheus
	start_with_metrics
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" -n 2 /gpu1

	prom_port=$(free_port)
	cat >"$DG_TMP/prometheus.yml" <<-EOF
		global:
		  scrape_interval: 1s
		  evaluation_interval: 1s
		scrape_configs:
		  - job_name: devgate
		    static_configs:
		      - targets: ["127.0.0.1:$METRICS_PORT"]
	EOF
	prometheus --config.file "$DG_TMP/prometheus.yml" --storage.tsdb.path "$DG_TMP/prom" \
		--web.listen-address "127.0.0.1:$prom_port" --log.level warn \
		>"$DG_TMP/prometheus.log" 2>&1 &
	PROM_PID=$!
	query() {
		curl -sSG --data-urlencode \
			"query=devgate_device_accesses_denied_total{container=\"$CID\",device=\"195:1\"}" \
			"http://127.0.0.1:$prom_port/api/v1/query" 2>/dev/null |
			jq -r '.data.result[0].value[1] // empty'
	}
	scraped() { [ "$(query)" = 2 ]; }
	# Waits for Prometheus to start and scrape (1 s interval), not a timing test.
	wait_until 15 scraped || {
		cat "$DG_TMP/prometheus.log" >&2
		fail "Prometheus did not return the denied count: '$(query)'"
	}
}

@test "events --json shows the denial of the second GPU" {
	start_daemon
	container c
	uuid1=$(dg list --json | jq -r '.gpus[1].uuid')
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 dg events --json
	[ "$output" = "" ]
	run -1 probe "$CID" -n 2 /gpu1
	denied() { [ -n "$(dg events --json)" ]; }
	wait_until 5 denied
	run -0 dg events --json
	# Two opens within a second make one event (the kernel rate-limits them).
	[ "${#lines[@]}" = 1 ]
	ev=${lines[0]}
	[ "$(echo "$ev" | jq -r .type)" = denied ]
	[ "$(echo "$ev" | jq -r .container)" = "$CID" ]
	[ "$(echo "$ev" | jq -r .cgroup)" = "/$CID" ]
	[ "$(echo "$ev" | jq -r .cgroup_id)" = "$(stat -c %i "$DG_CGROOT/$CID")" ]
	[ "$(echo "$ev" | jq -r .device)" = "c 195:1" ]
	[ "$(echo "$ev" | jq -r .node)" = /dev/nvidia1 ]
	[ "$(echo "$ev" | jq -r .gpu)" = "$uuid1" ]
	[ "$(echo "$ev" | jq -r .access)" = r ]
	[[ "$(echo "$ev" | jq -r .time)" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{3}Z$ ]]
	run -0 dg events
	[[ "$output" == *" $CID (cgroup /$CID) was denied /dev/nvidia1 (c 195:1, $uuid1), access r" ]]
	# The granted GPU makes no event.
	run -1 probe "$CID" /dev/nvidia0
	run -0 dg metrics
	[ "$(value devgate_device_accesses_denied_total 195:1 "$output")" = 2 ]
	echo "$output" | grep -qx 'devgate_denial_events_total 1'
}

@test "denial events the kernel's buffer has no room for are counted as dropped" {
	# One container fills the ring only without its per-cgroup budget of
	# events (the next test): off here, to reach the drops.
	DEVGATE_TEST_CGROUP_EVENTS=0 start_daemon
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	# More distinct denied devices than the 256 KiB ring holds (~6,500 events),
	# and one more for after; devgated is stopped while the container fills it.
	n=7000
	fill_ring "$n"
	denied=$DENIED
	[ "$denied" -gt 6600 ]
	metric() { dg metrics | awk -v m="$1" '$1 == m { print $2 }'; }
	seen() { [ $(($(metric devgate_denial_events_total) + dropped)) = "$1" ]; }
	dropped=$(metric devgate_denial_events_dropped_total)
	[ "$dropped" -gt 0 ]
	wait_until 5 seen "$denied"
	# The counters miss nothing, and devices devgate does not know share one
	# series per container and access: a container cannot multiply series.
	run -0 dg metrics
	denied_series=$(grep '^devgate_device_accesses_denied_total{' <<<"$output")
	[ "$(wc -l <<<"$denied_series")" -le 3 ]
	[ "$(awk '{ s += $2 } END { print s }' <<<"$denied_series")" = "$denied" ]
	grep -q 'device="other",node="",gpu="",access="r"} 69[0-9][0-9]$' <<<"$denied_series"
	# Reading again, devgated misses nothing.
	run -1 probe "$CID" "/many/$((n + 1))"
	wait_until 5 seen $((denied + 1))
	[ "$(metric devgate_denial_events_dropped_total)" = "$dropped" ]
}

# opens_many CID N: container CID opens N distinct minors of the NVIDIA major
# (195:1 to N), made in its rootfs (a container with CAP_MKNOD could make
# them itself), in batches, while devgated runs; sets DENIED.
opens_many() {
	local cid=$1 n=$2 i paths
	mkdir -p "$DG_TMP/${cid##*-}/rootfs/many"
	"$DEVGATE_BUILD/probe" -C "195:$n" "$DG_TMP/${cid##*-}/rootfs/many"
	DENIED=0
	for ((i = 1; i <= n; i += 10000)); do
		mapfile -t paths < <(seq -f /many/%g "$i" $((i + 9999 > n ? n : i + 9999)))
		run probe "$cid" "${paths[@]}"
		DENIED=$((DENIED + $(grep -c ' EPERM$' <<<"$output")))
	done
}

# scrape_ms: the fastest of five devgatectl metrics, end to end, in ms.
scrape_ms() {
	local best=999999999 s0 s1
	for _ in 1 2 3 4 5; do
		s0=$(date +%s%N)
		dg metrics >/dev/null
		s1=$(date +%s%N)
		[ $((s1 - s0)) -lt "$best" ] && best=$((s1 - s0))
	done
	echo "$((best / 1000000)).$((best % 1000000 / 100000))"
}

@test "one container that opens 70,000 distinct minors stops no other's counts or events" {
	start_daemon
	container b
	local victim=$CID
	run -0 dg grant --pid "$CPID" --gpu 0
	container a
	local attacker=$CID
	run -0 dg grant --pid "$CPID" --gpu 1
	local events0 t0 t1 text entries events windows before
	before=$(scrape_ms)
	events0=$(dg metrics | awk '$1 == "devgate_denial_events_total" { print $2 }')
	t0=$(date +%s%N)
	# More keys than the 65,536 the shared counters map holds.
	opens_many "$attacker" 70000
	t1=$(date +%s%N)
	[ "$DENIED" -gt 69000 ]

	# The other container is counted as before, and its denial is an event.
	CID=$victim
	run -1 probe "$victim" -n 3 /dev/nvidia0
	run -1 probe "$victim" /gpu1
	text=$(dg metrics)
	[ "$(value devgate_device_accesses_granted_total 195:0 "$text")" = 3 ]
	[ "$(value devgate_device_accesses_denied_total 195:1 "$text")" = 1 ]
	seen_victim() {
		dg events --json | jq -e --arg c "$victim" 'select(.container == $c and .device == "c 195:1")' \
			>/dev/null
	}
	wait_until 5 seen_victim || fail "no event for $victim: $(dg events --json | tail -3)"

	# The attacker's unknown minors are one "other" series, counted exactly;
	# the map holds a handful of keys, not 70,000.
	CID=$attacker
	[ "$(value devgate_device_accesses_denied_total other "$text")" -ge $((DENIED - 3)) ]
	entries=$(echo "$text" | awk '$1 == "devgate_bpf_counters_map_entries" { print $2 }')
	[ "$entries" -le 16 ] || fail "counters map entries: $entries"
	# Its denial events: at most its budget of 64 a window (2^30 ns), however
	# many devices it tries, and the other container's one; the ring is left
	# to the others.
	events=$(($(echo "$text" | awk '$1 == "devgate_denial_events_total" { print $2 }') - events0))
	windows=$(((t1 - t0) / 1073741824 + 2))
	[ "$events" -le $((64 * windows + 1)) ] || fail "$events events in $windows windows"
	[ "$(echo "$text" | awk '$1 == "devgate_denial_events_dropped_total" { print $2 }')" = 0 ]
	# And a scrape costs what a few keys cost (printed for the record).
	echo "# devgatectl metrics before: $before ms, after 70,000 minors: $(scrape_ms) ms;" \
		"counters map keys: $entries" >&3
}

@test "events --follow streams new denials" {
	start_daemon
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	dg events --follow --json >"$DG_TMP/follow.out" 2>&1 &
	FOLLOW_PID=$!
	# Before or after the follower attached, the first one shows up: recent
	# events come first.
	followed() { [ "$(grep -c . "$DG_TMP/follow.out")" -ge "$1" ]; }
	run -1 probe "$CID" -n 5 /gpu1
	wait_until 5 followed 1
	sleep 1.1 # past the one-per-second limit of the kernel side
	run -1 probe "$CID" /gpu1
	wait_until 5 followed 2
	[ "$(grep -c . "$DG_TMP/follow.out")" = 2 ]
	[ "$(jq -r .device "$DG_TMP/follow.out" | sort -u)" = "c 195:1" ]
	[ "$(value devgate_device_accesses_denied_total 195:1)" = 6 ]
	kill -0 "$FOLLOW_PID"
}

@test "series of a revoked or ended container disappear" {
	start_daemon
	container a
	run -0 dg grant --pid "$CPID" --gpu 0
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ -n "$(series devgate_device_accesses_granted_total 195:0)" ]
	run -0 dg revoke --pid "$CPID"
	run -0 dg metrics
	[[ "$output" != *"container=\"$CID\""* ]]
	echo "$output" | grep -qx 'devgate_bpf_counters_map_entries 0'

	container b
	run -0 dg grant --pid "$CPID" --gpu 1
	run -1 probe "$CID" /dev/nvidia1
	[ -n "$(series devgate_device_accesses_granted_total 195:1)" ]
	dg_runc kill "$CID" KILL
	wait_until 5 no_leases
	run -0 dg metrics
	[[ "$output" != *"container=\"$CID\""* ]]
	echo "$output" | grep -qx 'devgate_bpf_counters_map_entries 0'
	echo "$output" | grep -qx 'devgate_releases_total 1'
	echo "$output" | grep -qx 'devgate_leases 0'
}

@test "hook calls are counted by stage, failed requests by reason" {
	start_daemon
	container c
	req='{"v":1,"op":"grant","args":{"pid":'$CPID',"gpus":"0","source":"hook/createRuntime"}}'
	run -0 socat -t 5 - "UNIX-CONNECT:$DG_SOCK" <<<"$req"
	[ "$(echo "$output" | jq .ok)" = true ]
	req='{"v":1,"op":"revoke","args":{"pid":'$CPID',"source":"hook/poststop"}}'
	run -0 socat -t 5 - "UNIX-CONNECT:$DG_SOCK" <<<"$req"
	[ "$(echo "$output" | jq .ok)" = true ]
	run -0 dg grant --pid "$CPID" --gpu 0
	container d
	run -8 dg grant --pid "$CPID" --gpu 0
	run -0 socat -t 5 - "UNIX-CONNECT:$DG_SOCK" <<<'{"v":1,"op":"nope"}'
	run -0 dg metrics
	echo "$output" | grep -qx 'devgate_hook_calls_total{stage="createRuntime"} 1'
	echo "$output" | grep -qx 'devgate_hook_calls_total{stage="poststop"} 1'
	echo "$output" | grep -qx 'devgate_hook_calls_total{stage="prestart"} 0'
	echo "$output" | grep -qx 'devgate_grants_total 2'
	echo "$output" | grep -qx 'devgate_revokes_total 1'
	echo "$output" | grep -qx 'devgate_request_failures_total{op="grant",reason="gpu_unavailable"} 1'
	echo "$output" | grep -qx 'devgate_request_failures_total{op="unknown",reason="protocol"} 1'
	echo "$output" | grep -qx 'devgate_grant_duration_seconds_count 3'
	echo "$output" | grep -qx 'devgate_revoke_duration_seconds_count 1'
}

@test "metrics --json, --help, and a bad --metrics-listen" {
	start_daemon
	run -0 dg metrics --json
	[ "$(echo "$output" | jq -r .format)" = "prometheus text 0.0.4" ]
	[[ "$(echo "$output" | jq -r .text)" == *"devgate_leases 0"* ]]
	run -0 dg metrics --help
	[[ "$output" == "Usage: devgatectl metrics"* ]]
	run -0 dg events --help
	[[ "$output" == "Usage: devgatectl events"* ]]
	run -2 dg events --bogus
	run -2 dg --json events extra
	[ "$(echo "$output" | jq -r .error.code)" = invalid ]
	stop_daemon
	run -2 "$DEVGATE_BUILD/devgated" --socket "$DG_SOCK" --state-dir "$DG_TMP/state" \
		--pin-root "$DG_PINS" --host-root "$DG_HOST" --metrics-listen localhost:9400
	[[ "$output" == *"--metrics-listen: 'localhost:9400' is not ADDR:PORT"* ]]
}
