# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# Real LXC containers on cgroup v2, in the same private mount namespace as
# runc (runc.sh): LXC then attaches its own device program. Tests update it
# through liblxc's add_device_node (python3-lxc), what lxc-device add calls.
# lxc-device itself works here but prints errors first: its check whether the
# name is a network interface opens /proc/1/ns/net, which this sandbox
# refuses; the check then answers no and the add goes on.
#
# Needs: DG_NSDIR, DG_TMP (the containers live under DG_TMP/lxc).
#
# Containers start at LXC's default log level, as users run them: at TRACE
# liblxc loads every device program with the verifier's full log, which
# costs more than the load itself. DG_LXC_LOGLEVEL=TRACE (or any lxc-start
# -l level) asks for more, for debugging; the log is DG_TMP/lxc/NAME.log.

# The Python that has the lxc module (a pyenv shim may shadow it).
DG_LXC_PY=/usr/bin/python3

dg_lxc() {
	local cmd=$1
	shift
	dg_in_ns "$cmd" -P "$DG_TMP/lxc" "$@"
}

# dg_lxc_create NAME PROBE [defaults]: a busybox container whose device
# program denies all but the usual few, with the probe in /bin and nodes
# made before start: /gpu0 and /gpu1 (195:0, 195:1), /mem (1:1), /x1 /x2
# /x3 (240:1..3). With "defaults", the device rules are LXC's own default
# list (the cgroup2 lines of its common.conf, which distribution templates
# include), as a user's container has them.
dg_lxc_create() {
	local name=$1 probe=$2 root
	mkdir -p "$DG_TMP/lxc"
	if [ "${3:-}" = defaults ]; then
		{
			printf '%s\n' 'lxc.net.0.type = empty' 'lxc.apparmor.profile = unconfined'
			grep '^lxc.cgroup2.devices' /usr/share/lxc/config/common.conf
		} >"$DG_TMP/lxc/$name.conf"
	else
		cat >"$DG_TMP/lxc/$name.conf" <<-CONF
		lxc.net.0.type = empty
		lxc.apparmor.profile = unconfined
		lxc.cgroup2.devices.deny = a
		lxc.cgroup2.devices.allow = c 1:3 rwm
		lxc.cgroup2.devices.allow = c 1:5 rwm
		lxc.cgroup2.devices.allow = c 1:8 rwm
		lxc.cgroup2.devices.allow = c 1:9 rwm
		lxc.cgroup2.devices.allow = c 5:0 rwm
		lxc.cgroup2.devices.allow = c 5:2 rwm
		lxc.cgroup2.devices.allow = c 136:* rwm
		CONF
	fi
	dg_lxc lxc-create -n "$name" -t busybox -f "$DG_TMP/lxc/$name.conf" >/dev/null 2>&1 ||
		return 1
	root="$DG_TMP/lxc/$name/rootfs"
	cp "$probe" "$root/bin/"
	mknod -m 666 "$root/gpu0" c 195 0
	mknod -m 666 "$root/gpu1" c 195 1
	mknod -m 666 "$root/mem" c 1 1
	for i in 1 2 3; do mknod -m 666 "$root/x$i" c 240 "$i"; done
}

# dg_lxc_start NAME: prints the host PID of its init.
dg_lxc_start() {
	local level=()
	[ -n "${DG_LXC_LOGLEVEL:-}" ] && level=(-l "$DG_LXC_LOGLEVEL")
	dg_lxc lxc-start -n "$1" -d "${level[@]}" -o "$DG_TMP/lxc/$1.log" || return 1
	dg_lxc lxc-info -n "$1" -pH
}

dg_lxc_rm() {
	dg_lxc lxc-stop -n "$1" -k >/dev/null 2>&1 || true
	dg_lxc lxc-destroy -n "$1" >/dev/null 2>&1 || true
}

# dg_lxc_add NAME NODE: liblxc's add_device_node, as lxc-device add does it;
# prints True or False. NODE must exist on the host, at the same path it is
# to have in the container (liblxc checks both).
dg_lxc_add() {
	dg_in_ns "$DG_LXC_PY" -c 'import lxc, sys
c = lxc.Container(sys.argv[1], sys.argv[3])
print(c.add_device_node(sys.argv[2]))' "$1" "$2" "$DG_TMP/lxc"
}
