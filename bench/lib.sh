# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# What bench/run.sh and bench/fastpath.sh share. Sourced after
# tests/lib/runc.sh (dg_plain).

# bench_plain CGROUP ROOT LIST PROG: a hand-made container (dg_plain: a
# cgroup of its own, a tmpfs /dev, ROOT as its root) with the pinned
# runtime-like device program PROG attached, as a runtime would. CGROUP goes
# into the file LIST, which the caller's cleanup empties. Prints its PID.
bench_plain() {
	local cg=$1 pid
	echo "$cg" >>"$3"
	pid=$(dg_plain "$cg" "$2") || return 1
	bpftool cgroup attach "$cg" device pinned "$4" multi
	echo "$pid"
}
