/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which process keeps a BPF program open. LXC's monitor keeps a descriptor
 * of its current device program for the container's lifetime and closes
 * the old one when it moves to a new one; supersede.c reads that as the
 * runtime's own word on which of its programs is current.
 */
#ifndef DEVGATE_PROGFD_H
#define DEVGATE_PROGFD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A process by PID and start time, so a reused PID is never taken for it. */
struct progfd_proc {
	pid_t pid;
	uint64_t start; /* /proc/PID/stat field 22 */
};

#define PROGFD_PROCS 256 /* processes of a cgroup whose parents are looked at */

/*
 * The process that keeps program prog_id open among the parents of cgfd's
 * processes: a runtime's monitor is the parent of the container's init
 * (LXC's lxc-start). 1 found, 0 none. Reads a few /proc entries, not all.
 */
int progfd_owner(int cgfd, uint32_t prog_id, struct progfd_proc *ret);
/* 1 when p holds a descriptor of prog_id, 0 when not, -ESRCH when p is gone. */
int progfd_holds(const struct progfd_proc *p, uint32_t prog_id);

#endif
