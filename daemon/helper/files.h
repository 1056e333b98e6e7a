/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node helper's driver files jobs: the host's files mounted read-only
 * into a container at their paths, and taken off again with the
 * directories made for them (files.c). The entries of a job and what
 * became of each, shared with devgated through helper.h. Nothing but
 * libc: it is built into the static devgated-node too.
 */
#ifndef DEVGATE_HELPER_FILES_H
#define DEVGATE_HELPER_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

/* What a files job did, in the helper's reply: a result per entry, the directories made. */
struct files_reply {
	struct file_result res[HELPER_MAX_FILES];
	uint32_t n_dirs;
	struct helper_dir dirs[HELPER_MAX_DIRS];
};

/* What files_run needs of the job (helper.h) and of helper.c. */
struct files_params {
	bool mount; /* OP_MOUNT_FILES; otherwise OP_UNMOUNT_FILES */
	size_t n;   /* entries */
	uid_t fs_uid;
	gid_t fs_gid;
	uint64_t root_caps; /* struct helper_job's */
	bool walk;	    /* no openat2 (struct helper_job's no_openat2) */
	/* helper.c's path resolution below a root, and its capability drop. */
	int (*in_root)(int dirfd, const char *path, uint64_t resolve, bool walk);
	int (*drop_caps)(uint64_t keep, uint64_t *ret);
};

/*
 * Runs a files job on the entries below root, once the helper is in the
 * container's mount namespace; trees are a mount job's detached mounts,
 * one per entry. Each entry's outcome goes to out, and the capabilities it
 * worked with to *caps. Returns 0; -EIO when a mount failed (all or
 * nothing: what the job made is taken off again); or -errno when it could
 * not start (nothing done).
 */
int files_run(int root, const struct files_params *p, const struct helper_file *files,
	      const int *trees, struct files_reply *out, uint64_t *caps);

#endif
