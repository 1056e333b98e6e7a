// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <poll.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "confine.h"
#include "fdpass.h"
#include "helper.h"
#include "log.h"
#include "nodes.h"
#include "zygote.h"

#define HELPER_TIMEOUT_MS 5000

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

/*
 * devgated's own mount namespace, read once: devgated never changes it
 * (only helpers setns). Unknown, every target is entered.
 */
static struct stat own_mntns;
static bool own_mntns_known;

/* DEVGATE_TEST_NO_OPENAT2=1: the fallback walk, for tests on kernels that have openat2. */
static bool walk_paths;

/* The only syscalls the helper may make once it runs untrusted paths. */
static const int helper_syscalls[] = {
	SCMP_SYS(setns),    SCMP_SYS(umask),  SCMP_SYS(openat2),      SCMP_SYS(newfstatat),
	SCMP_SYS(fstat),    SCMP_SYS(statx),  SCMP_SYS(mknodat),      SCMP_SYS(fchownat),
	SCMP_SYS(unlinkat), SCMP_SYS(write),  SCMP_SYS(close),	      SCMP_SYS(exit_group),
	SCMP_SYS(exit),	    SCMP_SYS(getpid), SCMP_SYS(rt_sigreturn), SCMP_SYS(recvmsg),
	SCMP_SYS(capget),   SCMP_SYS(capset), SCMP_SYS(openat),	      SCMP_SYS(mkdirat),
};

/* The zygote's (or devgated's own) forked child. */
static void spare_main(int sock)
{
	helper_main(sock, &helper_filter);
}

int nodes_init(struct dg_error *err)
{
	const char *test = getenv("DEVGATE_TEST_NO_OPENAT2");
	int r;

	walk_paths = test && strcmp(test, "1") == 0;
	own_mntns_known = stat("/proc/self/ns/mnt", &own_mntns) == 0;
	if (walk_paths)
		log_warning(
			"DEVGATE_TEST_NO_OPENAT2=1: container paths are walked without openat2");
	r = confine_build(SCMP_ACT_ERRNO(EPERM), helper_syscalls, ARRAY_SIZE(helper_syscalls), NULL,
			  0, &helper_filter, err);
	if (r < 0)
		return r;
	r = zygote_start(spare_main, &helper_filter);
	if (r < 0)
		log_warning_errno(r, "cannot start the node helper zygote (%m); devgated forks "
				     "helpers itself");
	return 0;
}

/* ---- daemon side ---- */

static bool same_mntns(pid_t pid)
{
	struct stat other;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	return own_mntns_known && stat(path, &other) == 0 && own_mntns.st_dev == other.st_dev &&
	       own_mntns.st_ino == other.st_ino;
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
		const char *slash = strchr(nodes[i].name, '/');
		/* One level of directory, dri/ only: DRM nodes live in /dev/dri. */
		const char *base = slash && strncmp(nodes[i].name, "dri/", 4) == 0 ? slash + 1
										   : nodes[i].name;

		if (!base[0] || strchr(base, '/') || base[0] == '.')
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
