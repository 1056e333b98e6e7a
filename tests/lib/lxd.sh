# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# A private LXD for tests: LXD_DIR, client config (LXD_CONF) and log under
# /var/lib/PREFIX-lxd, a dir storage pool and no network, so several test
# runs (each with its own prefix) run side by side. It never uses
# /var/lib/lxd or a system LXD. LXD names a container's cgroup
# lxc.payload.NAME at the cgroup root whatever its LXD_DIR: callers give
# containers names that start with their prefix.
#
# Where the daemon runs decides which cgroup layout its containers get:
#   DG_LXD_NS unset or empty: the host's normal view (on a hybrid host, a
#     privileged container's device policy is in the v1 devices controller);
#   DG_LXD_NS=FILE: a mount namespace bound to FILE (runc.sh's dg_ns_setup,
#     cgroup2 on /sys/fs/cgroup): LXD uses cgroup v2 and a BPF program.
#
# Usage:
#   dg_lxd_start PREFIX        starts it; sets LXD_DIR, LXD_CONF, DG_LXD_SOCK
#   dg_lxd ARGS...             LXD's client (lxc) against it
#   dg_lxd_image ALIAS ROOT    imports directory ROOT as image ALIAS
#   dg_lxd_stop PREFIX         deletes its instances, stops it, cleans up
#
# Needs: lxd (Debian's lxd: lxd and its client lxc), tar, and runc.sh sourced first.

dg_lxd_paths() {
	DG_LXD_TOP="/var/lib/$1-lxd"
	LXD_DIR="$DG_LXD_TOP/d"
	LXD_CONF="$DG_LXD_TOP/conf"
	DG_LXD_SOCK="$LXD_DIR/unix.socket"
	export LXD_DIR LXD_CONF
}

dg_lxd_wrap() {
	dg_in_ns_opt "${DG_LXD_NS:-}" "$@"
}

# Debian's lxd package puts lxd in /usr/sbin and lxc in /usr/bin; LXC's
# tools (lxc-start...) have other names.
dg_lxd() {
	LXD_DIR="$LXD_DIR" LXD_CONF="$LXD_CONF" lxc --quiet "$@"
}

dg_lxd_start() {
	local prefix=$1 i pid
	dg_lxd_paths "$prefix"
	mkdir -p "$LXD_DIR" "$LXD_CONF"
	chmod 711 "$DG_LXD_TOP" "$LXD_DIR"
	dg_lxd_wrap setsid env LXD_DIR="$LXD_DIR" lxd --group root \
		--logfile "$DG_LXD_TOP/lxd.log" </dev/null >"$DG_LXD_TOP/lxd.out" 2>&1 &
	pid=$!
	# nsenter and setsid exec (a background job leads no process group).
	echo "$pid" >"$DG_LXD_TOP/lxd.pid"
	for i in $(seq 1200); do
		[ -S "$DG_LXD_SOCK" ] && dg_lxd_wrap env LXD_DIR="$LXD_DIR" lxd waitready --timeout 1 \
			>/dev/null 2>&1 && break
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -20 "$DG_LXD_TOP/lxd.out" "$DG_LXD_TOP/lxd.log" >&2
			echo "dg_lxd_start: lxd exited" >&2
			return 1
		fi
		if [ "$i" = 1200 ]; then
			echo "dg_lxd_start: lxd did not answer on $DG_LXD_SOCK within 60 s" >&2
			return 1
		fi
		sleep 0.05
	done
	dg_lxd_wrap env LXD_DIR="$LXD_DIR" lxd init --preseed <<-'YAML' >/dev/null
		storage_pools:
		- name: default
		  driver: dir
		profiles:
		- name: default
		  devices:
		    root:
		      path: /
		      pool: default
		      type: disk
	YAML
}

# dg_lxd_image ALIAS ROOT: a busybox directory tree (with /bin/sh and
# /bin/sleep) becomes image ALIAS, a unified tarball: metadata.yaml and
# rootfs/. LXD starts /sbin/init; where ROOT has none, the image's sleeps.
dg_lxd_image() {
	local alias=$1 root=$2 tmp
	tmp=$(mktemp -d)
	mkdir "$tmp/img"
	printf 'architecture: %s\ncreation_date: %s\nproperties:\n  description: %s\n' \
		"$(uname -m)" "$(date +%s)" "$alias" >"$tmp/img/metadata.yaml"
	cp -a "$root" "$tmp/img/rootfs"
	if [ ! -e "$tmp/img/rootfs/sbin/init" ]; then
		mkdir -p "$tmp/img/rootfs/sbin"
		printf '#!/bin/sh\nexec sleep 100000\n' >"$tmp/img/rootfs/sbin/init"
		chmod 755 "$tmp/img/rootfs/sbin/init"
	fi
	tar -C "$tmp/img" -czf "$tmp/image.tar.gz" metadata.yaml rootfs
	dg_lxd image import "$tmp/image.tar.gz" --alias "$alias" >/dev/null
	local rc=$?
	rm -rf "$tmp"
	return "$rc"
}

# dg_lxd_stop PREFIX: only this prefix's lxd (by its pid file) and what it
# made; safe to call twice or when the start failed.
dg_lxd_stop() {
	local prefix=$1 pid i n
	dg_lxd_paths "$prefix"
	if [ -S "$DG_LXD_SOCK" ]; then
		for n in $(dg_lxd list -c n --format csv 2>/dev/null); do
			dg_lxd delete -f "$n" >/dev/null 2>&1 || true
		done
	fi
	# lxd shutdown reaches only the daemon on this LXD_DIR's socket.
	[ -S "$DG_LXD_SOCK" ] &&
		dg_lxd_wrap env LXD_DIR="$LXD_DIR" lxd shutdown --timeout 30 >/dev/null 2>&1
	pid=$(cat "$DG_LXD_TOP/lxd.pid" 2>/dev/null) || pid=
	if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = lxd ]; then
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 600); do
			kill -0 "$pid" 2>/dev/null || break
			[ "$i" != 600 ] || kill -KILL "$pid" 2>/dev/null || true
			sleep 0.05
		done
	fi
	dg_lxd_wrap sh -c 'grep -o " $1[^ ]*" /proc/self/mounts | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done' _ "$DG_LXD_TOP"
	rm -rf "$DG_LXD_TOP"
}
