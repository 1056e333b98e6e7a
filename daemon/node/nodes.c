// SPDX-License-Identifier: Apache-2.0
/*
 * devgated's side of the node helper: it turns "make these device nodes"
 * (or "mount these driver files") in a container into a job, hands the job
 * to a confined helper process (helper/helper.c) with the descriptors it
 * needs, and turns the helper's reply into results and errors. It keeps
 * one spare helper forked ahead of need. It must never touch a path inside
 * a container itself: only the helper does, from inside the container's
 * mount namespace and under its seccomp filter.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/mount.h>
#include <poll.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cleanup.h"
#include "devcache.h"
#include "sys/confine.h"
#include "helper/fdpass.h"
#include "helper/helper.h"
#include "helper/syscalls.h"
#include "log.h"
#include "nodes.h"
#include "util.h"
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

/* The seccomp filter of every helper (helper/syscalls.h), built at start. */
static struct sock_fprog helper_filter;

/*
 * devgated's own mount and user namespaces, read once: devgated never
 * changes them (only helpers setns). When unknown, every target's
 * namespace is entered.
 */
static struct stat own_mntns, own_userns;
static bool own_mntns_known, own_userns_known;

/*
 * Nodes for containers in another user namespace: a tmpfs of devgated's own,
 * mounted nowhere (no path anyone could reach), whose nodes are cloned into
 * the container as bind mounts. Made at the first such grant.
 */
static int node_src = -1;

/*
 * Set by DEVGATE_TEST_NO_OPENAT2=1: helpers walk paths as on a kernel
 * without openat2, so tests cover that code on kernels that have it.
 */
static bool walk_paths;

/* What each forked helper runs, in the zygote's child or devgated's own. */
static void spare_main(int sock)
{
	helper_main(sock, &helper_filter);
}

int nodes_helper_filter(struct sock_fprog *ret, struct dg_error *err)
{
	return confine_build(SCMP_ACT_ERRNO(EPERM), helper_syscalls, ARRAY_SIZE(helper_syscalls),
			     NULL, 0, ret, err);
}

int nodes_init(struct dg_error *err)
{
	const char *test = getenv("DEVGATE_TEST_NO_OPENAT2");
	int r;

	walk_paths = test && strcmp(test, "1") == 0;
	own_mntns_known = stat("/proc/self/ns/mnt", &own_mntns) == 0;
	own_userns_known = stat("/proc/self/ns/user", &own_userns) == 0;
	if (walk_paths)
		log_warning(
			"DEVGATE_TEST_NO_OPENAT2=1: container paths are walked without openat2");
	r = nodes_helper_filter(&helper_filter, err);
	if (r < 0)
		return r;
	devcache_init();
	r = zygote_start(spare_main, &helper_filter);
	if (r < 0)
		log_warning_errno(r, "cannot start the node helper zygote (%m); devgated forks "
				     "helpers itself");
	return 0;
}

/* ---- daemon side ---- */

/*
 * Whether process pid is in the namespace own (of kind ns, "mnt" or
 * "user"). False when devgated's own is unknown or pid's cannot be read.
 */
static bool same_ns(pid_t pid, const char *ns, const struct stat *own, bool known)
{
	struct stat other;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, ns);
	return known && stat(path, &other) == 0 && own->st_dev == other.st_dev &&
	       own->st_ino == other.st_ino;
}

static bool same_mntns(pid_t pid)
{
	return same_ns(pid, "mnt", &own_mntns, own_mntns_known);
}

/*
 * Reads the host id that pid's user namespace maps to its root (or, if it
 * maps no root, its first mapped id) from map ("uid_map" or "gid_map"):
 * an owner its /dev accepts for a new file. 0, or -errno / -EINVAL.
 */
static int mapped_id(pid_t pid, const char *map, uint32_t *ret)
{
	auto_free char *text = NULL;
	char path[64];
	unsigned int inside, outside, count;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, map);
	r = read_file_at(AT_FDCWD, path, 4096, &text, NULL);
	if (r < 0)
		return r;
	if (sscanf(text, "%u %u %u", &inside, &outside, &count) != 3 || count == 0)
		return -EINVAL;
	*ret = outside;
	for (const char *l = text; l; l = strchr(l + 1, '\n')) {
		if (sscanf(l, "%u %u %u", &inside, &outside, &count) == 3 && inside == 0 && count)
			*ret = outside;
	}
	return 0;
}

