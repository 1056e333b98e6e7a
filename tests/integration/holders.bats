#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# Revoke reports every process of the container that still holds the device,
# also those whose descriptor was never opened in the container: a count of
# the opens the gate let through would miss each of these, so the holder
# scan must stay exact (daemon/sys/holders.c).

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	OUTSIDER=
	# GPU 0 is 1:5 here (/dev/zero): a node that opens and maps, so it can be held.
	make_host --nvidia-major 1 --minor-base 5
	start_daemon
	container c
	run -0 dg grant --pid "$CPID" --gpu 0
	run -0 probe "$CID" /dev/nvidia5
	[ "$output" = "/dev/nvidia5 ok" ]
	# A host process that holds the same device outside the container: never reported.
	(
		exec 5</dev/zero
		exec sleep 100011
	) 3>&- &
	OUTSIDER=$!
}
teardown() {
	[ -z "${OUTSIDER:-}" ] || kill "$OUTSIDER" 2>/dev/null || true
	! mountpoint -q "$DG_TMP/fs" || umount -l "$DG_TMP/fs"
	dg_teardown
}

# hold HOW: a process in the container's cgroup that holds /dev/zero as HOW
# says (tests/helpers/holder.py); prints its PID.
hold() {
	"$DG_ROOT/tests/helpers/holder.py" "$1" /dev/zero "$DG_CGROOT/$CID" 3>&-
}

# trace_daemon CALLS: strace -y of devgated's CALLS into $DG_TMP/trace, from
# when it is attached until untrace.
trace_daemon() { dg_trace_start "$1" -y; }
untrace() { dg_trace_stop; }

# revoke_holders: revokes GPU 0 and prints the reported holders' PIDs, sorted,
# one line.
revoke_holders() {
	dg --json revoke --pid "$CPID" | jq -r '[.holders[]?.pid] | sort | join(" ")'
}

@test "revoke reports a descriptor passed in over a unix socket from outside" {
	h=$(hold passed)
	[ -n "$h" ]
	[ -n "$(find "/proc/$h/fd" -lname /dev/zero)" ]
	[ "$(revoke_holders)" = "$h" ]
}

@test "revoke reports a descriptor opened before its process moved into the container" {
	h=$(hold moved)
	[ -n "$h" ]
	[ "$(revoke_holders)" = "$h" ]
	kill -0 "$OUTSIDER"
}

@test "revoke reports mappings whose descriptor is closed, in every process that has one" {
	h1=$(hold mapped)
	h2=$(hold mapped)
	[ -n "$h1" ] && [ -n "$h2" ]
	# Held by the mapping alone: no descriptor on the device is left.
	[ -z "$(find "/proc/$h1/fd" -lname /dev/zero)" ]
	grep -q ' /dev/zero$' "/proc/$h1/maps"
	run -0 dg --json revoke --pid "$CPID"
	[ "$(echo "$output" | jq -r '[.holders[].pid] | sort | join(" ")')" = \
		"$(printf '%s\n' "$h1" "$h2" | sort -n | tr '\n' ' ' | sed 's/ $//')" ]
	[ "$(echo "$output" | jq -r '[.holders[].node] | unique | join(" ")')" = /dev/nvidia5 ]
}

@test "revoke reports no holder when only processes outside the container hold the device" {
	[ "$(revoke_holders)" = "" ]
	kill -0 "$OUTSIDER"
}

@test "revoke looks at each file the container maps once, not at each mapping" {
	h1=$(hold mapped)
	h2=$(hold mapped)
	[ -n "$h1" ] && [ -n "$h2" ]
	# File mappings of the container's processes, and the files behind them.
	maps=$(sed 's|.*|/proc/&/maps|' "$DG_CGROOT/$CID/cgroup.procs" | xargs cat 2>/dev/null |
		awk '$5 != 0 { print $4, $5 }')
	mappings=$(echo "$maps" | wc -l)
	files=$(echo "$maps" | sort -u | wc -l)
	[ "$files" -lt "$mappings" ]
	trace_daemon newfstatat
	[ "$(revoke_holders)" = "$(printf '%s\n' "$h1" "$h2" | sort -n | tr '\n' ' ' | sed 's/ $//')" ]
	untrace
	looked=$(grep -c '"../map_files/' "$DG_TMP/trace" || true)
	[ "$looked" -gt 0 ]
	[ "$looked" -le "$files" ]
}

