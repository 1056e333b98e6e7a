#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# spread.sh A B: compares two runs' figure files (bench/results/issue28.txt,
# "name value" a line, as bench/run.sh writes them). Prints each figure of
# both, and their spread: the larger over the smaller, less one, in percent.
# Exits 1 when a figure's spread is over 20% (the reproduce rule of issue
# 28), 0 otherwise; a figure in one file only is listed, not counted.
[ $# = 2 ] || { echo "usage: spread.sh A B" >&2; exit 2; }
awk 'FNR == NR { a[$1] = $2; next }
     { b[$1] = $2 }
     END {
	bad = 0
	printf "%-16s %12s %12s %8s\n", "figure", "A", "B", "spread"
	for (k in a) {
		if (!(k in b)) { printf "%-16s %12s %12s\n", k, a[k], "-" | "sort"; continue }
		lo = a[k] < b[k] ? a[k] : b[k]
		hi = a[k] < b[k] ? b[k] : a[k]
		s = lo > 0 ? (hi / lo - 1) * 100 : 0
		printf "%-16s %12s %12s %7.1f%%%s\n", k, a[k], b[k], s, (s > 20) ? " over 20%" : "" | "sort"
		if (s > 20) bad = 1
	}
	for (k in b) if (!(k in a)) printf "%-16s %12s %12s\n", k, "-", b[k] | "sort"
	close("sort")
	exit bad
     }' "$1" "$2"
