#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The include-and-call graph of the whole tree (bpf, common, daemon and its
# folders, cli, k8s), and the rules it must keep:
#
#   - no cycle between modules (a module is a .c and the .h of the same name);
#   - no cycle between folders (daemon/gate, daemon/lease, common, ...);
#   - a folder's private headers are included only from inside it (its
#     README.md names the public ones: "Public headers: a.h, b.h.");
#   - a folder whose README.md says "Calls: only this folder." calls no
#     function defined outside it (daemon/helper: the static node binary);
#   - no chain deeper than --max-depth modules.
#
# An edge A -> B: A's .c or .h includes B's header (resolved as the compiler
# does: the file's own folder, then common, bpf, daemon, cli; a BPF
# skeleton stands for its bpf/*.bpf.c), or A's object uses a symbol B's
# object defines (nm; a name defined twice resolves to the user's own top
# folder first, then common). Depth counts the modules on the longest chain,
# so a module that uses nothing is 1.
#
#   sh scripts/depgraph.sh [--max-depth N] [BUILD]   check; BUILD: objects (build)
#   sh scripts/depgraph.sh --edges [BUILD]           module edges, "from to"
#   sh scripts/depgraph.sh --folders [BUILD]         folder edges
#   sh scripts/depgraph.sh --depth [BUILD]           each module's depth, deepest first
set -eu
mode=check
max_depth=0
while [ $# -gt 0 ]; do
	case $1 in
	--edges | --folders | --depth) mode=${1#--} ;;
	--max-depth)
		max_depth=$2
		shift
		;;
	-*)
		echo "depgraph: unknown option '$1'" >&2
		exit 2
		;;
	*) break ;;
	esac
	shift
done
build=${1:-build}
if [ ! -d "$build/daemon" ]; then
	echo "depgraph: no objects under '$build/daemon': build first (make)" >&2
	exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

find bpf common daemon cli k8s -type f \( -name '*.c' -o -name '*.h' -o -name '*.cc' \) |
	LC_ALL=C sort >"$tmp/files"

# file -> module: the path without its extension (.bpf.c keeps ".bpf").
module_of() {
	sed 's/\.\(c\|h\|cc\)$//'
}
module_of <"$tmp/files" | LC_ALL=C sort -u >"$tmp/modules"

# Include edges, file to file, resolved as the compiler's -I order would.
awk '
FNR == 1 && NR == FNR { }
NR == FNR { have[$0] = 1; list[++n] = $0; next }
END {
	split("common bpf daemon cli", inc_dirs, " ")
	for (i = 1; i <= n; i++) {
		f = list[i]; d = f; sub(/\/[^\/]*$/, "", d)
		while ((getline line < f) > 0) {
			if (line !~ /^#include "/) continue
			h = line; sub(/^#include "/, "", h); sub(/".*/, "", h)
			if (h == "devgate.skel.h") { print f, "bpf/devgate.bpf.c"; continue }
			if (h == "attach_watch.skel.h") { print f, "bpf/attach_watch.bpf.c"; continue }
			if ((d "/" h) in have) { print f, d "/" h; continue }
			for (k = 1; k <= 4; k++)
				if ((inc_dirs[k] "/" h) in have) { print f, inc_dirs[k] "/" h; break }
		}
		close(f)
	}
}' "$tmp/files" >"$tmp/includes"

awk '{ a = $1; b = $2; sub(/\.(c|h|cc)$/, "", a); sub(/\.(c|h|cc)$/, "", b);
	if (a != b) print a, b }' "$tmp/includes" >"$tmp/edges"

# Call edges: who defines each symbol, then who uses it.
# Objects of modules that have a .c: a header alone defines nothing, and an
# object left from a file that is gone must not count.
while read -r m; do
	{ [ -f "$m.c" ] || [ -f "$m.cc" ]; } && [ -f "$build/$m.o" ] && echo "$build/$m.o"
done <"$tmp/modules" >"$tmp/objects"
# nm -A names the object on each line: "BUILD/daemon/x.o:   U sym" or "...: 0000 T sym".
# shellcheck disable=SC2046
nm -A $(cat "$tmp/objects") | awk -v b="$build/" -v uses="$tmp/uses" -v defs="$tmp/defs" '
{
	o = $1; sub(/:.*/, "", o); sub("^" b, "", o); sub(/\.o$/, "", o)
	if ($2 == "U") print $3, o > uses
	else if ($2 ~ /^[TDBR]$/) print $3, o > defs
}'
LC_ALL=C sort -o "$tmp/uses" "$tmp/uses"
LC_ALL=C sort -o "$tmp/defs" "$tmp/defs"
LC_ALL=C join "$tmp/uses" "$tmp/defs" | awk '
function top(m) { sub(/\/.*/, "", m); return m }
{
	# sym user definer: keep the best definer per (user, sym)
	key = $2 " " $1
	rank = top($3) == top($2) ? 0 : (top($3) == "common" ? 1 : 2)
	if (!(key in best) || rank < bestrank[key]) { best[key] = $3; bestrank[key] = rank }
}
END { for (k in best) { split(k, p, " "); if (p[1] != best[k]) print p[1], best[k] } }
' | LC_ALL=C sort -u >"$tmp/calls"
cat "$tmp/calls" >>"$tmp/edges"
LC_ALL=C sort -u "$tmp/edges" -o "$tmp/edges"

folder_edges() {
	awk '{ a = $1; b = $2; sub(/\/[^\/]*$/, "", a); sub(/\/[^\/]*$/, "", b);
		if (a != b) print a, b }' "$tmp/edges" | LC_ALL=C sort -u
}

