/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The system calls a node helper may make once it is confined: its seccomp
 * allow-list, kept beside the code it governs (helper.c, files.c). Any other call
 * fails with EPERM. devgated builds the filter from this list at start
 * (node/nodes.c, with sys/confine.c) and hands it to the zygote, which
 * installs it in every helper it forks.
 *
 * A call added to helper.c or files.c (or one that a libc function they use makes)
 * must be added here too; tests/unit/test_helper.c runs the helper's work
 * under this very filter and fails otherwise.
 *
 * Plain syscall numbers of this architecture, from <sys/syscall.h>: libc
 * only, like the rest of this folder. On x86_64 and aarch64 libseccomp's
 * SCMP_SYS(x) is __NR_x, so the filter is the one SCMP_SYS would give; on
 * an architecture without one of these calls the build fails here instead
 * of the filter silently leaving it out.
 */
#ifndef DEVGATE_HELPER_SYSCALLS_H
#define DEVGATE_HELPER_SYSCALLS_H

#include <sys/syscall.h>

static const int helper_syscalls[] = {
	__NR_setns,	   /* enter the container's mount namespace */
	__NR_umask,	   /* umask(0): nodes get exactly the job's mode */
	__NR_openat2,	   /* resolve paths inside the container's root */
	__NR_newfstatat,   /* fstatat: what a path holds now */
	__NR_fstat,	   /* fstat: which file system a directory is on */
	__NR_statx,	   /* what libc may use for either */
	__NR_fstatfs,	   /* the file system /dev is on, for devgated (helper_probe) */
	__NR_mknodat,	   /* make a device node */
	__NR_fchownat,	   /* give it the job's owner */
	__NR_unlinkat,	   /* remove a node, or a file a mount was on */
	__NR_write,	   /* the reply to devgated */
	__NR_sendmsg,	   /* the probe, with the /dev it opened (helper_probe) */
	__NR_close,	   /* descriptors of directories it opened */
	__NR_exit_group,   /* _exit */
	__NR_exit,	   /* _exit, where libc uses the thread's own */
	__NR_getpid,	   /* libc */
	__NR_rt_sigreturn, /* return from a signal handler */
	__NR_recvmsg,	   /* the job and its descriptors (there is no read) */
	__NR_capget,	   /* drop every capability the job does not need */
	__NR_capset,
	__NR_openat, /* the walk without openat2; files to mount on; dri/ directories */
	/* bind-mounted nodes (a container in another user namespace) */
	__NR_move_mount, /* put devgated's node (or a driver file) on its path */
	__NR_umount2,	 /* take it off again */
	__NR_fchdir,	 /* umount2 takes a path: work from the directory's fd */
	__NR_setfsuid,	 /* files owned by an id the container maps */
	__NR_setfsgid,
	/* driver files, and /dev/dri or /dev/nvidia-caps: the directories they go in */
	__NR_mkdirat,
	/* driver files are made as the container's root: without root's groups */
	__NR_setgroups,
	/* a mount is devgate's if it is unbindable: open_tree cannot clone it */
	__NR_open_tree,
};

#endif
