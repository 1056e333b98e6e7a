#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the .deb for another Debian release (trixie: Debian 13) in a
# debootstrapped chroot holding that release's build dependencies, and runs
# that release's lintian on it. The chroot is cached as a tarball under
# CACHE (default /var/cache/devgate-ci), named by suite and by debian/control's
# Build-Depends: a later run reuses it and downloads nothing. Prints the
# .deb's path (under BUILD_DIR/SUITE). With --if-stale, a .deb built there
# from the same sources (packaging/sources.sh) is kept.
#
# usage: sh packaging/chroot-build.sh [--if-stale] SUITE BUILD_DIR     (as root, from the source tree)
set -eu

if_stale=false
[ "$1" != --if-stale ] || { if_stale=true && shift; }
suite=$1
out=$2/$suite
cache=${DEVGATE_CI_CACHE:-/var/cache/devgate-ci}
mirror=${DEVGATE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
version=$(dpkg-parsechangelog -S Version)
. packaging/sources.sh
inputs=$(dg_inputs "$2")
for old in "$out"/devgate_"$version"_*.deb; do
	if $if_stale && dg_current "$old" "$inputs"; then
		echo "$old"
		exit 0
	fi
done

key=$( (echo "$suite lintian ccache" && sed -n '/^Build-Depends:/,/^[A-Z]/p' debian/control) |
	sha256sum | cut -c1-12)
tarball=$cache/$suite-build-$key.tar
work=$(mktemp -d /var/tmp/devgate-chroot.XXXXXX)
trap 'rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
root=$work/root

# The compiler cache, kept beside the roots: each run copies the sources
# afresh, and most objects are the same as the last run's.
ccache=$cache/$suite-ccache
mkdir -p "$ccache"

# in_root CMD: runs CMD in the chroot, with its own /proc and the compiler
# cache on /ccache (once the root has that folder), as a login shell would.
in_root() {
	unshare -m sh -c 'mount -t proc proc "$0/proc" &&
		{ [ ! -d "$0/ccache" ] || mount --bind "$2" "$0/ccache"; } && exec chroot "$0" \
		env -i PATH=/usr/lib/ccache:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
		CCACHE_DIR=/ccache CCACHE_MAXSIZE=1G DEBIAN_FRONTEND=noninteractive sh -c "$1"' \
		"$root" "$1" "$ccache"
}

# Each phase's seconds, on stderr: where a run's minutes went.
t0=$(date +%s)
phase() {
	echo "chroot-build($suite): $1 in $(($(date +%s) - t0)) s" >&2
	t0=$(date +%s)
}

echo "chroot-build($suite): building in $work" >&2
mkdir -p "$cache" "$root/build/devgate-$version"
dg_sources "$2" | tar --null -T - -cf - | tar -xf - -C "$root/build/devgate-$version"
exec 9>"$tarball.lock"
flock 9
if [ ! -s "$tarball" ]; then
	echo "chroot-build: debootstrap $suite and its build dependencies" >&2
	debootstrap --variant=minbase "$suite" "$work/new" "$mirror" >"$work/log" 2>&1 ||
		{ tail -n 20 "$work/log" >&2; exit 1; }
	mv "$root/build" "$work/new/build"
	rm -rf "$root"
	mv "$work/new" "$root"
	in_root "apt-get update -qq && apt-get install -y -qq --no-install-recommends \
		build-essential lintian ccache && mkdir /ccache && apt-get build-dep -y -qq /build/devgate-$version && \
		apt-get clean && rm -rf /var/lib/apt/lists/*" >"$work/log" 2>&1 ||
		{ tail -n 20 "$work/log" >&2; exit 1; }
	tar -C "$root" --exclude=./build -cf "$work/root.tar" .
	mv "$work/root.tar" "$tarball"
else
	tar -C "$root" -xf "$tarball"
fi
flock -u 9
phase "build root ready"

in_root "cd /build/devgate-$version && dpkg-buildpackage -us -uc -b -j$(nproc)" >"$work/log" 2>&1 ||
	{ tail -n 40 "$work/log" >&2; echo "chroot-build: dpkg-buildpackage failed in $suite" >&2; exit 1; }
phase "dpkg-buildpackage"
deb=$(cd "$root/build" && ls devgate_"$version"_*.deb)
in_root "lintian --fail-on error,warning --info /build/$deb" >"$work/lintian" 2>&1 ||
	{ cat "$work/lintian" >&2; echo "chroot-build: lintian ($suite) failed" >&2; exit 1; }
phase "lintian"
mkdir -p "$out"
rm -f "$out"/devgate_*.deb "$out"/devgate_*.deb.inputs
cp "$root/build/$deb" "$out/"
echo "$inputs" >"$out/$deb.inputs"
sed "s/^/chroot-build: lintian ($suite): /" "$work/lintian" >&2
echo "$out/$deb"
