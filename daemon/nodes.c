// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/capability.h>
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
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "confine.h"
#include "fdpass.h"
#include "log.h"
#include "nodes.h"
#include "zygote.h"

#define HELPER_TIMEOUT_MS 5000

enum helper_op {
	OP_CREATE,
	OP_REMOVE
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
};

struct helper_msg {
	int stage;
	int err;
	uint64_t caps; /* the effective capabilities it worked with */
	struct node_result res[DG_MAX_NODES];
};

/* What the daemon asks of a helper; pidfd and rootfd travel as SCM_RIGHTS. */
struct helper_job {
	int op;
	int enter;	/* join the target's mount namespace */
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
};

/*
 * The spare: a helper forked ahead of time, already confined, waiting for
 * one job. Forking and installing seccomp (~0.3 ms) then happen while the
 * daemon is idle, or in the zygote while devgated finishes the request
 * before, not while a grant waits. It serves one job and exits, so no
 * state carries from one container to the next.
 */
static struct child spare = { .sock = -1, .pidfd = -1 };

/* A helper that has replied and is exiting: ended later, off the request's path. */
static struct child spent = { .sock = -1, .pidfd = -1 };

static struct sock_fprog helper_filter;

/* DEVGATE_TEST_NO_OPENAT2=1: the fallback walk, for tests on kernels that have openat2. */
static bool walk_paths;

/* The only syscalls the helper may make once it runs untrusted paths. */
static const int helper_syscalls[] = {
	SCMP_SYS(setns),    SCMP_SYS(umask),  SCMP_SYS(openat2),      SCMP_SYS(newfstatat),
	SCMP_SYS(fstat),    SCMP_SYS(statx),  SCMP_SYS(mknodat),      SCMP_SYS(fchownat),
	SCMP_SYS(unlinkat), SCMP_SYS(write),  SCMP_SYS(close),	      SCMP_SYS(exit_group),
	SCMP_SYS(exit),	    SCMP_SYS(getpid), SCMP_SYS(rt_sigreturn), SCMP_SYS(recvmsg),
	SCMP_SYS(capget),   SCMP_SYS(capset), SCMP_SYS(openat),
};

static void spare_main(int sock);

int nodes_init(struct dg_error *err)
{
	const char *test = getenv("DEVGATE_TEST_NO_OPENAT2");
	int r;

	walk_paths = test && strcmp(test, "1") == 0;
	if (walk_paths)
		log_warning(
			"DEVGATE_TEST_NO_OPENAT2=1: container paths are walked without openat2");
	r = confine_build(SCMP_ACT_ERRNO(EPERM), helper_syscalls, ARRAY_SIZE(helper_syscalls), NULL,
			  0, &helper_filter, err);
	if (r < 0)
		return r;
	r = zygote_start(spare_main);
	if (r < 0)
		log_warning_errno(r, "cannot start the node helper zygote (%m); devgated forks "
				     "helpers itself");
	return 0;
}

/* ---- helper side: runs in the forked child, no allocation, no logging ---- */

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
	struct node_opts o = { .mode = job->mode, .uid = job->uid, .gid = job->gid };
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
	if (create_all(devfd, &o, job->nodes, job->n, msg->res) == -EIO)
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

/* The spare's whole life: runs in the forked child, never returns. */
static void spare_main(int sock)
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
		   syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &helper_filter) == 0;
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

/* ---- daemon side ---- */

static bool same_mntns(pid_t pid)
{
	struct stat self, other;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	return stat("/proc/self/ns/mnt", &self) == 0 && stat(path, &other) == 0 &&
	       self.st_dev == other.st_dev && self.st_ino == other.st_ino;
}

static int read_reply(struct child *c, struct helper_msg *msg)
{
	struct pollfd p = { .fd = c->sock, .events = POLLIN };
	ssize_t got = -1;
	int r;

	for (;;) {
		r = poll(&p, 1, HELPER_TIMEOUT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			r = r < 0 ? -errno : -ETIMEDOUT;
			child_end(c);
			return r;
		}
		got = read(c->sock, msg, sizeof(*msg));
		if (got < 0 && errno == EINTR)
			continue;
		break;
	}
	/* The reply is the helper's last act; a helper killed before it sends none. */
	if (got != (ssize_t)sizeof(*msg)) {
		child_end(c);
		return -ECHILD;
	}
	c->sock = safe_close(c->sock);
	spent = *c;
	*c = (struct child){ .sock = -1, .pidfd = -1 };
	return 0;
}

static void reap_spent(void)
{
	/* It has replied, so nothing is lost if one that lingers is killed. */
	child_end(&spent);
}

static void spare_drop(void)
{
	child_end(&spare);
}

static int spare_spawn(void)
{
	return child_spawn(&spare);
}

void nodes_prepare(void)
{
	int r;

	reap_spent();
	if (spare.pid <= 0 && (r = spare_spawn()) < 0)
		log_debug_errno(r, "cannot fork a spare node helper yet: %m");
}

static int send_job(const struct helper_job *job, int pidfd, int rootfd)
{
	const int fds[2] = { pidfd, rootfd };

	return fds_send(spare.sock, job, sizeof(*job), fds, 2);
}

