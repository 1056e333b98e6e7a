// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fdpass.h"
#include "helper.h"

/*
 * Without openat2 (before 5.6, or filtered out): one component at a time,
 * O_PATH|O_NOFOLLOW|O_DIRECTORY, so a symlink or a file anywhere on the way
 * fails (ENOTDIR) and ".." never climbs out. Stricter than RESOLVE_IN_ROOT:
 * no symlink is followed at all. No allocation: this runs in the helper.
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
 * The directory a node is in: devfd, or for "dri/NAME" /dev/dri, made when
 * create, never reached through a symlink (the container owns it) and on
 * /dev's own file system: a mount there (the host's /dev/dri bound in) is
 * refused, so a revoke never unlinks a host node. *base: the name within
 * it. Close the result only when it is not devfd.
 */
static int node_dir(int devfd, const struct dg_node *node, bool create, const char **base)
{
	const char *slash = strchr(node->name, '/');
	char dir[sizeof(node->name)];
	struct stat dev_st, dir_st;
	int fd;

	*base = slash ? slash + 1 : node->name;
	if (!slash)
		return devfd;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - node->name), node->name);
	if (create && mkdirat(devfd, dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	fd = openat(devfd, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(devfd, &dev_st) < 0 || fstat(fd, &dir_st) < 0 || dev_st.st_dev != dir_st.st_dev) {
		close(fd);
		return -EXDEV;
	}
	return fd;
}

static void dir_close(int fd, int devfd)
{
	if (fd >= 0 && fd != devfd)
		close(fd);
}

static void inspect_in(int devfd, const char *name, const struct dg_node *node,
		       struct node_result *res);

/* node_dir() of an existing node: a missing directory is a missing node (in res). */
static int existing_dir(int devfd, const struct dg_node *node, const char **name,
			struct node_result *res)
{
	int dfd = node_dir(devfd, node, false, name);

	if (dfd < 0) {
		res->status = dfd == -ENOENT ? NODE_ABSENT : NODE_FAILED;
		res->err = dfd == -ENOENT ? 0 : -dfd;
	}
	return dfd;
}

static void inspect(int devfd, const struct dg_node *node, struct node_result *res)
{
	const char *name;
	int dfd = existing_dir(devfd, node, &name, res);

	if (dfd < 0)
		return;
	inspect_in(dfd, name, node, res);
	dir_close(dfd, devfd);
}

static void inspect_in(int devfd, const char *name, const struct dg_node *node,
		       struct node_result *res)
{
	struct stat st;

	if (fstatat(devfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		res->status = errno == ENOENT ? NODE_ABSENT : NODE_FAILED;
		res->err = errno == ENOENT ? 0 : errno;
		return;
	}
	if (S_ISCHR(st.st_mode) && major(st.st_rdev) == node->major &&
	    minor(st.st_rdev) == node->minor) {
		res->status = NODE_PRESENT;
		return;
	}
	res->status = NODE_CONFLICT;
	res->mode = st.st_mode;
	res->major = S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? major(st.st_rdev) : 0;
	res->minor = S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? minor(st.st_rdev) : 0;
}

static void make_in(int devfd, const char *name, const struct dg_node *node,
		    const struct helper_job *o, struct node_result *res)
{
	struct stat st;

	if (mknodat(devfd, name, S_IFCHR | o->mode, makedev(node->major, node->minor)) < 0) {
		if (errno == EEXIST) { /* raced with the container: judge what is there */
			inspect_in(devfd, name, node, res);
			return;
		}
		res->status = NODE_FAILED;
		res->err = errno;
		return;
	}
	res->status = NODE_CREATED;
	if ((o->uid || o->gid) && fchownat(devfd, name, o->uid, o->gid, AT_SYMLINK_NOFOLLOW) < 0) {
		res->status = NODE_FAILED;
		res->err = errno;
		return;
	}
	/* Check what the path holds now; the container may have swapped it. */
	if (fstatat(devfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISCHR(st.st_mode) ||
	    st.st_rdev != makedev(node->major, node->minor) || (st.st_mode & 07777) != o->mode) {
		res->status = NODE_FAILED;
		res->err = EIO;
	}
}

static void make_one(int devfd, const struct dg_node *node, const struct helper_job *o,
		     struct node_result *res)
{
	const char *name;
	int dfd = node_dir(devfd, node, true, &name);

	if (dfd < 0) {
		res->status = NODE_FAILED;
		res->err = -dfd;
		return;
	}
	make_in(dfd, name, node, o, res);
	dir_close(dfd, devfd);
}

static void unmake_one(int devfd, const struct dg_node *node, struct node_result *res)
{
	const char *name;
	int dfd = existing_dir(devfd, node, &name, res);

	if (dfd < 0)
		return;
	inspect_in(dfd, name, node, res);
	/* unlinkat never follows: at worst it removes what was swapped in. */
	if (res->status == NODE_PRESENT && unlinkat(dfd, name, 0) < 0) {
		res->status = errno == ENOENT ? NODE_ABSENT : NODE_FAILED;
		res->err = errno == ENOENT ? 0 : errno;
	} else if (res->status == NODE_PRESENT) {
		res->status = NODE_REMOVED;
	}
	dir_close(dfd, devfd);
}

static int create_all(int devfd, const struct helper_job *o, const struct dg_node *nodes, size_t n,
		      struct node_result *res)
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
		make_one(devfd, &nodes[i], o, &res[i]);
		if (res[i].status == NODE_CONFLICT || res[i].status == NODE_FAILED)
			return -EIO;
	}
	return 0;
}

static void undo_created(int devfd, const struct dg_node *nodes, size_t n, struct node_result *res)
{
	for (size_t i = 0; i < n; i++) {
		struct node_result tmp = { 0 };

		if (res[i].status != NODE_CREATED)
			continue;
		unmake_one(devfd, &nodes[i], &tmp);
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

static void helper_run(const struct helper_job *job, int pidfd, int rootfd, struct helper_msg *msg)
{
	int root = rootfd, devfd;
	struct stat st;

	if (job->enter && setns(pidfd, CLONE_NEWNS) < 0) {
		msg->stage = STAGE_SETNS;
		msg->err = errno;
		return;
	}
	if (drop_caps(HELPER_CAPS, &msg->caps) < 0) {
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
	if (job->op == OP_REMOVE) {
		for (size_t i = 0; i < job->n; i++)
			unmake_one(devfd, &job->nodes[i], &msg->res[i]);
		return;
	}
	if (create_all(devfd, job, job->nodes, job->n, msg->res) == -EIO)
		undo_created(devfd, job->nodes, job->n, msg->res);
}

/* Receives the job and its two fds; false when the daemon hung up. */
static bool spare_receive(int sock, struct helper_job *job, int fds[FDPASS_MAX])
{
	if (fds_recv(sock, job, sizeof(*job), fds) != 2 || job->n > DG_MAX_NODES)
		return false;
	job->root_path[sizeof(job->root_path) - 1] = '\0';
	return true;
}

void helper_main(int sock, const struct sock_fprog *filter)
{
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
	if (!spare_receive(3, &job, fds))
		_exit(0);
	if (confined)
		helper_run(&job, fds[0], fds[1], &msg);
	else
		msg.stage = STAGE_SECCOMP;
	if (write(3, &msg, sizeof(msg)) != (ssize_t)sizeof(msg))
		_exit(2);
	_exit(0);
}