@test "revoke reads each process's descriptors with getdents alone, and finds a holder in a nested cgroup" {
	mkdir "$DG_CGROOT/$CID/inner"
	h1=$(hold passed)
	h2=$("$DG_ROOT/tests/helpers/holder.py" mapped /dev/zero "$DG_CGROOT/$CID/inner" 3>&-)
	[ -n "$h1" ] && [ -n "$h2" ]
	grep -qx "$h2" "$DG_CGROOT/$CID/inner/cgroup.procs"
	trace_daemon fcntl,newfstatat,fstat,getdents64
	[ "$(revoke_holders)" = "$(printf '%s\n' "$h1" "$h2" | sort -n | tr '\n' ' ' | sed 's/ $//')" ]
	untrace
	kill -0 "$OUTSIDER"
	# Each holder's fd directory was listed ...
	grep -q "^getdents64([0-9]*</proc/$h1/fd>" "$DG_TMP/trace"
	grep -q "^getdents64([0-9]*</proc/$h2/fd>" "$DG_TMP/trace"
	# ... with no DIR stream around it (an fstat and two fcntl a directory).
	run ! grep -E '^((fcntl|fstat)\([0-9]+</proc/[0-9]+/fd>|newfstatat\([0-9]+</proc/[0-9]+/fd>, "")' \
		"$DG_TMP/trace"
}

# maps_dev PATH: the device of the filesystem holding PATH, as maps prints it.
maps_dev() {
	local ma mi
	read -r ma mi < <(stat -c '%Hd %Ld' "$1")
	printf '%02x:%02x\n' "$ma" "$mi"
}

