# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# A private dockerd for tests: its own data root, exec root, unix socket,
# pid file, config file and cgroup parent, all named by a prefix, so several
# test runs (each with its own prefix) run side by side with each other and
# with a system dockerd. It never touches /var/run/docker.sock,
# /etc/docker/daemon.json or the host's iptables.
#
# Where the daemon runs decides which cgroup layout its containers get:
#   DG_DOCKER_NS unset or empty: the host's normal view (on a hybrid host,
#     Docker puts its device policy in the v1 devices controller);
#   DG_DOCKER_NS=FILE: a mount namespace bound to FILE (as runc.sh's
#     dg_ns_setup makes, cgroup2 on /sys/fs/cgroup): Docker uses cgroup v2
#     and its own BPF device program.
# Every docker command goes to that daemon's socket; the CLI itself may run
# anywhere.
#
# Usage:
#   dg_docker_start PREFIX     starts it; sets DG_DOCKER_SOCK and DG_DOCKER_DIR
#   dg_docker ARGS...          the docker CLI against it
#   dg_docker_image NAME ROOT  imports directory ROOT as image NAME
#   dg_docker_stop PREFIX      removes its containers, stops it, cleans up
#
# Needs: dockerd and docker (Debian's docker.io), tar, and runc.sh sourced first.

# dg_docker_paths PREFIX: sets the paths (short: containerd's socket lives
# under the exec root and a unix socket path has at most 107 bytes).
dg_docker_paths() {
	DG_DOCKER_DIR="/run/$1-docker"
	DG_DOCKER_SOCK="$DG_DOCKER_DIR/docker.sock"
	DG_DOCKER_DATA="/var/lib/$1-docker"
	DG_DOCKER_CGPARENT="/$1-docker"
}

# dg_docker_wrap CMD...: CMD in the daemon's mount namespace, if it has one.
dg_docker_wrap() {
	dg_in_ns_opt "${DG_DOCKER_NS:-}" "$@"
}

dg_docker() {
	docker -H "unix://$DG_DOCKER_SOCK" "$@"
}

dg_docker_start() {
	local prefix=$1 i pid
	dg_docker_paths "$prefix"
	mkdir -p "$DG_DOCKER_DIR/exec" "$DG_DOCKER_DATA"
	echo '{}' >"$DG_DOCKER_DIR/daemon.json"
	dg_docker_wrap setsid dockerd \
		--config-file "$DG_DOCKER_DIR/daemon.json" \
		--data-root "$DG_DOCKER_DATA" --exec-root "$DG_DOCKER_DIR/exec" \
		-H "unix://$DG_DOCKER_SOCK" --pidfile "$DG_DOCKER_DIR/dockerd.pid" \
		--storage-driver=vfs --iptables=false --ip6tables=false --bridge=none \
		--exec-opt native.cgroupdriver=cgroupfs --cgroup-parent "$DG_DOCKER_CGPARENT" \
		</dev/null >"$DG_DOCKER_DIR/dockerd.log" 2>&1 &
	pid=$!
	# Generous: on a busy machine dockerd and its containerd start slowly.
	for i in $(seq 1200); do
		dg_docker version >/dev/null 2>&1 && return 0
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -20 "$DG_DOCKER_DIR/dockerd.log" >&2
			echo "dg_docker_start: dockerd exited" >&2
			return 1
		fi
		[ "$i" = 1200 ] || sleep 0.05
	done
	echo "dg_docker_start: dockerd did not answer on $DG_DOCKER_SOCK within 60 s" >&2
	return 1
}

# dg_docker_image NAME ROOT: a busybox directory tree becomes image NAME.
dg_docker_image() {
	tar -C "$2" -c . | dg_docker import - "$1" >/dev/null
}

# dg_docker_stop PREFIX: only this prefix's dockerd (by its pid file) and
# what it made; safe to call twice or when the start failed.
dg_docker_stop() {
	local prefix=$1 pid i ids
	dg_docker_paths "$prefix"
	if [ -S "$DG_DOCKER_SOCK" ]; then
		ids=$(dg_docker ps -aq 2>/dev/null) || ids=
		# shellcheck disable=SC2086 # one id a word
		[ -z "$ids" ] || dg_docker rm -f $ids >/dev/null 2>&1 || true
	fi
	pid=$(cat "$DG_DOCKER_DIR/dockerd.pid" 2>/dev/null) || pid=
	if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]; then
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 600); do
			kill -0 "$pid" 2>/dev/null || break
			[ "$i" != 600 ] || kill -KILL "$pid" 2>/dev/null || true
			sleep 0.05
		done
	fi
	# dockerd's mounts (vfs layers, netns files, containerd's state).
	dg_docker_wrap sh -c 'for d in "$1" "$2"; do
		grep -o " $d[^ ]*" /proc/self/mounts | sort -r | while read -r m; do
			umount -l "$m" 2>/dev/null || true
		done
	done' _ "$DG_DOCKER_DIR" "$DG_DOCKER_DATA"
	dg_docker_rm_cgroups "$DG_DOCKER_CGPARENT"
	rm -rf "$DG_DOCKER_DIR" "$DG_DOCKER_DATA"
}

# dg_docker_rm_cgroups PARENT: PARENT in the v2 hierarchy and in every v1
# controller, deepest first (the daemon may have run in either view).
dg_docker_rm_cgroups() {
	local mnt
	for mnt in $(awk '$9 == "cgroup2" || $9 == "cgroup" { print $5 }' /proc/self/mountinfo); do
		[ -d "$mnt$1" ] || continue
		[ ! -f "$mnt$1/cgroup.kill" ] || echo 1 >"$mnt$1/cgroup.kill" || true
		find "$mnt$1" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	done
}
