#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# grant --driver: the host driver's user space (libraries of the running
# module's version, nvidia-smi) mounted read-only into a live container,
# where a program loads them by soname, and taken out with the last GPU.
# The fixture's libraries are copies of one small shared object.

load helpers

setup_file() { dg_setup_file; }
teardown_file() { dg_teardown_file; }
setup() {
	dg_setup
	chmod 0711 "$DG_TMP" # a user-namespaced container walks into its bundle
	make_host --driver "550.54.14:$DEVGATE_BUILD/fakedrv.so"
	start_daemon
}
teardown() { dg_teardown; }

LIB=/usr/lib/x86_64-linux-gnu

# glibc_container NAME [JQ-FILTER]: a runc container that can run dlprobe
# (dynamic: ld.so and libc.so.6 copied in); sets CPID and CID.
glibc_container() {
	local b="$DG_TMP/$1"
	requires runc
	CID="$DG_ID-$1"
	dg_bundle "$b" "$DEVGATE_BUILD/probe"
	dg_glibc "$b/rootfs" libc.so.6
	cp "$DEVGATE_BUILD/dlprobe" "$b/rootfs/bin/"
	jq "${2:-.}" "$b/config.json" >"$b/c.json"
	mv "$b/c.json" "$b/config.json"
	[ -z "${2:-}" ] || chown -R 100000:100000 "$b/rootfs"
	CPID=$(dg_run "$CID" "$b")
	DG_CONTAINERS+=("$CID")
	DG_CGROUPS+=("$DG_CGROOT/$CID")
	[ -n "$CPID" ] && [ "$CPID" != null ]
}

# hooked_glibc NAME JQ-FILTER: hooked_bundle NAME with what dlprobe needs.
hooked_glibc() {
	local b="$DG_TMP/$1"
	requires runc
	hooked_bundle "$1" "$2"
	dg_glibc "$b/rootfs" libc.so.6
	cp "$DEVGATE_BUILD/dlprobe" "$b/rootfs/bin/"
}

dlprobe() {
	dg_runc exec "$CID" dlprobe "$@"
}

# Mounts below the container's /usr, by path.
usr_mounts() {
	awk '$5 ~ "^/usr/" { print $5 }' "/proc/$CPID/mountinfo" | sort | tr '\n' ' '
}

@test "grant --driver: the libraries load by soname, read-only; more kinds later; revoke takes them out" {
	glibc_container c
	run -1 dlprobe libcuda.so.1
	[[ "$output" == "libcuda.so.1 libcuda.so.1: cannot open shared object file"* ]]

	run -0 dg grant --pid "$CPID" --gpu 0 --driver compute,utility
	run -0 dlprobe libcuda.so.1 libnvidia-ml.so.1 libnvidia-ptxjitcompiler.so.1 \
		libcuda.so.550.54.14
	[ "${lines[0]}" = "libcuda.so.1 ok devgate-fixture" ]
	[ "${lines[1]}" = "libnvidia-ml.so.1 ok devgate-fixture" ]
	# Video was not asked for.
	run -1 dlprobe libnvcuvid.so.1
	run -0 dg_runc exec "$CID" nvidia-smi
	[ "$output" = "fixture nvidia-smi 550.54.14" ]
	run -1 dg_runc exec "$CID" sh -c "echo x >>$LIB/libcuda.so.550.54.14"
	[[ "$output" == *"Read-only file system"* ]]
	run -0 dg --json status
	[ "$(echo "$output" | jq -r '.leases[0].driver')" = utility,compute ]
	# libcuda, libnvidia-ml, -cfg, -ptxjitcompiler: each at its name and soname; nvidia-smi.
	[ "$(echo "$output" | jq '.leases[0].driver_files')" = 9 ]
	record=$(ls "$DG_TMP/state/leases/"*.json)
	[ "$(jq '.driver_files | length' "$record")" = 9 ]
	[ "$(jq -r '.driver_files | map(select(startswith("/"))) | length' "$record")" = 9 ]
	# The image has /lib and /lib64 only: devgate made these, and records them.
	[ "$(jq -c '[.driver_dirs[].path]' "$record")" = '["/usr","/usr/lib","/usr/lib/x86_64-linux-gnu","/usr/bin"]' ]

	# More kinds on the same lease: only the new files are mounted.
	run -0 dg grant --pid "$CPID" --gpu 0 --driver video
	run -0 dlprobe libnvcuvid.so.1 libnvidia-encode.so.1
	run -0 dg --json status
	[ "$(echo "$output" | jq -r '.leases[0].driver')" = utility,compute,video ]
	[ "$(echo "$output" | jq '.leases[0].driver_files')" = 13 ]

	# The record keeps what is mounted: a restarted devgated takes it out,
	# from a record written before the list was an array too.
	stop_daemon
	jq '.driver_files |= (join("\n") + "\n")' "$record" >"$record.old"
	mv "$record.old" "$record"
	[ "$(jq -r '.driver_files | type' "$record")" = string ]
	start_daemon
	run -0 dg --json status
	[ "$(echo "$output" | jq '.leases[0].driver_files')" = 13 ]
	run -0 dg revoke --pid "$CPID"
	run -1 dlprobe libcuda.so.1
	[ "$(usr_mounts)" = "" ]
	# The directories it made went with the files; the image's stay as they were.
	run -1 dg_runc exec "$CID" ls -A /usr
	run -0 dg_runc exec "$CID" ls -A /lib/x86_64-linux-gnu
	[ "$output" = libc.so.6 ]
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENOENT" ]
}

