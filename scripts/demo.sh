#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# devgate's main job, live: a running runc container gains a GPU and loses it
# again, with no restart. Uses the host's real GPUs when the NVIDIA driver is
# loaded, else a demo host fixture (fake /proc, /sys and /dev nodes with the
# real NVIDIA majors; cgroups, BPF and namespaces stay real).
#
# On a real GPU the container also gets the driver's libraries and
# nvidia-smi (grant --driver) and runs CUDA: a context and an allocation.
#
# usage: sh scripts/demo.sh [--no-install] [--no-build]     (as root)
#   --no-build  use build/ as it is (a GPU host without the build tools)
set -eu
cd "$(dirname "$0")/.."
top=$(pwd)

install=1 build=1
for a in "$@"; do
	case $a in
	--no-install) install=0 ;;
	--no-build) install=0 build=0 ;;
	*) echo "usage: sh scripts/demo.sh [--no-install] [--no-build]" >&2; exit 2 ;;
	esac
done
[ $install = 0 ] || sh scripts/install-deps.sh
[ "$(id -u)" = 0 ] || { echo "demo: run as root" >&2; exit 1; }
[ $build = 0 ] || make -s -j"$(nproc)"

work=$(mktemp -d /tmp/devgate-demo.XXXXXX)
DG_NSDIR=/run/devgate-demo-$$
pins=/sys/fs/bpf/devgate-demo-$$
sock=$work/devgated.sock
id=devgate-demo-$$
daemon=
. "$top/tests/lib/runc.sh"

cleanup() {
	set +e # clean up everything, whatever fails
	dg_rm "$id"
	[ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
	rm -rf "$pins" "$work"
	dg_ns_teardown
}
trap cleanup EXIT INT TERM

say() { printf '\n==> %s\n' "$*"; }
dgctl() { echo "# devgatectl $*"; "$top/build/devgatectl" -s "$sock" "$@"; }
inside() { echo "# (inside the container) probe $*"; dg_runc exec "$id" probe "$@" || true; }

if ls /proc/driver/nvidia/gpus/* >/dev/null 2>&1; then
	host=/
	say "NVIDIA driver found: using this host's real GPUs"
else
	host=$work/host
	"$top/tests/helpers/mkfixture" "$host" -n 2 >/dev/null
	say "no NVIDIA driver: using a demo host with 2 fake GPUs under $host"
fi

"$top/build/devgated" --socket "$sock" --state-dir "$work/state" --pin-root "$pins" \
	--host-root "$host" 2>"$work/devgated.log" &
daemon=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done

dg_ns_setup
dg_bundle "$work/bundle" "$top/build/probe"
mknod -m 666 "$work/bundle/rootfs/gpu0" c 195 0
driver=
if [ "$host" = / ]; then
	# glibc for the driver's nvidia-smi and for cudaprobe, which loads libcuda.so.1.
	root=$work/bundle/rootfs
	dg_glibc "$root" libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1
	cp "$top/build/cudaprobe" "$root/bin/"
	driver="--driver compute,utility"
fi
pid=$(dg_run "$id" "$work/bundle")
# Where runc put it: below the caller's own cgroup on some hosts, not at the top.
cg="$(dg_cgroot)$(awk -F: '$1 == "0" { print $3 }' "/proc/$pid/cgroup")"

say "devgated's view of the host"
dgctl list

say "a runc container is running (PID $pid, cgroup $cg); GPU 0 is not there"
inside /dev/nvidia0 /gpu0
echo "# bpftool cgroup show $cg"
bpftool cgroup show "$cg" || true

say "grant GPU 0 to the running container"
# shellcheck disable=SC2086 # $driver is empty or two words
dgctl grant --pid "$pid" --gpu 0 --container "$id" $driver
echo "# bpftool cgroup show $cg"
bpftool cgroup show "$cg" || true
say "inside: ENXIO means the cgroup let the open through to the (absent) driver; ok means a real GPU opened"
out=$(dg_runc exec "$id" probe /dev/nvidia0 /dev/nvidiactl /gpu1 || true)
echo "$out"
echo "$out" | grep -Eq '^/dev/nvidia0 (ok|ENXIO)$' || { echo "demo: GPU 0 was not usable" >&2; exit 1; }
echo "$out" | grep -q '^/gpu1 EPERM$' || { echo "demo: GPU 1 was not denied" >&2; exit 1; }

if [ -n "$driver" ]; then
	say "inside: the host driver's nvidia-smi and CUDA, mounted live (grant --driver)"
	dg_runc exec "$id" sh -c 'PATH=$PATH:/usr/local/nvidia/bin nvidia-smi -L' || true
	dg_runc exec "$id" cudaprobe || { echo "demo: CUDA did not work in the container" >&2; exit 1; }
fi

dgctl status

say "revoke it: the next open fails with EPERM and the node is gone"
dgctl revoke --pid "$pid"
out=$(dg_runc exec "$id" probe /gpu0 /dev/nvidia0 || true)
echo "$out"
echo "$out" | grep -q '^/gpu0 EPERM$' || { echo "demo: GPU 0 still open after revoke" >&2; exit 1; }
echo "# bpftool cgroup show $cg   (runc's own program is back)"
bpftool cgroup show "$cg" || true

say "done: the container gained and lost a GPU without a restart"
