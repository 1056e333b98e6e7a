# SPDX-License-Identifier: Apache-2.0
bats_require_minimum_version 1.5.0
# shellcheck shell=bash
#
# Common setup for devgate's bats tests. Every test gets its own fixture
# host, daemon, socket, state directory and pin directory; setup_file gives
# each file one runc mount namespace. teardown removes all of it, also
# after a failure.

DG_ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
DEVGATE_BUILD=${DEVGATE_BUILD:-$DG_ROOT/build}
# shellcheck source=../lib/runc.sh
. "$DG_ROOT/tests/lib/runc.sh"
# shellcheck source=../lib/lxc.sh
. "$DG_ROOT/tests/lib/lxc.sh"
# shellcheck source=../lib/crun.sh
. "$DG_ROOT/tests/lib/crun.sh"
# shellcheck source=../lib/docker.sh
. "$DG_ROOT/tests/lib/docker.sh"
# shellcheck source=../lib/lxd.sh
. "$DG_ROOT/tests/lib/lxd.sh"
# shellcheck source=../lib/keeper.sh
. "$DG_ROOT/tests/lib/keeper.sh"
# shellcheck source=../lib/cgroup1.sh
. "$DG_ROOT/tests/lib/cgroup1.sh"
# shellcheck source=../lib/reload.sh
. "$DG_ROOT/tests/lib/reload.sh"

fail() {
	echo "FAIL: $*" >&2
	return 1
}

# A missing requirement skips, except under DEVGATE_REQUIRE_PRIVILEGED=1
# (CI), where it fails: there a skipped test would be a silent hole.
missing() {
	if [ "${DEVGATE_REQUIRE_PRIVILEGED:-0}" = 1 ]; then
		fail "requirement missing and DEVGATE_REQUIRE_PRIVILEGED=1: $*"
	else
		skip "$*"
	fi
}

requires() {
	local r
	for r in "$@"; do
		case $r in
		root) [ "$(id -u)" = 0 ] || missing "needs root" ;;
		cgroup2) [ -n "$(dg_cgroot)" ] || missing "needs a cgroup v2 mount" ;;
		cgroup1) grep -q ' - cgroup cgroup [^ ]*devices' /proc/self/mountinfo ||
			missing "needs a cgroup v1 devices hierarchy (a hybrid or v1 host)" ;;
		bpf) [ -d /sys/fs/bpf ] || missing "needs /sys/fs/bpf" ;;
		runc) command -v runc >/dev/null || missing "needs runc" ;;
		podman) command -v podman >/dev/null || missing "needs podman" ;;
		lxc)
			command -v lxc-start >/dev/null && "$DG_LXC_PY" -c 'import lxc' 2>/dev/null ||
				missing "needs lxc and python3-lxc"
			;;
		promtool) command -v promtool >/dev/null || missing "needs promtool" ;;
		prometheus) command -v prometheus >/dev/null || missing "needs prometheus" ;;
		k8s)
			[ -x "$DEVGATE_BUILD/devgate-k8s" ] && [ -f "$DEVGATE_BUILD/k8s/py/api_pb2_grpc.py" ] &&
				/usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null ||
				missing "needs devgate-k8s and Debian's python3-grpcio and python3-protobuf"
			;;
		scdoc) command -v scdoc >/dev/null || missing "needs scdoc" ;;
		systemd-analyze) command -v systemd-analyze >/dev/null || missing "needs systemd-analyze" ;;
		*) fail "unknown requirement '$r'" ;;
		esac
	done
}

# Per-file: one mount namespace for runc.
dg_setup_file() {
	export DG_NSDIR="/run/devgate-test.$$.${BATS_TEST_FILENAME##*/}"
	if [ "$(id -u)" = 0 ] && { command -v runc || command -v lxc-start; } >/dev/null; then
		dg_ns_setup
	fi
}

dg_teardown_file() {
	dg_ns_teardown
}

