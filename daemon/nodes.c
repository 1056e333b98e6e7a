// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "nodes.h"

#define HELPER_TIMEOUT_MS 5000

enum helper_op { OP_CREATE, OP_REMOVE };

enum helper_stage {
	STAGE_OK = 0,
	STAGE_SECCOMP,
	STAGE_SETNS,
	STAGE_ROOT,
	STAGE_DEV,
	STAGE_HOST_DEV,
	STAGE_NODES,
};

struct helper_msg {
	int stage;
	int err;
	struct node_result res[NODES_MAX];
};

static struct sock_fprog helper_filter;

/* The only syscalls the helper may make once it runs untrusted paths. */
static const int helper_syscalls[] = {
	SCMP_SYS(setns),    SCMP_SYS(umask),	SCMP_SYS(openat2),    SCMP_SYS(newfstatat),
	SCMP_SYS(fstat),    SCMP_SYS(statx),	SCMP_SYS(mknodat),    SCMP_SYS(fchownat),
	SCMP_SYS(unlinkat), SCMP_SYS(write),	SCMP_SYS(close),      SCMP_SYS(exit_group),
	SCMP_SYS(exit),	    SCMP_SYS(getpid),	SCMP_SYS(rt_sigreturn),
};

int nodes_init(struct dg_error *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	auto_close int fd = -1;
	struct stat st = { 0 };
	void *buf;
	int r = 0;

	if (!ctx)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "cannot create a seccomp filter");
	for (size_t i = 0; i < ARRAY_SIZE(helper_syscalls) && r == 0; i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, helper_syscalls[i], 0);
	/* libseccomp 2.5 exports to an fd only; read the program back. */
	fd = memfd_create("devgate-seccomp", MFD_CLOEXEC);
	if (r == 0 && fd < 0)
		r = -errno;
	if (r == 0)
		r = seccomp_export_bpf(ctx, fd);
	seccomp_release(ctx);
	if (r == 0 && fstat(fd, &st) < 0)
		r = -errno;
	if (r == 0 && (st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter)))
		r = -EIO;
	if (r != 0) /* libseccomp returns 0 or -errno */
		return dg_error_set(err, DG_E_INTERNAL, r, "cannot build the node helper's seccomp "
				    "filter: %s", strerror(-r));
	buf = malloc((size_t)st.st_size);
	if (!buf || pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
		free(buf);
		return dg_error_set(err, DG_E_INTERNAL, EIO, "cannot read the seccomp filter back");
	}
	helper_filter.filter = buf;
	helper_filter.len = (unsigned short)((size_t)st.st_size / sizeof(struct sock_filter));
	return 0;
}

void nodes_fini(void)
{
	free(helper_filter.filter);
	helper_filter.filter = NULL;
	helper_filter.len = 0;
}

/* ---- helper side: runs in the forked child, no allocation, no logging ---- */

static int in_root(int dirfd, const char *path, uint64_t resolve)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = resolve | RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

