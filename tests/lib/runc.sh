# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# Real runc containers on cgroup v2, for tests and the demo.
#
# On hybrid hosts /sys/fs/cgroup holds v1 controllers and runc would use v1
# device rules. So runc always runs inside a private mount namespace where
# cgroup2 is mounted on /sys/fs/cgroup; the namespace is bound to a file so
# every runc command (run, exec, kill, delete) enters the same one. In the
# host's view the container's cgroup is <v2 mount>/<container id>.
#
# Needs: DG_NSDIR (a directory for the namespace file and runc's state).

# The cgroup v2 mount as this shell sees it.
dg_cgroot() {
	awk '$9 == "cgroup2" && $4 == "/" { print $5; exit }' /proc/self/mountinfo
}

dg_ns_setup() {
	mkdir -p "$DG_NSDIR"
	if ! mountpoint -q "$DG_NSDIR"; then
		mount --bind "$DG_NSDIR" "$DG_NSDIR"
		mount --make-private "$DG_NSDIR"
	fi
	touch "$DG_NSDIR/mnt"
	# A host with cgroup v2 alone has it there already (mounting it again: EBUSY).
	unshare --mount="$DG_NSDIR/mnt" --propagation private \
		sh -c '[ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ] ||
			mount -t cgroup2 none /sys/fs/cgroup'
}

dg_ns_teardown() {
	umount "$DG_NSDIR/mnt" 2>/dev/null || true
	umount "$DG_NSDIR" 2>/dev/null || true
	rm -rf "$DG_NSDIR"
}

dg_in_ns() {
	nsenter --mount="$DG_NSDIR/mnt" "$@"
}

# dg_in_ns_opt FILE CMD...: CMD in the mount namespace bound to FILE, or in
# this one when FILE is empty (a daemon started in the host's view).
dg_in_ns_opt() {
	local ns=$1
	shift
	if [ -n "$ns" ]; then
		nsenter --mount="$ns" "$@"
	else
		"$@"
	fi
}

dg_runc() {
	dg_in_ns runc --root "$DG_NSDIR/runc" "$@"
}

# dg_bundle DIR PROBE: a busybox bundle whose process sleeps, with the probe
# binary in /bin, and two nodes made before start that the runtime denies:
# /gpu1 (195:1, an ungranted GPU) and /mem (1:1, /dev/mem).
dg_bundle() {
	local dir=$1 probe=$2
	mkdir -p "$dir/rootfs/bin"
	cp /bin/busybox "$probe" "$dir/rootfs/bin/"
	for a in sh cat ls sleep stat mknod rm touch ln echo test true; do
		ln -sf busybox "$dir/rootfs/bin/$a"
	done
	mknod -m 666 "$dir/rootfs/gpu1" c 195 1
	mknod -m 666 "$dir/rootfs/mem" c 1 1
	(cd "$dir" && runc spec)
	jq '.process.terminal = false | .process.args = ["sleep", "100000"] | .root.readonly = false' \
		"$dir/config.json" > "$dir/config.json.new"
	mv "$dir/config.json.new" "$dir/config.json"
}

# dg_glibc ROOTFS LIB...: the host's loader and these glibc libraries copied
# in, so dynamically linked programs (dlprobe, cudaprobe, the driver's
# nvidia-smi) run in a busybox rootfs.
dg_glibc() {
	local root=$1 l
	shift
	mkdir -p "$root/lib64" "$root/lib/x86_64-linux-gnu"
	cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
	for l in "$@"; do
		cp -L "/lib/x86_64-linux-gnu/$l" "$root/lib/x86_64-linux-gnu/"
	done
}

# dg_oci_run TOOL ID BUNDLE: starts a detached container with TOOL (dg_runc,
# dg_crun); prints its init's host PID.
dg_oci_run() {
	local tool=$1 id=$2 bundle=$3
	"$tool" run -d -b "$bundle" "$id" </dev/null >"$bundle/run.log" 2>&1 || {
		cat "$bundle/run.log" >&2
		return 1
	}
	"$tool" state "$id" | jq -r .pid
}

# dg_run ID BUNDLE: dg_oci_run with runc.
dg_run() {
	dg_oci_run dg_runc "$@"
}

dg_rm() {
	dg_runc delete -f "$1" >/dev/null 2>&1 || true
}

# podman the way it works on these hosts: runc, cgroupfs, vfs storage kept
# under DG_NSDIR, inside the same mount namespace as runc.
dg_podman() {
	dg_in_ns podman --root "$DG_NSDIR/storage" --runroot "$DG_NSDIR/runroot" \
		--storage-driver vfs --cgroup-manager cgroupfs --runtime runc "$@"
}

# Flags podman run needs here (no pids controller, no network, fixed limits).
DG_PODMAN_RUN="--rm --network none --pids-limit 0 --ulimit nofile=1024:1024 --ulimit nproc=4096:4096"

# dg_podman_image NAME PROBE: imports a busybox image with the probe.
dg_podman_image() {
	local dir
	dir=$(mktemp -d)
	dg_bundle "$dir" "$2" >/dev/null
	tar -C "$dir/rootfs" -c . | dg_podman import - "$1" >/dev/null
	rm -rf "$dir"
}

# dg_plain CGROUP ROOT: a "container" made by hand, with no runtime device
# program: CGROUP (a directory to create under the v2 mount), mount and PID
# namespaces, a tmpfs /dev with /dev/null, chroot into ROOT (which needs
# /bin/sleep). Prints the host PID of its init.
dg_plain() {
	local cg=$1 root=$2 pid
	mkdir -p "$root/dev"
	mkdir "$cg"
	setsid sh -c 'echo $$ > "$1/cgroup.procs" && exec unshare --mount --pid --fork \
		--propagation private sh -c "mount -t tmpfs -o mode=755 tmpfs \"\$0/dev\" &&
		mknod -m 666 \"\$0/dev/null\" c 1 3 && exec chroot \"\$0\" /bin/sleep 100000" "$2"' \
		_ "$cg" "$root" </dev/null >/dev/null 2>&1 &
	for _ in $(seq 400); do
		for pid in $(cat "$cg/cgroup.procs"); do
			if [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = sleep ]; then
				echo "$pid"
				return 0
			fi
		done
		sleep 0.05
	done
	echo "dg_plain: $cg did not start" >&2
	return 1
}