# Per-test state. Ids include the test number and a random part so files and
# runs never collide in the shared cgroup tree.
dg_setup() {
	requires root cgroup2 bpf
	DG_TMP=$(mktemp -d /tmp/devgate-test.XXXXXX)
	DG_ID="dg$BATS_TEST_NUMBER-${DG_TMP##*.}"
	DG_PINS="/sys/fs/bpf/devgate-test-$DG_ID"
	DG_SOCK="$DG_TMP/sock"
	DG_HOST="$DG_TMP/host"
	DG_CGROOT=$(dg_cgroot)
	DG_CONTAINERS=()
	DG_LXCS=()
	DG_CGROUPS=()
	DG_DAEMON_PID=
	DG_DAEMON_ARGS=()
}

dg_teardown() {
	local c status=0
	for c in "${DG_CONTAINERS[@]}"; do dg_rm "$c"; done
	for c in "${DG_LXCS[@]}"; do dg_lxc_rm "$c"; done
	stop_daemon TERM || status=1
	# Sanitizer builds report into the daemon's log; any report fails the test.
	if [ -f "${DG_TMP:-}/daemon.log" ] &&
		grep -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$DG_TMP/daemon.log" >&2; then
		status=1
	fi
	for c in "${DG_CGROUPS[@]}"; do
		[ -d "$c" ] || continue
		# Kill what is left, then remove children before parents.
		echo 1 >"$c/cgroup.kill" 2>/dev/null || true
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || true
			[ -d "$c" ] || break
			sleep 0.1
		done
	done
	[ -n "${DG_PINS:-}" ] && rm -rf "$DG_PINS"
	dg_keeper_clean
	[ "$status" = 0 ] && [ -n "${DG_TMP:-}" ] && rm -rf "$DG_TMP"
	return "$status"
}

# The keeper cgroups of this test's devgated (daemon/gate/keeper.h): the runtime
# programs it held for gates that are gone now are let go.
dg_keeper_clean() {
	[ -n "${DG_PINS:-}" ] && [ -n "${DG_CGROOT:-}" ] || return 0
	dg_keeper_rm "$DG_CGROOT" "$DG_PINS"
}

# make_host [mkfixture options]: the fake GPU host (default: 2 GPUs).
make_host() {
	"$DG_ROOT/tests/helpers/mkfixture" "$DG_HOST" "$@" >/dev/null
}

# start_daemon [OPTIONS]: this test's devgated, with DG_DAEMON_ARGS (a file's
# usual options, empty by default) and then OPTIONS, which win.
start_daemon() {
	[ -d "$DG_HOST" ] || make_host
	"$DEVGATE_BUILD/devgated" --socket "$DG_SOCK" --state-dir "$DG_TMP/state" \
		--pin-root "$DG_PINS" --host-root "$DG_HOST" "${DG_DAEMON_ARGS[@]}" "$@" \
		>>"$DG_TMP/daemon.log" 2>&1 &
	DG_DAEMON_PID=$!
	wait_for_daemon
}

# Generous: a loaded CI machine with sanitizers can be slow to start things.
wait_for_daemon() {
	local i
	for i in $(seq 400); do
		if dg status >/dev/null 2>&1; then return 0; fi
		if ! kill -0 "$DG_DAEMON_PID" 2>/dev/null; then
			cat "$DG_TMP/daemon.log" >&2
			fail "devgated exited during start"
			return 1
		fi
		sleep 0.05
	done
	fail "devgated did not answer within 20 s"
}

# stop_daemon [SIGNAL]: after TERM (the default) devgated must exit 0.
stop_daemon() {
	local sig=${1:-TERM} status=0
	[ -n "$DG_DAEMON_PID" ] || return 0
	kill -"$sig" "$DG_DAEMON_PID" 2>/dev/null || true
	wait "$DG_DAEMON_PID" 2>/dev/null || status=$?
	DG_DAEMON_PID=
	if [ "$sig" = TERM ] && [ "$status" != 0 ]; then
		echo "devgated exited with status $status after SIGTERM" >&2
		tail -20 "$DG_TMP/daemon.log" >&2
		return 1
	fi
	return 0
}

dg() {
	"$DEVGATE_BUILD/devgatectl" -s "$DG_SOCK" "$@"
}