@test "grant --driver: a host whose libraries only its ld.so.conf names (/usr/local/nvidia/lib64); the soname goes where the image's ld.so looks" {
	local nv=/usr/local/nvidia/lib64
	mkdir -p "$DG_HOST$nv" "$DG_HOST/etc/ld.so.conf.d"
	mv "$DG_HOST$LIB"/lib* "$DG_HOST$nv/"
	printf 'include /etc/ld.so.conf.d/*.conf\n' >"$DG_HOST/etc/ld.so.conf"
	printf '%s\n' $nv >"$DG_HOST/etc/ld.so.conf.d/nvidia.conf"
	glibc_container c
	run -0 dg grant --pid "$CPID" --gpu 0 --driver compute
	# No LD_LIBRARY_PATH, no ld.so.cache: ld.so finds the soname in its own directory.
	run -0 dlprobe libcuda.so.1
	[ "$output" = "libcuda.so.1 ok devgate-fixture" ]
	run -0 dg_runc exec "$CID" ls $nv
	[ "$(echo "$output" | tr '\n' ' ')" = "libcuda.so.1 libcuda.so.550.54.14 libnvidia-ptxjitcompiler.so.1 libnvidia-ptxjitcompiler.so.550.54.14 " ]
	run -0 dg_runc exec "$CID" ls /lib/x86_64-linux-gnu
	[ "$(echo "$output" | tr '\n' ' ')" = "libc.so.6 libcuda.so.1 libnvidia-ptxjitcompiler.so.1 " ]
	run -1 dg_runc exec "$CID" sh -c "echo x >>/lib/x86_64-linux-gnu/libcuda.so.1"
	[[ "$output" == *"Read-only file system"* ]]
	run -0 dg revoke --pid "$CPID"
	run -1 dlprobe libcuda.so.1
	[ "$(usr_mounts)" = "" ]
	run -0 dg_runc exec "$CID" ls /lib/x86_64-linux-gnu
	[ "$output" = "libc.so.6" ]
	run -1 dg_runc exec "$CID" ls -A /usr
	# CDI cannot look into the image: the soname goes to the multiarch directory too.
	run -0 dg cdi generate --driver compute
	[ "$(echo "$output" | jq -c '[.containerEdits.mounts[] | select(.hostPath | endswith("libcuda.so.550.54.14")) | .containerPath]')" = \
		"[\"$nv/libcuda.so.550.54.14\",\"$nv/libcuda.so.1\",\"$LIB/libcuda.so.1\"]" ]
}

