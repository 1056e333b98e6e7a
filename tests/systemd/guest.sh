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
# in_ct CMD...: runs CMD in the container: its cgroup (under its device
# programs) and its mount namespace.
in_ct() {
	sh -c 'echo $$ >"$0/cgroup.procs" && p=$1 && shift && exec nsenter -t "$p" -m -- "$@"' \
		"$scope_cg" "$pid" "$@"
}
# opens EXPECTED PATH...: probe's lines for PATH... in the scope are EXPECTED.
opens() {
	want=$1
	shift
	[ "$(in_ct probe "$@")" = "$want" ]
}
is_sleep() { [ "$(readlink "/proc/$(tail -n 1 "$1/cgroup.procs")/exe")" = /usr/bin/sleep ]; }
# is_probing: a probe runs in the container.
is_probing() {
	for p in $(cat "$scope_cg/cgroup.procs"); do
		[ "$(readlink "/proc/$p/exe")" != /usr/local/bin/probe ] || return 0
	done
	return 1
}
excluded() { [ "$(devgatectl --json list | jq '[.gpus[] | select(.state == "excluded")] | length')" = "$1" ]; }

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
say "devgated started by systemd, journald has its log"

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

# A container in a systemd scope whose device policy systemd keeps as a BPF
# program: its own mount namespace and /dev (devgate makes nodes only in a
# container's own /dev).
systemd-run --scope --unit=devgate-ct.scope -p DevicePolicy=strict \
	-p 'DeviceAllow=/dev/null rw' unshare -m --propagation private \
	sh -c 'mount -t tmpfs -o mode=0755 tmpfs /dev && exec sleep infinity' >/dev/null 2>&1 &
scope_cg=/sys/fs/cgroup/system.slice/devgate-ct.scope
wait_until 10 is_sleep "$scope_cg" || die "no container in devgate-ct.scope"
pid=$(tail -n 1 "$scope_cg/cgroup.procs")
opens "$gpu0 EPERM
$zero EPERM" $gpu0 $zero || die "systemd's DevicePolicy=strict is not in force on the scope"
devgatectl grant --pid "$pid" --gpu 0 >/dev/null || die "devgatectl grant"
opens "/dev/nvidia0 ENXIO
$gpu1 EPERM" /dev/nvidia0 $gpu1 ||
	die "after grant: GPU 0 does not reach the driver, or GPU 1 is not denied"
say "GPU 0 granted to devgate-ct.scope; GPU 1 denied"

# systemd rewrites the scope's device programs while GPU 0 is opened in a loop.
stop=/run/devgate-ct.stop
in_ct probe -L 60000 /dev/nvidia0 $stop >/run/gpu0.runs &
prober=$!
wait_until 10 is_probing || die "the prober did not start"
rewrites() {
	journalctl -u devgated -b --no-pager -o cat | grep -c 'device programs of devgate-ct changed' ||
		true
}
before=$(rewrites)
systemctl daemon-reload
systemctl set-property --runtime devgate-ct.scope 'DeviceAllow=/dev/zero rw'
# devgated saw systemd's new program (and wrapped it, or found its gate intact).
wait_until 10 test "$(rewrites)" -gt "$before" || die "devgated saw no change of the scope's programs"
wait_until 10 opens "/dev/nvidia0 ENXIO" /dev/nvidia0 || die "GPU 0 stays denied after systemd's rewrite"
touch $stop
wait $prober || die "the prober failed"
opens "/dev/nvidia0 ENXIO
$gpu1 EPERM" /dev/nvidia0 $gpu1 || die "after systemd's rewrite: GPU 1 is allowed"
# Not asserted (issue 27, item 3, is another change): whether systemd's own
# new rule took effect under devgate's gates.
say "systemd's new DeviceAllow=/dev/zero under devgate: $(in_ct probe $zero)"
# Each EPERM run: from the end of the run before it (the last open that
# reached the driver) to the start of the run after it.
worst=$(awk '{ first[NR] = $1; last[NR] = $2; res[NR] = $3 }
	END { w = 0; for (i = 2; i < NR; i++) if (res[i] == "EPERM") {
		d = first[i + 1] - last[i - 1]; if (d > w) w = d }
		if (res[NR] != "ENXIO") w = -1; print w }' /run/gpu0.runs)
[ "$worst" -ge 0 ] || die "GPU 0 denied at the end: $(cat /run/gpu0.runs)"
say "systemd rewrote the scope's device program: $(grep -c EPERM /run/gpu0.runs) denied run(s), longest $((worst / 1000)) us"
[ "$worst" -le $MAX_HEAL_NS ] || die "GPU 0 was denied for $((worst / 1000)) us (over 50 ms)"

# dpkg -r stops devgated (debian/devgate.prerm).
dpkg -r devgate >/dev/null
systemctl is-active devgated >/dev/null 2>&1 && die "devgated still runs after dpkg -r"
# Not asserted yet: the unit says leases and gates stay across a stop; here
# (devgated could not keep the runtime's program: EROFS) GPU 0 did not.
say "dpkg -r stopped devgated; then: $(in_ct probe /dev/nvidia0 $gpu1 | tr '\n' ' ')"
