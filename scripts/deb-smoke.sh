#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The .deb end to end, as CI runs it from scripts/test.sh: build it (make
# deb: dpkg-buildpackage), check it with lintian, install it with dpkg -i,
# smoke-test the installed binaries against a fixture host, remove it with
# dpkg -r and check that nothing but the conffile is left, then purge. Leaves devgate uninstalled, also when a step fails; a devgate
# package left by an earlier run is purged first.
#
# usage: sh scripts/deb-smoke.sh [DEB]    (as root, Debian; DEB: a .deb
#                                          'make deb' built, else it runs it)
set -eu
cd "$(dirname "$0")/.."
top=$(pwd)

[ "$(id -u)" = 0 ] || { echo "deb-smoke: run as root" >&2; exit 1; }
for c in dpkg-buildpackage dh lintian; do
	command -v $c >/dev/null || { echo "deb-smoke: needs $c (scripts/install-deps.sh)" >&2; exit 1; }
done

work=$(mktemp -d /tmp/devgate-deb.XXXXXX)
pins=/sys/fs/bpf/devgate-deb-$$
daemon=

say() { echo "deb-smoke: $*"; }
die() { echo "deb-smoke: FAIL: $*" >&2; exit 1; }

installed() {
	dpkg-query -W -f='${db:Status-Status}' devgate 2>/dev/null | grep -Eq 'installed|config-files'
}

cleanup() {
	status=$?
	if [ -n "$daemon" ]; then
		kill "$daemon" 2>/dev/null || true
		wait "$daemon" 2>/dev/null || true
	fi
	if installed; then dpkg --purge devgate >/dev/null 2>&1 || status=1; fi
	rm -rf "$work" "$pins"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if installed; then
	say "purging a devgate package left by an earlier run"
	dpkg --purge devgate >/dev/null
fi

if [ $# -gt 0 ]; then deb=$1; else deb=$(make --no-print-directory -s deb | tail -n 1); fi
[ -f "$deb" ] || die "make deb made no package"
# No error or warning; debian/devgate.lintian-overrides says why for each
# tag it overrides.
lintian --fail-on error,warning "$deb" >"$work/lintian" 2>&1 || {
	cat "$work/lintian" >&2
	die "lintian"
}
say "installing $deb"
dpkg -i "$deb" >/dev/null
dpkg -L devgate >"$work/files"

# The installed binaries, configuration, unit, man pages and completion.
[ "$(/usr/sbin/devgated --version)" = "devgated $(dpkg-query -W -f='${Version}' devgate)" ] ||
	die "devgated --version"
/usr/bin/devgatectl --version >/dev/null || die "devgatectl --version"
/usr/bin/devgate-hook --version >/dev/null || die "devgate-hook --version"
/usr/sbin/devgate-k8s --version >/dev/null || die "devgate-k8s --version"
[ -f /usr/share/devgate/k8s/devgate-k8s.yaml ] || die "the DaemonSet manifest is not installed"
jq -e '.hook.path == "/usr/bin/devgate-hook"' \
	/usr/share/containers/oci/hooks.d/devgate.json >/dev/null || die "hooks.d names devgate-hook"
/usr/sbin/devgated --check-config >"$work/effective" || die "the shipped config is invalid"
/usr/sbin/devgated --config /dev/null --check-config | cmp -s - "$work/effective" ||
	die "the shipped config does not state the defaults"
if command -v systemd-analyze >/dev/null; then
	out=$(systemd-analyze verify --man=no /lib/systemd/system/devgated.service 2>&1) ||
		die "systemd-analyze verify: $out"
	[ -z "$out" ] || die "systemd-analyze verify: $out"
fi
for m in man8/devgated.8 man8/devgatectl.8 man8/devgate-hook.8 man5/devgate.conf.5; do
	zcat "/usr/share/man/$m.gz" | grep -q '^\.TH' || die "man page $m"
done
bash -c '. /usr/share/bash-completion/completions/devgatectl && complete -p devgatectl' \
	>/dev/null || die "bash completion"

# A daemon from the package, against a fixture host.
"$top/tests/helpers/mkfixture" "$work/host" --dev-char >/dev/null
/usr/sbin/devgated --socket "$work/sock" --state-dir "$work/state" --pin-root "$pins" \
	--host-root "$work/host" 2>"$work/daemon.log" &
daemon=$!
for _ in $(seq 100); do
	/usr/bin/devgatectl -s "$work/sock" status >/dev/null 2>&1 && break
	kill -0 "$daemon" 2>/dev/null || { cat "$work/daemon.log" >&2; die "devgated exited"; }
	sleep 0.05
done
n=$(/usr/bin/devgatectl -s "$work/sock" --json list | jq '.gpus | length')
[ "$n" = 2 ] || die "devgatectl list shows $n GPUs, not 2"
/usr/bin/devgatectl -s "$work/sock" doctor --host-root "$work/host" --pin-root "$pins" \
	>"$work/doctor" || { cat "$work/doctor" >&2; die "doctor found a failure"; }
kill "$daemon"
wait "$daemon" || die "devgated did not exit 0 on SIGTERM"
daemon=

# dpkg -r leaves the conffile (and its directory), nothing else of ours.
say "removing"
dpkg -r devgate >/dev/null
while IFS= read -r path; do
	case $path in
	/etc/devgate | /etc/devgate/devgate.conf)
		[ -e "$path" ] || die "dpkg -r removed the conffile $path"
		;;
	*)
		# Shared directories (/usr/bin, ...) stay; our own paths must not.
		if [ -e "$path" ] && { [ ! -d "$path" ] || [ "${path#*devgate}" != "$path" ]; }; then
			die "$path is left after dpkg -r"
		fi
		;;
	esac
done <"$work/files"
dpkg --purge devgate >/dev/null
[ ! -e /etc/devgate ] || die "/etc/devgate is left after dpkg --purge"
say "ok: installed, served a fixture host, removed cleanly"
