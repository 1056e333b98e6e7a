/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup v1 "devices": where the hierarchy that has the devices controller
 * is mounted, and which of its cgroups a process is in. Hybrid hosts put a
 * process in a v1 devices cgroup and a v2 cgroup at once; the kernel checks
 * both, v1 after any v2 program.
 */
#ifndef DEVGATE_CGROUP1_H
#define DEVGATE_CGROUP1_H

#include <stdbool.h>
#include <sys/types.h>

struct cg1root {
	char *mount; /* e.g. /sys/fs/cgroup/devices */
	int fd;	     /* O_PATH | O_DIRECTORY */
};

/*
 * Finds, in mountinfo text, the last cgroup v1 mount of the whole hierarchy
 * (root "/") whose super options name "devices" and that usable() accepts
 * (NULL: any). -ENOMEDIUM if none.
 */
int cgroup1_mountinfo_find(const char *text, bool (*usable)(const char *path), char **ret);
/* The v1 devices hierarchy this namespace reaches; -ENOMEDIUM on a pure v2 host. */
int cg1root_open(struct cg1root *ret);
void cg1root_close(struct cg1root *r);

/* Deep enough for nested containers; a deeper tree is refused, not walked. */
#define CGROUP1_DEPTH 16

/*
 * Opens file (NULL: the directory) of the cgroup at path below root,
 * never leaving the mount: no symlink, no other mount, nothing above it.
 */
int cgroup1_open_in(const struct cg1root *root, const char *path, const char *file, int flags);
/*
 * Calls each on every process in the cgroup at path and the cgroups below
 * it (from depth, CGROUP1_DEPTH at most: -ELOOP beyond); returns the first
 * non-zero answer of each, or -errno. A cgroup removed meanwhile is skipped.
 */
int cgroup1_procs_walk(const struct cg1root *root, const char *path, int depth,
		       int (*each)(pid_t pid, void *ctx), void *ctx);

/* The path of the /proc/PID/cgroup line whose controllers include devices. */
int cgroup1_devices_parse(const char *text, char **ret);
/* The v1 devices cgroup of a process; -ESRCH when gone, -ENOMEDIUM without one. */
int cgroup1_devices_of_pid(pid_t pid, char **ret);
/*
 * 1 when, in every v1 hierarchy but devices where outer (a /proc/PID/cgroup
 * text) is below the root, inner's cgroup is outer's or below it; 0 if
 * not. On a host with cgroup v1 alone these say whose a process is, as
 * the v2 cgroup does on a hybrid one.
 */
int cgroup1_within(const char *outer, const char *inner);

#endif
