#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# devgate on a real systemd host: boots Debian SUITE with systemd as PID 1
# in systemd-nspawn (no machined: the guest is driven with nsenter into its
# PID 1's namespaces), installs the .deb there with dpkg -i, and runs
# tests/systemd/guest.sh inside: systemctl start/reload, journald, and a
# grant to a systemd scope that holds while systemd rewrites the scope's
# device programs. 'make systemd-host' runs it. Leaves nothing running.
#
# usage: sh tests/systemd/run.sh DEB [SUITE]     (as root; SUITE: bookworm)
set -eu
cd "$(dirname "$0")/../.."
top=$(pwd)

deb=$(realpath "$1")
suite=${2:-bookworm}
say() { echo "systemd-host($suite): $*"; }
die() {
	echo "systemd-host($suite): FAIL: $*" >&2
	exit 1
}
[ "$(id -u)" = 0 ] || die "run as root"
command -v systemd-nspawn >/dev/null || die "needs systemd-nspawn (Debian's systemd-container)"

v2=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
[ -n "$v2" ] || die "no cgroup2 mount"
work=$(mktemp -d /var/tmp/devgate-systemd.XXXXXX)
# nspawn runs in a cgroup of its own, which becomes the guest's root cgroup.
cg=$v2/$(basename "$work")
nspawn=
leader=

cleanup() {
	status=$?
	if [ -n "$nspawn" ]; then
		# SIGRTMIN+4 to the guest's systemd is a clean poweroff; nspawn then
		# exits. Before the guest is found, nspawn's SIGTERM does the same.
		if [ -n "$leader" ]; then
			kill -s RTMIN+4 "$leader" 2>/dev/null || true
		else
			kill -TERM "$nspawn" 2>/dev/null || true
		fi
		i=0
		while kill -0 "$nspawn" 2>/dev/null && [ $i -lt 300 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -KILL "$nspawn" 2>/dev/null || true
		wait "$nspawn" 2>/dev/null || true
	fi
	if [ -d "$cg" ]; then
		echo 1 >"$cg/cgroup.kill" 2>/dev/null || true
		find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
	fi
	[ "$status" = 0 ] || [ ! -s "$work/nspawn.log" ] || tail -n 30 "$work/nspawn.log" >&2
	rm -rf "$work"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

start=$(date +%s)
tarball=$(sh tests/systemd/mkroot.sh "$suite" "$deb")
root=$work/root
mkdir "$root"
tar -C "$root" -xf "$tarball"
install -m 0644 "$deb" "$root/root/devgate.deb"
install -m 0755 tests/systemd/guest.sh "$root/root/guest.sh"
install -m 0644 tests/systemd/runtimes.sh "$root/root/runtimes.sh"
install -m 0755 "${DEVGATE_BUILD:-$top/build}/probe" "$root/usr/local/bin/probe"
# The fake GPU host devgated serves (devgate.conf's host-root).
"$top/tests/helpers/mkfixture" "$root/srv/host" --dev-char >/dev/null

mkdir "$cg"
# --capability=all: devgated's bounding set (the unit's
# CapabilityBoundingSet) must exist in the guest; --keep-unit
# --register=no: there is no systemd or machined on the host. nspawn's
# seccomp allow-list lacks calls devgated makes: bpf (EPERM: no gate, no
# maps) and open_by_handle_at (cgroups by id: no heal, no end of lease);
# runc under dockerd makes a session keyring for each container (keyctl,
# add_key: "unable to join session keyring: operation not permitted").
syscalls="bpf open_by_handle_at openat2 keyctl add_key request_key"
(echo 0 >"$cg/cgroup.procs" && SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 exec systemd-nspawn -q \
	--register=no --keep-unit --capability=all --system-call-filter="$syscalls" \
	-D "$root" -b >"$work/nspawn.log" 2>&1) &
nspawn=$!

# The guest's PID 1: the process in our cgroup whose PID in its own
# namespace is 1. (/proc/PID/root reads "/" once the guest pivoted.)
i=0
while [ -z "$leader" ]; do
	leader=$(find "$cg" -name cgroup.procs -exec cat {} + | while read -r p; do
		if grep -q '^NSpid:.*[[:space:]]1$' "/proc/$p/status" 2>/dev/null; then
			echo "$p"
		fi
	done)
	[ -n "$leader" ] && break
	kill -0 "$nspawn" 2>/dev/null || die "systemd-nspawn exited"
	i=$((i + 1))
	[ $i -lt 600 ] || die "no guest PID 1 after 60 s"
	sleep 0.1
done
guest() { nsenter -t "$leader" -a -- env -i PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
# systemctl talks to PID 1 on this socket; it appears early in the boot.
i=0
until guest test -S /run/systemd/private; do
	i=$((i + 1))
	[ $i -lt 600 ] || die "systemd made no /run/systemd/private in 60 s"
	sleep 0.1
done
state=$(guest systemctl is-system-running --wait 2>&1) || true
case $state in
running) ;;
degraded) say "booted degraded: $(guest systemctl --failed --no-legend --plain | tr '\n' ' ')" ;;
*) die "the guest's systemd did not finish booting: $state" ;;
esac
say "booted in $(($(date +%s) - start)) s; PID 1 is host PID $leader"
guest sh /root/guest.sh
say "ok in $(($(date +%s) - start)) s"