/*
 * Makes node_src: a tmpfs of devgated's own, mounted nowhere, where the
 * nodes bound into user-namespaced containers are made. 0, or -errno.
 */
static int node_src_open(void)
{
	auto_close int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);

	if (fs < 0)
		return -errno;
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -errno;
	node_src = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
				MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
	return node_src < 0 ? -errno : 0;
}

/*
 * Returns a detached mount (a descriptor) of node in node_src, with the
 * job's mode and owner, for the helper to bind into the container; -errno.
 */
static int node_tree(const struct dg_node *node, const struct helper_job *job)
{
	char name[32];
	int fd;

	snprintf(name, sizeof(name), "%c%u:%u", node->block ? 'b' : 'c', node->major, node->minor);
	if (mknodat(node_src, name, node->block ? S_IFBLK : S_IFCHR,
		    makedev(node->major, node->minor)) < 0 &&
	    errno != EEXIST)
		return -errno;
	/* Mode and owner set every time: one node serves every container. */
	if (fchmodat(node_src, name, job->mode, 0) < 0 ||
	    fchownat(node_src, name, job->uid, job->gid, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	fd = (int)syscall(SYS_open_tree, node_src, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Marks n descriptor slots empty, so close_all() may run before they are filled. */
static void fds_none(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fds[i] = -1;
}

/* Closes the first n descriptors of fds and marks them empty. */
static void close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fds[i] = safe_close(fds[i]);
}

/*
 * Fills trees with one detached mount per node of the job, in its order.
 * All or none: on failure the ones made are closed. 0, or -errno.
 */
static int node_trees(const struct helper_job *job, int *trees)
{
	int r = node_src < 0 ? node_src_open() : 0;

	for (size_t i = 0; r == 0 && i < job->n; i++) {
		trees[i] = node_tree(&job->nodes[i], job);
		if (trees[i] < 0) {
			r = trees[i];
			close_all(trees, i);
		}
	}
	return r;
}

/* What devgated answered a helper that asked about its /dev (helper_probe). */
struct dev_answer {
	bool asked;
	bool refused;
	int devfd;	 /* the /dev the helper opened, sent with its probe; -1 */
	int64_t fs_type; /* the probe's statfs f_type of that /dev */
	char why[768];	 /* why it refused, for the error message */
};

/*
 * Sets a->why to the mount of devgated's own mount namespace that has file
 * system dev, from /proc/self/mountinfo, read now so that a mount made (or
 * propagated) a moment ago counts. Returns 1 when there is one, 0 when
 * there is none, -errno when mountinfo cannot be read.
 */
static int own_mount(dev_t dev, const char what[160], struct dev_answer *a)
{
	auto_fclose FILE *f = fopen("/proc/self/mountinfo", "re");
	auto_free char *line = NULL;
	size_t cap = 0;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		unsigned int maj, min;
		char point[256];
		const char *type = strstr(line, " - ");
		int n;

		if (sscanf(line, "%*d %*d %u:%u %*s %255s", &maj, &min, point) != 3 ||
		    makedev(maj, min) != dev)
			continue;
		n = type ? (int)strcspn(type + 3, " ") : 1;
		n = n < 32 ? n : 32;
		snprintf(a->why, sizeof(a->why),
			 "%s is on %.*s %u:%u, the file system devgated's own mount namespace has "
			 "at %s (a host volume, or a mount that propagates to the host): a node "
			 "made there could be opened outside the container",
			 what, n, type ? type + 3 : "?", maj, min, point);
		return 1;
	}
	return ferror(f) ? -EIO : 0;
}

/* Whether devgated's own mount namespace has no mount of file system dev (devcache.h). */
static bool dev_unshared(dev_t dev)
{
	static const char what[160] = "a /dev devgated keeps";
	struct dev_answer a;

	return own_mount(dev, what, &a) == 0;
}

/*
 * Decides a helper's probe (helper.h): a /dev that devgated's own mount
 * namespace has mounted too is refused, and so is one on btrfs, whose
 * st_dev names a subvolume rather than a mount and so cannot be told from
 * a host volume. what names the directory for the message.
 */
static void answer_probe(const struct helper_probe *p, const char what[160], struct dev_answer *a)
{
	int r;

	a->asked = true;
	a->fs_type = p->fs_type;
	if (p->fs_type == (int64_t)BTRFS_SUPER_MAGIC) {
		a->refused = true;
		snprintf(a->why, sizeof(a->why),
			 "%s is on btrfs, where devgate cannot tell a container's own file system "
			 "from a host volume",
			 what);
		return;
	}
	r = own_mount((dev_t)p->dev, what, a);
	a->refused = r != 0;
	if (r < 0)
		snprintf(a->why, sizeof(a->why),
			 "cannot read /proc/self/mountinfo to check that %s is the container's "
			 "own: %s",
			 what, strerror(-r));
}

/*
 * Reads the helper's next message into msg (a probe or the reply), and in
 * *fd the descriptor a probe comes with (-1 when none). recvmsg's result.
 */
static ssize_t recv_reply(int sock, struct helper_msg *msg, int *fd)
{
	char control[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = msg, .iov_len = sizeof(*msg) };
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control,
		.msg_controllen = sizeof(control),
	};
	ssize_t got = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	struct cmsghdr *c = got >= 0 ? CMSG_FIRSTHDR(&mh) : NULL;

	*fd = -1;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(fd, CMSG_DATA(c), sizeof(int));
	return got;
}

/*
 * Waits for helper c's reply (its last act) and reads it into msg; the
 * helper then becomes the spent one, ended later. A probe on the way (one
 * at most) gets its answer (answer_probe, about what, kept in ans). A
 * helper that does not answer in HELPER_TIMEOUT_MS, or dies first, is
 * ended: -ETIMEDOUT or -ECHILD.
 */
static int read_reply(struct child *c, struct helper_msg *msg, const char *what,
		      struct dev_answer *ans)
{
	struct pollfd p = { .fd = c->sock, .events = POLLIN };
	struct helper_probe probe;
	ssize_t got = -1;
	int r, fd;

	for (;;) {
		r = poll(&p, 1, HELPER_TIMEOUT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			r = r < 0 ? -errno : -ETIMEDOUT;
			child_end(c);
			return r;
		}
		got = recv_reply(c->sock, msg, &fd);
		if (got < 0 && errno == EINTR)
			continue;
		if (got == (ssize_t)sizeof(probe) && !ans->asked) {
			char go;

			ans->devfd = TAKE_FD(fd);
			memcpy(&probe, msg, sizeof(probe));
			answer_probe(&probe, what, ans);
			go = ans->refused ? 0 : HELPER_GO;
			if (send(c->sock, &go, 1, MSG_NOSIGNAL) == 1)
				continue;
			got = -1;
		}
		safe_close(fd); /* a reply carries none */
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

/* Ends the helper that replied last, if any. */
static void reap_spent(void)
{
	/* It has replied, so nothing is lost if one that lingers is killed. */
	child_end(&spent);
}

/* Ends the spare helper, if there is one. */
static void spare_drop(void)
{
	child_end(&spare);
}

/* Gets a new spare helper from the zygote (or forks one). 0, or -errno. */
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

/*
 * Sends the job to the spare with its descriptors (the target's pidfd and
 * root, then trees), then a files job's entries as a message of their own
 * (helper.h). 0, or -errno.
 */
static int send_job(const struct helper_job *job, const struct helper_file *files, int pidfd,
		    int rootfd, const int *trees, size_t n_trees)
{
	int fds[FDPASS_MAX] = { pidfd, rootfd };
	size_t len = job->n_files * sizeof(*files);
	int r;

	if (n_trees > FDPASS_MAX - 2)
		return -E2BIG;
	memcpy(fds + 2, trees, n_trees * sizeof(*trees));
	r = fds_send(spare.sock, job, sizeof(*job), fds, 2 + n_trees);
	if (r < 0 || len == 0)
		return r;
	return send(spare.sock, files, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -errno;
}

/*
 * Runs one job in the spare helper and returns its reply in msg, and in
 * ans what devgated answered its probe. trees are the detached mounts the
 * job binds (one per node or file); files are the entries of a files job,
 * NULL for nodes. A spare that died while idle is replaced once. 0, or
 * -errno when no helper answered.
 */
static int run_helper(const struct target *t, const struct helper_job *job,
		      const struct helper_file *files, const int *trees, size_t n_trees,
		      struct helper_msg *msg, struct dev_answer *ans)
{
	char what[160];

	int r;

	reap_spent();
	/* A spare that died while idle is replaced once. */
	for (int attempt = 0; attempt < 2; attempt++) {
		if (spare.pid <= 0) {
			r = spare_spawn();
			if (r < 0)
				return r;
		}
		r = send_job(job, files, t->pidfd, t->rootfd, trees, n_trees);
		if (r == 0)
			break;
		spare_drop();
	}
	if (r < 0)
		return r;
	snprintf(what, sizeof(what), "%.100s/dev in the container of PID %d",
		 job->root_path[0] ? job->root_path : "", (int)t->pid);
	r = read_reply(&spare, msg, what, ans);
	/* The next one forks while devgated finishes this request, not in the next. */
	child_order();
	return r;
}

/* What went wrong, for the error message, when a helper stopped at stage. */
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

/* Sets err to "the target exited" and returns -ESRCH. */
static int target_gone(const struct target *t, struct dg_error *err)
{
	dg_error_set(err, DG_E_NO_TARGET, ESRCH,
		     "PID %d exited before devgate could reach its /dev", (int)t->pid);
	dg_error_hint(err, "its PID may belong to another process by now: ask again for a "
			   "container that runs");
	return -ESRCH;
}

/*
 * Turns a helper's reply into 0 (it got through every stage) or -errno
 * with err set to what stopped it.
 */
static int check_msg(const struct target *t, const char *root_path, const struct helper_msg *msg,
		     const struct dev_answer *ans, struct dg_error *err)
{
	if (msg->stage == STAGE_OK)
		return 0;
	if (msg->stage == STAGE_DEV_SHARED) {
		dg_error_set(err, DG_E_TARGET_UNSUPPORTED, EXDEV, "%s",
			     ans->asked ? ans->why
					: "the node helper found a /dev devgated did not approve");
		dg_error_hint(err, "devgate makes nodes only in a /dev of the container's own (the "
				   "tmpfs runtimes mount there), never in a host directory or a "
				   "shared mount bound on /dev");
		return -EXDEV;
	}
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

/* "a symlink", "a directory", ...: what a file of this st_mode is, for messages. */
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

/*
 * The first node a create could not make, as an error: a path held by
 * something else (-EEXIST), or a failed call (-errno). 0 when all were made.
 */
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

/*
 * Fills job for op on target t: the nodes (names checked), whether to enter
 * its mount namespace, whether to bind (another user namespace) and as
 * which ids, the root path and its identity. Refuses a target that has
 * exited, and a root path in devgated's own mount namespace. 0, or -errno
 * with err set.
 */
static int make_job(const struct target *t, enum helper_op op, const struct node_opts *o,
		    const struct dg_node *nodes, size_t n, struct helper_job *job,
		    struct dg_error *err)
{
	memset(job, 0, sizeof(*job));
	if (n > DG_MAX_NODES)
		return dg_error_set(err, DG_E_INTERNAL, E2BIG, "too many nodes");
	for (size_t i = 0; i < n; i++) {
		const char *slash = strchr(nodes[i].name, '/');
		/* One level of directory: DRM nodes live in /dev/dri, MIG's in /dev/nvidia-caps. */
		bool in_dir = slash && (strncmp(nodes[i].name, "dri/", 4) == 0 ||
					strncmp(nodes[i].name, "nvidia-caps/", 12) == 0);
		const char *base = in_dir ? slash + 1 : nodes[i].name;

		if (!base[0] || strchr(base, '/') || base[0] == '.')
			return dg_error_set(err, DG_E_INTERNAL, EINVAL, "bad node name '%s'",
					    nodes[i].name);
	}
	if (o->root_path && strlen(o->root_path) >= sizeof(job->root_path))
		return dg_error_set(err, DG_E_INVALID, ENAMETOOLONG, "root path is too long");
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
	job->bind = job->enter && !same_ns(t->pid, "user", &own_userns, own_userns_known);
	if (job->bind && (mapped_id(t->pid, "uid_map", &job->fs_uid) < 0 ||
			  mapped_id(t->pid, "gid_map", &job->fs_gid) < 0))
		return dg_error_set(err, DG_E_TARGET_UNSUPPORTED, EINVAL,
				    "PID %d is in another user namespace that maps no id devgate "
				    "could own its nodes' files with",
				    (int)t->pid);
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
	if (n)
		memcpy(job->nodes, nodes, n * sizeof(*nodes));
	return 0;
}

/*
 * The host's /dev, which a helper must never work in. Only for a helper:
 * the kept /dev is the very mount a helper checked against it.
 */
static int host_dev_set(struct helper_job *job, struct dg_error *err)
{
	struct stat host;

	if (stat("/dev", &host) < 0)
		return dg_error_set(err, DG_E_KERNEL, errno, "cannot stat /dev: %m");
	job->host_dev = host.st_dev;
	return 0;
}

/*
 * Makes or removes nodes in t's /dev: in the /dev devgated keeps for t
 * when it still may, else through a helper (whose /dev it then keeps):
 * builds the job, the detached mounts to bind when t is in another user
 * namespace, runs it and checks the reply. res[i] says what happened to
 * nodes[i]. 0, or -errno with err set.
 */
static int nodes_apply(const struct target *t, enum helper_op op, const struct node_opts *o,
		       const struct dg_node *nodes, size_t n, struct node_result *res,
		       struct dg_error *err)
{
	struct helper_msg msg = { 0 };
	struct dev_answer ans = { .devfd = -1 };
	struct helper_job job;
	int trees[DG_MAX_NODES];
	bool bind;
	uint64_t gen;
	int r = make_job(t, op, o, nodes, n, &job, err);

	fds_none(trees, ARRAY_SIZE(trees));
	if (r < 0)
		return r;
	if (devcache_apply(t, &job, res, dev_unshared))
		return op == OP_CREATE ? node_error(t, nodes, n, res, err) : 0;
	if ((r = host_dev_set(&job, err)) < 0)
		return r;
	bind = job.bind && op == OP_CREATE;
	if (bind && (r = node_trees(&job, trees)) < 0)
		return dg_error_set(
			err, DG_E_KERNEL, r,
			"cannot make the nodes to bind into PID %d's /dev (another user "
			"namespace): %s",
			(int)t->pid, strerror(-r));
	/* Before the probe is answered: a mount made after it changes the number. */
	gen = devcache_gen();
	r = run_helper(t, &job, NULL, trees, bind ? n : 0, &msg, &ans);
	if (bind)
		close_all(trees, n);
	if (r < 0) {
		safe_close(ans.devfd);
		return dg_error_set(err, DG_E_KERNEL, r, "node helper for PID %d failed: %s",
				    (int)t->pid, r == -ETIMEDOUT ? "timed out" : strerror(-r));
	}
	memcpy(res, msg.res, n * sizeof(*res));
	log_debug("node helper for PID %d worked with capabilities %#llx", (int)t->pid,
		  (unsigned long long)msg.caps);
	r = check_msg(t, o->root_path, &msg, &ans, err);
	/*
	 * Only a tmpfs /dev is kept: devgated itself then works in it, and a
	 * FUSE or network /dev could make its single thread wait on the
	 * container's daemon (a helper's wait is bounded and killed).
	 */
	if (r == 0 && devcache_serves(&job) && ans.devfd >= 0 && ans.fs_type == TMPFS_MAGIC)
		devcache_put(t, ans.devfd, gen);
	safe_close(ans.devfd);
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

/* ---- driver files ---- */

/*
 * Returns the host's file path (below host_root) as a detached mount to put
 * in a container, and its identity in *st: read-only, nosuid, nodev, and
 * unbindable, devgate's mark (helper.c): the kernel neither attaches it
 * below a shared mount nor clones it, so it never leaves the container,
 * and devgate knows it again. -errno.
 */
static int file_tree(int host_root, const char *path, struct stat *st)
{
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
		.propagation = MS_UNBINDABLE,
	};
	auto_close int fd = open_in_root(host_root, path, O_PATH, 0);
	int tree, r;

	if (fd < 0)
		return fd;
	tree = (int)syscall(SYS_open_tree, fd, "",
			    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tree < 0)
		return -errno;
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0 ||
	    fstat(tree, st) < 0) {
		r = -errno;
		close(tree);
		return r;
	}
	return tree;
}

int nodes_open_files(int host_root, struct node_file *f, size_t n, struct dg_error *err)
{
	for (size_t i = 0; i < n; i++)
		f[i].tree = -1;
	for (size_t i = 0; i < n; i++) {
		struct stat st = { 0 };
		int tree = file_tree(host_root, f[i].host, &st);

		if (tree < 0) {
			nodes_close_files(f, i);
			return dg_error_set(err, DG_E_KERNEL, -tree,
					    "cannot open the driver's %s on the host: %s",
					    f[i].host, strerror(-tree));
		}
		f[i].tree = tree;
		f[i].dev = st.st_dev;
		f[i].ino = st.st_ino;
	}
	return 0;
}

void nodes_close_files(struct node_file *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		f[i].tree = safe_close(f[i].tree);
}

/*
 * Sets *ret to the capabilities that pass file permissions which pid's
 * user namespace root may have: those of its bounding set, from
 * /proc/PID/status. 0, or -errno.
 */
static int root_caps(pid_t pid, uint64_t *ret)
{
	const uint64_t dac = (1ULL << CAP_DAC_OVERRIDE) | (1ULL << CAP_DAC_READ_SEARCH) |
			     (1ULL << CAP_FOWNER);
	auto_free char *text = NULL;
	unsigned long long bnd;
	const char *line;
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	r = read_file_at(AT_FDCWD, path, 16384, &text, NULL);
	if (r < 0)
		return r;
	line = strstr(text, "\nCapBnd:");
	if (!line || sscanf(line, "\nCapBnd: %llx", &bnd) != 1)
		return -EINVAL;
	*ret = bnd & dac;
	return 0;
}

/*
 * Fills job and its entries for a driver files job: only into a container's
 * own mount namespace, never devgated's, and as the container's root: root
 * with the file capabilities of its bounding set, or in another user
 * namespace the ids it maps root to (make_job) with none. 0, or -errno
 * with err set.
 */
static int files_job(const struct target *t, enum helper_op op, const struct node_opts *o,
		     const struct node_file *f, size_t n, struct helper_job *job,
		     struct helper_file *entries, struct dg_error *err)
{
	int r;

	if (n > HELPER_MAX_FILES)
		return dg_error_set(err, DG_E_INTERNAL, E2BIG, "too many driver files");
	r = make_job(t, op, o, NULL, 0, job, err);
	if (r < 0)
		return r;
	if (!job->enter)
		return dg_error_set(
			err, DG_E_TARGET_UNSUPPORTED, EXDEV,
			"PID %d shares devgated's mount namespace: driver files go only "
			"into a container's own",
			(int)t->pid);
	if (!job->bind) {
		r = root_caps(t->pid, &job->root_caps);
		if (r == 0 && pidfd_alive(t->pidfd) < 0)
			return target_gone(t, err);
		if (r < 0)
			return dg_error_set(err, DG_E_KERNEL, -r,
					    "cannot read the capabilities of PID %d: %s",
					    (int)t->pid, strerror(-r));
	}
	for (size_t i = 0; i < n; i++) {
		if (strlen(f[i].path) >= HELPER_PATH_MAX || f[i].path[0] != '/')
			return dg_error_set(err, DG_E_INTERNAL, EINVAL, "bad driver file path");
		entries[i] = (struct helper_file){
			.dev = f[i].dev,
			.ino = f[i].ino,
			.kind = f[i].dir ? HELPER_DIR : HELPER_MOUNT,
			.flags = f[i].marked ? HELPER_MARKED : 0,
		};
		snprintf(entries[i].path, HELPER_PATH_MAX, "%s", f[i].path);
	}
	job->n_files = n;
	return 0;
}

/* The error for entry f that failed as res says; returns -errno. */
static int file_error(const struct target *t, const struct node_file *f,
		      const struct file_result *res, struct dg_error *err)
{
	int at = res->at < strlen(f->path) ? res->at : (int)strlen(f->path);

	if (res->step == FSTEP_WALK && res->err == EXDEV) {
		dg_error_set(err, DG_E_TARGET_UNSUPPORTED, EXDEV,
			     "cannot mount the driver's %s in the container of PID %d: %.*s is "
			     "on another mount than the container's root (a volume, or a host "
			     "directory bound in)",
			     f->path, (int)t->pid, at, f->path);
		dg_error_hint(err, "devgate puts the driver's files only on the container's root "
				   "filesystem, never across a mount; mount the driver with CDI "
				   "('devgatectl cdi generate') instead");
		return -EXDEV;
	}
	if ((res->step == FSTEP_MKDIR || res->step == FSTEP_FILE) &&
	    (res->err == EACCES || res->err == EPERM)) {
		dg_error_set(err, DG_E_TARGET_UNSUPPORTED, res->err,
			     "cannot mount the driver's %s in the container of PID %d: the "
			     "container's root may not make %s%.*s (%s)",
			     f->path, (int)t->pid, res->step == FSTEP_FILE ? "a file in " : "", at,
			     f->path, strerror(res->err));
		dg_error_hint(err, "devgate makes only what the container's own root could make "
				   "(as its ids, with the capabilities it has); give the image the "
				   "directory, or mount the driver with CDI");
		return -res->err;
	}
	if (res->step == FSTEP_SHARED) {
		dg_error_set(err, DG_E_TARGET_UNSUPPORTED, EXDEV,
			     "cannot mount the driver's %s in the container of PID %d: the mount "
			     "it would go on is shared with other mount namespaces, and "
			     "devgate's mounts must not propagate out of the container",
			     f->path, (int)t->pid);
		dg_error_hint(err, "give the container a private or slave root (OCI "
				   "linux.rootfsPropagation), or mount the driver with CDI");
		return -EXDEV;
	}
	return dg_error_set(err, DG_E_KERNEL, res->err,
			    "cannot mount the driver's %s in the container of PID %d: %s", f->path,
			    (int)t->pid, strerror(res->err));
}

/*
 * Mounts or unmounts driver files in t through a helper; ret says what
 * became of each entry. 0, or -errno with err set.
 */
static int files_apply(const struct target *t, enum helper_op op, const struct node_opts *o,
		       const struct node_file *f, size_t n, struct node_files_result *ret,
		       struct dg_error *err)
{
	struct helper_msg msg = { 0 };
	struct dev_answer ans = { .devfd = -1 };
	struct helper_job job = { 0 };
	struct helper_file entries[HELPER_MAX_FILES];
	int trees[HELPER_MAX_FILES];
	size_t n_trees = op == OP_MOUNT_FILES ? n : 0;
	int r;

	ret->replied = false;
	r = files_job(t, op, o, f, n, &job, entries, err);
	if (r == 0)
		r = host_dev_set(&job, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n_trees; i++)
		trees[i] = f[i].tree;
	r = run_helper(t, &job, entries, trees, n_trees, &msg, &ans);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "node helper for PID %d failed: %s",
				    (int)t->pid, r == -ETIMEDOUT ? "timed out" : strerror(-r));
	ret->replied = true;
	log_debug("node helper for PID %d worked with capabilities %#llx (driver files)",
		  (int)t->pid, (unsigned long long)msg.caps);
	memcpy(ret->res, msg.files.res, n * sizeof(*ret->res));
	ret->n_dirs = 0;
	for (size_t i = 0; i < msg.files.n_dirs && i < HELPER_MAX_DIRS; i++) {
		if (msg.files.dirs[i].file < n && msg.files.dirs[i].len < HELPER_PATH_MAX)
			ret->dirs[ret->n_dirs++] = msg.files.dirs[i];
	}
	if (msg.stage == STAGE_FILES) {
		for (size_t i = 0; i < n; i++) {
			if (msg.files.res[i].status == FILE_FAILED)
				return file_error(t, &f[i], &msg.files.res[i], err);
		}
		return dg_error_set(err, DG_E_KERNEL, msg.err,
				    "cannot work on the driver's files in the container of PID "
				    "%d: %s",
				    (int)t->pid, strerror(msg.err));
	}
	return check_msg(t, o->root_path, &msg, &ans, err);
}

int nodes_mount_files(const struct target *t, const struct node_opts *o, const struct node_file *f,
		      size_t n, struct node_files_result *ret, struct dg_error *err)
{
	return files_apply(t, OP_MOUNT_FILES, o, f, n, ret, err);
}

int nodes_unmount_files(const struct target *t, const struct node_opts *o,
			const struct node_file *f, size_t n, struct node_files_result *ret,
			struct dg_error *err)
{
	return files_apply(t, OP_UNMOUNT_FILES, o, f, n, ret, err);
}

void nodes_fini(void)
{
	node_src = safe_close(node_src);
	devcache_fini();
	reap_spent();
	spare_drop();
	zygote_stop();
	free(helper_filter.filter);
	helper_filter.filter = NULL;
	helper_filter.len = 0;
}
