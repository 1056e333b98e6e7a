/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup v2: where the hierarchy is mounted, and cgroups opened by path or
 * by id. Everything is keyed by the cgroup id (the kernfs inode number),
 * which the kernel never reuses.
 */
#ifndef DEVGATE_CGROUP_H
#define DEVGATE_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "errors.h"
#include "mountinfo.h"

struct cgroot {
	char *mount; /* e.g. /sys/fs/cgroup or /sys/fs/cgroup/unified */
	int fd;
	/*
	 * A host with cgroup v1 alone: the v1 devices hierarchy stands in for
	 * v2 (cgroot_open_v1), and a container is its v1 devices cgroup.
	 */
	bool v1;
	/* root->v1: a process's path in it (cgroup1_devices_of_pid, given by the caller). */
	int (*v1_path_of)(pid_t pid, char **ret);
};

/*
 * root: the cgroup v2 mount to use; NULL: the usable one mountinfo names
 * last. -ENOMEDIUM when none is mounted (a cgroup v1 host).
 */
int cgroot_open(struct cgroot *ret, const char *root, struct dg_error *err);
void cgroot_close(struct cgroot *root);
/*
 * On a host with no cgroup v2 mount: the v1 devices hierarchy at mount as
 * the root of every cgroup devgated keys, opens and watches (ret->v1);
 * path_of gives a process's path in it. Its
 * kernfs ids work as v2's do (name_to_handle_at, open_by_handle_at), and a
 * cgroup removed and made again gets a new one.
 */
int cgroot_open_v1(struct cgroot *ret, const char *mount, int (*path_of)(pid_t pid, char **ret),
		   struct dg_error *err);

/*
 * A host with neither cgroup v2 nor the v1 devices controller: nothing
 * restricts a container's devices, so nothing can be gated (target.c).
 */
#define CGROUP_NO_V2_WHY                                                                 \
	"this host has no cgroup v2 and no cgroup v1 devices controller; devgate gates " \
	"through one of them"
#define CGROUP_NO_V2_HINT \
	"mount cgroup v2 ('mount -t cgroup2 none /sys/fs/cgroup'), then restart devgated"

/* Opens the cgroup at PATH (relative to the v2 root, starting with '/'). */
int cgroup_open_path(const struct cgroot *root, const char *path, int *ret_fd);
int cgroup_open_id(const struct cgroot *root, uint64_t id, int *ret_fd);
int cgroup_id_of(int cgfd, uint64_t *ret);
/* The v2 path of an open cgroup, from the kernel's own view. */
int cgroup_path_of(const struct cgroot *root, int cgfd, char **ret);
/*
 * 1 if the cgroup or a descendant has a process, 0 if not: cgroup.events
 * on v2, the cgroup.procs of the subtree on v1, which has no such file.
 */
int cgroup_populated(int cgfd);
/* The text of /proc/PID/cgroup; -ESRCH when the process is gone. */
int proc_cgroup_read(pid_t pid, char **ret);
/* The v2 path of a process; -ESRCH when gone, -ENOMEDIUM without v2. */
int cgroup_of_pid(pid_t pid, char **ret);
/* The path of a process in root's hierarchy: v2's, or the v1 devices one (root->v1). */
int cgroup_of_pid_in(const struct cgroot *root, pid_t pid, char **ret);
/*
 * cgroup_of_pid_in, also handing back the /proc/PID/cgroup text it read
 * (*ret_text, the caller's to free, even on an error; NULL on a v1-alone
 * host, where none is read).
 */
int cgroup_of_pid_kept(const struct cgroot *root, pid_t pid, char **ret, char **ret_text);
/* True when 'path' equals 'other' or is one of its ancestors. */
int cgroup_path_is_ancestor(const char *path, const char *other);

#endif
