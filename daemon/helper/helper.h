/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node helper itself: the code that runs in a forked, single-use child
 * inside the container's mount namespace, and the messages it exchanges
 * with devgated. Built into devgated (helpers it forks itself) and into
 * devgated-node, the small static zygote devgated starts (zygote.h). No
 * allocation, no logging, nothing but libc.
 */
#ifndef DEVGATE_HELPER_H
#define DEVGATE_HELPER_H

#include <linux/filter.h>
#include <stdint.h>
#include <sys/types.h>

#include "files.h"
#include "gpu.h"

enum node_status {
	NODE_UNTOUCHED = 0,
	NODE_CREATED,  /* made by this call */
	NODE_PRESENT,  /* already there with the right numbers */
	NODE_REMOVED,  /* unlinked by this call */
	NODE_ABSENT,   /* nothing there to remove */
	NODE_CONFLICT, /* something else occupies the path */
	NODE_FAILED,   /* a syscall failed; see err */
};

struct node_result {
	int status;
	int err;	    /* errno for NODE_FAILED */
	unsigned int mode;  /* NODE_CONFLICT: st_mode found */
	unsigned int major; /* NODE_CONFLICT: numbers found */
	unsigned int minor;
};

enum helper_op {
	OP_CREATE,
	OP_REMOVE,
	OP_MOUNT_FILES,	 /* bind the host's files (one mount each) read-only at their paths */
	OP_UNMOUNT_FILES /* take them off again, and the files made to mount on */
};

enum helper_stage {
	STAGE_OK = 0,
	STAGE_SECCOMP,
	STAGE_SETNS,
	STAGE_CAPS,
	STAGE_ROOT,
	STAGE_ROOT_ID,
	STAGE_DEV,
	STAGE_HOST_DEV,
	STAGE_NODES,
	STAGE_FILES, /* a driver file could not be mounted (none is), or no files job could start */
	STAGE_DEV_SHARED, /* devgated refused the /dev the helper opened (helper_probe) */
};

struct helper_msg {
	int stage;
	int err;
	uint64_t caps; /* the effective capabilities it worked with */
	struct node_result res[DG_MAX_NODES];
	struct files_reply files; /* OP_*_FILES */
};

/*
 * Before a node job makes or removes anything, the helper tells devgated
 * which file system the /dev it opened is on, in a message of this size
 * (a helper_msg is far larger) that carries that directory's O_PATH
 * descriptor too (devgated may keep it: daemon/node/devcache.h), and goes
 * on only when devgated answers with
 * the one byte HELPER_GO. devgated refuses a /dev that its own mount
 * namespace has mounted too (a host volume, or a mount that propagates),
 * which the helper, inside the container, cannot see.
 */
struct helper_probe {
	uint64_t dev;	 /* st_dev of the directory */
	int64_t fs_type; /* statfs's f_type */
};
#define HELPER_GO 'y'

/*
 * What the daemon asks of a helper; pidfd and rootfd travel as SCM_RIGHTS,
 * and with bind, one detached mount of each node after them.
 */
struct helper_job {
	int op;
	int enter; /* join the target's mount namespace */
	/*
	 * The target is in another user namespace: its /dev was mounted there,
	 * so a node made in it cannot be opened (and root cannot even create a
	 * file in it). Nodes are bind mounts of devgated's own, on files made
	 * as fs_uid/fs_gid, an owner the container's namespace maps.
	 */
	int bind;
	uid_t fs_uid;
	gid_t fs_gid;
	int no_openat2; /* tests: walk as on a kernel without openat2 */
	/*
	 * root_path must be root_dev/root_ino; a target whose own root is that
	 * directory (it has pivoted into it since) is served from its root.
	 */
	int check_root;
	dev_t root_dev;
	ino_t root_ino;
	dev_t host_dev;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	char root_path[4096]; /* "" for the target's own root */
	size_t n;
	struct dg_node nodes[DG_MAX_NODES];
	size_t n_files; /* OP_*_FILES: how many entries the second message holds */
	/*
	 * OP_*_FILES: of CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER,
	 * those the container's root has (its bounding set; none in another
	 * user namespace). Files and directories are made as that root
	 * (fs_uid, fs_gid) with these alone.
	 */
	uint64_t root_caps;
};

/*
 * devgated's first message to devgated-node: what its helpers inherit from
 * devgated when they are not forked from it.
 */
#define HELPER_FILTER_MAX 256
struct helper_setup {
	uint32_t job_size;	       /* sizeof(struct helper_job): both sides of one build */
	pid_t parent;		       /* devgated */
	uint64_t effective, permitted; /* devgated's capabilities */
	uint32_t filter_len;
	struct sock_filter filter[HELPER_FILTER_MAX];
};

/*
 * Makes (OP_CREATE, all or nothing) or removes (OP_REMOVE) the job's nodes
 * in the directory devfd, a /dev already opened and approved; trees are
 * the mounts to bind (job->bind). What happened to each in res. Used by
 * the helper, and by devgated itself on a /dev a helper handed it
 * (daemon/node/devcache.c), where only single names are worked on.
 */
void helper_nodes(int devfd, const struct helper_job *job, const int *trees,
		  struct node_result *res);

/* The spare's whole life on its end of sock: confine, one job, reply, exit. */
void helper_main(int sock, const struct sock_fprog *filter) __attribute__((noreturn));

#endif