# reads_after_last_open SUFFIX: the reads of the file whose path ends in
# SUFFIX, from the last time it was opened (the scan's; the request's own
# checks read it before), in $DG_TMP/trace.
reads_after_last_open() {
	awk -v s="$1>" '
		/^openat\(/ && index($0, s) { n = 0; open = 1; next }
		open && /^read\(/ && index($0, s) { n++ }
		END { print n + 0 }' "$DG_TMP/trace"
}

# procs_under CGROUP: the processes of cgroup directory CGROUP and of its descendants.
procs_under() {
	find "$1" -name cgroup.procs -exec cat {} + | sort -n
}

@test "revoke's holder scan opens only each process's fd directory and lists each directory once" {
	mkdir "$DG_CGROOT/$CID/inner"
	h1=$(hold mapped)
	h2=$("$DG_ROOT/tests/helpers/holder.py" passed /dev/zero "$DG_CGROOT/$CID/inner" 3>&-)
	[ -n "$h1" ] && [ -n "$h2" ]
	trace_daemon open,openat,getdents64,newfstatat,lseek,read
	[ "$(revoke_holders)" = "$(printf '%s\n' "$h1" "$h2" | sort -n | tr '\n' ' ' | sed 's/ $//')" ]
	untrace
	kill -0 "$OUTSIDER"
	# Each process of the container: its fd directory is the one thing
	# opened, and listed by one read; maps and map_files are reached from it.
	for p in $(procs_under "$DG_CGROOT/$CID"); do
		[ "$(grep -c "\"/proc/$p/fd\"" "$DG_TMP/trace")" = 1 ]
		[ "$(grep -c "^getdents64([0-9]*</proc/$p/fd>" "$DG_TMP/trace")" = 1 ]
		run ! grep -E "\"/proc/$p(/(maps|map_files))?\"" "$DG_TMP/trace"
	done
	grep -q "^openat([0-9]*</proc/$h1/fd>, \"../maps\"" "$DG_TMP/trace"
	grep -q "^newfstatat([0-9]*</proc/$h1/fd>, \"../map_files/" "$DG_TMP/trace"
	# Each cgroup: its cgroup.procs read once (no read that returns 0) and
	# its directory listed by one read, the container's through the
	# request's own descriptor (no "." opened).
	[ "$(reads_after_last_open "/$CID/cgroup.procs")" = 1 ]
	[ "$(reads_after_last_open "/$CID/inner/cgroup.procs")" = 1 ]
	[ "$(grep -c "^getdents64([0-9]*<[^>]*/$CID>" "$DG_TMP/trace")" = 1 ]
	[ "$(grep -c "^getdents64([0-9]*<[^>]*/$CID/inner>" "$DG_TMP/trace")" = 1 ]
	run ! grep -E "^openat\([0-9]+<[^>]*/$CID(/inner)?>, \"\.\"" "$DG_TMP/trace"
}

@test "revoke finds and kills holders listed past the first read of an fd directory and of a cgroup" {
	# Sibling cgroups with long names: the container's directory takes more
	# than one getdents64 read; the holder's is the one listed last.
	long=$(printf 'x%.0s' $(seq 200))
	for i in $(seq 60); do mkdir "$DG_CGROOT/$CID/$i$long"; done
	# shellcheck disable=SC2012 # ls -f lists in getdents64's order, which the test needs
	last=$(cd "$DG_CGROOT/$CID" && ls -f | while read -r e; do
		[ "$e" = . ] || [ "$e" = .. ] || [ ! -d "$e" ] || echo "$e"
	done | tail -n 1)
	[ -n "$last" ]
	# Each holder's device descriptor comes after 600 others.
	h1=$("$DG_ROOT/tests/helpers/holder.py" crowded /dev/zero "$DG_CGROOT/$CID/$last" 3>&-)
	h2=$(hold crowded)
	[ -n "$h1" ] && [ -n "$h2" ]
	[ "$(find "/proc/$h2/fd" | wc -l)" -gt 600 ]
	run -0 dg --json revoke --pid "$CPID" --kill=TERM
	[ "$(echo "$output" | jq -r '[.holders[].pid] | sort | join(" ")')" = \
		"$(printf '%s\n' "$h1" "$h2" | sort -n | tr '\n' ' ' | sed 's/ $//')" ]
	[ "$(echo "$output" | jq '.killed')" = 2 ]
	wait_until 10 sh -c "! kill -0 $h1 2>/dev/null && ! kill -0 $h2 2>/dev/null"
	# The host's own holder of the same device is neither reported nor signalled.
	kill -0 "$OUTSIDER"
}

@test "revoke finds and kills a mapping of a node on another filesystem (a tmpfs)" {
	mkdir "$DG_TMP/fs"
	mount -t tmpfs -o size=1m dg31 "$DG_TMP/fs"
	mknod -m 666 "$DG_TMP/fs/gpu" c 1 5
	h=$("$DG_ROOT/tests/helpers/holder.py" mapped "$DG_TMP/fs/gpu" "$DG_CGROOT/$CID" 3>&-)
	[ -n "$h" ]
	# maps names the tmpfs's device, not the one of /dev.
	fsdev=$(maps_dev "$DG_TMP/fs/gpu")
	[ "$(awk -v p="$DG_TMP/fs/gpu" '$6 == p { print $4 }' "/proc/$h/maps")" = "$fsdev" ]
	[ "$fsdev" != "$(maps_dev /dev/zero)" ]
	run -0 dg --json revoke --pid "$CPID" --kill=TERM
	[ "$(echo "$output" | jq -r '[.holders[].pid] | join(" ")')" = "$h" ]
	[ "$(echo "$output" | jq -r '.holders[0].node')" = /dev/nvidia5 ]
	[ "$(echo "$output" | jq '.killed')" = 1 ]
	wait_until 10 sh -c "! kill -0 $h 2>/dev/null"
	kill -0 "$OUTSIDER"
}

@test "revoke finds and kills a holder listed past the first page of cgroup.procs" {
	crowd="$DG_CGROOT/$CID/crowd"
	mkdir "$crowd"
	# Sleepers first, until cgroup.procs is well past a page (PIDs wrap at
	# pid_max, so their count alone does not say how many bytes): it takes
	# more than one read, and the holder, which joins last, is listed last.
	for _ in $(seq 40); do
		[ "$(wc -c <"$crowd/cgroup.procs")" -ge 4600 ] && break
		n=$(wc -l <"$crowd/cgroup.procs")
		sh -c 'echo $$ > "$1/cgroup.procs" && for i in $(seq 100); do sleep 100013 & done' _ "$crowd" \
			>/dev/null 2>&1 3>&-
		wait_until 60 sh -c "[ \$(wc -l < '$crowd/cgroup.procs') -ge $((n + 100)) ]"
	done
	[ "$(wc -c <"$crowd/cgroup.procs")" -ge 4600 ]
	sleepers=$(wc -l <"$crowd/cgroup.procs")
	h=$("$DG_ROOT/tests/helpers/holder.py" moved /dev/zero "$crowd" 3>&-)
	[ -n "$h" ]
	[ "$(awk -v h="$h" '{ off += length($0) + 1 } $0 == h { print off; exit }' \
		"$crowd/cgroup.procs")" -gt 4096 ]
	run -0 dg --json revoke --pid "$CPID" --kill=TERM
	[ "$(echo "$output" | jq -r '[.holders[].pid] | join(" ")')" = "$h" ]
	[ "$(echo "$output" | jq '.killed')" = 1 ]
	wait_until 10 sh -c "! kill -0 $h 2>/dev/null"
	kill -0 "$OUTSIDER"
	# The sleepers hold nothing: none was signalled.
	[ "$(wc -l <"$crowd/cgroup.procs")" -ge "$sleepers" ]
}

@test "revoke --kill ends a holder of each kind (passed, moved, mapped), and no process outside" {
	h1=$(hold passed)
	h2=$(hold moved)
	h3=$(hold mapped)
	[ -n "$h1" ] && [ -n "$h2" ] && [ -n "$h3" ]
	run -0 dg --json revoke --pid "$CPID" --kill=TERM
	[ "$(echo "$output" | jq -r '[.holders[].pid] | sort | join(" ")')" = \
		"$(printf '%s\n' "$h1" "$h2" "$h3" | sort -n | tr '\n' ' ' | sed 's/ $//')" ]
	[ "$(echo "$output" | jq '.killed')" = 3 ]
	wait_until 10 sh -c "! kill -0 $h1 2>/dev/null && ! kill -0 $h2 2>/dev/null && ! kill -0 $h3 2>/dev/null"
	kill -0 "$OUTSIDER"
	kill -0 "$CPID"
}