# jq filter for a runc config: a user namespace of its own, whose ids 0-65535
# are 100000-165535 on the host (chown the rootfs to 100000 to match).
# shellcheck disable=SC2034
DG_USERNS_JQ='.linux.namespaces += [{"type": "user"}] |
	.linux.uidMappings = [{"containerID": 0, "hostID": 100000, "size": 65536}] |
	.linux.gidMappings = [{"containerID": 0, "hostID": 100000, "size": 65536}]'

# container NAME: starts a runc container; sets CPID and CID.
container() {
	requires runc
	CID="$DG_ID-$1"
	dg_bundle "$DG_TMP/$1" "$DEVGATE_BUILD/probe"
	CPID=$(dg_run "$CID" "$DG_TMP/$1")
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	[ -n "$CPID" ] && [ "$CPID" != null ]
}

# nested_container NAME: a runc container (cgroup v2, as container's)
# whose cgroup is PARENT/CID, PARENT being this test's own cgroup, so a test
# may attach to an ancestor; sets CID, CPID and PARENT (host path).
nested_container() {
	requires runc
	CID="$DG_ID-$1"
	PARENT="$DG_CGROOT/$DG_ID"
	dg_bundle "$DG_TMP/$1" "$DEVGATE_BUILD/probe"
	jq --arg p "/$DG_ID/$CID" '.linux.cgroupsPath = $p' "$DG_TMP/$1/config.json" \
		>"$DG_TMP/$1/config.new"
	mv "$DG_TMP/$1/config.new" "$DG_TMP/$1/config.json"
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$PARENT")
	CPID=$(dg_run "$CID" "$DG_TMP/$1")
	[ -n "$CPID" ] && [ "$CPID" != null ]
}

# hooked_bundle NAME JQ-FILTER [MINOR...]: a runc bundle with devgate's hooks
# in its config.json (createRuntime and poststop), edited further by the
# filter, with /gpuM nodes made in its rootfs; sets CID.
hooked_bundle() {
	local name=$1 filter=$2 m
	shift 2
	CID="$DG_ID-$name"
	dg_bundle "$DG_TMP/$name" "$DEVGATE_BUILD/probe"
	for m in "$@"; do
		[ -e "$DG_TMP/$name/rootfs/gpu$m" ] || mknod -m 666 "$DG_TMP/$name/rootfs/gpu$m" c 195 "$m"
	done
	jq --arg hook "$DEVGATE_BUILD/devgate-hook" --arg s "$DG_SOCK" '
		.hooks = {
			createRuntime: [{path: $hook, args: ["devgate-hook", "-s", $s, "createRuntime"]}],
			poststop: [{path: $hook, args: ["devgate-hook", "-s", $s, "poststop"]}]
		} | '"$filter" "$DG_TMP/$name/config.json" >"$DG_TMP/$name/config.new"
	mv "$DG_TMP/$name/config.new" "$DG_TMP/$name/config.json"
	DG_CONTAINERS+=("$CID")
}

# run_bundle NAME: runs hooked_bundle NAME in the foreground; the output is
# the container's.
run_bundle() {
	dg_runc run -b "$DG_TMP/$1" "$CID" </dev/null
}

# For the setup_file and teardown_file of a file that runs podman: the
# probe's image, made once, and every container it left.
dg_podman_setup_file() {
	dg_setup_file
	if command -v podman >/dev/null && [ -d "$DG_NSDIR" ]; then
		dg_podman_image localhost/devgate-test "$DEVGATE_BUILD/probe"
	fi
}

dg_podman_teardown_file() {
	dg_podman rm -af >/dev/null 2>&1 || true
	dg_teardown_file
}

# lxc_container NAME [defaults]: starts an LXC container (dg_lxc_create,
# "defaults": LXC's own device list); sets CPID, CID (its LXC name) and CG
# (its cgroup).
lxc_container() {
	requires lxc
	CID="$DG_ID-$1"
	DG_LXCS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/lxc.payload.$CID" "$DG_CGROOT/lxc.monitor.$CID")
	dg_lxc_create "$CID" "$DEVGATE_BUILD/probe" "${2:-}"
	CPID=$(dg_lxc_start "$CID")
	CG="$DG_CGROOT/lxc.payload.$CID"
	[ -n "$CPID" ] && [ -n "$(cg_progs "$CG")" ]
}

