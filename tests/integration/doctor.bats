#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# devgatectl doctor: a healthy fixture host passes; each broken one fails or
# warns in the right check, with a hint, and the exit status says so.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() { dg_setup; }
teardown() { dg_teardown; }

doctor() {
	dg doctor --host-root "$DG_HOST" --pin-root "$DG_PINS" "$@"
}

# check_of NAME FIELD: one field of one check in the last JSON output.
check_of() {
	echo "$output" | jq -r --arg n "$1" ".checks[] | select(.name == \$n) | .$2"
}

@test "a healthy host with devgated running: every check ok, exit 0" {
	make_host --dev-char --driver "550.54.14:$DEVGATE_BUILD/fakedrv.so"
	start_daemon
	run -0 doctor --json
	[ "$(echo "$output" | jq -r .status)" = ok ]
	[ "$(echo "$output" | jq -r '[.checks[].status] | unique | join(",")')" = ok ]
	[ "$(echo "$output" | jq -r '[.checks[].name] | join(" ")')" = \
		"cgroup2 bpffs bpf-device driver driver-files gpus mig drm-gpus nodes dev-char daemon foreign-progs mechanism" ]
	[ "$(check_of cgroup2 message)" = "cgroup v2 is mounted at $DG_CGROOT" ]
	[ "$(check_of nodes message)" = "5 device nodes in /dev with the right numbers" ]
	[[ "$(check_of daemon message)" == "devgated 0.1.0 (PID $DG_DAEMON_PID) answers on"* ]]
	[ "$(check_of mig message)" = "no GPU in MIG mode" ]
	# The fixture's libraries: utility has nvidia-smi too.
	[ "$(check_of driver-files message)" = \
		"driver 550.54.14, files found: utility 3, compute 2, video 2, graphics 2" ]
	run -0 doctor
	[ "${lines[-1]}" = "13 ok, 0 warnings, 0 failed, 0 skipped" ]
	[[ "${lines[0]}" == "ok    cgroup2        cgroup v2 is mounted at "* ]]
}

@test "no NVIDIA driver in /proc/devices: driver fails, exit 1" {
	make_host --dev-char
	sed -i '/nvidia/d' "$DG_HOST/proc/devices"
	start_daemon
	run -1 doctor --json
	[ "$(echo "$output" | jq -r .status)" = fail ]
	[ "$(check_of driver status)" = fail ]
	[ "$(check_of driver message)" = \
		"no NVIDIA driver in $DG_HOST/proc/devices: the nvidia kernel module is not loaded" ]
	[[ "$(check_of driver hint)" == "load it with 'modprobe nvidia'"* ]]
	[ "$(check_of gpus status)" = skip ]
	[ "$(check_of nodes status)" = skip ]
	[ "$(check_of daemon status)" = ok ]
}

@test "no nvidia-uvm: a warning only, exit 0" {
	make_host --dev-char --no-uvm
	start_daemon
	run -0 doctor --json
	[ "$(echo "$output" | jq -r .status)" = warn ]
	[ "$(check_of driver status)" = warn ]
	[ "$(check_of driver hint)" = "load it with 'modprobe nvidia-uvm'" ]
}

@test "a node with the wrong device numbers fails nodes, once" {
	make_host --dev-char
	rm "$DG_HOST/dev/nvidia1"
	mknod "$DG_HOST/dev/nvidia1" c 195 7
	run -1 doctor --json
	[ "$(check_of nodes status)" = fail ]
	[ "$(check_of nodes message)" = \
		"host node /dev/nvidia1 is not character device 195:1 (found char device 195:7)" ]
	[[ "$(check_of nodes hint)" == "remove the wrong node"* ]]
	# The GPU itself is fine: its only problem is the node, said once.
	[ "$(check_of gpus status)" = ok ]
	# A regular file where a node belongs is wrong too.
	rm "$DG_HOST/dev/nvidiactl"
	echo x >"$DG_HOST/dev/nvidiactl"
	run -1 doctor --json
	[[ "$(check_of nodes message)" == *"/dev/nvidiactl is not character device 195:255 (found a non-device file"* ]]
}

@test "a missing node is a warning with a way to make it" {
	make_host --dev-char
	rm "$DG_HOST/dev/nvidia-uvm-tools"
	start_daemon
	run -0 doctor --json
	[ "$(check_of nodes status)" = warn ]
	[[ "$(check_of nodes message)" == "/dev/nvidia-uvm-tools ("*":1) is missing" ]]
	[[ "$(check_of nodes hint)" == *nvidia-modprobe* ]]
}