# Longest chain by modules: depth(n) = 1 + the deepest of what n uses.
depths() {
	cat "$tmp/modules" "$tmp/edges" | awk '
	NF == 1 { node[$1] = 1; next }
	{ node[$1] = 1; node[$2] = 1; out[$1] = out[$1] " " $2 }
	function depth(n,   k, parts, i, d, best) {
		if (n in memo) return memo[n]
		if (n in busy) return 0
		busy[n] = 1
		best = 0; nextof[n] = ""
		k = split(out[n], parts, " ")
		for (i = 1; i <= k; i++) {
			d = depth(parts[i])
			if (d > best) { best = d; nextof[n] = parts[i] }
		}
		delete busy[n]
		memo[n] = best + 1
		return memo[n]
	}
	END {
		for (n in node) {
			d = depth(n)
			chain = n; m = n
			while (nextof[m] != "") { m = nextof[m]; chain = chain " -> " m }
			print d, chain
		}
	}' | LC_ALL=C sort -k1,1nr -k2
}

case $mode in
edges)
	cat "$tmp/edges"
	exit 0
	;;
folders)
	folder_edges
	exit 0
	;;
depth)
	depths | awk '{ print $1, $2 }'
	exit 0
	;;
esac

if ! tsort "$tmp/edges" >/dev/null 2>"$tmp/err"; then
	echo "depgraph: the modules have a dependency cycle:" >&2
	grep -v 'input contains a loop' "$tmp/err" | sed 's/^tsort: /  /' >&2
	fail=1
fi
folder_edges >"$tmp/fedges"
if ! tsort "$tmp/fedges" >/dev/null 2>"$tmp/err"; then
	echo "depgraph: the folders have a dependency cycle:" >&2
	grep -v 'input contains a loop' "$tmp/err" | sed 's/^tsort: /  /' >&2
	echo "  (the edges between them: sh scripts/depgraph.sh --edges | grep FOLDER)" >&2
	fail=1
fi

# Private headers: included from outside their folder only if public.
for readme in $(find daemon -mindepth 2 -name README.md | LC_ALL=C sort); do
	dir=$(dirname "$readme")
	public=$(sed -n 's/^Public headers: *//p' "$readme" | sed 's/\.$//' | tr -d '`' | tr ',' ' ')
	if [ -z "$public" ] && ! grep -q '^Public headers: none' "$readme"; then
		echo "depgraph: $readme names no public headers (\"Public headers: a.h, b.h.\")" >&2
		fail=1
	fi
	awk -v dir="$dir" -v public=" $public " '
	{
		fd = $1; sub(/\/[^\/]*$/, "", fd)
		hd = $2; sub(/\/[^\/]*$/, "", hd)
		h = $2; sub(/.*\//, "", h)
		if (hd == dir && fd != dir && index(public, " none ") == 0 && index(public, " " h " ") == 0)
			printf "depgraph: %s includes %s, private to %s\n", $1, $2, dir
		else if (hd == dir && fd != dir && index(public, " none ") > 0)
			printf "depgraph: %s includes %s, private to %s\n", $1, $2, dir
	}' "$tmp/includes" >"$tmp/private"
	if [ -s "$tmp/private" ]; then
		cat "$tmp/private" >&2
		fail=1
	fi
	if grep -q '^Calls: only this folder' "$readme"; then
		awk -v dir="$dir" '{ a = $1; b = $2; sub(/\/[^\/]*$/, "", a); sub(/\/[^\/]*$/, "", b)
			if (a == dir && b != dir)
				printf "depgraph: %s calls into %s, outside %s (its README: only this folder)\n", $1, $2, dir
		}' "$tmp/calls" >"$tmp/out"
		if [ -s "$tmp/out" ]; then
			cat "$tmp/out" >&2
			fail=1
		fi
	fi
done

depths >"$tmp/depths"
deepest=$(head -n 1 "$tmp/depths")
n_depth=${deepest%% *}
if [ "$max_depth" -gt 0 ] && [ "$n_depth" -gt "$max_depth" ]; then
	echo "depgraph: a chain of $n_depth modules, deeper than $max_depth:" >&2
	echo "  ${deepest#* }" >&2
	fail=1
fi
[ "$fail" = 0 ] || exit 1
echo "depgraph: $(wc -l <"$tmp/modules") modules, $(wc -l <"$tmp/edges") edges, no cycle;" \
	"$(cut -d' ' -f1 "$tmp/fedges" | cat - "$tmp/modules" | sed 's|/[^/]*$||' | sort -u | wc -l) folders, no cycle between them"
echo "depgraph: deepest chain, $n_depth modules: ${deepest#* }"
