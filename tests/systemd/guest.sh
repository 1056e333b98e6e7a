#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs inside the booted guest (tests/systemd/run.sh copies it to /root):
# installs the .deb, starts devgated with systemctl, checks journald and
# 'systemctl reload', then grants GPU 0 to a process in a systemd scope
# (DevicePolicy=strict, so systemd's own device program is on it) and has
# systemd rewrite that program (daemon-reload, set-property DeviceAllow=)
# while the process opens the GPU in a loop: the grant holds or heals
# within 50 ms, and GPU 1 stays denied throughout.
set -eu

say() { echo "guest: $*"; }
die() {
	echo "guest: FAIL: $*" >&2
	journalctl -u devgated -b --no-pager 2>/dev/null | tail -n 20 >&2 || true
	exit 1
}
# wait_until SECONDS CMD...: CMD succeeds within SECONDS.
wait_until() {
	n=$(($1 * 20))
	shift
	while ! "$@" >/dev/null 2>&1; do
		n=$((n - 1))
		[ $n -gt 0 ] || return 1
		sleep 0.05
	done
}
journal_has() { journalctl -u devgated -b --no-pager -o cat | grep -qF -- "$1"; }
# in_cg CG CMD...: runs CMD in cgroup CG, under the device programs on it.
in_cg() { sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$@"; }
# opens CG EXPECTED PATH...: probe's lines for PATH..., opened in CG, are EXPECTED.
opens() {
	c=$1
	want=$2
	shift 2
	[ "$(in_cg "$c" probe "$@")" = "$want" ]
}
is_sleep() { [ "$(readlink "/proc/$(tail -n 1 "$1/cgroup.procs")/exe")" = /usr/bin/sleep ]; }
# is_probing CG: a probe runs in CG.
is_probing() {
	for p in $(cat "$1/cgroup.procs"); do
		[ "$(readlink "/proc/$p/exe")" != /usr/local/bin/probe ] || return 0
	done
	return 1
}
excluded() { [ "$(devgatectl --json list | jq '[.gpus[] | select(.state == "excluded")] | length')" = "$1" ]; }
# progs CG: the device programs on CG, ID:NAME, sorted.
progs() { bpftool -j cgroup show "$1" | jq -r '.[] | "\(.id):\(.name)"' | sort | paste -sd ' '; }
# leased CG N: devgatectl --json status lists N leases on CG (by cgroup id).
leased() {
	[ "$(devgatectl --json status | jq --arg id "$(stat -c %i "$1")" \
		'[.leases[]? | select((.cgroup_id | tostring) == $id)] | length')" = "$2" ]
}
# reapplied: devgated's own heal times, one a line: from an attach event to
# its gates back, or (without attach events) the heal check's re-apply.
reapplied() {
	journalctl -u devgated -b --no-pager -o cat |
		sed -n 's/.*gates re-applied \([0-9.]*\) ms later$/\1/p; s/.*gates re-applied in \([0-9.]*\) ms$/\1/p'
}
rewrites() { journalctl -u devgated -b --no-pager -o cat | grep -c 'device programs of .* changed' || true; }

gpu0=/srv/host/dev/nvidia0
gpu1=/srv/host/dev/nvidia1
# /dev/zero's numbers where the container sees them (its /dev is its own;
# /run is nodev).
zero=/srv/devgate-zero
mknod -m 0666 $zero c 1 5
MAX_HEAL_NS=50000000

# systemd mounts no bpffs in a container, nor takes a mount unit for it (an
# API file system): the admin mounts one, and the unit's RequiresMountsFor=
# /sys/fs/bpf finds it mounted.
mountpoint -q /sys/fs/bpf || mount -t bpf -o mode=0700 bpf /sys/fs/bpf
dpkg -i /root/devgate.deb >/dev/null
systemctl is-enabled devgated >/dev/null 2>&1 && die "the package enabled devgated"
systemctl is-active devgated >/dev/null 2>&1 && die "the package started devgated"
conf=/etc/devgate/devgate.conf
echo 'host-root = /srv/host' >>"$conf"
systemctl start devgated || die "systemctl start devgated"
systemctl is-active devgated >/dev/null || die "devgated is not active"
devgatectl status >/dev/null || die "devgatectl status"
journal_has "devgated $(dpkg-query -W -f='${Version}' devgate) serving on" ||
	die "journald has no start message from devgated"
say "devgated started by systemd, journald has its log: $(journalctl -u devgated -b --no-pager -o cat | grep -m 1 'displaced gates are')"

# systemctl reload: a new gpu-allow takes effect, then the old again.
excluded 0 || die "GPUs excluded before any policy"
echo 'gpu-allow = 10de:20b0' >>"$conf"
systemctl reload devgated
wait_until 10 excluded 2 || die "systemctl reload: gpu-allow did not take effect"
journal_has "SIGHUP: policy reloaded: 2 of 2 GPU(s) excluded" || die "no reload in the journal"
sed -i '/^gpu-allow = 10de:20b0$/d' "$conf"
systemctl reload devgated
wait_until 10 excluded 0 || die "systemctl reload: the old policy did not come back"
say "systemctl reload applied devgate.conf's policy"

# rewrite_check UNIT CG NODE: systemd rewrites UNIT's device programs
# (daemon-reload, set-property DeviceAllow=) while NODE, granted, is opened
# in CG in a loop: devgated sees it, the grant holds or heals within 50 ms,
# and GPU 1 stays denied.
rewrite_check() {
	stop=/run/devgate-rewrite.stop
	rm -f $stop
	in_cg "$2" probe -L 60000 "$3" $stop >/run/gpu0.runs &
	prober=$!
	wait_until 10 is_probing "$2" || die "$1: the prober did not start"
	before=$(rewrites)
	healed=$(reapplied | wc -l)
	systemctl daemon-reload
	systemctl set-property --runtime "$1" 'DeviceAllow=/dev/zero rw'
	# devgated saw systemd's new program (and wrapped it, or found its gate intact).
	wait_until 10 test "$(rewrites)" -gt "$before" || die "$1: devgated saw no change of its programs"
	wait_until 10 opens "$2" "$3 ENXIO" "$3" || die "$1: GPU 0 stays denied after systemd's rewrite"
	touch $stop
	wait $prober || die "$1: the prober failed"
	opens "$2" "$3 ENXIO
$gpu1 EPERM" "$3" $gpu1 || die "$1: after systemd's rewrite, GPU 1 is allowed"
	# Each EPERM run: from the end of the run before it (the last open that
	# reached the driver) to the start of the run after it.
	worst=$(awk '{ first[NR] = $1; last[NR] = $2; res[NR] = $3 }
		END { w = 0; for (i = 2; i < NR; i++) if (res[i] == "EPERM") {
			d = first[i + 1] - last[i - 1]; if (d > w) w = d }
			if (res[NR] != "ENXIO") w = -1; print w }' /run/gpu0.runs)
	[ "$worst" -ge 0 ] || die "$1: GPU 0 denied at the end: $(cat /run/gpu0.runs)"
	say "$1: systemd rewrote its device programs: $(grep -c EPERM /run/gpu0.runs) denied run(s), longest $((worst / 1000)) us; devgated's gates back $(reapplied | tail -n +$((healed + 1)) | paste -sd ' ' | grep . || echo '(none displaced)') ms (devgated's re-apply)"
	[ "$worst" -le $MAX_HEAL_NS ] || die "$1: GPU 0 was denied for $((worst / 1000)) us (over 50 ms)"
}

# revoked CG NODE WHAT: NODE is gone and CG's own policy is in force: GPU 0
# denied, /dev/null open, no devgate program left.
revoked() {
	[ ! -e "$2" ] || die "$3: revoke left $2"
	opens "$1" "$gpu0 EPERM
/dev/null ok" $gpu0 /dev/null || die "$3: after revoke, the scope's own policy is not in force"
	case " $(progs "$1") " in
	*:devgate*) die "$3: after revoke, devgate's programs stay: $(progs "$1")" ;;
	esac
}

# ct_check PID WHAT: grants GPU 0 to the container whose process is PID,
# in a systemd scope (WHAT made it): it reaches the driver and GPU 1 stays
# denied; revoke leaves the scope's programs as they were. Then again with
# systemd rewriting the scope's programs while granted.
ct_check() {
	cg=/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$1/cgroup")
	unit=${cg##*/}
	case $unit in
	*.scope) systemctl is-active "$unit" >/dev/null || die "$2: $unit is not an active unit" ;;
	*) die "$2: PID $1 is in $cg, not in a systemd scope" ;;
	esac
	node=/proc/$1/root/dev/nvidia0
	own=$(progs "$cg")
	opens "$cg" "$gpu0 EPERM
/dev/null ok" $gpu0 /dev/null || die "$2: the scope's device policy is not in force"
	devgatectl grant --pid "$1" --gpu 0 >/dev/null || die "$2: devgatectl grant"
	opens "$cg" "$node ENXIO
$gpu1 EPERM" "$node" $gpu1 || die "$2: after grant, GPU 0 does not reach the driver, or GPU 1 is not denied"
	leased "$cg" 1 || die "$2: granted, but devgatectl --json status lists no lease: $(devgatectl --json status)"
	devgatectl revoke --pid "$1" --gpu 0 >/dev/null || die "$2: devgatectl revoke"
	revoked "$cg" "$node" "$2"
	leased "$cg" 0 || die "$2: revoked, but devgatectl --json status lists the lease"
	[ "$(progs "$cg")" = "$own" ] || die "$2: after revoke, $unit has '$(progs "$cg")', not '$own'"
	say "$2: GPU 0 granted to $unit and revoked; GPU 1 denied; its programs as before ($own)"

	devgatectl grant --pid "$1" --gpu 0 >/dev/null || die "$2: devgatectl grant (again)"
	rewrite_check "$unit" "$cg" "$node"
	devgatectl revoke --pid "$1" --gpu 0 >/dev/null || die "$2: devgatectl revoke"
	revoked "$cg" "$node" "$2"
	# Not asserted (issue 27 item 3, the beside gate): each gate keeps the
	# program systemd replaced, and revoke puts it back beside systemd's new
	# one, so systemd's rule added while granted stays denied.
	say "$2: revoked after systemd's rewrite: $unit has $(progs "$cg"); systemd's new DeviceAllow=/dev/zero: $(in_cg "$cg" probe $zero)"
}

