/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A container to act on: a live process held by pidfd (no PID-reuse race),
 * its root directory and its cgroup v2 cgroup.
 */
#ifndef DEVGATE_TARGET_H
#define DEVGATE_TARGET_H

#include <stdint.h>
#include <sys/types.h>

#include "cgroup.h"
#include "errors.h"

struct target {
	pid_t pid;
	int pidfd;
	int rootfd; /* /proc/PID/root, O_PATH */
	char *cgroup;
	int cgfd;
	uint64_t cgid;
	char *proc_cg; /* /proc/PID/cgroup as this resolution read it; NULL on a v1-alone host */
};

#define TARGET_INIT                                                                         \
	{                                                                                   \
		.pid = 0, .pidfd = -1, .rootfd = -1, .cgroup = NULL, .cgfd = -1, .cgid = 0, \
		.proc_cg = NULL                                                             \
	}

/*
 * On a cgroup v1 host (root has no v2 mount, fd -1) nothing can be gated
 * yet: -ENOMEDIUM, and err says why of what (a PID, a cgroup, a name).
 */
int target_check_v2(const struct cgroot *root, const char *what, struct dg_error *err);
/*
 * Resolves a PID. self_cgroup is devgated's own cgroup: a target there or
 * above it is refused, since gating it would gate the daemon too.
 */
int target_from_pid(const struct cgroot *root, const char *self_cgroup, pid_t pid,
		    struct target *ret, struct dg_error *err);
/* Resolves a cgroup path; the target's process is its first member. */
int target_from_cgroup(const struct cgroot *root, const char *self_cgroup, const char *path,
		       struct target *ret, struct dg_error *err);
void target_done(struct target *t);

/*
 * From a /proc/PID/stat file (path relative to dirfd): the parent and the
 * start time in clock ticks since boot; either may be NULL. -ESRCH when
 * the process is gone.
 */
int proc_stat(int dirfd, const char *path, pid_t *ppid, uint64_t *start);

int pidfd_open_pid(pid_t pid);
/* 0 while the process behind pidfd runs, -ESRCH once it has exited. */
int pidfd_alive(int pidfd);

#endif