static void inspect(int devfd, const struct dg_node *node, struct node_result *res)
{
	struct stat st;

	if (fstatat(devfd, node->name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
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

static void make_one(int devfd, const struct dg_node *node, const struct node_opts *o,
		     struct node_result *res)
{
	struct stat st;

	if (mknodat(devfd, node->name, S_IFCHR | o->mode, makedev(node->major, node->minor)) < 0) {
		if (errno == EEXIST) { /* raced with the container: judge what is there */
			inspect(devfd, node, res);
			return;
		}
		res->status = NODE_FAILED;
		res->err = errno;
		return;
	}
	res->status = NODE_CREATED;
	if ((o->uid || o->gid) &&
	    fchownat(devfd, node->name, o->uid, o->gid, AT_SYMLINK_NOFOLLOW) < 0) {
		res->status = NODE_FAILED;
		res->err = errno;
		return;
	}
	/* Check what the path holds now; the container may have swapped it. */
	if (fstatat(devfd, node->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISCHR(st.st_mode) ||
	    st.st_rdev != makedev(node->major, node->minor) || (st.st_mode & 07777) != o->mode) {
		res->status = NODE_FAILED;
		res->err = EIO;
	}
}

static void unmake_one(int devfd, const struct dg_node *node, struct node_result *res)
{
	inspect(devfd, node, res);
	if (res->status != NODE_PRESENT)
		return;
	/* unlinkat never follows: at worst it removes what was swapped in. */
	if (unlinkat(devfd, node->name, 0) < 0) {
		res->status = errno == ENOENT ? NODE_ABSENT : NODE_FAILED;
		res->err = errno == ENOENT ? 0 : errno;
		return;
	}
	res->status = NODE_REMOVED;
}

static int create_all(int devfd, const struct node_opts *o, const struct dg_node *nodes, size_t n,
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

static void helper_run(const struct target *t, bool enter, dev_t host_dev, enum helper_op op,
		       const struct node_opts *o, const struct dg_node *nodes, size_t n,
		       struct helper_msg *msg)
{
	int root = t->rootfd, devfd;
	struct stat st;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &helper_filter) < 0) {
		msg->stage = STAGE_SECCOMP;
		msg->err = errno;
		return;
	}
	if (enter && setns(t->pidfd, CLONE_NEWNS) < 0) {
		msg->stage = STAGE_SETNS;
		msg->err = errno;
		return;
	}
	umask(0);
	if (o->root_path) {
		root = in_root(t->rootfd, o->root_path, 0);
		if (root < 0) {
			msg->stage = STAGE_ROOT;
			msg->err = -root;
			return;
		}
	}
	devfd = in_root(root, "dev", RESOLVE_NO_SYMLINKS);
	if (devfd < 0) {
		msg->stage = STAGE_DEV;
		msg->err = -devfd;
		return;
	}
	/* Never touch the host's own /dev, whoever shares it. */
	if (fstat(devfd, &st) < 0 || st.st_dev == host_dev) {
		msg->stage = STAGE_HOST_DEV;
		msg->err = EXDEV;
		return;
	}
	if (op == OP_REMOVE) {
		for (size_t i = 0; i < n; i++)
			unmake_one(devfd, &nodes[i], &msg->res[i]);
		return;
	}
	if (create_all(devfd, o, nodes, n, msg->res) == -EIO)
		undo_created(devfd, nodes, n, msg->res);
}

/* ---- daemon side ---- */

static bool same_mntns(pid_t pid)
{
	struct stat self, other;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	return stat("/proc/self/ns/mnt", &self) == 0 && stat(path, &other) == 0 &&
	       self.st_dev == other.st_dev && self.st_ino == other.st_ino;
}

static int read_reply(int fd, pid_t child, struct helper_msg *msg)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t got = 0;
	int status, r;

	while (got < sizeof(*msg)) {
		ssize_t n;

		r = poll(&p, 1, HELPER_TIMEOUT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			kill(child, SIGKILL);
			(void)waitpid(child, &status, 0);
			return r < 0 ? -errno : -ETIMEDOUT;
		}
		n = read(fd, (char *)msg + got, sizeof(*msg) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	while (waitpid(child, &status, 0) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	if (got != sizeof(*msg) || !WIFEXITED(status))
		return -ECHILD;
	return 0;
}

static int run_helper(const struct target *t, enum helper_op op, const struct node_opts *o,
		      const struct dg_node *nodes, size_t n, struct helper_msg *msg)
{
	int pipefd[2];
	bool enter = !same_mntns(t->pid);
	struct stat host;
	pid_t child;
	int r;

	if (stat("/dev", &host) < 0)
		return -errno;
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	child = fork();
	if (child < 0) {
		r = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return r;
	}
	if (child == 0) {
		struct helper_msg out = { 0 };

		close(pipefd[0]);
		helper_run(t, enter, host.st_dev, op, o, nodes, n, &out);
		if (write(pipefd[1], &out, sizeof(out)) != (ssize_t)sizeof(out))
			_exit(2);
		_exit(0);
	}
	close(pipefd[1]);
	r = read_reply(pipefd[0], child, msg);
	close(pipefd[0]);
	return r;
}

static const char *stage_text(int stage)
{
	switch (stage) {
	case STAGE_SECCOMP:
		return "cannot confine the node helper with seccomp";
	case STAGE_SETNS:
		return "cannot enter the container's mount namespace";
	case STAGE_ROOT:
		return "cannot open the container's root filesystem";
	case STAGE_DEV:
		return "cannot open /dev in the container (missing, or a symlink)";
	case STAGE_HOST_DEV:
		return "the container's /dev is the host's /dev; devgate makes nodes only in a "
		       "container's own /dev";
	default:
		return "node helper failed";
	}
}

static int check_msg(const struct target *t, const struct helper_msg *msg, struct dg_error *err)
{
	if (msg->stage == STAGE_OK)
		return 0;
	if (msg->stage == STAGE_HOST_DEV)
		return dg_error_set(err, DG_E_TARGET_UNSUPPORTED, EXDEV, "PID %d: %s", (int)t->pid,
				    stage_text(msg->stage));
	return dg_error_set(err, msg->stage == STAGE_DEV ? DG_E_NODE_CONFLICT : DG_E_KERNEL,
			    msg->err, "%s (PID %d): %s", stage_text(msg->stage), (int)t->pid,
			    strerror(msg->err));
}

static const char *file_kind(unsigned int mode)
{
	if (S_ISLNK(mode))
		return "a symlink";
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISREG(mode))
		return "a regular file";
	if (S_ISCHR(mode))
		return "another character device";
	if (S_ISBLK(mode))
		return "a block device";
	return "a special file";
}

static int node_error(const struct target *t, const struct dg_node *nodes, size_t n,
		      const struct node_result *res, struct dg_error *err)
{
	for (size_t i = 0; i < n; i++) {
		if (res[i].status == NODE_CONFLICT) {
			dg_error_set(err, DG_E_NODE_CONFLICT, EEXIST,
				     "/dev/%s in the container of PID %d is %s (%u:%u), not "
				     "character device %u:%u",
				     nodes[i].name, (int)t->pid, file_kind(res[i].mode),
				     res[i].major, res[i].minor, nodes[i].major, nodes[i].minor);
			dg_error_hint(err, "remove it inside the container, then grant again");
			return -EEXIST;
		}
		if (res[i].status == NODE_FAILED)
			return dg_error_set(err, DG_E_KERNEL, res[i].err,
					    "cannot create /dev/%s in the container of PID %d: %s",
					    nodes[i].name, (int)t->pid, strerror(res[i].err));
	}
	return 0;
}

static int nodes_apply(const struct target *t, enum helper_op op, const struct node_opts *o,
		       const struct dg_node *nodes, size_t n, struct node_result *res,
		       struct dg_error *err)
{
	struct helper_msg msg = { 0 };
	int r;

	if (n > NODES_MAX)
		return dg_error_set(err, DG_E_INTERNAL, E2BIG, "too many nodes");
	for (size_t i = 0; i < n; i++) {
		if (!nodes[i].name[0] || strchr(nodes[i].name, '/') || nodes[i].name[0] == '.')
			return dg_error_set(err, DG_E_INTERNAL, EINVAL, "bad node name '%s'",
					    nodes[i].name);
	}
	r = run_helper(t, op, o, nodes, n, &msg);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "node helper for PID %d failed: %s",
				    (int)t->pid, r == -ETIMEDOUT ? "timed out" : strerror(-r));
	memcpy(res, msg.res, n * sizeof(*res));
	r = check_msg(t, &msg, err);
	if (r < 0)
		return r;
	return op == OP_CREATE ? node_error(t, nodes, n, res, err) : 0;
}

int nodes_create(const struct target *t, const struct node_opts *opts, const struct dg_node *nodes,
		 size_t n, struct node_result *res, struct dg_error *err)
{
	return nodes_apply(t, OP_CREATE, opts, nodes, n, res, err);
}

int nodes_remove(const struct target *t, const struct node_opts *opts, const struct dg_node *nodes,
		 size_t n, struct node_result *res, struct dg_error *err)
{
	return nodes_apply(t, OP_REMOVE, opts, nodes, n, res, err);
}
