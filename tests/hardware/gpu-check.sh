#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# devgate on a real NVIDIA GPU host, as root, with build/ already built:
# the README's demo (a live grant with the driver's files, nvidia-smi and
# CUDA in a runc container), then MIG: the GPU put in MIG mode, instances
# made, granted live by profile and by MIG UUID, CUDA run on each, revoked.
# It changes the GPU's MIG mode and puts it back; run it on a machine you
# may do that on (a lent test machine), never on a shared host.
#
# usage: bash tests/hardware/gpu-check.sh [--no-mig]
# Needs runc, jq, bpftool and busybox (/bin/busybox) on the machine.
set -u
cd "$(dirname "$0")/../.." || exit 1
top=$(pwd)
mig=1
[ "${1:-}" = --no-mig ] && mig=0

say() { printf '\n==== %s\n' "$*"; }
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

nvidia-smi -L || { echo "gpu-check: no NVIDIA GPU here" >&2; exit 1; }
head -1 /proc/driver/nvidia/version
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf

say "sh scripts/demo.sh --no-build"
timeout 150 sh scripts/demo.sh --no-build
echo "demo rc=$?"
[ $mig = 1 ] || exit 0

work=$(mktemp -d /tmp/devgate-gpu-check.XXXXXX)
sock=$work/sock
pins=/sys/fs/bpf/devgate-gpu-check-$$
export DG_NSDIR=/run/devgate-gpu-check-$$
daemon=
# shellcheck source=tests/lib/runc.sh
. "$top/tests/lib/runc.sh"

cleanup() {
	dg_rm dgc
	[ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
	nvidia-smi mig -dci >/dev/null 2>&1
	nvidia-smi mig -dgi >/dev/null 2>&1
	nvidia-smi -i 0 -mig 0 >/dev/null 2>&1
	rm -rf "$pins" "$work"
	dg_ns_teardown
}
trap cleanup EXIT

ctl() { echo "# devgatectl $*"; "$top/build/devgatectl" -s "$sock" "$@"; }
inside() { echo "# (inside) $*"; dg_runc exec dgc "$@" 2>&1; }

say "MIG: mode on, instances 2g, 1g, 1g"
timeout 60 nvidia-smi -i 0 -mig 1 || exit 1
# H100/H200 profile ids: 19 is 1g, 14 is 2g (nvidia-smi mig -lgip).
timeout 60 nvidia-smi mig -cgi 19,19,14 -C >/dev/null || exit 1
nvidia-smi -L
t0=$(date +%s%N)
"$top/build/devgated" --socket "$sock" --state-dir "$work/state" --pin-root "$pins" \
	--host-root / 2>"$work/devgated.log" &
daemon=$!
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
echo "devgated up in $(ms_since "$t0") ms (NVML asked)"
ctl list

dg_ns_setup
dg_bundle "$work/bundle" "$top/build/probe"
root=$work/bundle/rootfs
dg_glibc "$root" libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1
cp "$top/build/cudaprobe" "$root/bin/"
pid=$(dg_run dgc "$work/bundle")

say "grant by profile"
ctl grant --pid "$pid" --profile 1g.18gb --driver utility,compute --container dgc
inside ls /dev/nvidia-caps
inside /usr/local/nvidia/bin/nvidia-smi -L
inside cudaprobe
ctl revoke --pid "$pid"

say "grant by MIG UUID"
uuid=$("$top/build/devgatectl" -s "$sock" -j list |
	jq -r '[.gpus[0].instances[] | select(.profile | startswith("2g"))][0].uuid')
ctl grant --pid "$pid" --gpu "$uuid" --driver utility,compute --container dgc
inside cudaprobe
ctl list
ctl revoke --pid "$pid" --gpu "$uuid"
inside cudaprobe

say "a whole GPU in MIG mode: every instance"
ctl grant --pid "$pid" --gpu 0 --driver compute --container dgc
inside cudaprobe
ctl revoke --pid "$pid"

say "devgated's log"
grep -v "debug" "$work/devgated.log" | tail -20
