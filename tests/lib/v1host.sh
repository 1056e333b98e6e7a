# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# A pure cgroup v1 host (Debian 10, CentOS 7, systemd.unified_cgroup_hierarchy=0
# with no unified mount) on this hybrid one, no mock of the kernel: a private
# mount namespace, bound to a file, where every cgroup2 mount is gone and the
# v1 controllers stay. runc there finds a legacy host and keeps a container's
# device policy in the v1 devices controller alone; its processes stay in the
# v2 root, and no BPF device program is attached for it. devgated, runc and
# whatever must see that host run through v1h.
# Needs: DG_V1HOST (a directory for the namespace file and runc's state), and
# cgroup1.sh (v1_mount, v1_rmdirs).

v1host_setup() {
	mkdir -p "$DG_V1HOST"
	if ! mountpoint -q "$DG_V1HOST"; then
		mount --bind "$DG_V1HOST" "$DG_V1HOST"
		mount --make-private "$DG_V1HOST"
	fi
	touch "$DG_V1HOST/mnt"
	# Deepest first, so a cgroup2 mount stacked on another goes too.
	unshare --mount="$DG_V1HOST/mnt" --propagation private sh -c '
		awk "\$9 == \"cgroup2\" { print \$5 }" /proc/self/mountinfo | sort -r |
			while read -r m; do umount "$m" || exit 1; done
		! grep -q " - cgroup2 " /proc/self/mountinfo'
}

v1host_teardown() {
	umount "$DG_V1HOST/mnt" 2>/dev/null || true
	umount "$DG_V1HOST" 2>/dev/null || true
	rm -rf "$DG_V1HOST"
}

# v1h CMD...: CMD on the v1 host (absolute paths: setns moves the cwd to /).
v1h() {
	nsenter --mount="$DG_V1HOST/mnt" "$@"
}

v1h_runc() {
	v1h runc --root "$DG_V1HOST/runc" "$@"
}

# v1h_container NAME: a runc container on the v1 host, with /gpu0 (195:0)
# besides dg_bundle's /gpu1 and /mem; sets CID, CPID and V1DIR (its v1
# devices cgroup in this shell's view).
v1h_container() {
	CID="$DG_ID-$1"
	dg_bundle "$DG_TMP/$1" "$DEVGATE_BUILD/probe" >/dev/null
	mknod -m 666 "$DG_TMP/$1/rootfs/gpu0" c 195 0
	V1H_RUNCS+=("$CID")
	v1h_runc run -d -b "$DG_TMP/$1" "$CID" </dev/null >"$DG_TMP/$1/run.log" 2>&1 || {
		cat "$DG_TMP/$1/run.log" >&2
		return 1
	}
	CPID=$(v1h_runc state "$CID" | jq -r .pid)
	v1_where "$CPID"
}

# v1h_legacy: the container v1h_container made is legacy only: its
# processes in the v2 root, its policy in its own devices.list.
v1h_legacy() {
	[ "$(grep '^0::' "/proc/$CPID/cgroup")" = "0::/" ] ||
		fail "container $CID has a cgroup v2 cgroup: $(grep '^0::' "/proc/$CPID/cgroup")"
	[ "$V1DIR" = "$DG_V1/$CID" ] || fail "container $CID is in v1 devices cgroup $V1DIR"
	grep -qx 'c 1:3 rwm' "$V1DIR/devices.list" ||
		fail "runc wrote no v1 device policy for $CID: $(cat "$V1DIR/devices.list")"
}

# v1h_rm: deletes the containers v1h_container made and their v1 cgroups
# in every controller.
v1h_rm() {
	local c
	for c in "${V1H_RUNCS[@]}"; do
		v1h_runc delete -f "$c" >/dev/null 2>&1 || true
		v1_rmdirs "$c" || echo "teardown: v1 cgroups of $c are still there" >&2
	done
	V1H_RUNCS=()
}

v1h_probe() {
	local cid=$1
	shift
	v1h_runc exec "$cid" probe "$@"
}

# v1h_daemon [OPTIONS]: start_daemon's devgated, on the v1 host.
v1h_daemon() {
	[ -d "$DG_HOST" ] || make_host
	# nsenter itself, not v1h: the PID must be devgated's own for stop_daemon.
	nsenter --mount="$DG_V1HOST/mnt" "$DEVGATE_BUILD/devgated" --socket "$DG_SOCK" --state-dir "$DG_TMP/state" \
		--pin-root "$DG_PINS" --host-root "$DG_HOST" "$@" >>"$DG_TMP/daemon.log" 2>&1 &
	DG_DAEMON_PID=$!
	wait_for_daemon
}