@test "missing or wrong /dev/char links: a warning naming systemd, exit 0" {
	make_host
	start_daemon
	run -0 doctor --json
	[ "$(echo "$output" | jq -r .status)" = warn ]
	[ "$(check_of dev-char status)" = warn ]
	[[ "$(check_of dev-char message)" == "/dev/char/195:0 is missing; /dev/char/195:1 is missing;"* ]]
	[[ "$(check_of dev-char hint)" == "systemd finds devices through /dev/char/MAJ:MIN"* ]]
	mkdir -p "$DG_HOST/dev/char"
	ln -s ../nvidia1 "$DG_HOST/dev/char/195:0"
	run -0 doctor --json
	[[ "$(check_of dev-char message)" == "/dev/char/195:0 points to '../nvidia1', not to character device 195:0;"* ]]
	run -0 doctor
	[[ "$output" == *"warn  dev-char"* ]]
}

@test "devgated not running: daemon fails with how to start it, exit 1" {
	make_host --dev-char
	run -1 doctor --json
	[ "$(echo "$output" | jq -r .status)" = fail ]
	[ "$(check_of daemon status)" = fail ]
	[ "$(check_of daemon message)" = \
		"cannot reach devgated at $DG_SOCK: No such file or directory" ]
	[[ "$(check_of daemon hint)" == "start it with 'systemctl start devgated'"* ]]
	[ "$(check_of foreign-progs status)" = skip ]
	run -1 doctor
	[[ "$output" == *"fail  daemon         cannot reach devgated"* ]]
	[[ "$output" == *"hint: start it with"* ]]
}

@test "a pin root outside bpffs fails bpffs" {
	make_host --dev-char
	start_daemon
	run -1 dg doctor --host-root "$DG_HOST" --pin-root "$DG_TMP/pins/devgate" --json
	[ "$(check_of bpffs status)" = fail ]
	[ "$(check_of bpffs message)" = \
		"$DG_TMP/pins is not a bpf filesystem; devgated will refuse to pin there" ]
	[ "$(check_of bpffs hint)" = \
		"mount one (mount -t bpf bpf $DG_TMP/pins) or choose another pin-root" ]
}

@test "a device program devgate has not wrapped on a leased cgroup: warning" {
	make_host --dev-char
	# No heal check and no periodic re-check, so the foreign program stays.
	start_daemon --recheck-ms 3600000 --heal-ms 0 --no-attach-events
	plain_container p
	run -0 dg grant --pid "$CPID" --gpu 0 --container doc-p
	run -0 doctor --json
	[ "$(check_of foreign-progs message)" = "no foreign device program on 1 leased cgroup" ]
	bpftool prog load "$DEVGATE_BUILD/runtime_like.bpf.o" "$DG_PINS-rt" type cgroup/dev
	bpftool cgroup attach "$DG_CGROOT/$CID" device pinned "$DG_PINS-rt" multi
	rm -f "$DG_PINS-rt"
	id=$(bpftool -j cgroup show "$DG_CGROOT/$CID" | jq '.[] | select(.name == "runtime_like") | .id')
	run -0 doctor --json
	[ "$(check_of foreign-progs status)" = warn ]
	[ "$(check_of foreign-progs message)" = \
		"cgroup /$CID (doc-p) carries device program $id (runtime_like) that devgate has not wrapped" ]
	[[ "$(check_of foreign-progs hint)" == "devgated wraps such programs at its next re-check"* ]]
}

# The beside gate (the default gate-mode) leaves the runtime's program where
# it was, before it: that program is not a foreign one; one after the gate is.
@test "a runc container granted in the beside form: its own program is no warning, one after the gate is" {
	make_host --dev-char
	start_daemon --recheck-ms 3600000 --heal-ms 0 --no-attach-events
	container c
	rt=$(cg_progs "$DG_CGROOT/$CID")
	run -0 dg grant --pid "$CPID" --gpu 0 --container doc-c
	gated_beside "$DG_CGROOT/$CID" "$rt"
	run -0 doctor --json
	[ "$(check_of foreign-progs status)" = ok ]
	[ "$(check_of foreign-progs message)" = "no foreign device program on 1 leased cgroup" ]
	bpftool prog load "$DEVGATE_BUILD/runtime_like.bpf.o" "$DG_PINS-rt" type cgroup/dev
	bpftool cgroup attach "$DG_CGROOT/$CID" device pinned "$DG_PINS-rt" multi
	rm -f "$DG_PINS-rt"
	id=$(bpftool -j cgroup show "$DG_CGROOT/$CID" | jq '.[] | select(.name == "runtime_like") | .id')
	run -0 doctor --json
	[ "$(check_of foreign-progs status)" = warn ]
	[ "$(check_of foreign-progs message)" = \
		"cgroup /$CID (doc-c) carries device program $id (runtime_like) that devgate has not wrapped" ]
}

@test "doctor: usage errors and help" {
	run -2 dg doctor --frobnicate
	[ "${lines[-1]}" = "hint: see 'devgatectl doctor --help'" ]
	run -2 dg doctor extra
	run -0 dg doctor --help
	[[ "${lines[0]}" == "Usage: devgatectl [-s SOCKET] doctor"* ]]
	run -0 dg help doctor
}