static int run_helper(const struct target *t, const struct helper_job *job, struct helper_msg *msg)
{
	int r;

	reap_spent();
	/* A spare that died while idle is replaced once. */
	for (int attempt = 0; attempt < 2; attempt++) {
		if (spare.pid <= 0) {
			r = spare_spawn();
			if (r < 0)
				return r;
		}
		r = send_job(job, t->pidfd, t->rootfd);
		if (r == 0)
			break;
		spare_drop();
	}
	if (r < 0)
		return r;
	r = read_reply(&spare, msg);
	/* The next one forks while devgated finishes this request, not in the next. */
	child_order();
	return r;
}

static const char *stage_text(int stage)
{
	switch (stage) {
	case STAGE_SECCOMP:
		return "cannot confine the node helper with seccomp";
	case STAGE_SETNS:
		return "cannot enter the container's mount namespace";
	case STAGE_CAPS:
		return "the node helper cannot drop its capabilities";
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

static int target_gone(const struct target *t, struct dg_error *err)
{
	dg_error_set(err, DG_E_NO_TARGET, ESRCH,
		     "PID %d exited before devgate could reach its /dev", (int)t->pid);
	dg_error_hint(err, "its PID may belong to another process by now: ask again for a "
			   "container that runs");
	return -ESRCH;
}

static int check_msg(const struct target *t, const char *root_path, const struct helper_msg *msg,
		     struct dg_error *err)
{
	if (msg->stage == STAGE_OK)
		return 0;
	/* setns() on the pidfd of a process that has exited. */
	if (msg->stage == STAGE_SETNS && msg->err == ESRCH)
		return target_gone(t, err);
	if (msg->stage == STAGE_HOST_DEV)
		return dg_error_set(err, DG_E_TARGET_UNSUPPORTED, EXDEV, "PID %d: %s", (int)t->pid,
				    stage_text(msg->stage));
	if (msg->stage == STAGE_ROOT_ID) {
		dg_error_set(err, DG_E_TARGET_UNSUPPORTED, EXDEV,
			     "the mount namespace of PID %d does not hold the bundle's rootfs: %s "
			     "there is another directory than the one the hook opened",
			     (int)t->pid, root_path);
		dg_error_hint(err, "the OCI state's pid must be the container's own, at "
				   "createRuntime or prestart");
		return -EXDEV;
	}
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

static int make_job(const struct target *t, enum helper_op op, const struct node_opts *o,
		    const struct dg_node *nodes, size_t n, struct helper_job *job,
		    struct dg_error *err)
{
	struct stat host;

	if (n > DG_MAX_NODES)
		return dg_error_set(err, DG_E_INTERNAL, E2BIG, "too many nodes");
	for (size_t i = 0; i < n; i++) {
		if (!nodes[i].name[0] || strchr(nodes[i].name, '/') || nodes[i].name[0] == '.')
			return dg_error_set(err, DG_E_INTERNAL, EINVAL, "bad node name '%s'",
					    nodes[i].name);
	}
	if (o->root_path && strlen(o->root_path) >= sizeof(job->root_path))
		return dg_error_set(err, DG_E_INVALID, ENAMETOOLONG, "root path is too long");
	if (stat("/dev", &host) < 0)
		return dg_error_set(err, DG_E_KERNEL, errno, "cannot stat /dev: %m");
	memset(job, 0, sizeof(*job));
	job->op = op;
	job->enter = !same_mntns(t->pid);
	/*
	 * same_mntns() read /proc/PID: that was the target only if it still
	 * runs now. Once it has exited its PID may be another process's, and
	 * its old root a directory on the host.
	 */
	if (pidfd_alive(t->pidfd) < 0)
		return target_gone(t, err);
	/*
	 * A root path names the container's rootfs inside its own mount
	 * namespace; in devgated's it would be any host directory.
	 */
	if (o->root_path && !job->enter)
		return dg_error_set(err, DG_E_TARGET_UNSUPPORTED, EXDEV,
				    "PID %d shares devgated's mount namespace: a root path (%s) is "
				    "honoured only inside a container's own",
				    (int)t->pid, o->root_path);
	job->host_dev = host.st_dev;
	job->no_openat2 = walk_paths;
	job->check_root = o->root_path && o->check_root;
	job->root_dev = o->root_dev;
	job->root_ino = o->root_ino;
	job->mode = o->mode;
	job->uid = o->uid;
	job->gid = o->gid;
	if (o->root_path)
		snprintf(job->root_path, sizeof(job->root_path), "%s", o->root_path);
	job->n = n;
	memcpy(job->nodes, nodes, n * sizeof(*nodes));
	return 0;
}

static int nodes_apply(const struct target *t, enum helper_op op, const struct node_opts *o,
		       const struct dg_node *nodes, size_t n, struct node_result *res,
		       struct dg_error *err)
{
	struct helper_msg msg = { 0 };
	struct helper_job job;
	int r = make_job(t, op, o, nodes, n, &job, err);

	if (r < 0)
		return r;
	r = run_helper(t, &job, &msg);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "node helper for PID %d failed: %s",
				    (int)t->pid, r == -ETIMEDOUT ? "timed out" : strerror(-r));
	memcpy(res, msg.res, n * sizeof(*res));
	log_debug("node helper for PID %d worked with capabilities %#llx", (int)t->pid,
		  (unsigned long long)msg.caps);
	r = check_msg(t, o->root_path, &msg, err);
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

void nodes_fini(void)
{
	reap_spent();
	spare_drop();
	zygote_stop();
	free(helper_filter.filter);
	helper_filter.filter = NULL;
	helper_filter.len = 0;
}
