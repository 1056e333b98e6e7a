#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# CI's own sequence (scripts/test.sh) builds Debian 13's .deb in a trixie
# chroot beside the tests (packaging/chroot-build.sh, the real one, in a
# copy of the tree). Make and the slow steps are stubs: a make that logs
# its targets, fails where it is told to, or ends the run while the chroot
# build is under way. A build that fails or is cut short fails CI, says
# why, and leaves no process, mount or build root behind.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }

setup() {
	dg_setup
	command -v debootstrap >/dev/null && command -v dpkg-parsechangelog >/dev/null ||
		missing "needs debootstrap and dpkg-dev (scripts/install-deps.sh)"
	TREE=$DG_TMP/tree
	mkdir -p "$TREE" "$DG_TMP/bin"
	(cd "$DG_ROOT" && . packaging/sources.sh && dg_sources) |
		(cd "$DG_ROOT" && tar --null -T - -cf -) | tar -xf - -C "$TREE"
	printf '#!/bin/sh\nexit 0\n' >"$TREE/scripts/install-deps.sh"
	printf '#!/bin/sh\nexit 0\n' >"$TREE/scripts/deb-smoke.sh"
	# The stub make: logs its targets; for systemd-host, asks chroot-build
	# whether its .deb is current; STUB_STOP_AT=TARGET waits there for
	# the chroot build's dpkg-buildpackage, notes its session and root,
	# and fails.
	cat >"$DG_TMP/bin/make" <<'EOF'
#!/bin/bash
echo "$*" >>"$STUB_DIR/make.log"
# make systemd-host with Debian 13: what its chroot-build --if-stale says.
if [ "$*" = "systemd-host SYSTEMD_SUITES=bookworm trixie" ]; then
	sh packaging/chroot-build.sh --if-stale trixie build >"$STUB_DIR/if-stale" 2>&1
	exit
fi
[ "$*" = "${STUB_STOP_AT:-}" ] || exit 0
# The build: the child of scripts/test.sh that leads its own session.
sid=$(ps -o pid=,sid= --ppid "$PPID" | awk '$1 == $2 { print $1 }')
[ -n "$sid" ] || { echo "stub make: scripts/test.sh started no build" >&2; exit 3; }
for _ in $(seq 30000); do
	pid=$(pgrep -s "$sid" -x dpkg-buildpacka | head -n 1)
	[ -z "$pid" ] && pgrep -s "$sid" >/dev/null || break
	sleep 0.02
done
[ -n "$pid" ] || { echo "stub make: no dpkg-buildpackage in session '$sid'" >&2; exit 3; }
echo "$sid" >"$STUB_DIR/sid"
readlink "/proc/$pid/root" >"$STUB_DIR/root"
exit 2
EOF
	chmod 0755 "$DG_TMP/bin/make"
	export STUB_DIR=$DG_TMP
}

teardown() { dg_teardown; }

# ci_run: scripts/test.sh in the copy, with the stub make first on PATH.
ci_run() {
	PATH="$DG_TMP/bin:$PATH" run sh "$TREE/scripts/test.sh"
}

# nothing_left WORKDIR [SID]: no chroot-build folder, mount or process.
nothing_left() {
	[ -n "$1" ] && [ ! -e "$1" ] || fail "the build root $1 is left"
	! grep -qF " $1" /proc/self/mountinfo || fail "a mount under $1 is left"
	# A killed process's zombie goes once its parent reaps it (or dies): not at once.
	[ -z "${2:-}" ] || wait_until 10 sh -c "! pgrep -s $2 >/dev/null" ||
		fail "session $2 still has: $(pgrep -a -s "$2")"
}

@test "CI: Debian 13's .deb failing to build fails CI with its log; no process, mount or root left" {
	requires root
	# Broken on purpose in the copy only: the build fails once dh runs.
	sed -i 's/^override_dh_auto_build:$/&\n\t@echo "broken on purpose by ci.bats" >\&2; false/' \
		"$TREE/debian/rules"
	ci_run
	echo "$output"
	[ "$status" = 1 ]
	[[ $output == *"broken on purpose by ci.bats"* ]]
	[[ $output == *"dpkg-buildpackage failed in trixie"* ]]
	[[ $output == *"Debian 13's .deb did not build"* ]]
	# Every part before it ran; systemd-host and lint did not.
	for t in "-j$(nproc)" unit integration integration-no-openat2 fuzz-smoke; do
		grep -qx -- "$t" "$DG_TMP/make.log" || fail "make $t did not run"
	done
	! grep -q 'systemd-host\|^lint' "$DG_TMP/make.log" || fail "ran on: $(cat "$DG_TMP/make.log")"
	work=$(echo "$output" | sed -n 's/^chroot-build(trixie): building in //p')
	nothing_left "$work"
}

@test "CI: a part failing while Debian 13's .deb builds stops that build; no process, mount or root left" {
	requires root
	STUB_STOP_AT=integration ci_run
	echo "$output"
	[ "$status" = 2 ]
	! grep -q 'systemd-host\|^lint\|fuzz-smoke' "$DG_TMP/make.log" || fail "ran on: $(cat "$DG_TMP/make.log")"
	sid=$(cat "$DG_TMP/sid")
	root=$(cat "$DG_TMP/root")
	[[ $root == /var/tmp/devgate-chroot.*/root ]]
	nothing_left "${root%/root}" "$sid"
	# Stopped, not waited for: no .deb came out of it.
	[ -z "$(ls "$TREE/build/trixie" 2>/dev/null)" ] || fail "the build ran to its end: $(ls "$TREE/build/trixie")"
}

@test "CI: SYSTEMD_SUITES=bookworm builds no Debian 13 .deb" {
	requires root
	SYSTEMD_SUITES=bookworm ci_run
	[ "$status" = 0 ]
	[[ $output != *chroot-build* ]]
	grep -qx 'systemd-host SYSTEMD_SUITES=bookworm' "$DG_TMP/make.log"
}

@test "CI: Debian 13's .deb is waited for, and make systemd-host runs both releases with it current" {
	requires root
	# A .deb stamped current, as an earlier build leaves it: the background
	# build keeps it (chroot-build --if-stale) and ends at once.
	version=$(cd "$TREE" && dpkg-parsechangelog -S Version)
	deb=build/trixie/devgate_${version}_amd64.deb
	mkdir -p "$TREE/build/trixie"
	echo "not a real package" >"$TREE/$deb"
	(cd "$TREE" && . packaging/sources.sh && dg_inputs build) >"$TREE/$deb.inputs"
	ci_run
	echo "$output"
	[ "$status" = 0 ]
	[[ $output == *"devgate: Debian 13's .deb (waited for) took"* ]]
	# After deb-smoke and before lint: systemd-host with both releases.
	[ "$(tail -n 2 "$DG_TMP/make.log")" = "systemd-host SYSTEMD_SUITES=bookworm trixie
lint" ]
	# There it is still current: --if-stale printed it and built nothing.
	[ "$(cat "$DG_TMP/if-stale")" = "$deb" ]
}
