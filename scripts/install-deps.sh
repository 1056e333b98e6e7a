#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian 12 packages devgate builds, tests and demos with.
# Idempotent: installs only what is missing. Needs root.
set -eu

PKGS="make gcc libc6-dev pkg-config clang llvm libclang-rt-14-dev bpftool
libbpf-dev libcap-dev libseccomp-dev libjson-c-dev libmicrohttpd-dev libcmocka-dev
bats jq socat runc podman lxc lxc-dev python3-lxc docker.io lxd busybox-static util-linux procps strace cppcheck clang-tidy shellcheck curl prometheus
scdoc dpkg-dev systemd hyperfine gnuplot-nox linux-perf
debhelper lintian debootstrap systemd-container
g++ libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
python3-grpcio python3-protobuf python3-yaml lxd"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		missing="$missing $p"
	fi
done
[ -n "$missing" ] || exit 0

if [ "$(id -u)" != 0 ]; then
	echo "install-deps: these packages are missing:$missing" >&2
	echo "install-deps: run as root to install them" >&2
	exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# With recommends: podman needs some of them (conmon's helpers, containers-common).
# shellcheck disable=SC2086
apt-get install -y -qq $missing >/dev/null
