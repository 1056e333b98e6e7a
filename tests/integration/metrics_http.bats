#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# The /metrics endpoint against local users who fight it: a burst of
# connections that send one byte and close, slow headers that trickle,
# scrapers in a loop; and the warning when it listens beyond loopback.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	FLOOD=
}
teardown() {
	if [ -n "$FLOOD" ]; then
		kill "$FLOOD" 2>/dev/null || true
		wait "$FLOOD" 2>/dev/null || true
	fi
	dg_teardown
}

FLOODER="$BATS_TEST_DIRNAME/../helpers/sockflood.py"

# start_http [ADDR]: devgated serving /metrics on ADDR (default 127.0.0.1)
# at a port the kernel picked free.
start_http() {
	HTTP_ADDR=${1:-127.0.0.1}
	HTTP_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	start_daemon --metrics-listen "$HTTP_ADDR:$HTTP_PORT"
}

# scrape_within S: one GET /metrics answered whole within S seconds.
scrape_within() {
	curl -sSf --max-time "$1" "http://127.0.0.1:$HTTP_PORT/metrics" | grep -q '^devgate_build_info'
}

# cpu_ticks: devgated's user and system time so far, in clock ticks.
cpu_ticks() {
	awk '{ print $14 + $15 }' "/proc/$DG_DAEMON_PID/stat"
}

# flood_open MIN: the flood in the background holds MIN connections or more.
flood_open() {
	[ "$(awk '{ print $2 }' "$DG_TMP/flood" 2>/dev/null)" -ge "$1" ] 2>/dev/null
}

@test "a burst of 3000 connections that send one byte and close costs milliseconds, not /metrics" {
	start_http
	scrape_within 5
	t0=$(cpu_ticks)
	run -0 python3 "$FLOODER" burst "127.0.0.1:$HTTP_PORT" 3000
	# Each slot comes back as its client ends: the next scrape is answered.
	scrape_within 2 || fail "/metrics did not answer within 2 s of the burst"
	scrape_within 2
	run -0 dg -t 2 list
	# What the burst cost devgated's one thread, in ticks of 10 ms.
	[ $(($(cpu_ticks) - t0)) -le 50 ] || fail "the burst took $(($(cpu_ticks) - t0)) ticks"
	# grep -c says 0 (and exits 1) when libmicrohttpd said nothing at all.
	run grep -c "metrics endpoint" "$DG_TMP/daemon.log"
	[ "$output" -le 20 ] || fail "libmicrohttpd's messages were not rate-limited: $output lines"
}

@test "40 slow-header connections leave /metrics room; more are cut at their deadline" {
	start_http
	python3 "$FLOODER" --status "$DG_TMP/flood" slow "127.0.0.1:$HTTP_PORT" 40 &
	FLOOD=$!
	wait_until 20 flood_open 40
	for _ in 1 2 3; do
		scrape_within 2 || fail "/metrics did not answer beside 40 slow connections"
	done
	kill "$FLOOD"
	wait "$FLOOD" 2>/dev/null || true
	# More than devgated's 64 slots, each trickling a byte every 0.5 s and
	# replaced as soon as it is cut: a scrape waits at most one deadline.
	python3 "$FLOODER" --status "$DG_TMP/flood" slow "127.0.0.1:$HTTP_PORT" 100 &
	FLOOD=$!
	wait_until 20 flood_open 64
	scrape_within 15 || fail "/metrics did not answer beside 100 slow connections"
	grep -q "made" "$DG_TMP/flood"
	run -0 dg -t 2 list
}

@test "scrapers in a loop do not stall the control socket, and the page is at most a second old" {
	start_http
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	python3 "$FLOODER" --status "$DG_TMP/flood" scrape "127.0.0.1:$HTTP_PORT" 8 &
	FLOOD=$!
	wait_until 20 flood_open 1
	# 50 lists, one connection each, beside 8 scrapers in a loop: each is
	# answered, none waits a second (8 scrapers once held root's list 1.2 s).
	run -0 python3 "$FLOODER" probe "$DG_SOCK" 50
	[[ "$output" != *fail* ]] || fail "$output"
	slowest=$(echo "$output" | sort -n | tail -1)
	[ "$slowest" -lt 1000000000 ] || fail "a list took $slowest ns beside the scrapers"
	kill "$FLOOD"
	wait "$FLOOD" 2>/dev/null || true
	FLOOD=
	# The page is rendered at most once a second: a new grant shows up.
	run -0 dg grant --pid "$CPID" --gpu 1
	wait_until 5 sh -c "curl -sSf --max-time 2 http://127.0.0.1:$HTTP_PORT/metrics |
		grep -qx 'devgate_grants_total 2'"
}

@test "/metrics beyond loopback is served with a warning; on loopback without one" {
	start_http 127.0.0.1
	run -1 grep "listens beyond loopback" "$DG_TMP/daemon.log"
	stop_daemon
	start_http 0.0.0.0
	scrape_within 5
	grep -q "metrics endpoint 0.0.0.0:$HTTP_PORT listens beyond loopback: /metrics has no authentication" \
		"$DG_TMP/daemon.log"
}
