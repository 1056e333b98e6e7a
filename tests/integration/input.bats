#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Hostile input: requests on the socket, and the bundle and state a hook is
# handed. Each is refused with a clear error, and nothing changes.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; start_daemon; }
teardown() { dg_teardown; }

# send LINE: one raw line to devgated, its reply in $output.
send() {
	run -0 sh -c 'printf "%s\n" "$1" | socat -t 2 - UNIX-CONNECT:"$2"' sh "$1" "$DG_SOCK"
}

# refused LINE MESSAGE-GLOB: a protocol error whose message matches.
refused() {
	send "$1"
	[ "$(echo "$output" | jq -r .error.code)" != null ] || fail "accepted: $1 -> $output"
	# shellcheck disable=SC2053 # $2 is a glob
	[[ "$(echo "$output" | jq -r .error.message)" == $2 ]] ||
		fail "for $1: $(echo "$output" | jq -r .error.message)"
}

unchanged() {
	no_leases
	[ "$(grant_entries)" = 0 ]
}

@test "socket: a key twice, \\u0000, deep nesting: refused by name, nothing granted" {
	plain_container dup
	pid=$CPID
	refused '{"v":1,"op":"list","op":"grant","args":{"pid":'"$pid"',"gpus":"0"}}' \
		"malformed message: a key appears twice in one object"
	refused '{"v":1,"op":"grant","args":{"pid":'"$pid"',"gpus":"0","gpus":"1"}}' \
		"malformed message: a key appears twice in one object"
	refused '{"v":1,"op":"grant","args":{"pid":'"$pid"',"gpus":"0","label":"ok\u0000evil"}}' \
		'malformed message: a string holds ?u0000'
	deep=$(printf '[%.0s' {1..200})1$(printf ']%.0s' {1..200})
	refused '{"v":1,"op":"list","args":{"a":'"$deep"'}}' "malformed message: nested too deep"
	unchanged
}

@test "socket: wrong types, huge numbers, unknown fields and ops: refused, nothing granted" {
	plain_container t
	refused '{"v":1,"op":"grant","args":{"pid":"1"}}' "*'pid' must be an integer"
	refused '{"v":1,"op":"grant","args":{"pid":1e300}}' "*'pid' must be an integer"
	refused '{"v":1,"op":"grant","args":{"pid":99999999999999999999999999}}' "*'pid' is out of range*"
	refused '{"v":1,"op":"grant","args":{"pid":-1}}' "*'pid' is out of range*"
	refused '{"v":1,"op":"grant","args":{"pid":'"$CPID"',"gpus":["0"]}}' "*'gpus' must be a string"
	refused '{"v":1,"op":"grant","args":{"pid":'"$CPID"',"count":1e400}}' "*"
	refused '{"v":1e400,"op":"list"}' "*"
	refused '{"v":1,"op":"grant","args":{"pid":1,"sudo":true}}' "*unknown field 'sudo'"
	refused '{"v":1,"op":"shutdown"}' "unknown operation 'shutdown'"
	refused '{"v":1,"op":null}' "*"
	refused '{}' "*"
	refused '' "*"
	unchanged
}

@test "socket: raw NUL bytes and an oversized line: the client is refused, the rest served" {
	run -0 sh -c "printf '{\"v\":1,\"op\":\"list\"\\0,\"x\":1}\n' | socat -t 2 - UNIX-CONNECT:$DG_SOCK"
	[ "$(echo "$output" | jq -r .error.code)" = protocol ]
	# A line with no end: the daemon answers or drops it, and keeps serving.
	run timeout 20 sh -c "head -c 8000000 /dev/zero | tr '\\0' '[' | socat -t 2 - UNIX-CONNECT:$DG_SOCK"
	[ "$status" != 124 ] || fail "devgated kept reading an 8 MB line"
	run -0 dg list
	[[ "${lines[0]}" == IDX* ]]
	unchanged
}

# hk ARGS...: devgate-hook, as runtimes run it.
hk() { "$DEVGATE_BUILD/devgate-hook" -s "$DG_SOCK" "$@"; }

state_json() { # ID STATUS BUNDLE PID
	printf '{"ociVersion":"1.0.2","id":"%s","status":"%s","bundle":"%s","pid":%s}' "$@"
}

# bundle NAME: a bundle asking for GPU 0; its config.json as text in $cfg.
bundle() {
	B="$DG_TMP/$1"
	dg_bundle "$B" "$DEVGATE_BUILD/probe"
	jq -c '.annotations = {"devgate.io/gpus": "0"}' "$B/config.json" >"$B/c.json"
	mv "$B/c.json" "$B/config.json"
	cfg=$(cat "$B/config.json")
}

# hook_refuses MESSAGE-GLOB: the hook on $B, for $PID, fails with the message.
hook_refuses() {
	run hk createRuntime <<<"$(state_json "$DG_ID-x" creating "$B" "$PID")"
	[ "$status" -ne 0 ] || fail "hook accepted: $output"
	# shellcheck disable=SC2053 # $1 is a glob
	[[ "$output" == $1 ]] || fail "hook said: $output"
}