@test "grant --driver: a record lost while devgated is down; the start takes devgate's mounts out, and a new grant mounts them again" {
	glibc_container c
	run -0 dg grant --pid "$CPID" --gpu 0 --driver compute
	run -0 dlprobe libcuda.so.1
	stop_daemon
	rm "$DG_TMP/state/leases/"*.json
	start_daemon
	grep -q "rebuilt the lost record of $CID" "$DG_TMP/daemon.log"
	grep -q "took 4 mount(s) of the driver's files that no record holds out of $CID" "$DG_TMP/daemon.log"
	[ "$(usr_mounts)" = "" ]
	run -1 dlprobe libcuda.so.1
	# Not the image's files now: the grant mounts them again, and its revoke takes them off.
	run -0 dg grant --pid "$CPID" --gpu 0 --driver compute
	run -0 dlprobe libcuda.so.1
	run -0 dg --json status
	[ "$(echo "$output" | jq '.leases[0].driver_files')" = 4 ]
	run -0 dg revoke --pid "$CPID"
	[ "$(usr_mounts)" = "" ]
	run -0 dg_runc exec "$CID" ls -A $LIB
	[ "$output" = "" ]
}

@test "grant --driver into a user-namespaced container" {
	glibc_container u "$DG_USERNS_JQ"
	run -0 dg grant --pid "$CPID" --gpus 1 --driver compute
	run -0 dlprobe libcuda.so.1
	[ "$output" = "libcuda.so.1 ok devgate-fixture" ]
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENXIO" ]
	run -0 dg revoke --pid "$CPID"
	run -1 dlprobe libcuda.so.1
	[ "$(usr_mounts)" = "" ]
}

@test "grant --driver refused: unknown kind, no GPU, no driver on the host; nothing changes" {
	glibc_container c
	run -2 dg grant --pid "$CPID" --gpu 0 --driver compute,cuda
	[[ "$output" == *"driver capability 'cuda' is unknown"* ]]
	run -2 dg grant --pid "$CPID" --device /dev/full:/dev/f2 --driver compute
	[[ "$output" == *"the driver's files go with a GPU"* ]]
	no_leases
	rm "$DG_HOST/proc/driver/nvidia/version"
	run -8 dg grant --pid "$CPID" --gpu 0 --driver compute
	[[ "$output" == *"no NVIDIA driver user space"* ]]
	no_leases
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENOENT" ]
	[ "$(usr_mounts)" = "" ]
	[ "$(grants_of "$DG_CGROOT/$CID")" = 0 ]
}

@test "cdi generate mounts the driver's files, each library also at its soname" {
	run -0 dg cdi generate --host-root "$DG_HOST"
	mounts=$(echo "$output" | jq -c '.containerEdits.mounts')
	# Eight libraries (seven with a soname) and nvidia-smi.
	[ "$(echo "$mounts" | jq length)" = 16 ]
	[ "$(echo "$mounts" | jq -c '[.[] | select(.containerPath == "/usr/lib/x86_64-linux-gnu/libcuda.so.1")][0]')" = \
		"{\"hostPath\":\"$DG_HOST/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14\",\"containerPath\":\"/usr/lib/x86_64-linux-gnu/libcuda.so.1\",\"options\":[\"ro\",\"nosuid\",\"nodev\",\"bind\"]}" ]
	run -0 dg cdi generate --host-root "$DG_HOST" --driver compute
	[ "$(echo "$output" | jq '.containerEdits.mounts | length')" = 4 ]
	run -0 dg cdi generate --host-root "$DG_HOST" --driver none
	[ "$(echo "$output" | jq '.containerEdits.mounts | length')" = 0 ]
	run -2 dg cdi generate --host-root "$DG_HOST" --driver cuda
	[[ "$output" == *"--driver: 'cuda' is not utility, compute, video, graphics, all or none"* ]]
}

