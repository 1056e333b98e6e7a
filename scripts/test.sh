#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The full test suite, as the README gives it and CI runs it: install what
# is missing, build, run unit and integration tests, build the .deb and
# smoke-test it installed (scripts/deb-smoke.sh), install and run it on
# Debian 12 booted with systemd (make systemd-host), then lint.
# DEVGATE_REQUIRE_PRIVILEGED=1 turns every skipped privileged test into a
# failure (CI sets it).
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
make -j"$(nproc)"
make test
sh scripts/deb-smoke.sh
make systemd-host
make lint
echo "devgate: all tests passed"
