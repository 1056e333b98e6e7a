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
#include <stdint.h>
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
/*
 * An entry of a driver files job: a file of the host's driver, mounted
 * read-only at path in the container; or, to unmount, a directory devgate
 * made there.
 */
struct node_file {
	const char *host;  /* mount: the host's file, below the host root */
	const char *path;  /* absolute, in the container */
	uint64_t dev, ino; /* as struct helper_file's; nodes_open_files sets them for a mount */
	bool dir;	   /* unmount: a directory devgate made, removed if empty */
	bool marked;	   /* unmount: only a mount devgate marked as its own comes off */
	int tree;	   /* mount: the host file's detached mount (nodes_open_files), or -1 */
};

/* What a files job did: a result per entry, and the directories a mount job made. */
struct node_files_result {
	bool replied; /* the helper answered: false when what it did is not known */
	struct file_result res[HELPER_MAX_FILES];
	size_t n_dirs;
	struct helper_dir dirs[HELPER_MAX_DIRS];
};

/*
 * Opens each entry's host file (below host_root) as a read-only, nosuid,
 * nodev and unbindable detached mount, its tree, and sets its dev and ino.
 * All or none. 0, or -errno with err set.
 */
int nodes_open_files(int host_root, struct node_file *f, size_t n, struct dg_error *err);
/* Closes the trees nodes_open_files opened. */
void nodes_close_files(struct node_file *f, size_t n);
/*
 * Mounts the opened files at their paths in the container, making the
 * directories that are missing, as the container's root would: never
 * across a mount from its root, never below a shared mount. All or none.
 * ret->res[i]: FILE_MOUNTED, FILE_ADOPTED (devgate's mount of that file
 * was there already), or FILE_IMAGE (the image's own file, left alone);
 * ret->dirs: the directories made. 0, or -errno with err set.
 */
int nodes_mount_files(const struct target *t, const struct node_opts *o, const struct node_file *f,
		      size_t n, struct node_files_result *ret, struct dg_error *err);
/*
 * Takes devgate's mounts off (and the files they were on), and removes
 * the directories it made that are empty, in the order given; anything
 * else at those paths stays. ret->res[i]: FILE_REMOVED, FILE_ABSENT,
 * FILE_KEPT or FILE_FAILED. 0, or -errno with err set.
 */
int nodes_unmount_files(const struct target *t, const struct node_opts *o,
			const struct node_file *f, size_t n, struct node_files_result *ret,
			struct dg_error *err);

/*
 * Removes the n nodes from the /dev of target t where they still carry
 * their numbers; anything else at those paths is left alone. res[i] says
 * what happened to nodes[i] (NODE_REMOVED, NODE_ABSENT, NODE_CONFLICT,
 * ...). 0, or -errno with err set.
 */
int nodes_remove(const struct target *t, const struct node_opts *opts, const struct dg_node *nodes,
		 size_t n, struct node_result *res, struct dg_error *err);

#endif
