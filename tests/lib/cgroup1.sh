# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# cgroup v1 devices on a hybrid host: runc containers in the host's own view
# (no private cgroup2 namespace), whose device policy is a v1 devices list.
# Callers set DG_V1 (v1_mount) and the arrays V1_RUNCS and DG_CGROUPS.

# v1_rmdirs NAME: removes cgroup NAME from every controller, deepest first;
# fails while one is left.
v1_rmdirs() {
	local c left=0
	for c in /sys/fs/cgroup/*/"$1"; do
		[ -d "$c" ] || continue
		find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || true
		[ ! -d "$c" ] || left=1
	done
	return "$left"
}

# The v1 hierarchy with the devices controller, as this shell sees it.
v1_mount() {
	awk '{ for (i = 7; i < NF && $i != "-"; i++); }
		$(i + 1) == "cgroup" && $4 == "/" && $(i + 3) ~ /(^|,)devices(,|$)/ { m = $5 }
		END { print m }' /proc/self/mountinfo
}

v1_runc() {
	runc --root "$DG_TMP/runc-v1" "$@"
}

# v1_where PID: sets V1DIR, the process's v1 devices cgroup directory.
v1_where() {
	V1DIR="$DG_V1$(awk -F: '$2 ~ /(^|,)devices(,|$)/ { print $3 }' "/proc/$1/cgroup")"
	[ -f "$V1DIR/devices.list" ]
}

# v1_container NAME [JQ-FILTER]: a runc container in the host's view, with
# /gpu0 (195:0) besides dg_bundle's nodes; sets CID, CPID and V1DIR.
v1_container() {
	local name=$1 filter=${2:-.}
	CID="$DG_ID-$name"
	dg_bundle "$DG_TMP/$name" "$DEVGATE_BUILD/probe"
	mknod -m 666 "$DG_TMP/$name/rootfs/gpu0" c 195 0
	jq "$filter" "$DG_TMP/$name/config.json" >"$DG_TMP/$name/config.new"
	mv "$DG_TMP/$name/config.new" "$DG_TMP/$name/config.json"
	V1_RUNCS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	v1_runc run -d -b "$DG_TMP/$name" "$CID" </dev/null >"$DG_TMP/$name/run.log" 2>&1 || {
		cat "$DG_TMP/$name/run.log" >&2
		return 1
	}
	CPID=$(v1_runc state "$CID" | jq -r .pid)
	v1_where "$CPID"
}

v1_probe() {
	local cid=$1
	shift
	v1_runc exec "$cid" probe "$@"
}
