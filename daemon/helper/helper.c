// SPDX-License-Identifier: Apache-2.0
/*
 * The node helper's work: in a single-use child, confined by its seccomp
 * filter (syscalls.h), it receives one job from devgated, enters the
 * container's mount namespace, drops the capabilities it does not need,
 * makes or removes device nodes in the container's /dev (or has files.c
 * mount driver files), and sends back what happened. Every path below the container's
 * root belongs to the container, so it never follows a symlink there and
 * acts only through descriptors. It must use libc alone (no allocation, no
 * logging): it is built into the static devgated-node too, and any call it
 * adds must be added to syscalls.h.
 */
#include <errno.h>
#include <fcntl.h>
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
#include <sys/statfs.h>
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
	struct stat st;
	int fd, r;

	if (mknodat(devfd, name, node_type(node) | o->mode, makedev(node->major, node->minor)) < 0)
		return -errno;
	if (!o->uid && !o->gid)
		return 0;
	/* Owned through a descriptor of the node itself: never what a rename swapped in. */
	fd = openat(devfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = fstat(fd, &st) < 0 ? -errno : 0;
	if (r == 0 && ((st.st_mode & S_IFMT) != node_type(node) ||
		       st.st_rdev != makedev(node->major, node->minor)))
		r = -EIO;
	if (r == 0 && fchownat(fd, "", o->uid, o->gid, AT_EMPTY_PATH) < 0)
		r = -errno;
	close(fd);
	return r;
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

/* Whether dirfd is the directory the job's root_dev and root_ino name. */
static bool is_root(int dirfd, const struct helper_job *job)
{
	struct stat st;

	return fstat(dirfd, &st) == 0 && st.st_dev == job->root_dev && st.st_ino == job->root_ino;
}

/* Where helper_main() put the socket to devgated. */
#define HELPER_SOCK 3

/*
 * Asks devgated whether the /dev open at devfd (st, its fstat) may hold
 * nodes: sends a helper_probe with its file system and waits for the
 * answer. Anything but HELPER_GO, devgated hanging up included, is a no.
 */
static bool dev_approved(int devfd, const struct stat *st)
{
	struct helper_probe p = { .dev = st->st_dev };
	struct statfs fs;
	int none[FDPASS_MAX];
	char answer = 0;

	if (fstatfs(devfd, &fs) < 0)
		return false;
	p.fs_type = (int64_t)fs.f_type;
	/* With the directory itself: devgated may keep it for later jobs (nodes.c). */
	if (fds_send(HELPER_SOCK, &p, sizeof(p), &devfd, 1) < 0)
		return false;
	return fds_recv(HELPER_SOCK, &answer, 1, none) == 0 && answer == HELPER_GO;
}

/* Whether the job is about driver files rather than nodes. */
static bool files_op(const struct helper_job *job)
{
	return job->op == OP_MOUNT_FILES || job->op == OP_UNMOUNT_FILES;
}

/*
 * Runs a driver files job (files.c) with its root; STAGE_FILES when it
 * could not start, or when a mount failed and nothing stays mounted.
 */
static void run_files(int root, const struct helper_job *job, const struct helper_file *files,
		      const int *trees, struct helper_msg *msg)
{
	const struct files_params p = {
		.mount = job->op == OP_MOUNT_FILES,
		.n = job->n_files,
		.fs_uid = job->fs_uid,
		.fs_gid = job->fs_gid,
		.root_caps = job->root_caps,
		.walk = job->no_openat2,
		.in_root = in_root,
		.drop_caps = drop_caps,
	};
	int r = files_run(root, &p, files, trees, &msg->files, &msg->caps);

	if (r < 0) {
		msg->stage = STAGE_FILES;
		msg->err = -r;
	}
}

/*
 * Does the job, in order: enters the container's mount namespace, drops
 * capabilities, opens the root (checking it is the expected one) and its
 * dev, refuses the host's own /dev and, for nodes, any /dev devgated does
 * not approve (dev_approved), then makes or removes nodes or mounts files.
 * msg says how far it got (stage) and what happened.
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
	/* A target that pivoted into the root it was granted in is served from its own root. */
	if (job->root_path[0] && !(job->check_root && is_root(rootfd, job))) {
		root = in_root(rootfd, job->root_path, 0, job->no_openat2);
		if (root < 0) {
			msg->stage = STAGE_ROOT;
			msg->err = -root;
			return;
		}
		/* Another container may have made the same path inside itself. */
		if (job->check_root && !is_root(root, job)) {
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
	/* Nor any /dev that devgated's mount namespace has too: devgated decides. */
	if (!files_op(job) && !dev_approved(devfd, &st)) {
		msg->stage = STAGE_DEV_SHARED;
		msg->err = EXDEV;
		return;
	}
	if (files_op(job)) {
		run_files(root, job, files, trees, msg);
		return;
	}
	helper_nodes(devfd, job, trees, msg->res);
}

void helper_nodes(int devfd, const struct helper_job *job, const int *trees,
		  struct node_result *res)
{
	if (job->op == OP_REMOVE) {
		for (size_t i = 0; i < job->n; i++)
			unmake_one(devfd, &job->nodes[i], job, &res[i]);
		return;
	}
	if (create_all(devfd, job, job->nodes, job->n, trees, res) == -EIO)
		undo_created(devfd, job, job->nodes, job->n, res);
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
