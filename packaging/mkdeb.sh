#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# 'make deb': builds devgate's .deb the Debian way (debian/, debhelper,
# dpkg-buildpackage) from a copy of the source tree under BUILD_DIR/deb, so
# the build writes nothing next to the checkout, then moves the .deb to
# BUILD_DIR and prints its path. Files git ignores (build trees) stay out.
#
# With --if-stale, a .deb already in BUILD_DIR is kept when its sources are
# the same files, of the same sizes and times, as when it was built (a
# stamp next to it says), so a developer's edit is never tested as an old
# package.
#
# usage: packaging/mkdeb.sh [--if-stale] BUILD_DIR     (from the source tree)
set -eu

if_stale=false
[ "$1" != --if-stale ] || { if_stale=true && shift; }
O=$1
version=$(dpkg-parsechangelog -S Version)
arch=$(dpkg --print-architecture)
work=$O/deb
src=$work/devgate-$version
deb=$O/devgate_${version}_$arch.deb

. packaging/sources.sh
inputs=$(dg_inputs "$O")
if $if_stale && dg_current "$deb" "$inputs"; then
	echo "$deb"
	exit 0
fi

rm -rf "$work" "$deb.inputs"
mkdir -p "$src"
dg_sources "$O" | tar --null -T - -cf - | tar -xf - -C "$src"
(cd "$src" && dpkg-buildpackage -us -uc -b -j"$(nproc)" >../build.log 2>&1) || {
	tail -n 40 "$work/build.log" >&2
	echo "mkdeb: dpkg-buildpackage failed; the whole log is $work/build.log" >&2
	exit 1
}
mv "$work/devgate_${version}_$arch.deb" "$O/"
rm -rf "$work"
echo "$inputs" >"$deb.inputs"
echo "$deb"
