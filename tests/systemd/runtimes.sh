# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh
# Sourced by guest.sh in the booted guest: podman with the systemd cgroup
# manager and Docker (docker.io) with the systemd cgroup driver, each
# running a busybox container in a scope systemd made for it; guest.sh's
# ct_check grants to it, has systemd rewrite the scope's device programs,
# and revokes. The guest shares the host's network: no container has one,
# and dockerd makes no bridge and no iptables rules.

# A busybox image, imported into each runtime.
bb=/srv/busybox
mkdir -p $bb/bin $bb/dev $bb/proc $bb/sys
cp /bin/busybox $bb/bin/
ln -sf busybox $bb/bin/sh
ln -sf busybox $bb/bin/sleep

# podman: its runtime (runc) asks systemd, over D-Bus, for a scope with the
# container's device policy (libpod-ID.scope), and puts its own program there
# too. The ulimits: this sandbox lacks CAP_SYS_RESOURCE (host-facts); no
# pids limit: the guest has no pids controller (runc 1.2, Debian 13, writes
# pids.max for -1 and fails).
pm() {
	podman --root /var/lib/dg-podman --runroot /run/dg-podman --storage-driver vfs \
		--cgroup-manager systemd --events-backend file --runtime runc "$@"
}
tar -C $bb -cf - . | pm import - localhost/busybox >/dev/null 2>&1 || die "podman import"
pm run -d --name dg-podman --network none --pids-limit=0 --ulimit nofile=4096:4096 \
	--ulimit nproc=4096:4096 localhost/busybox sleep 1000000 >/dev/null || die "podman run"
ct_check "$(pm inspect -f '{{.State.Pid}}' dg-podman)" "podman --cgroup-manager systemd"
pm rm -f -t 0 dg-podman >/dev/null

# Docker: dockerd as a transient service (the package's docker.service is
# masked in the root: its defaults would change the network), its containers
# in docker-ID.scope through systemd.
systemd-run --unit=dg-dockerd --collect -p Delegate=yes dockerd \
	--exec-opt native.cgroupdriver=systemd --storage-driver=vfs --iptables=false \
	--ip6tables=false --bridge=none >/dev/null || die "dockerd did not start"
wait_until 120 docker info || die "dockerd does not answer: $(journalctl -u dg-dockerd --no-pager | tail -n 5)"
[ "$(docker info -f '{{.CgroupDriver}}')" = systemd ] || die "dockerd's cgroup driver is not systemd"
tar -C $bb -cf - . | docker import - busybox >/dev/null || die "docker import"
docker run -d --name dg-docker --network none busybox sleep 1000000 >/dev/null || die "docker run"
ct_check "$(docker inspect -f '{{.State.Pid}}' dg-docker)" "docker (cgroup driver systemd)"
docker rm -f dg-docker >/dev/null
systemctl stop dg-dockerd
