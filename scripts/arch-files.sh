#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# ARCHITECTURE.md's table of source folders, made from the folders
# themselves: each row is a folder, the first sentence of its README.md and
# the files it holds. The table sits between the two marker lines below in
# ARCHITECTURE.md; what each file does is said once, at the top of the file.
#
#   sh scripts/arch-files.sh           print the table
#   sh scripts/arch-files.sh --check   fail if ARCHITECTURE.md's copy differs
#   sh scripts/arch-files.sh --write   put the table into ARCHITECTURE.md
set -eu
begin='<!-- folders: made by scripts/arch-files.sh; edit the READMEs, not this -->'
end='<!-- end of folders -->'
doc=ARCHITECTURE.md

folders() {
	for d in bpf common daemon daemon/* cli k8s; do
		[ -d "$d" ] && echo "$d"
	done
}

# The first sentence of the README's first paragraph after its title.
summary() {
	awk 'NR == 1 && /^#/ { next }
		/^$/ { if (text != "") exit; next }
		{ text = text (text == "" ? "" : " ") $0 }
		END { i = index(text, ". "); if (i) text = substr(text, 1, i); print text }' "$1"
}

table() {
	echo "| folder | what it holds | files |"
	echo "|---|---|---|"
	folders | while read -r d; do
		if [ ! -f "$d/README.md" ]; then
			echo "arch-files: $d has no README.md" >&2
			return 1
		fi
		files=$(find "$d" -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' -o -name '*.cc' \
			-o -name '*.S' -o -name '*.proto' \) -printf '%f\n' | LC_ALL=C sort |
			sed 's/.*/`&`/' | paste -sd, - | sed 's/,/, /g')
		printf '| `%s/` | %s | %s |\n' "$d" "$(summary "$d/README.md")" "$files"
	done
}

case ${1:-} in
"")
	table
	;;
--check)
	table >"${TMPDIR:-/tmp}/arch-files.$$"
	awk -v b="$begin" -v e="$end" '$0 == e { p = 0 } p { print } $0 == b { p = 1 }' "$doc" |
		diff -u - "${TMPDIR:-/tmp}/arch-files.$$" >&2 || {
		rm -f "${TMPDIR:-/tmp}/arch-files.$$"
		echo "arch-files: $doc's table of folders is stale: sh scripts/arch-files.sh --write" >&2
		exit 1
	}
	rm -f "${TMPDIR:-/tmp}/arch-files.$$"
	;;
--write)
	table >"${TMPDIR:-/tmp}/arch-files.$$"
	grep -qxF "$begin" "$doc" && grep -qxF "$end" "$doc" || {
		echo "arch-files: $doc lacks the marker lines" >&2
		exit 1
	}
	awk -v b="$begin" -v e="$end" -v t="${TMPDIR:-/tmp}/arch-files.$$" '
		$0 == b { print; while ((getline l < t) > 0) print l; skip = 1; next }
		$0 == e { skip = 0 }
		!skip { print }' "$doc" >"$doc.new"
	mv "$doc.new" "$doc"
	rm -f "${TMPDIR:-/tmp}/arch-files.$$"
	;;
*)
	echo "usage: sh scripts/arch-files.sh [--check|--write]" >&2
	exit 2
	;;
esac
