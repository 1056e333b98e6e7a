#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# A Debian root that boots with systemd as PID 1 (tests/systemd/run.sh),
# from Debian's archive with debootstrap, holding the libraries the .deb
# depends on so that dpkg -i needs no network, and the container runtimes
# guest.sh drives under systemd's cgroup manager (podman, Docker's
# docker.io, runc, and busybox for their images). Cached as a tarball under
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
runtimes="podman docker.io runc busybox-static bpftool"
# Debian 13 ships the docker command apart from dockerd, as a Recommends
# (not installed here).
[ "$suite" = bookworm ] || runtimes="$runtimes docker-cli"
# debootstrap boots a root with systemd; apt adds the rest: debootstrap's
# --include resolves dependencies weakly (on trixie, the .deb's libgrpc29t64
# failed to configure).
apt_pkgs="jq $(echo "${deps%,}" | tr ',' ' ') $runtimes"
key=$(printf '%s %s %s\n' "$suite" "$include" "$runtimes" | sha256sum | cut -c1-12)
tarball=$cache/$suite-systemd-$key.tar

mkdir -p "$cache"
# One builder at a time; the others wait and reuse its tarball.
exec 9>"$tarball.lock"
flock 9
if [ ! -s "$tarball" ]; then
	tmp=$(mktemp -d "$cache/root.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	echo "mkroot: debootstrap $suite, then $apt_pkgs" >&2
	debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus "$suite" "$tmp/root" "$mirror" \
		>"$tmp/log" 2>&1 || { tail -n 20 "$tmp/log" >&2; exit 1; }
	# No service starts in the chroot (policy-rc.d), none is left behind.
	printf '#!/bin/sh\nexit 101\n' >"$tmp/root/usr/sbin/policy-rc.d"
	chmod 0755 "$tmp/root/usr/sbin/policy-rc.d"
	unshare -m sh -c 'mount -t proc proc "$0/proc" && exec chroot "$0" env -i \
		PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive sh -c \
		"apt-get update -qq && apt-get install -y -qq --no-install-recommends $1 && apt-get clean"' \
		"$tmp/root" "$apt_pkgs" >>"$tmp/log" 2>&1 || { tail -n 20 "$tmp/log" >&2; exit 1; }
	rm "$tmp/root/usr/sbin/policy-rc.d"
	# Every command guest.sh drives, found in the root: a package split in a
	# later release fails here, not mid-test.
	for c in systemctl systemd-run journalctl jq dpkg podman dockerd docker runc busybox bpftool; do
		chroot "$tmp/root" sh -c "command -v $c" >/dev/null ||
			{ echo "mkroot: $suite's root has no $c (which package ships it there?)" >&2; exit 1; }
	done
	# guest.sh starts dockerd itself; at boot, the package's defaults would
	# set up iptables and a bridge.
	for u in docker.service docker.socket containerd.service; do
		ln -sf /dev/null "$tmp/root/etc/systemd/system/$u"
	done
	rm -rf "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/lib/apt/lists/"*
	tar -C "$tmp/root" -cf "$tmp/root.tar" .
	mv "$tmp/root.tar" "$tarball"
fi
echo "$tarball"
