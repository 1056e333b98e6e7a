#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# spread.sh A B: compares two runs' figure files (bench/results/issue28.txt,
# "name value" a line, as bench/run.sh writes them). Prints each figure of
# both, and their spread: the larger over the smaller, less one, in percent.
# Exits 1 when a goal's figure spreads over 20% (the reproduce rule of issue
# 28), 0 otherwise. A figure marked "info" (a third word: no goal counts it)
# is listed with its spread but not counted; one in one file only is listed.
# The last line says how many goal figures are within 20%.
[ $# = 2 ] || { echo "usage: spread.sh A B" >&2; exit 2; }
for f in "$1" "$2"; do
	[ -r "$f" ] || { echo "spread.sh: cannot read $f" >&2; exit 2; }
done
awk 'FNR == NR { a[$1] = $2; if ($3 == "info") info[$1] = 1; next }
     { b[$1] = $2; if ($3 == "info") info[$1] = 1 }
     END {
	bad = 0; goals = 0; within = 0
	printf "%-16s %12s %12s %8s\n", "figure", "A", "B", "spread"
	for (k in a) {
		if (!(k in b)) { printf "%-16s %12s %12s\n", k, a[k], "-" | "sort"; continue }
		lo = a[k] < b[k] ? a[k] : b[k]
		hi = a[k] < b[k] ? b[k] : a[k]
		s = lo > 0 ? (hi / lo - 1) * 100 : 0
		note = (s > 20) ? " over 20%" : ""
		if (k in info)
			note = note " (information)"
		else {
			goals++
			if (s > 20) bad = 1; else within++
		}
		printf "%-16s %12s %12s %7.1f%%%s\n", k, a[k], b[k], s, note | "sort"
	}
	for (k in b) if (!(k in a)) printf "%-16s %12s %12s\n", k, "-", b[k] | "sort"
	close("sort")
	printf "%d of %d goal figures within 20%%\n", within, goals
	exit bad
     }' "$1" "$2"
