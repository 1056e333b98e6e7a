# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# A driver reload in the fake host (tests/helpers/mkfixture): nvidia-uvm
# comes back with another dynamic major.

uvm_major() {
	awk '$2 == "nvidia-uvm" { print $1 }' "$DG_HOST/proc/devices"
}

# A dynamic major that neither this machine's drivers nor the fixture use:
# a node of it opens with ENXIO where the cgroup allows it.
free_major() {
	local m=500
	while awk -v m=$m '$1 == m { f = 1 } END { exit !f }' /proc/devices "$DG_HOST/proc/devices"; do
		m=$((m - 1))
	done
	echo $m
}

# reload_uvm MAJOR: the driver came back with nvidia-uvm at MAJOR (the host's
# nodes too, as nvidia-modprobe makes them).
reload_uvm() {
	sed -i "s/^[0-9]* nvidia-uvm\$/$1 nvidia-uvm/" "$DG_HOST/proc/devices"
	rm -f "$DG_HOST/dev/nvidia-uvm" "$DG_HOST/dev/nvidia-uvm-tools"
	mknod -m 666 "$DG_HOST/dev/nvidia-uvm" c "$1" 0
	mknod -m 666 "$DG_HOST/dev/nvidia-uvm-tools" c "$1" 1
}
