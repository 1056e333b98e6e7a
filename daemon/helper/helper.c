// SPDX-License-Identifier: Apache-2.0
/*
 * The node helper's work: in a single-use child, confined by its seccomp
 * filter (syscalls.h), it receives one job from devgated, enters the
 * container's mount namespace, drops the capabilities it does not need,
 * makes or removes device nodes in the container's /dev (or mounts driver
 * files), and sends back what happened. Every path below the container's
 * root belongs to the container, so it never follows a symlink there and
 * acts only through descriptors. It must use libc alone (no allocation, no
 * logging): it is built into the static devgated-node too, and any call it
 * adds must be added to syscalls.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fdpass.h"
#include "helper.h"

/*
 * Opens directory path below dirfd without openat2 (before Linux 5.6, or
 * filtered out): one component at a time, O_PATH|O_NOFOLLOW|O_DIRECTORY,
 * so a symlink or a file anywhere on the way fails (ENOTDIR) and ".."
 * never climbs out. Stricter than RESOLVE_IN_ROOT: no symlink is followed
 * at all. Returns the descriptor, or -errno.
 */
static int walk_in_root(int dirfd, const char *path)
{
	int cur = -1;

	while (*path) {
		char comp[NAME_MAX + 1];
		size_t len = strcspn(path, "/");
		int next;

		if (len == 0 || (len == 1 && path[0] == '.')) {
			path += len + (path[len] == '/');
			continue;
		}
		if (len > NAME_MAX || (len == 2 && path[0] == '.' && path[1] == '.')) {
			if (cur >= 0)
				close(cur);
			return len > NAME_MAX ? -ENAMETOOLONG : -EXDEV;
		}
		memcpy(comp, path, len);
		comp[len] = '\0';
		next = openat(cur >= 0 ? cur : dirfd, comp,
			      O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
		if (cur >= 0)
			close(cur);
		if (next < 0)
			return -errno;
		cur = next;
		path += len + (path[len] == '/');
	}
	return cur >= 0 ? cur : openat(dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/*
 * Opens directory path below dirfd as if dirfd were "/" (RESOLVE_IN_ROOT,
 * plus the resolve flags given); with walk, or where openat2 is missing,
 * by walk_in_root(). Returns an O_PATH descriptor, or -errno.
 */
static int in_root(int dirfd, const char *path, uint64_t resolve, bool walk)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = resolve | RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd = walk ? -1 : syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	if (walk || (fd < 0 && errno == ENOSYS))
		return walk_in_root(dirfd, path);
	return fd < 0 ? -errno : (int)fd;
}

/*
 * With on, makes files as the ids the container's user namespace maps
 * (setfsuid/setfsgid): its /dev refuses inodes whose owner it cannot
 * represent (EOVERFLOW for root). Without, back to root.
 */
static void as_owner(const struct helper_job *o, bool on)
{
	(void)setfsgid(on ? o->fs_gid : 0);
	(void)setfsuid(on ? o->fs_uid : 0);
}

/* Creates an empty file name in devfd, as the mapped ids, to mount on. 0, or -errno. */
static int mount_point(int devfd, const char *name, const struct helper_job *o)
{
	int fd, e;

	as_owner(o, true);
	fd = openat(devfd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0);
	e = errno;
	as_owner(o, false);
	if (fd < 0)
		return -e;
	close(fd);
	return 0;
}

/*
 * Puts devgated's node (the detached mount tree) at name in devfd, on a
 * file made for it: a node made in a user-namespaced container's /dev
 * could not be opened. 0, or -errno (and the file is gone again).
 */
static int bind_node(int devfd, const char *name, const struct helper_job *o, int tree)
{
	int r = mount_point(devfd, name, o);

	if (r < 0)
		return r;
	/* No MOVE_MOUNT_T_SYMLINKS: a symlink swapped in is not followed. */
	if (syscall(SYS_move_mount, tree, "", devfd, name, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		r = -errno;
		(void)unlinkat(devfd, name, 0);
		return r;
	}
	return 0;
}

/*
 * Returns the directory node goes in, and in *base its name there: devfd
 * itself, or for "dri/NAME" /dev/dri (and "nvidia-caps/NAME"
 * /dev/nvidia-caps), made first when create. That directory is never
 * reached through a symlink (the container owns it) and must be on /dev's
 * own file system: a mount there (the host's /dev/dri bound in) is refused
 * with -EXDEV, so a revoke never unlinks a host node. Close the result
 * (dir_close) only when it is not devfd. -errno on failure.
 */
static int node_dir(int devfd, const struct dg_node *node, const struct helper_job *o, bool create,
		    const char **base)
{
	const char *slash = strchr(node->name, '/');
	char dir[sizeof(node->name)];
	struct stat dev_st, dir_st;
	int fd;

	*base = slash ? slash + 1 : node->name;
	if (!slash)
		return devfd;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - node->name), node->name);
	if (create) {
		as_owner(o, true);
		fd = mkdirat(devfd, dir, 0755) < 0 && errno != EEXIST ? -errno : 0;
		as_owner(o, false);
		if (fd < 0)
			return fd;
	}
	fd = openat(devfd, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(devfd, &dev_st) < 0 || fstat(fd, &dir_st) < 0 || dev_st.st_dev != dir_st.st_dev) {
		close(fd);
		return -EXDEV;
	}
	return fd;
}

/* Closes a directory node_dir() opened, leaving devfd itself open. */
static void dir_close(int fd, int devfd)
{
	if (fd >= 0 && fd != devfd)
		close(fd);
}

static void inspect_in(int devfd, const char *name, const struct dg_node *node,
		       struct node_result *res);

/* S_IFBLK or S_IFCHR, as the node is. */
static mode_t node_type(const struct dg_node *node)
{
	return node->block ? S_IFBLK : S_IFCHR;
}

/*
 * node_dir() for a node that should exist: a missing directory means a
 * missing node (NODE_ABSENT in res), any other failure NODE_FAILED.
 */
static int existing_dir(int devfd, const struct dg_node *node, const char **name,
			struct node_result *res)
{
	int dfd = node_dir(devfd, node, NULL, false, name);

	if (dfd < 0) {
		res->status = dfd == -ENOENT ? NODE_ABSENT : NODE_FAILED;
		res->err = dfd == -ENOENT ? 0 : -dfd;
	}
	return dfd;
}

/* Says in res what node's path holds now (see inspect_in). */
static void inspect(int devfd, const struct dg_node *node, struct node_result *res)
{
	const char *name;
	int dfd = existing_dir(devfd, node, &name, res);

	if (dfd < 0)
		return;
	inspect_in(dfd, name, node, res);
	dir_close(dfd, devfd);
}

/*
 * Says in res what name in devfd holds now: NODE_ABSENT, NODE_PRESENT (the
 * node with its numbers), NODE_CONFLICT (anything else, described), or
 * NODE_FAILED.
 */
static void inspect_in(int devfd, const char *name, const struct dg_node *node,
		       struct node_result *res)
{
	struct stat st;

	if (fstatat(devfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		res->status = errno == ENOENT ? NODE_ABSENT : NODE_FAILED;
		res->err = errno == ENOENT ? 0 : errno;
		return;
	}
	if ((st.st_mode & S_IFMT) == node_type(node) && major(st.st_rdev) == node->major &&
	    minor(st.st_rdev) == node->minor) {
		res->status = NODE_PRESENT;
		return;
	}
	res->status = NODE_CONFLICT;
	res->mode = st.st_mode;
	res->major = S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? major(st.st_rdev) : 0;
	res->minor = S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? minor(st.st_rdev) : 0;
}

/*
 * Puts node at name in devfd: a bind mount of devgated's node (tree) in
 * bind mode, else a node made here with the job's mode and owner. 0, or
 * -errno.
 */
static int place_node(int devfd, const char *name, const struct dg_node *node,
		      const struct helper_job *o, int tree)
{
	if (o->bind)
		return bind_node(devfd, name, o, tree);
	if (mknodat(devfd, name, node_type(node) | o->mode, makedev(node->major, node->minor)) < 0)
		return -errno;
	if ((o->uid || o->gid) && fchownat(devfd, name, o->uid, o->gid, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

/*
 * Makes node at name in devfd and checks what the path holds afterwards
 * (the container may have swapped it). res: NODE_CREATED; what is there
 * when something got there first; or NODE_FAILED.
 */
static void make_in(int devfd, const char *name, const struct dg_node *node,
		    const struct helper_job *o, int tree, struct node_result *res)
{
	struct stat st;
	int r = place_node(devfd, name, node, o, tree);

	if (r < 0) {
		if (r == -EEXIST) { /* raced with the container: judge what is there */
			inspect_in(devfd, name, node, res);
			return;
		}
		res->status = NODE_FAILED;
		res->err = -r;
		return;
	}
	res->status = NODE_CREATED;
	/* Check what the path holds now; the container may have swapped it. */
	if (fstatat(devfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    (st.st_mode & S_IFMT) != node_type(node) ||
	    st.st_rdev != makedev(node->major, node->minor) || (st.st_mode & 07777) != o->mode) {
		res->status = NODE_FAILED;
		res->err = EIO;
	}
}

/* Makes one node, in its directory (made when missing); the outcome in res. */
static void make_one(int devfd, const struct dg_node *node, const struct helper_job *o, int tree,
		     struct node_result *res)
{
	const char *name;
	int dfd = node_dir(devfd, node, o, true, &name);

	if (dfd < 0) {
		res->status = NODE_FAILED;
		res->err = -dfd;
		return;
	}
	make_in(dfd, name, node, o, tree, res);
	dir_close(dfd, devfd);
}

/*
 * Takes a bound node off name in devfd, before its file goes. umount2
 * takes a path, so it is resolved from devfd as the working directory: one
 * component, not followed if a symlink. Not a mount is fine. 0, or -errno.
 */
static int unbind_node(int devfd, const char *name)
{
	if (fchdir(devfd) < 0)
		return -errno;
	if (umount2(name, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL)
		return -errno;
	return 0;
}

/*
 * Removes one node if its path still holds it (unmounting it first in
 * bind mode); anything else there is left alone. The outcome in res.
 */
static void unmake_one(int devfd, const struct dg_node *node, const struct helper_job *o,
		       struct node_result *res)
{
	const char *name;
	int dfd = existing_dir(devfd, node, &name, res);
	int r;

	if (dfd < 0)
		return;
	inspect_in(dfd, name, node, res);
	r = res->status == NODE_PRESENT && o->bind ? unbind_node(dfd, name) : 0;
	if (r < 0) {
		res->status = NODE_FAILED;
		res->err = -r;
		/* unlinkat never follows: at worst it removes what was swapped in. */
	} else if (res->status == NODE_PRESENT && unlinkat(dfd, name, 0) < 0) {
		res->status = errno == ENOENT ? NODE_ABSENT : NODE_FAILED;
		res->err = errno == ENOENT ? 0 : errno;
	} else if (res->status == NODE_PRESENT) {
		res->status = NODE_REMOVED;
	}
	dir_close(dfd, devfd);
}

/*
 * Makes the n nodes that are missing. All or nothing: first every path is
 * inspected, and if any is held by something else nothing is made
 * (-EEXIST). -EIO when a node fails half-way (the caller undoes the rest).
 */
static int create_all(int devfd, const struct helper_job *o, const struct dg_node *nodes, size_t n,
		      const int *trees, struct node_result *res)
{
	bool blocked = false;

	for (size_t i = 0; i < n; i++) {
		inspect(devfd, &nodes[i], &res[i]);
		if (res[i].status == NODE_CONFLICT || res[i].status == NODE_FAILED)
			blocked = true;
	}
	if (blocked) {
		for (size_t i = 0; i < n; i++) {
			if (res[i].status == NODE_ABSENT || res[i].status == NODE_PRESENT)
				res[i].status = NODE_UNTOUCHED;
		}
		return -EEXIST;
	}
	for (size_t i = 0; i < n; i++) {
		if (res[i].status != NODE_ABSENT)
			continue;
		make_one(devfd, &nodes[i], o, o->bind ? trees[i] : -1, &res[i]);
		if (res[i].status == NODE_CONFLICT || res[i].status == NODE_FAILED)
			return -EIO;
	}
	return 0;
}

/* Removes the nodes this job made, and marks them untouched. */
static void undo_created(int devfd, const struct helper_job *o, const struct dg_node *nodes,
			 size_t n, struct node_result *res)
{
	for (size_t i = 0; i < n; i++) {
		struct node_result tmp = { 0 };

		if (res[i].status != NODE_CREATED)
			continue;
		unmake_one(devfd, &nodes[i], o, &tmp);
		res[i].status = NODE_UNTOUCHED;
	}
}

/* ---- driver files: the host's, mounted read-only at the same paths ---- */

/*
 * Every write below is made as the container's own root would make it
 * (files_identity), only on the mount the container's root is on
 * (files_dir: no volume, no other mount on the way), and every mount is
 * one devgated marked unbindable: the kernel refuses to attach it below a
 * shared mount (its copies could not be made) and refuses to clone it, so
 * it never propagates out of the container, and devgate knows its own
 * mounts again by that mark.
 */

/* The capabilities that pass file permissions: kept only if the container's root has them. */
#define HELPER_DAC_CAPS \
	((1ULL << CAP_DAC_OVERRIDE) | (1ULL << CAP_DAC_READ_SEARCH) | (1ULL << CAP_FOWNER))

static int drop_caps(uint64_t keep, uint64_t *ret);

/* What a files job works with. */
struct files_ctx {
	int root;	   /* the container's root */
	uint64_t root_mnt; /* the id of its mount */
	const struct helper_job *job;
	const struct helper_file *files;
	struct helper_msg *msg;
};

/*
 * From here on acts as the container's root: its ids (fs_uid, fs_gid), no
 * supplementary group, and of the capabilities that pass file permissions
 * only those it has (root_caps). CAP_SYS_ADMIN stays, for the mounts.
 * Reports the capabilities left in *caps. 0, or -errno.
 */
static int files_identity(const struct helper_job *job, uint64_t *caps)
{
	if (setgroups(0, NULL) < 0)
		return -errno;
	(void)setfsgid(job->fs_gid);
	(void)setfsuid(job->fs_uid);
	/* Both return the ids before the call: asked again, they tell whether it took. */
	if ((uid_t)setfsuid(job->fs_uid) != job->fs_uid ||
	    (gid_t)setfsgid(job->fs_gid) != job->fs_gid)
		return -EPERM;
	return drop_caps((1ULL << CAP_SYS_ADMIN) | (job->root_caps & HELPER_DAC_CAPS), caps);
}

/* Sets *ret to the id of the mount name in dirfd is on (statx). 0, or -errno. */
static int mount_id(int dirfd, const char *name, int flags, uint64_t *ret)
{
	struct statx sx;

	if (statx(dirfd, name, flags, STATX_MNT_ID, &sx) < 0)
		return -errno;
	if (!(sx.stx_mask & STATX_MNT_ID))
		return -ENOSYS; /* before Linux 5.8 */
	*ret = sx.stx_mnt_id;
	return 0;
}

/*
 * Splits "/usr/lib/x" into dir "usr/lib" and *base "x" ("/x": dir ".").
 * False for a relative path, one ending in a slash, or a dir too long for
 * len.
 */
static bool split_path(const char *path, char *dir, size_t len, const char **base)
{
	const char *slash = strrchr(path, '/');
	size_t n;

	if (path[0] != '/' || !slash[1])
		return false;
	n = slash == path ? 1 : (size_t)(slash - path) - 1;
	if (n >= len)
		return false;
	memcpy(dir, slash == path ? "." : path + 1, n);
	dir[n] = '\0';
	*base = slash + 1;
	return true;
}

/*
 * Opens directory path below the container's root, following symlinks
 * inside the root only (images link /lib to usr/lib), and only on the
 * root's own mount: a path that reaches any other mount (a volume, a host
 * directory bound in) is -EXDEV. RESOLVE_NO_XDEV stops the walk at the
 * first mount; the mount id checks the end, also of a walk without
 * openat2. Returns the descriptor, or -errno.
 */
static int files_open_dir(const struct files_ctx *c, const char *path)
{
	int fd = in_root(c->root, path, RESOLVE_NO_XDEV, c->job->no_openat2);
	uint64_t mnt;
	int r;

	if (fd < 0)
		return fd;
	r = mount_id(fd, "", AT_EMPTY_PATH, &mnt);
	if (r == 0 && mnt != c->root_mnt)
		r = -EXDEV;
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

/*
 * Makes directory path (its parent exists), and notes it in the reply as
 * made for entry i, the first len bytes of its path. 0, -EEXIST when
 * something got there first, or -errno.
 */
static int files_mkdir(const struct files_ctx *c, char *path, size_t i, size_t len)
{
	char *slash = strrchr(path, '/');
	struct helper_msg *msg = c->msg;
	struct stat st;
	int parent, r = 0;

	if (msg->n_dirs == HELPER_MAX_DIRS)
		return -E2BIG;
	if (slash)
		*slash = '\0';
	parent = files_open_dir(c, slash ? path : ".");
	if (slash)
		*slash = '/';
	if (parent < 0)
		return parent;
	if (mkdirat(parent, slash ? slash + 1 : path, 0755) < 0)
		r = -errno;
	else if (fstatat(parent, slash ? slash + 1 : path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		r = -errno;
	else
		msg->dirs[msg->n_dirs++] = (struct helper_dir){ .file = (uint32_t)i,
								.len = (uint32_t)len,
								.ino = st.st_ino };
	close(parent);
	return r;
}

/*
 * Opens the directory dir (below the root) entry i goes in, making the
 * parts that are missing. Returns the descriptor, or -errno with the step
 * and the directory's length in res.
 */
static int files_dir(const struct files_ctx *c, const char *dir, size_t i, struct file_result *res)
{
	char part[HELPER_PATH_MAX];
	size_t len = strlen(dir);

	for (size_t end = 1; end <= len; end++) {
		int fd;

		if (dir[end] != '/' && dir[end] != '\0')
			continue;
		memcpy(part, dir, end);
		part[end] = '\0';
		/* The length in the entry's path, which has a leading slash. */
		res->at = (uint16_t)(end + 1);
		res->step = FSTEP_WALK;
		fd = files_open_dir(c, part);
		if (fd >= 0) {
			close(fd);
			continue;
		}
		if (fd != -ENOENT)
			return fd;
		res->step = FSTEP_MKDIR;
		fd = files_mkdir(c, part, i, end + 1);
		if (fd < 0 && fd != -EEXIST)
			return fd;
	}
	res->step = FSTEP_WALK;
	return files_open_dir(c, dir);
}

/*
 * Whether name in dirfd is a mount of devgate's: the root of a mount (a
 * symlink is never followed) of a regular file, the host file dev/ino
 * when ino is not 0, and with marked unbindable, as devgated makes its
 * mounts (open_tree cannot clone it). 1, 0, or -errno.
 */
static int devgate_mount(int dirfd, const char *name, uint64_t dev, uint64_t ino, bool marked)
{
	struct statx sx;
	int fd;

	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_INO, &sx) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!(sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return -ENOSYS; /* before Linux 5.8 */
	if (!(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) || !S_ISREG(sx.stx_mode))
		return 0;
	if (ino && (sx.stx_ino != ino || makedev(sx.stx_dev_major, sx.stx_dev_minor) != dev))
		return 0;
	if (!marked)
		return 1;
	fd = (int)syscall(SYS_open_tree, dirfd, name,
			  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno == EINVAL ? 1 : -errno;
}

/* Sets res to a failure of step with errno e (a positive errno). */
static void file_failed(struct file_result *res, int step, int e)
{
	res->status = FILE_FAILED;
	res->step = (uint16_t)step;
	res->err = e;
}

/*
 * Takes devgate's mount off name in dirfd (umount2 takes a path: from
 * dirfd as the working directory, one component, not followed), then
 * removes the file it was on if that is the empty file devgate made:
 * anything else found there stays. 0, or -errno.
 */
static int unmount_at(int dirfd, const char *name)
{
	struct statx sx;

	if (fchdir(dirfd) < 0 || umount2(name, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
		return -errno;
	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_SIZE, &sx) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISREG(sx.stx_mode) || sx.stx_size || (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return 0;
	return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
}

/*
 * Moves the host's file (the detached mount tree) onto the empty file name
 * in dirfd, and checks that it kept its mark: FILE_MOUNTED, or FILE_FAILED
 * with name as it was before (the file removed) in res.
 */
static void attach(int dirfd, const char *name, int tree, struct file_result *res)
{
	int fd;

	if (syscall(SYS_move_mount, tree, "", dirfd, name, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		/* EINVAL: an unbindable mount below a shared one (see above). */
		file_failed(res, errno == EINVAL ? FSTEP_SHARED : FSTEP_MOUNT, errno);
		(void)unlinkat(dirfd, name, 0);
		return;
	}
	fd = (int)syscall(SYS_open_tree, tree, "",
			  AT_EMPTY_PATH | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0 && errno == EINVAL) {
		res->status = FILE_MOUNTED;
		return;
	}
	/* It can be cloned: below a shared mount it lost its mark (older kernels). */
	file_failed(res, FSTEP_SHARED, fd >= 0 ? EINVAL : errno);
	if (fd >= 0)
		close(fd);
	(void)unmount_at(dirfd, name);
}

/*
 * Mounts the host's file (the detached mount tree) at entry i's path, on
 * an empty file made for it. Where something is there already it is
 * devgate's mount of this very file (adopted) or the image's own (left
 * alone). The outcome in res.
 */
static void mount_one(const struct files_ctx *c, size_t i, int tree, struct file_result *res)
{
	const struct helper_file *f = &c->files[i];
	char dir[HELPER_PATH_MAX];
	const char *base;
	int dfd, fd, r;

	if (!split_path(f->path, dir, sizeof(dir), &base)) {
		file_failed(res, FSTEP_PATH, EINVAL);
		return;
	}
	dfd = files_dir(c, dir, i, res);
	if (dfd < 0) {
		file_failed(res, res->step, -dfd);
		return;
	}
	fd = openat(dfd, base, O_CREAT | O_EXCL | O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0 && errno == EEXIST) {
		r = devgate_mount(dfd, base, f->dev, f->ino, true);
		if (r < 0)
			file_failed(res, FSTEP_FILE, -r);
		else
			res->status = r ? FILE_ADOPTED : FILE_IMAGE;
	} else if (fd < 0) {
		file_failed(res, FSTEP_FILE, errno);
	} else {
		close(fd);
		attach(dfd, base, tree, res);
	}
	close(dfd);
}

/*
 * Takes devgate's mount off entry f's path and removes the file under it;
 * a path that holds no mount of devgate's (see devgate_mount) is left
 * alone. The outcome in res.
 */
static void unmount_one(const struct files_ctx *c, const struct helper_file *f,
			struct file_result *res)
{
	char dir[HELPER_PATH_MAX];
	const char *base;
	int dfd, r;

	if (!split_path(f->path, dir, sizeof(dir), &base)) {
		file_failed(res, FSTEP_PATH, EINVAL);
		return;
	}
	dfd = files_open_dir(c, dir);
	if (dfd < 0) {
		res->status = FILE_ABSENT; /* gone, or no longer where devgate mounted it */
		return;
	}
	r = devgate_mount(dfd, base, f->dev, f->ino, f->flags & HELPER_MARKED);
	if (r == 0)
		res->status = FILE_ABSENT;
	else if (r > 0 && (r = unmount_at(dfd, base)) == 0)
		res->status = FILE_REMOVED;
	if (r < 0)
		file_failed(res, FSTEP_UNMOUNT, -r);
	close(dfd);
}

/*
 * Removes the directory devgate made at entry f's path if it is still
 * that directory (its inode) and empty; otherwise it stays. The outcome
 * in res.
 */
static void rmdir_one(const struct files_ctx *c, const struct helper_file *f,
		      struct file_result *res)
{
	char dir[HELPER_PATH_MAX];
	const char *base;
	struct statx sx;
	int dfd;

	if (!split_path(f->path, dir, sizeof(dir), &base)) {
		file_failed(res, FSTEP_PATH, EINVAL);
		return;
	}
	dfd = files_open_dir(c, dir);
	if (dfd < 0 || statx(dfd, base, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_INO, &sx) < 0) {
		res->status = FILE_ABSENT;
	} else if (!S_ISDIR(sx.stx_mode) || sx.stx_ino != f->ino ||
		   (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
		res->status = FILE_KEPT;
	} else if (unlinkat(dfd, base, AT_REMOVEDIR) == 0) {
		res->status = FILE_REMOVED;
	} else if (errno == ENOTEMPTY || errno == EEXIST || errno == EBUSY) {
		res->status = FILE_KEPT;
	} else {
		file_failed(res, FSTEP_UNMOUNT, errno);
	}
	if (dfd >= 0)
		close(dfd);
}

/* Takes off what a failed mount job made: its mounts, then its directories, deepest first. */
static void files_undo(const struct files_ctx *c, size_t n)
{
	struct helper_msg *msg = c->msg;
	struct file_result tmp;

	while (n-- > 0) {
		struct helper_file f = c->files[n];

		if (msg->files[n].status == FILE_MOUNTED) {
			f.flags = HELPER_MARKED;
			unmount_one(c, &f, &tmp);
		}
		if (msg->files[n].status != FILE_FAILED)
			msg->files[n].status = FILE_UNTOUCHED;
	}
	while (msg->n_dirs > 0) {
		const struct helper_dir *d = &msg->dirs[--msg->n_dirs];
		struct helper_file f = { .kind = HELPER_DIR, .ino = d->ino };

		memcpy(f.path, c->files[d->file].path, d->len);
		f.path[d->len] = '\0';
		rmdir_one(c, &f, &tmp);
	}
}

/*
 * Runs a driver files job, each entry's outcome in msg. Mounting is all or
 * nothing: a failure takes off what this job made (STAGE_FILES).
 */
static void files_run(int root, const struct helper_job *job, const struct helper_file *files,
		      const int *trees, struct helper_msg *msg)
{
	struct files_ctx c = { .root = root, .job = job, .files = files, .msg = msg };
	int r = files_identity(job, &msg->caps);
	size_t i;

	if (r == 0)
		r = mount_id(root, "", AT_EMPTY_PATH, &c.root_mnt);
	if (r < 0) {
		msg->stage = STAGE_FILES;
		msg->err = -r;
		return;
	}
	for (i = 0; i < job->n_files; i++) {
		struct file_result *res = &msg->files[i];

		if (job->op == OP_UNMOUNT_FILES) {
			if (files[i].kind == HELPER_DIR)
				rmdir_one(&c, &files[i], res);
			else
				unmount_one(&c, &files[i], res);
			continue;
		}
		mount_one(&c, i, trees[i], res);
		if (res->status == FILE_FAILED)
			break;
	}
	if (job->op == OP_UNMOUNT_FILES || i == job->n_files)
		return;
	files_undo(&c, i + 1);
	msg->stage = STAGE_FILES;
	msg->err = EIO;
}

/*
 * What the helper keeps once it is inside the container's mount namespace:
 * enough to make, own and remove nodes, nothing more (no CAP_SYS_ADMIN:
 * the namespace is joined already). capset only lowers what it holds.
 */
#define HELPER_CAPS                                                         \
	((1ULL << CAP_MKNOD) | (1ULL << CAP_CHOWN) | (1ULL << CAP_FOWNER) | \
	 (1ULL << CAP_DAC_OVERRIDE) | (1ULL << CAP_DAC_READ_SEARCH))
/* Bind-mounted nodes: mount and unmount, and file ids the container maps. */
#define HELPER_BIND_CAPS \
	(HELPER_CAPS | (1ULL << CAP_SYS_ADMIN) | (1ULL << CAP_SETUID) | (1ULL << CAP_SETGID))

/*
 * Lowers the effective and permitted capabilities to keep (none
 * inheritable) and returns in *ret the effective ones it then has. 0, or
 * -errno.
 */
static int drop_caps(uint64_t keep, uint64_t *ret)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { { 0 } };

	if (syscall(SYS_capget, &h, d) < 0)
		return -errno;
	for (int i = 0; i < 2; i++) {
		uint32_t k = (uint32_t)(keep >> (32 * i));

		d[i].effective &= k;
		d[i].permitted &= k;
		d[i].inheritable = 0;
	}
	if (syscall(SYS_capset, &h, d) < 0 || syscall(SYS_capget, &h, d) < 0)
		return -errno;
	*ret = d[0].effective | ((uint64_t)d[1].effective << 32);
	return 0;
}

/* Whether the job is about driver files rather than nodes. */
static bool files_op(const struct helper_job *job)
{
	return job->op == OP_MOUNT_FILES || job->op == OP_UNMOUNT_FILES;
}

/*
 * Does the job, in order: enters the container's mount namespace, drops
 * capabilities, opens the root (checking it is the expected one) and its
 * dev, refuses the host's own /dev, then makes or removes nodes or
 * mounts files. msg says how far it got (stage) and what happened.
 */
static void helper_run(const struct helper_job *job, const struct helper_file *files, int pidfd,
		       int rootfd, const int *trees, struct helper_msg *msg)
{
	int root = rootfd, devfd;
	struct stat st;

	if (job->enter && setns(pidfd, CLONE_NEWNS) < 0) {
		msg->stage = STAGE_SETNS;
		msg->err = errno;
		return;
	}
	if (drop_caps(job->bind || job->op >= OP_MOUNT_FILES ? HELPER_BIND_CAPS : HELPER_CAPS,
		      &msg->caps) < 0) {
		msg->stage = STAGE_CAPS;
		msg->err = errno;
		return;
	}
	umask(0);
	if (job->root_path[0]) {
		root = in_root(rootfd, job->root_path, 0, job->no_openat2);
		if (root < 0) {
			msg->stage = STAGE_ROOT;
			msg->err = -root;
			return;
		}
		/* Another container may have made the same path inside itself. */
		if (job->check_root && (fstat(root, &st) < 0 || st.st_dev != job->root_dev ||
					st.st_ino != job->root_ino)) {
			msg->stage = STAGE_ROOT_ID;
			msg->err = EXDEV;
			return;
		}
	}
	devfd = in_root(root, "dev", RESOLVE_NO_SYMLINKS, job->no_openat2);
	if (devfd < 0) {
		msg->stage = STAGE_DEV;
		msg->err = -devfd;
		return;
	}
	/* Never touch the host's own /dev, whoever shares it. */
	if (fstat(devfd, &st) < 0 || st.st_dev == job->host_dev) {
		msg->stage = STAGE_HOST_DEV;
		msg->err = EXDEV;
		return;
	}
	if (files_op(job)) {
		files_run(root, job, files, trees, msg);
		return;
	}
	if (job->op == OP_REMOVE) {
		for (size_t i = 0; i < job->n; i++)
			unmake_one(devfd, &job->nodes[i], job, &msg->res[i]);
		return;
	}
	if (create_all(devfd, job, job->nodes, job->n, trees, msg->res) == -EIO)
		undo_created(devfd, job, job->nodes, job->n, msg->res);
}

_Static_assert(FDPASS_MAX >= 2 + DG_MAX_NODES && FDPASS_MAX >= 2 + HELPER_MAX_FILES,
	       "a job's descriptors fit one message");

/*
 * How many descriptors a job comes with: the pidfd, the root, and a mount
 * per node to bind or file to mount.
 */
static size_t job_fds(const struct helper_job *job)
{
	if (job->op == OP_MOUNT_FILES)
		return 2 + job->n_files;
	return 2 + (job->bind && job->op == OP_CREATE ? job->n : 0);
}

/*
 * Receives the job, its descriptors and a files job's paths. False when
 * devgated hung up or sent something malformed.
 */
static bool spare_receive(int sock, struct helper_job *job, struct helper_file *files,
			  int fds[FDPASS_MAX])
{
	int none[FDPASS_MAX];
	int n = fds_recv(sock, job, sizeof(*job), fds);
	size_t len;

	if (n < 2 || job->n > DG_MAX_NODES || job->n_files > HELPER_MAX_FILES ||
	    (job->n_files && !files_op(job)) || (size_t)n != job_fds(job))
		return false;
	/* recvmsg, as the job came: the filter allows no read. No descriptors with it. */
	len = job->n_files * sizeof(*files);
	if (len && fds_recv(sock, files, len, none) != 0)
		return false;
	for (size_t i = 0; i < job->n_files; i++)
		files[i].path[HELPER_PATH_MAX - 1] = '\0';
	job->root_path[sizeof(job->root_path) - 1] = '\0';
	return true;
}

void helper_main(int sock, const struct sock_fprog *filter)
{
	static struct helper_file files[HELPER_MAX_FILES];
	struct helper_job job;
	struct helper_msg msg = { 0 };
	int fds[FDPASS_MAX], devnull, confined;

	/* Keep nothing of the daemon's: not its sockets, maps or log. */
	if (dup2(sock, 3) < 0)
		_exit(1);
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(devnull, 2) < 0)
		_exit(1);
	close_range(4, ~0U, 0);
	(void)prctl(PR_SET_NAME, "devgated-node", 0, 0, 0);
	confined = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
		   syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, filter) == 0;
	if (!confined)
		msg.err = errno;
	if (!spare_receive(3, &job, files, fds))
		_exit(0);
	if (confined)
		helper_run(&job, files, fds[0], fds[1], fds + 2, &msg);
	else
		msg.stage = STAGE_SECCOMP;
	if (write(3, &msg, sizeof(msg)) != (ssize_t)sizeof(msg))
		_exit(2);
	_exit(0);
}
