// SPDX-License-Identifier: Apache-2.0
/*
 * The node helper's driver files jobs (see files.h): in the container's
 * mount namespace, with its root, it mounts the host's driver files
 * (detached mounts devgated made) read-only at their paths, making the
 * directories that are missing, or takes them off and removes those
 * directories again. It acts only through descriptors below the root,
 * never follows a symlink out of it, and must use libc alone (no
 * allocation, no logging): it is built into the static devgated-node too,
 * and any call it adds must be added to syscalls.h. It knows nothing of
 * the helper's jobs and replies beyond files.h: helper.c hands it what it
 * needs.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "files.h"

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

/* What a files job works with. */
struct files_ctx {
	int root;	   /* the container's root */
	uint64_t root_mnt; /* the id of its mount */
	const struct files_params *p;
	const struct helper_file *files;
	struct files_reply *out;
};

/*
 * From here on acts as the container's root: its ids (fs_uid, fs_gid), no
 * supplementary group, and of the capabilities that pass file permissions
 * only those it has (root_caps). CAP_SYS_ADMIN stays, for the mounts.
 * Reports the capabilities left in *caps. 0, or -errno.
 */
static int files_identity(const struct files_params *p, uint64_t *caps)
{
	if (setgroups(0, NULL) < 0)
		return -errno;
	(void)setfsgid(p->fs_gid);
	(void)setfsuid(p->fs_uid);
	/* Both return the ids before the call: asked again, they tell whether it took. */
	if ((uid_t)setfsuid(p->fs_uid) != p->fs_uid || (gid_t)setfsgid(p->fs_gid) != p->fs_gid)
		return -EPERM;
	return p->drop_caps((1ULL << CAP_SYS_ADMIN) | (p->root_caps & HELPER_DAC_CAPS), caps);
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
	int fd = c->p->in_root(c->root, path, RESOLVE_NO_XDEV, c->p->walk);
	uint64_t mnt = 0;
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
	struct files_reply *out = c->out;
	struct stat st;
	int parent, r = 0;

	if (out->n_dirs == HELPER_MAX_DIRS)
		return -E2BIG;
	if (slash)
		*slash = '\0';
	parent = files_open_dir(c, slash ? path : ".");
	if (slash)
		*slash = '/';
	if (parent < 0)
		return parent;
	if (mkdirat(parent, slash ? slash + 1 : path, 0755) < 0 ||
	    fstatat(parent, slash ? slash + 1 : path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		r = -errno;
	else
		out->dirs[out->n_dirs++] = (struct helper_dir){ .file = (uint32_t)i,
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
 * Removes name in dirfd if it is the directory of inode ino, not a mount,
 * and empty. 0; -ENOENT when nothing is there; -EBUSY when something else
 * is (or it is not empty); or -errno.
 */
static int rmdir_at(int dirfd, const char *name, uint64_t ino)
{
	struct statx sx;

	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_INO, &sx) < 0)
		return -errno;
	if (!S_ISDIR(sx.stx_mode) || sx.stx_ino != ino ||
	    (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return -EBUSY;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0)
		return 0;
	return errno == ENOTEMPTY || errno == EEXIST ? -EBUSY : -errno;
}

/*
 * Takes devgate's mount of entry f (see devgate_mount) off name in dirfd.
 * 0; -ENOENT when no mount of devgate's is there; or -errno.
 */
static int unmount_devgate(int dirfd, const char *name, const struct helper_file *f)
{
	int r = devgate_mount(dirfd, name, f->dev, f->ino, f->flags & HELPER_MARKED);

	if (r <= 0)
		return r ? r : -ENOENT;
	return unmount_at(dirfd, name);
}

/*
 * Takes off what devgate made at entry f's path: its mount (see
 * devgate_mount) and the file under it, or the directory it made if that
 * is empty. Anything else there stays. The outcome in res.
 */
static void remove_one(const struct files_ctx *c, const struct helper_file *f,
		       struct file_result *res)
{
	char dir[HELPER_PATH_MAX];
	const char *base;
	int dfd, r;

	if (!split_path(f->path, dir, sizeof(dir), &base)) {
		file_failed(res, FSTEP_PATH, EINVAL);
		return;
	}
	/* A directory that cannot be reached now: gone, or not where devgate made it. */
	dfd = files_open_dir(c, dir);
	if (dfd < 0)
		r = -ENOENT;
	else if (f->kind == HELPER_DIR)
		r = rmdir_at(dfd, base, f->ino);
	else
		r = unmount_devgate(dfd, base, f);
	if (r == 0)
		res->status = FILE_REMOVED;
	else if (r == -ENOENT)
		res->status = FILE_ABSENT;
	else if (r == -EBUSY)
		res->status = FILE_KEPT;
	else
		file_failed(res, FSTEP_UNMOUNT, -r);
	if (dfd >= 0)
		close(dfd);
}

/* Takes off what a failed mount job made: its mounts, then its directories, deepest first. */
static void files_undo(const struct files_ctx *c, size_t n)
{
	struct files_reply *out = c->out;
	struct file_result tmp;

	while (n-- > 0) {
		struct helper_file f = c->files[n];

		if (out->res[n].status == FILE_MOUNTED) {
			f.flags = HELPER_MARKED;
			remove_one(c, &f, &tmp);
		}
		if (out->res[n].status != FILE_FAILED)
			out->res[n].status = FILE_UNTOUCHED;
	}
	while (out->n_dirs > 0) {
		const struct helper_dir *d = &out->dirs[--out->n_dirs];
		struct helper_file f = { .kind = HELPER_DIR, .ino = d->ino };

		memcpy(f.path, c->files[d->file].path, d->len);
		f.path[d->len] = '\0';
		remove_one(c, &f, &tmp);
	}
}

int files_run(int root, const struct files_params *p, const struct helper_file *files,
	      const int *trees, struct files_reply *out, uint64_t *caps)
{
	struct files_ctx c = { .root = root, .p = p, .files = files, .out = out };
	int r = files_identity(p, caps);
	size_t i;

	if (r == 0)
		r = mount_id(root, "", AT_EMPTY_PATH, &c.root_mnt);
	if (r < 0)
		return r;
	for (i = 0; i < p->n; i++) {
		struct file_result *res = &out->res[i];

		if (!p->mount) {
			remove_one(&c, &files[i], res);
			continue;
		}
		mount_one(&c, i, trees[i], res);
		if (res->status == FILE_FAILED)
			break;
	}
	if (!p->mount || i == p->n)
		return 0;
	files_undo(&c, i + 1);
	return -EIO;
}
