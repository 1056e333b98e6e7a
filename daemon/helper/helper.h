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

/* Driver files in one job: each library twice (its name and its soname), tools. */
#define HELPER_MAX_FILES 96
#define HELPER_PATH_MAX 160
/* Directories one mount job may make (usr, usr/lib, usr/lib/x86_64-linux-gnu, usr/bin, ...). */
#define HELPER_MAX_DIRS 32

/*
 * The entries of an OP_*_FILES job travel in a second message right after
 * the job: n_files struct helper_file. Node jobs, the hot path, do not
 * carry room for them.
 */
enum helper_file_kind {
	HELPER_MOUNT, /* a driver file: mounted at path, or taken off it */
	HELPER_DIR,   /* OP_UNMOUNT_FILES: a directory devgate made, removed if empty */
};

/* OP_UNMOUNT_FILES: only a mount devgate marked as its own (unbindable) comes off. */
#define HELPER_MARKED (1u << 0)

struct helper_file {
	char path[HELPER_PATH_MAX]; /* absolute, in the container */
	/*
	 * HELPER_MOUNT: the host file's device and inode. A mount job finds
	 * devgate's own mount of that file at path by them (left by a crash);
	 * an unmount job takes off only a mount of that file (ino 0: any file,
	 * for a path the lease recorded). HELPER_DIR: the directory's inode
	 * when devgate made it.
	 */
	uint64_t dev;
	uint64_t ino;
	uint32_t kind;
	uint32_t flags; /* HELPER_MARKED */
};

/* What became of an entry of a files job. */
enum file_status {
	FILE_UNTOUCHED = 0,
	FILE_MOUNTED, /* mounted by this job */
	FILE_ADOPTED, /* devgate's mount of this very file was there already */
	FILE_IMAGE,   /* the image has a file of its own there: left alone */
	FILE_REMOVED, /* taken off (and the file under it removed), or a directory removed */
	FILE_ABSENT,  /* nothing of devgate's is there */
	FILE_KEPT,    /* devgate's directory, not empty (or no longer devgate's) */
	FILE_FAILED,  /* a call failed at step: err */
};

/* Where an entry failed. */
enum file_step {
	FSTEP_PATH,    /* not an absolute path with a directory */
	FSTEP_WALK,    /* a directory on the way (the first at bytes of the path) */
	FSTEP_MKDIR,   /* making that directory */
	FSTEP_FILE,    /* making the file to mount on */
	FSTEP_MOUNT,   /* the mount itself */
	FSTEP_SHARED,  /* the directory's mount is shared: the mount would propagate */
	FSTEP_UNMOUNT, /* taking it off, or removing what it was on */
};

struct file_result {
	int32_t status; /* enum file_status */
	int32_t err;	/* errno, for FILE_FAILED */
	uint16_t step;	/* enum file_step, for FILE_FAILED */
	uint16_t at;	/* FSTEP_WALK, FSTEP_MKDIR: that directory is the path's first at bytes */
};

/* A directory a mount job made: the first len bytes of the path of its entry file. */
struct helper_dir {
	uint32_t file;
	uint32_t len;
	uint64_t ino;
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
};

struct helper_msg {
	int stage;
	int err;
	uint64_t caps; /* the effective capabilities it worked with */
	struct node_result res[DG_MAX_NODES];
	struct file_result files[HELPER_MAX_FILES]; /* OP_*_FILES: one per entry */
	uint32_t n_dirs;			    /* OP_MOUNT_FILES: the directories it made */
	struct helper_dir dirs[HELPER_MAX_DIRS];
};

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
	int check_root; /* root_path must be root_dev/root_ino */
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

/* The spare's whole life on its end of sock: confine, one job, reply, exit. */
void helper_main(int sock, const struct sock_fprog *filter) __attribute__((noreturn));

#endif
