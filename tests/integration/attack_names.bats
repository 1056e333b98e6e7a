#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Attacks on --container NAME: devgated reads runtimes' state, and a state
# file names a PID and a cgroup. A name must not be made to point at
# another process: a recycled PID, a PID in another cgroup, a name that
# walks out of the state root, a state root that someone other than root
# can change. runc's state only (cheap): copies of a live container's
# state.json, edited, in a root of this test's own. The same name in two
# runtimes (exit 2, hint --runtime) is names.bats's.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }

setup() {
	dg_setup
	DG_ID="dg28at-$DG_ID"
	DG_PINS="/sys/fs/bpf/$DG_ID"
	RT="$DG_TMP/rt"
	mkdir -m 700 "$RT"
	container a
	REAL="$DG_NSDIR/runc/$CID/state.json"
	[ -f "$REAL" ]
	FAKE_PID=
}

teardown() {
	[ -z "${FAKE_PID:-}" ] || kill "$FAKE_PID" 2>/dev/null || true
	dg_teardown
}

# names_daemon ROOT: devgated that looks names up in runc's state at ROOT alone.
names_daemon() {
	start_daemon --docker-socket "" --lxd-socket "" --podman-storage "" --runc-root "$1"
}

# state NAME [JQ-FILTER]: ROOT/NAME/state.json, container a's state edited.
state() {
	mkdir -p "$RT/$1"
	jq "${2:-.}" "$REAL" >"$RT/$1/state.json"
}

# nothing_granted: no lease, no grant in the map, a's GPU still denied.
nothing_granted() {
	no_leases
	[ "$(grant_entries)" = 0 ]
	run -1 probe "$CID" /gpu1
	[ "$output" = "/gpu1 EPERM" ]
}

@test "a state whose PID was recycled, is gone, or sits in another cgroup: refused, nothing granted" {
	names_daemon "$RT"
	state ok
	state recycled '.init_process_start += 1'
	state moved '.cgroup_paths |= map_values(sub("[^/]*$"; "elsewhere"))'
	gone=$(sh -c 'echo $$')
	state gone ".init_process_pid = $gone"

	run -5 dg grant --container recycled --gpu 1
	[[ "$output" == *"runc container 'recycled' (ID recycled) is not running: PID $CPID is another process than the one the state names"* ]]
	nothing_granted
	run -5 dg grant --container moved --gpu 1
	[[ "$output" == *"PID $CPID is in cgroup /$CID, not in the one the state names (/elsewhere)"* ]]
	nothing_granted
	run -5 dg grant --container gone --gpu 1
	[[ "$output" == *"its PID $gone is gone"* ]]
	nothing_granted

	# The unedited copy is a itself: the refusals above are the edits'.
	run -0 dg grant --container ok --gpu 1
	run -1 probe "$CID" /gpu1 /mem
	[ "$output" = "$(printf '/gpu1 ENXIO\n/mem EPERM')" ]
	[ "$(dg status --json | jq -r '.leases[0].cgroup')" = "/$CID" ]
	run -0 dg revoke --container ok
	no_leases
}

@test "a state that names a cgroup of the same last name under another parent: refused, nothing granted; the whole path is compared" {
	names_daemon "$RT"
	state other '.cgroup_paths |= map_values(sub("(?<t>/[^/]*)$"; "/elsewhere\(.t)"))'
	state outside '.cgroup_paths |= map_values(sub("^.*/"; "/tmp/cg/"))'
	jq -r '.cgroup_paths[]' "$RT/other/state.json" | grep -q "/elsewhere/$CID\$"

	run -5 dg grant --container other --gpu 1
	[[ "$output" == *"PID $CPID is in cgroup /$CID, not in the one the state names (/elsewhere/$CID)"* ]]
	nothing_granted
	run -5 dg grant --container outside --gpu 1
	[[ "$output" == *"names no cgroup below /sys/fs/cgroup"* ]]
	nothing_granted
}

@test "names with path characters, a leading dot or dash, or over 253 long: refused before any lookup" {
	names_daemon "$RT"
	# A state that a walk out of the root would find.
	mkdir -p "$DG_TMP/esc"
	cp "$REAL" "$DG_TMP/esc/state.json"
	state ok
	long=$(printf 'x%.0s' $(seq 254))
	for name in ../esc ok/../ok ./ok ok/ /ok .ok -ok "$long" 'ok;x' 'ok x' ''; do
		run -5 dg grant --container "$name" --gpu 1
		[ "${lines[0]}" = "devgatectl: '$name' is not a container name" ] ||
			[ "$name" = '' ] || fail "name '$name': $output"
		nothing_granted
	done
	grep -q "hint: names are 1 to 253 letters" <<<"$(dg grant --container ../esc --gpu 1 2>&1)"
	# 253 is a name: looked up, and not found.
	run -5 dg grant --container "${long:1}" --gpu 1
	[[ "${lines[0]}" == *"no container is named"* ]]
	nothing_granted
	run -0 dg grant --container ok --gpu 1
	run -0 dg revoke --container ok
}