# lxc_probe CID PATH...: probe inside an LXC container.
lxc_probe() {
	local cid=$1
	shift
	dg_lxc lxc-attach -n "$cid" -- /bin/probe "$@"
}

# probe CID PATH...: open(2) from inside the container, one result per line.
probe() {
	local cid=$1
	shift
	dg_runc exec "$cid" probe "$@"
}

# Device program ids attached to a cgroup, space separated, in order.
cg_progs() {
	bpftool -j cgroup show "$1" | jq -r '[.[].id] | join(" ")'
}

cg_prog_names() {
	bpftool -j cgroup show "$1" | jq -r '[.[].name] | join(" ")'
}

# lookout_id CG: the id of devgate's lookout (devgate_mark) on cgroup CG.
lookout_id() {
	bpftool -j cgroup show "$1" | jq -r '.[] | select(.name == "devgate_mark") | .id'
}

# keeps_per_task ID: lookout ID records in the thread's own task storage
# (what the verifier kept of it calls bpf_task_storage_get).
keeps_per_task() {
	bpftool prog dump xlated id "$1" | grep -q task_storage_get
}

# The ids of the programs on a cgroup that are not devgate's, in order.
cg_foreign() {
	bpftool -j cgroup show "$1" | jq -r '[.[] | select(.name | startswith("devgate_") | not) | .id] | join(" ")'
}

# gated_beside CGROUP IDS: the cgroup is guarded in the beside form (the
# default gate-mode) and the runtime's programs are exactly IDS, by id, in
# order: in the order they run, devgate's lookout first (where the kernel
# runs pre-order programs: it is pinned), IDS, the beside gate (one of its
# two pinned instances), the tally last. Says what differs.
gated_beside() {
	local own eff pins want
	own=$(cg_foreign "$1")
	[ "$own" = "$2" ] || { echo "runtime programs on $1: '$own', not '$2'" >&2; return 1; }
	eff=$(bpftool -j cgroup show "$1" effective | jq -r '[.[].id] | join(" ")')
	pins=$(for p in dg_beside_v1 dg_beside2_v1; do
		bpftool -j prog show pinned "$DG_PINS/$p" 2>/dev/null | jq .id
	done)
	want="$2 BESIDE $(bpftool -j prog show pinned "$DG_PINS"/dg_tally_*_v1 | jq .id)"
	if [ -e "$DG_PINS/dg_lookout_v1" ]; then
		want="$(bpftool -j prog show pinned "$DG_PINS/dg_lookout_v1" | jq .id) $want"
	fi
	for p in $pins; do
		[ "$eff" = "${want/BESIDE/$p}" ] && return 0
	done
	echo "programs run on $1: '$eff', not '$want' (BESIDE one of: $pins)" >&2
	return 1
}

# cg_state CGROUP: the cgroup's dg_cgstate_v1 storage, as JSON
# ({cgroup_id, slot: [set 0, set 1], orig: [...]}), or nothing.
cg_state() {
	bpftool -j map dump pinned "$DG_PINS/dg_cgstate_v1" |
		jq -c --argjson k "$(stat -c %i "$1")" '.[] | select(.formatted.key == $k) | .formatted.value'
}

# slot_prog SET SLOT: the id of the program in that slot of the set's shared
# prog array; fails when the slot is empty.
slot_prog() {
	local s=$2 v
	v=$(bpftool -j map lookup pinned "$DG_PINS/dg_slots$1_v1" \
		key $((s & 255)) $((s >> 8 & 255)) $((s >> 16 & 255)) $((s >> 24)) 2>/dev/null) || return 1
	printf '%d\n' "0x$(echo "$v" | jq -r '.value | reverse | map(ltrimstr("0x")) | join("")')"
}

# What devgate left of its gates: pin directories of per-cgroup copies and
# used slots of the shared gates' arrays. Empty once every lease is gone.
gate_leftovers() {
	local s
	ls "$DG_PINS/cg"
	for s in 0 1; do
		bpftool -j map dump pinned "$DG_PINS/dg_slots${s}_v1" | jq -r ".[] | \"set $s slot \\(.key)\""
	done
}