@test "without --host-root or --pin-root, doctor and cdi generate ask the running devgated" {
	make_host --dev-char
	start_daemon
	# The fixture's GPUs, not this machine's (it has none): the daemon said where.
	run -0 dg doctor --json
	[ "$(check_of driver status)" = ok ]
	[ "$(check_of gpus status)" = ok ]
	[[ "$(check_of bpffs message)" == *"$DG_PINS"* ]]
	run -0 dg cdi generate
	uuid0=$(dg list --json | jq -r '.gpus[0].uuid')
	echo "$output" | jq -e --arg u "$uuid0" '[.devices[].name] | index($u) != null'
	# What the user gives wins over what the daemon says.
	run -1 dg doctor --host-root "$DG_TMP/nowhere" --json
	[ "$(check_of driver status)" = fail ]
}

@test "mig: each GPU's instances; missing caps nodes or a stale caps major fail with a hint" {
	make_host --dev-char --mig "0:1,2;1:3"
	start_daemon
	caps=$(awk '$2 == "nvidia-caps" { print $1 }' "$DG_HOST/proc/devices")
	run -0 doctor --json
	[ "$(check_of mig status)" = ok ]
	[ "$(check_of mig message)" = "GPU 0 in MIG mode with gi1 (ci0), gi2 (ci0); GPU 1 in MIG mode with gi3 (ci0); nvidia-caps major $caps, its nodes in /dev/nvidia-caps" ]

	# GPU 0's gi2 is nvidia-cap21, its ci0 nvidia-cap22 (the fixture numbers as the driver).
	rm "$DG_HOST/dev/nvidia-caps/nvidia-cap22"
	run -1 doctor --json
	[ "$(check_of mig status)" = fail ]
	[ "$(check_of mig message)" = "/dev/nvidia-caps/nvidia-cap22 ($caps:22) is missing" ]
	[[ "$(check_of mig hint)" == *"nvidia-modprobe -f /proc/driver/nvidia/capabilities/gpuM/mig/giG/access"* ]]
	[ "$(check_of nodes status)" = ok ]

	# The driver reloaded with another caps major; the nodes kept the old one.
	rm "$DG_HOST/dev/nvidia-caps/nvidia-cap21"
	mknod "$DG_HOST/dev/nvidia-caps/nvidia-cap21" c $((caps - 1)) 21
	mknod "$DG_HOST/dev/nvidia-caps/nvidia-cap22" c $((caps - 1)) 22
	run -1 doctor
	[[ "$output" == *"fail  mig            /dev/nvidia-caps/nvidia-cap21 has major $((caps - 1)), a stale one: nvidia-caps is $caps now; /dev/nvidia-caps/nvidia-cap22 has major $((caps - 1)), a stale one"* ]]
	[[ "$output" == *"hint: the nvidia-caps major is dynamic"* ]]

	# No caps major at all: no MIG instance can be granted.
	sed -i '/nvidia-caps/d' "$DG_HOST/proc/devices"
	run -1 doctor --json
	[ "$(check_of mig message)" = "GPU 0 in MIG mode with gi1 (ci0), gi2 (ci0); GPU 1 in MIG mode with gi3 (ci0); but $DG_HOST/proc/devices has no nvidia-caps major" ]
	[[ "$(check_of mig hint)" == "the nvidia module registers nvidia-caps"* ]]
}

@test "driver-files: the user space per capability; another version's or missing libraries warn" {
	make_host --dev-char
	start_daemon
	run -0 doctor --json
	[ "$(check_of driver-files status)" = skip ]
	[ "$(check_of driver-files message)" = \
		"no $DG_HOST/proc/driver/nvidia/version: grant --driver is not available" ]

	stop_daemon
	rm -rf "$DG_HOST"
	make_host --dev-char --driver "550.54.14:$DEVGATE_BUILD/fakedrv.so"
	start_daemon
	lib=$DG_HOST/usr/lib/x86_64-linux-gnu
	# An upgrade on disk, the old module still loaded: libcuda is the new one's only.
	mv "$lib/libcuda.so.550.54.14" "$lib/libcuda.so.560.28.03"
	rm "$lib/libnvcuvid.so.550.54.14"
	run -0 doctor --json
	[ "$(echo "$output" | jq -r .status)" = warn ]
	[ "$(check_of driver-files status)" = warn ]
	[ "$(check_of driver-files message)" = "compute: /usr/lib/x86_64-linux-gnu/libcuda.so.560.28.03 of another version than the module's 550.54.14; compute: libcuda.so.550.54.14 missing; video: libnvcuvid.so.550.54.14 missing; driver 550.54.14, files found: utility 3, compute 1, video 1, graphics 2" ]
	[[ "$(check_of driver-files hint)" == "grant --driver mounts only what matches the loaded module"* ]]
}
