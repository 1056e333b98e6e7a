/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device nodes inside a container, made by a forked helper that joins the
 * container's mount namespace. The container controls every path below its
 * root, so the helper resolves with openat2(RESOLVE_IN_ROOT |
 * RESOLVE_NO_SYMLINKS), acts only through fd-relative calls that never
 * follow a final symlink, checks what it made with fstatat, and runs under a
 * seccomp allow-list.
 */
#ifndef DEVGATE_NODES_H
#define DEVGATE_NODES_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "errors.h"
#include "gpu.h"
#include "helper/helper.h"
#include "sys/target.h"

/* How to make a container's nodes, and where its root is. */
struct node_opts {
	mode_t mode; /* of each node (--node-mode) */
	uid_t uid;   /* owner of each node (--node-owner) */
	gid_t gid;
	const char *root_path; /* rootfs inside the target's mount ns; NULL: its root */
	bool check_root;       /* root_path must be this (dev, ino): the hook's rootfs */
	dev_t root_dev;
	ino_t root_ino;
};

/*
 * Builds the seccomp filter every node helper runs under: the calls of
 * helper/syscalls.h pass, any other fails with EPERM. The caller frees
 * ret->filter. nodes_init() uses it; so does the helper's unit test.
 */
int nodes_helper_filter(struct sock_fprog *ret, struct dg_error *err);
/*
 * Gets node helpers ready, once at daemon start: builds their filter and
 * starts the zygote that forks them (or, where it cannot start, says that
 * devgated forks them itself). 0, or -errno with err set.
 */
int nodes_init(struct dg_error *err);
/* Ends the helpers and the zygote and frees the filter; at daemon exit. */
void nodes_fini(void);
/* Gets the next helper ready ahead of need (and ends the last one); call when idle. */
void nodes_prepare(void);

/*
 * Makes the n nodes in the /dev of target t. All or nothing: when any path
 * is held by something else, nothing is made. res[i] says what happened to
 * nodes[i] (NODE_CREATED, NODE_PRESENT, NODE_CONFLICT, ...). 0, or -errno
 * with err set.
 */
int nodes_create(const struct target *t, const struct node_opts *opts, const struct dg_node *nodes,
		 size_t n, struct node_result *res, struct dg_error *err);
/* A driver file: the host's path (below the host root) and its path in the container. */
struct node_file {
	const char *host;
	const char *path;
};

/*
 * Mounts the host's files read-only at their paths in the container, making
 * directories where missing; all or none. status[i]: NODE_CREATED, or
 * NODE_PRESENT where the image has a file of its own there (left alone).
 */
int nodes_mount_files(const struct target *t, const struct node_opts *o, int host_root,
		      const struct node_file *f, size_t n, int *status, struct dg_error *err);
/* Unmounts them and removes the files they were mounted on; NODE_REMOVED or NODE_ABSENT. */
int nodes_unmount_files(const struct target *t, const struct node_opts *o,
			const struct node_file *f, size_t n, int *status, struct dg_error *err);

/*
 * Removes the n nodes from the /dev of target t where they still carry
 * their numbers; anything else at those paths is left alone. res[i] says
 * what happened to nodes[i] (NODE_REMOVED, NODE_ABSENT, NODE_CONFLICT,
 * ...). 0, or -errno with err set.
 */
int nodes_remove(const struct target *t, const struct node_opts *opts, const struct dg_node *nodes,
		 size_t n, struct node_result *res, struct dg_error *err);

#endif