@test "socket: what a client supplies reaches the log escaped; over-long labels and sources are refused" {
	plain_container esc
	local long bidi=$'\xe2\x80\xae'
	long=$(printf 'A%.0s' {1..5000})
	# A 5,000-byte source with a right-to-left override, a 300-byte label.
	refused '{"v":1,"op":"grant","args":{"pid":'"$CPID"',"gpus":"0","source":"'"$bidi$long"'"}}' \
		"*'source' is longer than 64 bytes"
	refused '{"v":1,"op":"grant","args":{"pid":'"$CPID"',"gpus":"0","container":"'"${long:0:300}"'"}}' \
		"*'container' is longer than 256 bytes"
	unchanged
	# A source that is logged with a refusal: a newline that would forge a
	# line, a bidirectional override that would reorder it, a bell.
	refused '{"v":1,"op":"grant","args":{"pid":'"$CPID"',"gpus":"7","source":"cli\ndevgated: notice: forged'"$bidi"'\u0007"}}' \
		"no GPU with index 7*"
	grep -qF 'via cli\x0adevgated: notice: forged\u202e\x07: ' "$DG_TMP/daemon.log" ||
		fail "$(grep refused "$DG_TMP/daemon.log")"
	# A label that is logged with the grant: an override, bytes that are not
	# UTF-8 (an OCI id is bytes, not text), a backslash.
	send '{"v":1,"op":"grant","args":{"pid":'"$CPID"',"gpus":"0","container":"job'"$bidi"'gpj'$'\xff\xc0\x80''\\x"}}'
	[ "$(echo "$output" | jq -r '.error.code // "none"')" = none ] || fail "$output"
	grep -qF 'granted 1 GPU(s) to job\u202egpj\xff\xc0\x80\\x (cgroup' "$DG_TMP/daemon.log" ||
		fail "$(grep granted "$DG_TMP/daemon.log")"
	# No raw control, override or invalid byte anywhere in the log, no forged line.
	run ! grep -q "^devgated: notice: forged" "$DG_TMP/daemon.log"
	run ! grep -qaP '[\x00-\x08\x0b-\x1f\x7f]|\xe2\x80[\xaa-\xae]|\xff|\xc0' "$DG_TMP/daemon.log"
	[ "$(grep -c "$long" "$DG_TMP/daemon.log")" = 0 ]
	# The legitimate grant stands: the container opens its GPU.
	run -0 dg status --json
	[ "$(echo "$output" | jq '.leases | length')" = 1 ]
	run -1 in_cgroup "$DG_CGROOT/$CID" "$CPID" /bin/probe /dev/nvidia0 /gpu1
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/gpu1 EPERM')" ]
}

@test "hook: config.json with a key twice, \\u0000, deep nesting or over 4 MiB: refused" {
	plain_container h
	PID=$CPID
	bundle b
	# The same annotation twice: json-c alone would keep the last one.
	printf '%s' "${cfg%\}},\"annotations\":{\"devgate.io/gpus\":\"1\"}}" >"$B/config.json"
	hook_refuses "*invalid $B/config.json: a key appears twice in one object*"
	printf '%s' "${cfg%\}},\"x\":\"a\\u0000b\"}" >"$B/config.json"
	hook_refuses '*a string holds ?u0000*'
	deep=$(printf '{"a":%.0s' {1..100})1$(printf '}%.0s' {1..100})
	printf '%s' "${cfg%\}},\"x\":$deep}" >"$B/config.json"
	hook_refuses "*nested too deep*"
	{ printf '%s' "${cfg%\}},\"x\":\""; head -c 5000000 /dev/zero | tr '\0' a; printf '"}'; } >"$B/config.json"
	hook_refuses "*larger than 4 MiB*"
	unchanged
}

@test "hook: annotations with control characters or 1 MB values: refused" {
	plain_container h
	PID=$CPID
	bundle b
	jq '.annotations["devgate.io/gpus"] = "0\n1"' "$B/config.json" >"$B/c" && mv "$B/c" "$B/config.json"
	hook_refuses "*is not a GPU selector*"
	big=$(head -c 1048576 /dev/zero | tr '\0' 0)
	jq --rawfile v <(printf '%s' "$big") '.annotations["devgate.io/gpus"] = $v' \
		"$B/config.json" >"$B/c" && mv "$B/c" "$B/config.json"
	hook_refuses "*larger than 1048576 bytes*"
	unchanged
}

@test "hook: a state whose pid is not a container's is refused, nothing granted" {
	bundle b
	# A host process in devgated's own mount namespace: no container at all.
	sleep 300 &
	PID=$!
	hook_refuses "*PID $PID*"
	kill -KILL "$PID"
	wait "$PID" || true
	unchanged
}