# A container in a systemd scope whose device policy systemd keeps as a BPF
# program (DevicePolicy=strict): its own mount namespace and /dev (devgate
# makes nodes only in a container's own /dev).
systemd-run --scope --unit=devgate-ct.scope -p DevicePolicy=strict \
	-p 'DeviceAllow=/dev/null rw' unshare -m --propagation private \
	sh -c 'mount -t tmpfs -o mode=0755 tmpfs /dev && exec sleep infinity' >/dev/null 2>&1 &
scope_cg=/sys/fs/cgroup/system.slice/devgate-ct.scope
wait_until 10 is_sleep "$scope_cg" || die "no container in devgate-ct.scope"
ct_check "$(tail -n 1 "$scope_cg/cgroup.procs")" "systemd-run --scope"

. /root/runtimes.sh

# A stop leaves leases and gates in place: the container keeps GPU 0 while
# devgated is down, and the next start adopts the lease. Meanwhile nothing
# heals: systemd's daemon-reload puts its device program back on the scope.
pid=$(tail -n 1 "$scope_cg/cgroup.procs")
node=/proc/$pid/root/dev/nvidia0
devgatectl grant --pid "$pid" --gpu 0 >/dev/null || die "devgatectl grant (before the stop)"
systemctl stop devgated
opens "$scope_cg" "$node ENXIO
$gpu1 EPERM" "$node" $gpu1 || die "systemctl stop devgated took GPU 0 away, or gave GPU 1"
say "devgated stopped: the scope keeps GPU 0"
systemctl daemon-reload
say "daemon-reload while devgated is stopped: $(in_cg "$scope_cg" probe "$node" | tr '\n' ' ')"
systemctl start devgated
# Its lease is listed as soon as systemd says devgated started (READY=1),
# and while a reload is handled.
leased "$scope_cg" 1 || die "right after the start, devgatectl --json status lists no lease: $(devgatectl --json status)"
systemctl reload devgated
leased "$scope_cg" 1 || die "right after a reload, devgatectl --json status lists no lease: $(devgatectl --json status)"
wait_until 10 opens "$scope_cg" "$node ENXIO
$gpu1 EPERM" "$node" $gpu1 || die "devgated's start did not give the scope GPU 0 back"
say "devgated started again: the scope has GPU 0, and devgatectl --json status lists its lease"
# The keeper's cgroups (outside any unit, at the cgroup root) were writable.
journalctl -u devgated -b --no-pager -o cat | grep -F 'cannot keep device program' &&
	die "devgated could not keep a runtime's program (above)"

# dpkg -r takes every grant back (nothing could revoke or heal one after),
# then stops devgated (debian/devgate.prerm).
dpkg -r devgate >/dev/null
systemctl is-active devgated >/dev/null 2>&1 && die "devgated still runs after dpkg -r"
revoked "$scope_cg" "$node" "dpkg -r"
say "dpkg -r revoked the scope's grant and stopped devgated: $(progs "$scope_cg")"