@test "a runc state root that is a symlink, not root's, or writable by others: refused with a hint" {
	state ok
	ln -s "$RT" "$DG_TMP/link"
	names_daemon "$DG_TMP/link"
	run -5 dg grant --container ok --gpu 1
	[ "${lines[0]}" = "devgatectl: no container is named 'ok'" ]
	[[ "${lines[1]}" == *"runc $DG_TMP/link (refused: $DG_TMP/link is a symlink; a state root and the directories above it must be root's alone)"* ]]
	nothing_granted
	stop_daemon TERM

	names_daemon "$RT"
	chown 65534 "$RT"
	run -5 dg grant --container ok --gpu 1
	[[ "${lines[1]}" == *"refused: $RT belongs to uid 65534, not root"* ]]
	nothing_granted
	chown 0 "$RT"
	chmod 777 "$RT"
	run -5 dg grant --container ok --gpu 1
	[[ "${lines[1]}" == *"refused: $RT is writable by others than root"* ]]
	nothing_granted
	# A directory above it that others can change counts too.
	chmod 700 "$RT"
	chmod 777 "$DG_TMP"
	run -5 dg grant --container ok --gpu 1
	[[ "${lines[1]}" == *"refused: $DG_TMP is writable by others than root"* ]]
	nothing_granted
	chmod 700 "$DG_TMP"

	run -0 dg grant --container ok --gpu 1
	run -1 probe "$CID" /gpu1
	[ "$output" = "/gpu1 ENXIO" ]
	run -0 dg revoke --container ok
}

# fake_docker SOCK PID ID: an API on SOCK that answers every container
# lookup as dockerd would for a running container with that PID and ID.
fake_docker() {
	/usr/bin/python3 -c '
import json, os, socket, sys
body = json.dumps({"Id": sys.argv[3], "Name": "/x",
                   "State": {"Running": True, "Pid": int(sys.argv[2])}}).encode()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(16)
while True:
    c, _ = s.accept()
    c.recv(65536)
    c.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + body)
    c.close()' "$@" </dev/null >/dev/null 2>&1 3>&- &
	FAKE_PID=$!
	wait_until 10 test -S "$1"
}

@test "a dockerd socket not root's, writable by all, or in a directory others can change: refused with a hint; its answer (another container's PID) is not granted" {
	local api="$DG_TMP/api" sock
	sock="$api/docker.sock"
	mkdir -m 755 "$api"
	fake_docker "$sock" "$CPID" "$CID"
	start_daemon --docker-socket "$sock" --lxd-socket "" --podman-storage "" --runc-root "" \
		--lxc-path "" --cri-runc-root ""
	chown 65534 "$sock"
	run -5 dg grant --container web --gpu 1
	[ "${lines[0]}" = "devgatectl: no container is named 'web'" ]
	[ "${lines[1]}" = "hint: searched docker $sock (refused: $sock belongs to uid 65534, not root; an API socket and the directories above it must be root's alone)" ]
	nothing_granted
	chown 0 "$sock"
	chmod 666 "$sock"
	run -5 dg grant --container web --gpu 1
	[[ "${lines[1]}" == *"(refused: $sock is writable by all; an API socket"* ]]
	nothing_granted
	chmod 660 "$sock"
	chmod 777 "$api"
	run -5 dg grant --container web --gpu 1
	[[ "${lines[1]}" == *"(refused: $api is writable by others than root; an API socket"* ]]
	nothing_granted
	ln -s "$sock" "$DG_TMP/link.sock"
	chmod 755 "$api"
	stop_daemon TERM
	start_daemon --docker-socket "$DG_TMP/link.sock" --lxd-socket "" --podman-storage "" \
		--runc-root "" --lxc-path "" --cri-runc-root ""
	run -5 dg grant --container web --gpu 1
	[[ "${lines[1]}" == *"(refused: $DG_TMP/link.sock is not a socket; an API socket"* ]]
	nothing_granted
	stop_daemon TERM

	# Root's socket in root's directories, reached through a symlink as
	# /var/run/docker.sock is: its answer is taken (and proved).
	ln -s "$api" "$DG_TMP/api-link"
	start_daemon --docker-socket "$DG_TMP/api-link/docker.sock" --lxd-socket "" \
		--podman-storage "" --runc-root "" --lxc-path "" --cri-runc-root ""
	run -0 dg grant --container web --gpu 1
	run -1 probe "$CID" /gpu1
	[ "$output" = "/gpu1 ENXIO" ]
	run -0 dg revoke --container x
}