# Number of entries devgate keeps in its grants map.
grant_entries() {
	bpftool -j map dump pinned "$DG_PINS/dg_grants_v1" | jq length
}

# plain_container NAME: a hand-made container with no runtime device program
# (see dg_plain). Sets CPID (host PID of its init) and CID.
plain_container() {
	CID="$DG_ID-$1"
	local root="$DG_TMP/$1/rootfs" i
	mkdir -p "$root/bin"
	cp /bin/busybox "$DEVGATE_BUILD/probe" "$root/bin/"
	for i in sh sleep stat test ls; do ln -sf busybox "$root/bin/$i"; done
	mknod -m 666 "$root/gpu1" c 195 1
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	CPID=$(dg_plain "$DG_CGROOT/$CID" "$root")
}

# in_cgroup CGROUP PID CMD...: runs CMD in CGROUP, inside PID's mount
# namespace and root, the way a container's own process would.
in_cgroup() {
	local cg=$1 pid=$2
	shift 2
	sh -c 'echo $$ > "$1/cgroup.procs" && shift 2 && exec nsenter -t "$0" -m -r "$@"' \
		"$pid" "$cg" _ "$@"
}

# Grants in devgate's map for one cgroup (by its directory).
grants_of() {
	local id
	id=$(stat -c %i "$1")
	bpftool -j map dump pinned "$DG_PINS/dg_grants_v1" |
		jq "[.[] | select(.formatted.key.cgroup_id == $id)] | length"
}

# crash_with POINT CMD...: a devgated armed at POINT; CMD must make it die.
crash_with() {
	local point=$1
	shift
	DEVGATE_FAULT=$point start_daemon
	"$@" >/dev/null 2>&1 || true
	wait_until 5 sh -c "! kill -0 $DG_DAEMON_PID 2>/dev/null" ||
		fail "devgated did not die at fault point $point"
	wait "$DG_DAEMON_PID" 2>/dev/null || true
	DG_DAEMON_PID=
}

# wait_until SECONDS CMD...: polls CMD every 20 ms; fails after SECONDS.
# dg_trace_start CALLS [STRACE-ARGS...]: strace of devgated's CALLS into
# $DG_TMP/trace (made anew), from when it is attached until dg_trace_stop.
dg_trace_start() {
	local set=$1
	shift
	rm -f "$DG_TMP/trace"
	strace -qq "$@" -e trace="$set" -o "$DG_TMP/trace" -p "$DG_DAEMON_PID" 3>&- &
	DG_TRACER=$!
	wait_until 10 sh -c "! grep -q '^TracerPid:[[:space:]]*0$' /proc/$DG_DAEMON_PID/status"
}

dg_trace_stop() {
	kill "$DG_TRACER"
	wait "$DG_TRACER" || true
}

wait_until() {
	local ms end
	ms=$(awk -v s="$1" 'BEGIN { printf "%d", s * 1000 }')
	shift
	end=$(($(date +%s%N) / 1000000 + ms))
	until "$@"; do
		[ $(($(date +%s%N) / 1000000)) -lt "$end" ] || return 1
		sleep 0.02
	done
}

no_leases() {
	[ "$(dg status --json | jq '.leases | length')" = 0 ]
}

# fill_ring N: N distinct denied devices opened in $CID while devgated is
# stopped, more than the 256 KiB event ring holds; sets DENIED to how many
# opens were denied.
fill_ring() {
	local n=$1 paths
	mkdir -p "$DG_TMP/c/rootfs/many"
	"$DEVGATE_BUILD/probe" -C "195:$((n + 1))" "$DG_TMP/c/rootfs/many"
	mapfile -t paths < <(seq -f /many/%g "$n")
	kill -STOP "$DG_DAEMON_PID"
	run probe "$CID" "${paths[@]}"
	kill -CONT "$DG_DAEMON_PID"
	[ "$status" = 1 ]
	# devgated has the ring's events to read once it runs again: on a busy
	# machine or an ASan build that can outlast a client's 10 s.
	wait_until 60 dg list >/dev/null 2>&1 || fail "devgated did not answer after the burst"
	# shellcheck disable=SC2154 # bats' run sets output
	DENIED=$(grep -c ' EPERM$' <<<"$output")
}
