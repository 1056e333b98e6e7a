#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# 'make deb': builds devgate's .deb the Debian way (debian/, debhelper,
# dpkg-buildpackage) from a copy of the source tree under BUILD_DIR/deb, so
# the build writes nothing next to the checkout, then moves the .deb to
# BUILD_DIR and prints its path. Files git ignores (build trees) stay out.
#
# usage: packaging/mkdeb.sh BUILD_DIR     (from the source tree)
set -eu

O=$1
version=$(dpkg-parsechangelog -S Version)
arch=$(dpkg --print-architecture)
work=$O/deb
src=$work/devgate-$version

rm -rf "$work"
mkdir -p "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git ls-files -z --cached --others --exclude-standard |
		xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		tar --null -T - -cf - | tar -xf - -C "$src"
else
	tar --exclude=./build --exclude=./build-asan --exclude="./$O" -cf - . | tar -xf - -C "$src"
fi
(cd "$src" && dpkg-buildpackage -us -uc -b -j"$(nproc)" >../build.log 2>&1) || {
	tail -n 40 "$work/build.log" >&2
	echo "mkdeb: dpkg-buildpackage failed; the whole log is $work/build.log" >&2
	exit 1
}
mv "$work/devgate_${version}_$arch.deb" "$O/"
rm -rf "$work"
echo "$O/devgate_${version}_$arch.deb"
