/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup v2: where the hierarchy is mounted, and cgroups opened by path or
 * by id. Everything is keyed by the cgroup id (the kernfs inode number),
 * which the kernel never reuses.
 */
#ifndef DEVGATE_CGROUP_H
#define DEVGATE_CGROUP_H

#include <stdint.h>
#include <sys/types.h>

#include "errors.h"
#include "mountinfo.h"

struct cgroot {
	char *mount; /* e.g. /sys/fs/cgroup or /sys/fs/cgroup/unified */
	int fd;
};

/*
 * root: the cgroup v2 mount to use; NULL: the usable one mountinfo names
 * last. -ENOMEDIUM when none is mounted (a cgroup v1 host).
 */
int cgroot_open(struct cgroot *ret, const char *root, struct dg_error *err);
void cgroot_close(struct cgroot *root);

/*
 * What a host with cgroup v1 alone (no v2 mount) means for devgate: it
 * gates through v2 device programs, with v1 devices rules only beside
 * them, so it refuses each grant there rather than answer "granted" while
 * the kernel still denies (target.c).
 */
#define CGROUP_NO_V2_WHY                                                                \
	"this host has no cgroup v2, only cgroup v1; devgate grants through cgroup v2 " \
	"device programs, with v1 devices rules only beside them, and does not gate "   \
	"through v1 devices alone (no per-access counters, no proof through a BPF view)"
#define CGROUP_NO_V2_HINT                                                                 \
	"mount cgroup v2 beside v1 ('mount -t cgroup2 none /sys/fs/cgroup/unified'), "    \
	"restart devgated, then the container (its runtime puts it in a v2 cgroup too); " \
	"or boot with systemd.unified_cgroup_hierarchy=1"

/* Opens the cgroup at PATH (relative to the v2 root, starting with '/'). */
int cgroup_open_path(const struct cgroot *root, const char *path, int *ret_fd);
int cgroup_open_id(const struct cgroot *root, uint64_t id, int *ret_fd);
int cgroup_id_of(int cgfd, uint64_t *ret);
/* The v2 path of an open cgroup, from the kernel's own view. */
int cgroup_path_of(const struct cgroot *root, int cgfd, char **ret);
/* 1 if the cgroup or a descendant has a process, 0 if not. */
int cgroup_populated(int cgfd);
/* The text of /proc/PID/cgroup; -ESRCH when the process is gone. */
int proc_cgroup_read(pid_t pid, char **ret);
/* The v2 path of a process; -ESRCH when gone, -ENOMEDIUM without v2. */
int cgroup_of_pid(pid_t pid, char **ret);
/* True when 'path' equals 'other' or is one of its ancestors. */
int cgroup_path_is_ancestor(const char *path, const char *other);

#endif
