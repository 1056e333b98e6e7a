#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Proves that the modules of a directory form no cycle: an edge A -> B when
# A's .c or .h includes B.h, or when A's object calls or reads a symbol that
# B's object defines (nm). tsort fails on any loop and names it.
#
#   sh scripts/depgraph.sh [DIR] [BUILD]    default: daemon build
#   sh scripts/depgraph.sh --edges DIR      print the edges instead
set -eu
edges_only=0
if [ "${1:-}" = --edges ]; then
	edges_only=1
	shift
fi
dir=${1:-daemon}
build=${2:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

modules() {
	for f in "$dir"/*.c "$dir"/*.h; do
		[ -e "$f" ] || continue
		basename "$f" | sed 's/\.[ch]$//'
	done | sort -u
}

modules >"$tmp/modules"

# Include edges: only headers of this directory count.
for f in "$dir"/*.c "$dir"/*.h; do
	[ -e "$f" ] || continue
	from=$(basename "$f" | sed 's/\.[ch]$//')
	sed -n 's/^#include "\([a-z_0-9]*\)\.h".*/\1/p' "$f" | while read -r to; do
		if grep -qx "$to" "$tmp/modules" && [ "$to" != "$from" ]; then
			echo "$from $to"
		fi
	done
done >"$tmp/edges"

# Call edges from the objects: who defines what, then who uses it.
for o in "$build/$dir"/*.o; do
	[ -e "$o" ] || continue
	m=$(basename "$o" .o)
	nm --defined-only "$o" | awk -v m="$m" '$2 ~ /^[TDBR]$/ { print $3, m }'
done | sort >"$tmp/defs"
for o in "$build/$dir"/*.o; do
	[ -e "$o" ] || continue
	m=$(basename "$o" .o)
	nm -u "$o" | awk '{ print $2 }' | sort | join - "$tmp/defs" |
		awk -v m="$m" '$2 != m { print m, $2 }'
done >>"$tmp/edges"

sort -u "$tmp/edges" -o "$tmp/edges"
if [ "$edges_only" = 1 ]; then
	cat "$tmp/edges"
	exit 0
fi
if ! tsort "$tmp/edges" >/dev/null 2>"$tmp/err"; then
	echo "depgraph: $dir has a dependency cycle:" >&2
	grep -v 'input contains a loop' "$tmp/err" | sed 's/^tsort: /  /' >&2
	exit 1
fi
echo "depgraph: $dir: $(wc -l <"$tmp/modules") modules, $(wc -l <"$tmp/edges") edges, no cycle"
