#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# A Debian root that boots with systemd as PID 1 (tests/systemd/run.sh),
# from Debian's archive with debootstrap, holding the libraries the .deb
# depends on so that dpkg -i needs no network. Cached as a tarball under
# CACHE (default /var/cache/devgate-ci), named by suite and by what it
# holds: a later run reuses it and downloads nothing. Prints the tarball.
#
# usage: sh tests/systemd/mkroot.sh SUITE DEB     (as root; SUITE: bookworm, trixie)
set -eu

suite=$1
deb=$2
cache=${DEVGATE_CI_CACHE:-/var/cache/devgate-ci}
mirror=${DEVGATE_DEBIAN_MIRROR:-http://deb.debian.org/debian}

# The package's Depends, first alternatives, without versions.
deps=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/[[:space:]]//g' |
	grep -v '^$' | sort -u | tr '\n' ',')
include="systemd,systemd-sysv,dbus,jq,${deps%,}"
key=$(printf '%s %s\n' "$suite" "$include" | sha256sum | cut -c1-12)
tarball=$cache/$suite-systemd-$key.tar

mkdir -p "$cache"
# One builder at a time; the others wait and reuse its tarball.
exec 9>"$tarball.lock"
flock 9
if [ ! -s "$tarball" ]; then
	tmp=$(mktemp -d "$cache/root.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	echo "mkroot: debootstrap $suite ($include)" >&2
	debootstrap --variant=minbase --include="$include" "$suite" "$tmp/root" "$mirror" \
		>"$tmp/log" 2>&1 || { tail -n 20 "$tmp/log" >&2; exit 1; }
	rm -rf "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/lib/apt/lists/"*
	tar -C "$tmp/root" -cf "$tmp/root.tar" .
	mv "$tmp/root.tar" "$tarball"
fi
echo "$tarball"