@test "hook: devgate.io/driver mounts the driver's files with the GPUs; from-env lets the image choose" {
	hooked_glibc h '.annotations = {"devgate.io/gpus": "0", "devgate.io/driver": "compute"}'
	dg_runc run -d -b "$DG_TMP/h" "$CID" </dev/null
	run -0 dlprobe libcuda.so.1 libnvidia-ptxjitcompiler.so.1
	[ "${lines[0]}" = "libcuda.so.1 ok devgate-fixture" ]
	# Utility was not asked for.
	run -1 dlprobe libnvidia-ml.so.1
	run -1 probe "$CID" /dev/nvidia0 /gpu1
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/gpu1 EPERM')" ]
	run -0 dg --json status
	[ "$(echo "$output" | jq -r '.leases[0].driver')" = compute ]
	[ "$(echo "$output" | jq '.leases[0].driver_files')" = 4 ]
	dg_runc delete -f "$CID"
	no_leases

	# from-env: the image's NVIDIA_DRIVER_CAPABILITIES picks utility.
	hooked_glibc e '.annotations = {"devgate.io/gpus": "0", "devgate.io/driver": "from-env"} |
		.process.env += ["NVIDIA_DRIVER_CAPABILITIES=utility"]'
	dg_runc run -d -b "$DG_TMP/e" "$CID" </dev/null
	run -0 dlprobe libnvidia-ml.so.1
	run -1 dlprobe libcuda.so.1
	run -0 dg_runc exec "$CID" nvidia-smi
	[ "$output" = "fixture nvidia-smi 550.54.14" ]
	run -0 dg --json status
	[ "$(echo "$output" | jq -r '.leases[0].driver')" = utility ]
	dg_runc delete -f "$CID"
	no_leases

	# Without from-env the image's env widens nothing.
	hooked_glibc w '.annotations = {"devgate.io/gpus": "0", "devgate.io/driver": "utility"} |
		.process.env += ["NVIDIA_DRIVER_CAPABILITIES=all"]'
	dg_runc run -d -b "$DG_TMP/w" "$CID" </dev/null
	run -0 dg --json status
	[ "$(echo "$output" | jq -r '.leases[0].driver')" = utility ]
	run -1 dlprobe libcuda.so.1
}

@test "hook: an unknown devgate.io/driver kind fails the container's creation; nothing granted" {
	hooked_glibc b '.annotations = {"devgate.io/gpus": "0", "devgate.io/driver": "compute,cuda"} |
		.process.args = ["probe", "/dev/null"]'
	run ! dg_runc run -b "$DG_TMP/b" "$CID" </dev/null
	[[ "$output" == *"annotation devgate.io/driver='compute,cuda': driver capability 'cuda' is unknown"* ]]
	no_leases
}

@test "grant --driver: a driver file that cannot be mounted rolls the whole grant back" {
	glibc_container c
	# The image has a file where /usr/bin goes: the libraries mount, nvidia-smi cannot.
	mkdir -p "$DG_TMP/c/rootfs/usr"
	echo image >"$DG_TMP/c/rootfs/usr/bin"
	entries=$(grant_entries)
	run -11 dg grant --pid "$CPID" --gpu 0 --driver compute,utility
	[[ "$output" == *"cannot mount the driver's /usr/bin/nvidia-smi in the container of PID $CPID: Not a directory"* ]]
	no_leases
	[ "$(grant_entries)" = "$entries" ]
	[ -z "$(gate_leftovers)" ] || fail "$(gate_leftovers)"
	run -1 probe "$CID" /dev/nvidia0
	[ "$output" = "/dev/nvidia0 ENOENT" ]
	# The libraries mounted before it are off again, their files and directories gone.
	[ "$(usr_mounts)" = "" ]
	run -0 dg_runc exec "$CID" ls -A /usr
	[ "$output" = bin ]
	[ "$(cat "$DG_TMP/c/rootfs/usr/bin")" = image ]

	# On a lease that holds GPU 0: GPU 1 with the driver fails, GPU 0 stays as it was.
	run -0 dg grant --pid "$CPID" --gpu 0
	entries=$(grant_entries)
	run -11 dg grant --pid "$CPID" --gpu 1 --driver compute,utility
	[[ "$output" == *"cannot mount the driver's /usr/bin/nvidia-smi"* ]]
	[ "$(grant_entries)" = "$entries" ]
	run -0 dg --json status
	[ "$(echo "$output" | jq -c '[.leases[0].gpus[].index]')" = "[0]" ]
	[ "$(echo "$output" | jq -r '.leases[0].driver // "none"')" = none ]
	run -1 probe "$CID" /dev/nvidia0 /dev/nvidia1
	[ "$output" = "$(printf '/dev/nvidia0 ENXIO\n/dev/nvidia1 ENOENT')" ]
	[ "$(usr_mounts)" = "" ]
	record=$(ls "$DG_TMP/state/leases/"*.json)
	[ "$(jq -r '.driver_files // "none"' "$record")" = none ]
	[ "$(jq -c '[.gpus[].minor]' "$record")" = "[0]" ]
}
