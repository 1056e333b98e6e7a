#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The full test suite, as the README gives it and CI runs it: install what
# is missing, build, run unit and integration tests, build the .deb and
# smoke-test it installed (scripts/deb-smoke.sh), install and run it on
# Debian 12 and 13 booted with systemd (make systemd-host), then lint.
# Debian 13's .deb is built in a trixie chroot (packaging/chroot-build.sh),
# niced, beside the tests from the start: it needs only the sources, and
# 'make systemd-host' then finds it current. Each part's seconds are printed.
# DEVGATE_REQUIRE_PRIVILEGED=1 turns every skipped privileged test into a
# failure (CI sets it). SYSTEMD_SUITES=bookworm leaves Debian 13 out.
set -eu
cd "$(dirname "$0")/.."
suites=${SYSTEMD_SUITES:-bookworm trixie}
bg=
bglog=

# The trixie build, its whole process group, is stopped if a part fails
# first: it leaves no process behind (its mounts are in its own namespace).
stop_build() {
	[ -n "$bg" ] || return 0
	kill -TERM "-$bg" 2>/dev/null || true
	wait "$bg" 2>/dev/null || true
	# Its children may still be ending (or be zombies of a parent that
	# is): wait up to 30 s for the group to empty, then kill what is left.
	n=0
	while pgrep -g "$bg" >/dev/null && [ $n -lt 300 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	kill -KILL "-$bg" 2>/dev/null || true
	bg=
}
on_exit() {
	status=$?
	stop_build
	rm -f "$bglog"
	exit $status
}
trap on_exit EXIT
trap 'exit 1' INT TERM

part() {
	name=$1
	shift
	t=$(date +%s)
	"$@"
	echo "devgate: $name took $(($(date +%s) - t)) s"
}

# collect: waits for the trixie build and prints its log; fails with it.
collect() {
	[ -n "$bg" ] || return 0
	rc=0
	wait "$bg" || rc=$?
	bg=
	cat "$bglog"
	[ $rc = 0 ] || { echo "devgate: Debian 13's .deb did not build (exit $rc; its log above)" >&2; exit 1; }
}

start=$(date +%s)
part install-deps sh scripts/install-deps.sh
case " $suites " in
*" trixie "*)
	bglog=$(mktemp /tmp/devgate-trixie.XXXXXX)
	# setsid: a group of its own, which stop_build ends whole.
	setsid -w nice -n 10 sh packaging/chroot-build.sh --if-stale trixie build >"$bglog" 2>&1 &
	bg=$!
	;;
esac
part build make -j"$(nproc)"
# make test, one part at a time (the Makefile's list).
tests=$(sed -n 's/^test:[[:space:]]*//p' Makefile)
for t in $tests; do
	part "$t" make "$t"
done
part deb-smoke sh scripts/deb-smoke.sh
part "Debian 13's .deb (waited for)" collect
part systemd-host make systemd-host SYSTEMD_SUITES="$suites"
part lint make lint
echo "devgate: all tests passed in $(($(date +%s) - start)) s"
