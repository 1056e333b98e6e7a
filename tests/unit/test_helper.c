// SPDX-License-Identifier: Apache-2.0
/*
 * The node helper (daemon/helper/helper.c) doing its real work under its
 * real seccomp filter. Each job runs in a fresh helper forked as devgated
 * forks one when it has no zygote (forkloop_child, then helper_main), with
 * the filter devgated builds (nodes_helper_filter, from helper/syscalls.h).
 * The test sends the job over the helper's socket, reads its reply and
 * checks what it made in a temporary directory, which stands for a
 * container's root filesystem. A call the helper makes that the allow-list
 * lacks fails there with EPERM, and so does the test.
 *
 * Device nodes, mount namespaces and mounts need root. As another user
 * those tests skip, except under DEVGATE_REQUIRE_PRIVILEGED=1 (CI), where
 * they fail; the rest run as any user.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "helper/fdpass.h"
#include "helper/forkloop.h"
#include "helper/helper.h"
#include "node/nodes.h"

#define HELPER_REPLY_MS 5000
#define NODE_MODE 0666
#define NODE_UID 1000
#define NODE_GID 1001
/* The host ids a user-namespaced container's root maps to, for bound nodes. */
#define FS_UID 4321
#define FS_GID 4322

/* The filter every helper of this test runs under, as devgated builds it. */
static struct sock_fprog filter;

/*
 * The "container": a process in a mount namespace of its own (root only).
 * Helpers join it as they join a container's, and the mounts they make
 * there go away with it. box_sock: closing it ends the process.
 */
static struct {
	pid_t pid;
	int pidfd;
	int rootfd; /* /proc/PID/root, as devgated opens a container's root */
	int sock;
} box = { -1, -1, -1, -1 };

/* This test's root filesystem: a fresh directory with a dev/ inside. */
static char root[64];

static const struct dg_node nodes[] = {
	{ .name = "nvidia0", .major = 195, .minor = 0 },
	{ .name = "nvidiactl", .major = 195, .minor = 255 },
	{ .name = "dri/card1", .major = 226, .minor = 1 },
	{ .name = "loop9", .major = 7, .minor = 9, .block = true },
};
#define N_NODES ARRAY_SIZE(nodes)

/* Whether the tests that need root run; a skip is a failure where root is required. */
static bool have_root(void)
{
	const char *required = getenv("DEVGATE_REQUIRE_PRIVILEGED");

	if (geteuid() == 0)
		return true;
	if (required && strcmp(required, "1") == 0)
		fail_msg("this test needs root, and DEVGATE_REQUIRE_PRIVILEGED=1");
	return false;
}

/* The box's whole life: a private mount namespace until the test hangs up. */
static void box_main(int sock)
{
	char c = 'r';

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		_exit(1);
	if (write(sock, &c, 1) != 1)
		_exit(1);
	while (read(sock, &c, 1) > 0)
		;
	_exit(0);
}

static void box_start(void)
{
	char path[64], c = 0;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	box.pid = fork();
	assert_true(box.pid >= 0);
	if (box.pid == 0) {
		close(sv[0]);
		box_main(sv[1]);
	}
	close(sv[1]);
	box.sock = sv[0];
	assert_int_equal(read(box.sock, &c, 1), 1);
	assert_int_equal(c, 'r');
	box.pidfd = (int)syscall(SYS_pidfd_open, box.pid, 0);
	assert_true(box.pidfd >= 0);
	snprintf(path, sizeof(path), "/proc/%d/root", (int)box.pid);
	box.rootfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(box.rootfd >= 0);
}

/* Skips the test without root (see have_root), else starts the box once. */
static void need_box(void)
{
	if (!have_root())
		skip();
	if (box.pid <= 0)
		box_start();
}

static void box_stop(void)
{
	int status;

	if (box.pid <= 0)
		return;
	box.sock = safe_close(box.sock);
	box.pidfd = safe_close(box.pidfd);
	box.rootfd = safe_close(box.rootfd);
	(void)waitpid(box.pid, &status, 0);
	box.pid = -1;
}

#ifdef __SANITIZE_ADDRESS__
#include <seccomp.h>

#include "helper/syscalls.h"
#include "sys/confine.h"

/*
 * An ASan build (make check-asan) runs the helper's code with the
 * sanitizer's runtime, which maps memory and an alternate signal stack for
 * itself: these three calls are the runtime's, not the helper's, and
 * devgated-node itself is never built with sanitizers. The helper's own list stays whole, so a call
 * the helper needs and lacks still fails here.
 */
static const int sanitizer_syscalls[] = { __NR_mmap, __NR_sigaltstack, __NR_gettid };

/* The helper's filter with the sanitizer runtime's calls added. */
static int helper_filter(struct sock_fprog *ret, struct dg_error *err)
{
	int all[ARRAY_SIZE(helper_syscalls) + ARRAY_SIZE(sanitizer_syscalls)];

	memcpy(all, helper_syscalls, sizeof(helper_syscalls));
	memcpy(all + ARRAY_SIZE(helper_syscalls), sanitizer_syscalls, sizeof(sanitizer_syscalls));
	return confine_build(SCMP_ACT_ERRNO(EPERM), all, ARRAY_SIZE(all), NULL, 0, ret, err);
}
#else
/* The very filter devgated builds. */
static int helper_filter(struct sock_fprog *ret, struct dg_error *err)
{
	return nodes_helper_filter(ret, err);
}
#endif

static int group_setup(void **state)
{
	struct dg_error err = { 0 };

	(void)state;
	if (helper_filter(&filter, &err) < 0) {
		fprintf(stderr, "cannot build the helper's filter: %s\n", err.message);
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	box_stop();
	free(filter.filter);
	return 0;
}

static int setup(void **state)
{
	char dev[sizeof(root) + 8];

	(void)state;
	snprintf(root, sizeof(root), "/tmp/devgate-helper.XXXXXX");
	if (!mkdtemp(root))
		return -1;
	snprintf(dev, sizeof(dev), "%s/dev", root);
	return mkdir(dev, 0755);
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

static int teardown(void **state)
{
	(void)state;
	return nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The helper's life in the child: helper_main never returns. */
static void helper_child(int sock)
{
	helper_main(sock, &filter);
}

/*
 * What the test answers a helper's probe of its /dev (devgated's part):
 * HELPER_GO unless a test says otherwise; the last probe is kept.
 */
static char probe_answer = HELPER_GO;
static struct helper_probe last_probe;
static int n_probes;

/*
 * Runs job in a fresh helper, with the target's pidfd and root, the
 * detached mounts it binds (trees) and a files job's entries, and returns its
 * reply in msg, answering its probe on the way. The helper must reply and
 * exit 0.
 */
static void run_job(const struct helper_job *job, int pidfd, int rootfd, const int *trees,
		    size_t n_trees, const struct helper_file *files, struct helper_msg *msg)
{
	int fds[FDPASS_MAX] = { pidfd, rootfd };
	size_t len = job->n_files * sizeof(*files);
	struct child c;
	struct pollfd p;
	ssize_t got;
	int status;

	assert_int_equal(forkloop_child(helper_child, &c), 0);
	if (n_trees)
		memcpy(fds + 2, trees, n_trees * sizeof(*trees));
	assert_int_equal(fds_send(c.sock, job, sizeof(*job), fds, 2 + n_trees), 0);
	if (len)
		assert_int_equal(send(c.sock, files, len, MSG_NOSIGNAL), (ssize_t)len);
	n_probes = 0;
	memset(msg, 0, sizeof(*msg));
	for (;;) {
		p = (struct pollfd){ .fd = c.sock, .events = POLLIN };
		assert_int_equal(poll(&p, 1, HELPER_REPLY_MS), 1);
		got = read(c.sock, msg, sizeof(*msg));
		if (got != (ssize_t)sizeof(last_probe))
			break;
		memcpy(&last_probe, msg, sizeof(last_probe));
		n_probes++;
		assert_int_equal(send(c.sock, &probe_answer, 1, MSG_NOSIGNAL), 1);
	}
	assert_int_equal(got, (ssize_t)sizeof(*msg));
	assert_int_equal(waitpid(c.pid, &status, 0), c.pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	close(c.sock);
	safe_close(c.pidfd);
}

/*
 * A job on this test's root: in the box's mount namespace (enter) or in
 * ours, with the nodes given. root_path names the root inside the target,
 * checked by its device and inode, as an OCI hook's rootfs is.
 */
static void job_init(struct helper_job *job, enum helper_op op, bool enter, const struct dg_node *n,
		     size_t count)
{
	struct stat host, st;

	memset(job, 0, sizeof(*job));
	assert_int_equal(stat("/dev", &host), 0);
	assert_int_equal(stat(root, &st), 0);
	job->op = op;
	job->enter = enter;
	job->host_dev = host.st_dev;
	job->check_root = 1;
	job->root_dev = st.st_dev;
	job->root_ino = st.st_ino;
	snprintf(job->root_path, sizeof(job->root_path), "%s", root);
	job->mode = NODE_MODE;
	job->n = count;
	if (count)
		memcpy(job->nodes, n, count * sizeof(*n));
}

/* The path of name below this test's root, as prefix (a /proc/PID/root or "") sees it. */
static void path_of(char *buf, size_t len, const char *prefix, const char *name)
{
	int n = snprintf(buf, len, "%s%s/%s", prefix, root, name);

	assert_true(n > 0 && (size_t)n < len);
}

/* "dev/NAME", where node n goes below the root, in buf. */
static const char *dev_name(const struct dg_node *n, char *buf, size_t len)
{
	int r = snprintf(buf, len, "dev/%s", n->name);

	assert_true(r > 0 && (size_t)r < len);
	return buf;
}

static void assert_node(const char *prefix, const struct dg_node *n, uid_t uid, gid_t gid)
{
	char path[PATH_MAX], name[64];
	struct stat st;

	path_of(path, sizeof(path), prefix, dev_name(n, name, sizeof(name)));
	if (lstat(path, &st) < 0)
		fail_msg("%s: %s", path, strerror(errno));
	assert_int_equal(st.st_mode & S_IFMT, n->block ? S_IFBLK : S_IFCHR);
	assert_int_equal(major(st.st_rdev), n->major);
	assert_int_equal(minor(st.st_rdev), n->minor);
	assert_int_equal(st.st_mode & 07777, NODE_MODE);
	assert_int_equal(st.st_uid, uid);
	assert_int_equal(st.st_gid, gid);
}

static void assert_gone(const char *prefix, const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	path_of(path, sizeof(path), prefix, name);
	assert_int_equal(lstat(path, &st), -1);
	assert_int_equal(errno, ENOENT);
}

static void assert_status(const struct helper_msg *msg, int status)
{
	assert_int_equal(msg->stage, STAGE_OK);
	for (size_t i = 0; i < N_NODES; i++) {
		if (msg->res[i].status != status)
			fail_msg("/dev/%s: status %d (errno %d), not %d", nodes[i].name,
				 msg->res[i].status, msg->res[i].err, status);
	}
}

/*
 * Nodes made in the box's /dev with their numbers, mode and owner, found
 * there on a second try, then removed. walk: the helper walks paths one
 * component at a time, as on a kernel without openat2.
 */
static void nodes_made_and_removed(bool walk)
{
	static struct helper_job job;
	static struct helper_msg msg;

	need_box();
	job_init(&job, OP_CREATE, true, nodes, N_NODES);
	job.no_openat2 = walk;
	job.uid = NODE_UID;
	job.gid = NODE_GID;
	run_job(&job, box.pidfd, box.rootfd, NULL, 0, NULL, &msg);
	assert_status(&msg, NODE_CREATED);
	/* It worked with what it needs for nodes, not with CAP_SYS_ADMIN. */
	assert_true(msg.caps & (1ULL << CAP_MKNOD));
	assert_false(msg.caps & (1ULL << CAP_SYS_ADMIN));
	for (size_t i = 0; i < N_NODES; i++)
		assert_node("", &nodes[i], NODE_UID, NODE_GID);

	run_job(&job, box.pidfd, box.rootfd, NULL, 0, NULL, &msg);
	assert_status(&msg, NODE_PRESENT);

	job.op = OP_REMOVE;
	run_job(&job, box.pidfd, box.rootfd, NULL, 0, NULL, &msg);
	assert_status(&msg, NODE_REMOVED);
	for (size_t i = 0; i < N_NODES; i++) {
		char name[64];

		assert_gone("", dev_name(&nodes[i], name, sizeof(name)));
	}
	run_job(&job, box.pidfd, box.rootfd, NULL, 0, NULL, &msg);
	assert_status(&msg, NODE_ABSENT);
}

static void test_nodes(void **state)
{
	(void)state;
	nodes_made_and_removed(false);
}

static void test_nodes_walk(void **state)
{
	(void)state;
	nodes_made_and_removed(true);
}

/* A detached mount of a node made in src/, as devgated binds into another user namespace. */
static int node_tree(const struct dg_node *n)
{
	const char *base = strrchr(n->name, '/');
	mode_t type = n->block ? S_IFBLK : S_IFCHR;
	char path[PATH_MAX], name[64];
	int fd, r;

	r = snprintf(name, sizeof(name), "src/%s", base ? base + 1 : n->name);
	assert_true(r > 0 && (size_t)r < sizeof(name));
	path_of(path, sizeof(path), "", name);
	/* The mode as the job wants it, whatever the umask: the helper checks it. */
	if (mknod(path, type | NODE_MODE, makedev(n->major, n->minor)) < 0 ||
	    chmod(path, NODE_MODE) < 0)
		fail_msg("%s: %s", path, strerror(errno));
	fd = (int)syscall(SYS_open_tree, AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0)
		fail_msg("open_tree %s: %s", path, strerror(errno));
	return fd;
}

/*
 * Nodes bound into the box's /dev, as for a container in another user
 * namespace: the box sees the nodes, this namespace only the files they are
 * mounted on, made as the id that namespace maps (FS_UID, FS_GID, the owner
 * of its /dev). Removed, both are gone.
 */
static void test_bound_nodes(void **state)
{
	static struct helper_job job;
	static struct helper_msg msg;
	char src[PATH_MAX], proc[32];
	int trees[N_NODES];

	(void)state;
	need_box();
	path_of(src, sizeof(src), "", "dev");
	assert_int_equal(chown(src, FS_UID, FS_GID), 0);
	path_of(src, sizeof(src), "", "src");
	assert_int_equal(mkdir(src, 0700), 0);
	for (size_t i = 0; i < N_NODES; i++)
		trees[i] = node_tree(&nodes[i]);
	job_init(&job, OP_CREATE, true, nodes, N_NODES);
	job.bind = 1;
	job.fs_uid = FS_UID;
	job.fs_gid = FS_GID;
	run_job(&job, box.pidfd, box.rootfd, trees, N_NODES, NULL, &msg);
	for (size_t i = 0; i < N_NODES; i++)
		close(trees[i]);
	assert_status(&msg, NODE_CREATED);
	snprintf(proc, sizeof(proc), "/proc/%d/root", (int)box.pid);
	for (size_t i = 0; i < N_NODES; i++) {
		char path[PATH_MAX], name[64];
		struct stat st;

		assert_node(proc, &nodes[i], 0, 0);
		path_of(path, sizeof(path), "", dev_name(&nodes[i], name, sizeof(name)));
		assert_int_equal(lstat(path, &st), 0);
		assert_true(S_ISREG(st.st_mode));
		assert_int_equal(st.st_uid, FS_UID);
		assert_int_equal(st.st_gid, FS_GID);
	}

	job.op = OP_REMOVE;
	run_job(&job, box.pidfd, box.rootfd, NULL, 0, NULL, &msg);
	assert_status(&msg, NODE_REMOVED);
	for (size_t i = 0; i < N_NODES; i++) {
		char name[64];

		assert_gone(proc, dev_name(&nodes[i], name, sizeof(name)));
		assert_gone("", dev_name(&nodes[i], name, sizeof(name)));
	}
}

/*
 * A detached mount of a new file of ours (name below the root), read-only
 * and unbindable, as devgated mounts the driver's files; with its identity
 * in f.
 */
static int file_tree(const char *name, const char *text, struct helper_file *f)
{
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
		.propagation = MS_UNBINDABLE,
	};
	char path[PATH_MAX];
	auto_close int fd = -1;
	struct stat st;
	int tree;

	path_of(path, sizeof(path), "", name);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	tree = (int)syscall(SYS_open_tree, AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		fail_msg("open_tree %s: %s", path, strerror(errno));
	assert_int_equal(syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)),
			 0);
	assert_int_equal(fstat(tree, &st), 0);
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->kind = HELPER_MOUNT;
	return tree;
}

static void assert_text(const char *path, const char *text)
{
	char buf[64] = "";
	auto_close int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		fail_msg("%s: %s", path, strerror(errno));
	assert_true(read(fd, buf, sizeof(buf) - 1) >= 0);
	assert_string_equal(buf, text);
}

/* Runs the shell script in the box's mount namespace, with ROOT set to this test's root. */
static void in_box(const char *script)
{
	pid_t pid;
	int status;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setns(box.pidfd, CLONE_NEWNS) < 0 || setenv("ROOT", root, 1) < 0)
			_exit(127);
		execl("/bin/sh", "sh", "-ec", script, (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("in the box: '%s' failed", script);
}

/* A files job on this test's root, in the box, with the entries given. */
static void files_job(struct helper_job *job, enum helper_op op, size_t n, uint64_t root_caps)
{
	job_init(job, op, true, NULL, 0);
	job->n_files = n;
	job->root_caps = root_caps;
}

static void set_path(struct helper_file *f, const char *path)
{
	snprintf(f->path, sizeof(f->path), "%s", path);
}

/*
 * Driver files mounted read-only into the box, their directories made
 * where missing (and reported), and a file the image has at such a path
 * left alone. Mounted again, devgate's mount found there is known as its
 * own. Then taken off with the files they were on, and the directories
 * removed; the image's file stays.
 */
static void test_driver_files(void **state)
{
	static struct helper_job job;
	static struct helper_msg msg;
	static struct helper_file files[5];
	char path[PATH_MAX], proc[32];
	int trees[2];

	(void)state;
	need_box();
	path_of(path, sizeof(path), "", "etc");
	assert_int_equal(mkdir(path, 0755), 0);
	path_of(path, sizeof(path), "", "host");
	assert_int_equal(mkdir(path, 0700), 0);
	path_of(path, sizeof(path), "", "etc/fake.conf");
	assert_int_equal(close(open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)), 0);
	set_path(&files[0], "/usr/lib/fake/libfake.so.1");
	set_path(&files[1], "/etc/fake.conf");
	trees[0] = file_tree("host/libfake.so.1", "the driver\n", &files[0]);
	trees[1] = file_tree("host/fake.conf", "the host's\n", &files[1]);

	files_job(&job, OP_MOUNT_FILES, 2, 0);
	run_job(&job, box.pidfd, box.rootfd, trees, 2, files, &msg);
	assert_int_equal(msg.stage, STAGE_OK);
	assert_int_equal(msg.files.res[0].status, FILE_MOUNTED);
	assert_int_equal(msg.files.res[1].status, FILE_IMAGE);
	/* usr, usr/lib, usr/lib/fake: prefixes of the first file's path. */
	assert_int_equal(msg.files.n_dirs, 3);
	assert_int_equal(msg.files.dirs[0].len, strlen("/usr"));
	assert_int_equal(msg.files.dirs[2].len, strlen("/usr/lib/fake"));
	assert_int_equal(msg.files.dirs[2].file, 0);
	snprintf(proc, sizeof(proc), "/proc/%d/root", (int)box.pid);
	path_of(path, sizeof(path), proc, "usr/lib/fake/libfake.so.1");
	assert_text(path, "the driver\n");
	assert_int_equal(open(path, O_WRONLY | O_CLOEXEC), -1);
	assert_int_equal(errno, EROFS);
	path_of(path, sizeof(path), proc, "usr/lib/fake");
	{
		struct stat st;

		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_ino, msg.files.dirs[2].ino);
		files[2] = (struct helper_file){ .kind = HELPER_DIR, .ino = st.st_ino };
		set_path(&files[2], "/usr/lib/fake");
	}
	files[3] = (struct helper_file){ .kind = HELPER_DIR, .ino = msg.files.dirs[1].ino };
	set_path(&files[3], "/usr/lib");
	files[4] = (struct helper_file){ .kind = HELPER_DIR, .ino = msg.files.dirs[0].ino };
	set_path(&files[4], "/usr");

	/* Again (a crash lost the record): devgate's mount there is its own, not the image's. */
	run_job(&job, box.pidfd, box.rootfd, trees, 2, files, &msg);
	close(trees[0]);
	close(trees[1]);
	assert_int_equal(msg.stage, STAGE_OK);
	assert_int_equal(msg.files.res[0].status, FILE_ADOPTED);
	assert_int_equal(msg.files.res[1].status, FILE_IMAGE);
	assert_int_equal(msg.files.n_dirs, 0);

	/* Recorded paths: any mount there comes off; not the image's file, which is none. */
	files[0].ino = files[1].ino = 0;
	files_job(&job, OP_UNMOUNT_FILES, 5, 0);
	run_job(&job, box.pidfd, box.rootfd, NULL, 0, files, &msg);
	assert_int_equal(msg.stage, STAGE_OK);
	assert_int_equal(msg.files.res[0].status, FILE_REMOVED);
	assert_int_equal(msg.files.res[1].status, FILE_ABSENT);
	for (size_t i = 2; i < 5; i++)
		assert_int_equal(msg.files.res[i].status, FILE_REMOVED);
	assert_gone(proc, "usr");
	path_of(path, sizeof(path), proc, "etc/fake.conf");
	assert_text(path, "");
}

/*
 * Where devgate does not write: a directory reached across a mount (a
 * volume, through a symlink too, and in a walk without openat2); a directory the container's root
 * may not write, unless it has CAP_DAC_OVERRIDE; below a shared mount. Each is refused with where
 * it stopped, and leaves nothing behind. A bindable mount of the same file (what a runtime's CDI
 * mount is) is the image's, and an unmount of devgate's marked mounts leaves it.
 */
static void test_driver_walls(void **state)
{
	static struct helper_job job;
	static struct helper_msg msg;
	static struct helper_file f[1];
	char path[PATH_MAX], proc[32];
	struct stat st;
	int tree;

	(void)state;
	need_box();
	snprintf(proc, sizeof(proc), "/proc/%d/root", (int)box.pid);
	path_of(path, sizeof(path), "", "host");
	assert_int_equal(mkdir(path, 0700), 0);
	in_box("mkdir \"$ROOT/vol\" && mount -t tmpfs vol \"$ROOT/vol\" && "
	       "ln -s vol \"$ROOT/usr\"");
	set_path(&f[0], "/usr/lib/libfake.so.1");
	tree = file_tree("host/libfake.so.1", "the driver\n", &f[0]);
	files_job(&job, OP_MOUNT_FILES, 1, 0);
	run_job(&job, box.pidfd, box.rootfd, &tree, 1, f, &msg);
	assert_int_equal(msg.stage, STAGE_FILES);
	assert_int_equal(msg.files.res[0].status, FILE_FAILED);
	assert_int_equal(msg.files.res[0].step, FSTEP_WALK);
	assert_int_equal(msg.files.res[0].err, EXDEV);
	assert_int_equal(msg.files.res[0].at, strlen("/usr"));
	path_of(path, sizeof(path), proc, "vol/lib");
	assert_int_equal(lstat(path, &st), -1);
	/* The walk without openat2 follows no symlink, and checks where it ends up. */
	job.no_openat2 = 1;
	run_job(&job, box.pidfd, box.rootfd, &tree, 1, f, &msg);
	assert_int_equal(msg.files.res[0].err, ENOTDIR);
	in_box("mkdir \"$ROOT/mnt\" && mount -t tmpfs mnt \"$ROOT/mnt\" && mkdir \"$ROOT/mnt/lib\"");
	set_path(&f[0], "/mnt/lib/libfake.so.1");
	run_job(&job, box.pidfd, box.rootfd, &tree, 1, f, &msg);
	assert_int_equal(msg.files.res[0].status, FILE_FAILED);
	assert_int_equal(msg.files.res[0].step, FSTEP_WALK);
	assert_int_equal(msg.files.res[0].err, EXDEV);
	path_of(path, sizeof(path), proc, "mnt/lib/libfake.so.1");
	assert_int_equal(lstat(path, &st), -1);
	job.no_openat2 = 0;

	/* Owned by another user: the container's root may not write there. */
	set_path(&f[0], "/opt/lib/libfake.so.1");
	path_of(path, sizeof(path), "", "opt");
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(chown(path, 1234, 1234), 0);
	run_job(&job, box.pidfd, box.rootfd, &tree, 1, f, &msg);
	assert_int_equal(msg.files.res[0].status, FILE_FAILED);
	assert_int_equal(msg.files.res[0].step, FSTEP_MKDIR);
	assert_int_equal(msg.files.res[0].err, EACCES);
	assert_int_equal(msg.files.res[0].at, strlen("/opt/lib"));
	assert_gone("", "opt/lib");
	/* Unless it may override permissions: then so may devgate. */
	files_job(&job, OP_MOUNT_FILES, 1, 1ULL << CAP_DAC_OVERRIDE);
	run_job(&job, box.pidfd, box.rootfd, &tree, 1, f, &msg);
	assert_int_equal(msg.stage, STAGE_OK);
	assert_int_equal(msg.files.res[0].status, FILE_MOUNTED);
	assert_int_equal(msg.files.n_dirs, 1);
	path_of(path, sizeof(path), "", "opt/lib");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, 0);

	/* A bindable mount of that file, as a runtime's is: the image's, and it stays. */
	set_path(&f[0], "/opt/libfake.so.1");
	in_box("touch \"$ROOT/opt/libfake.so.1\" && "
	       "mount --bind \"$ROOT/host/libfake.so.1\" \"$ROOT/opt/libfake.so.1\"");
	run_job(&job, box.pidfd, box.rootfd, &tree, 1, f, &msg);
	assert_int_equal(msg.files.res[0].status, FILE_IMAGE);
	f[0].flags = HELPER_MARKED;
	files_job(&job, OP_UNMOUNT_FILES, 1, 0);
	run_job(&job, box.pidfd, box.rootfd, NULL, 0, f, &msg);
	assert_int_equal(msg.files.res[0].status, FILE_ABSENT);
	path_of(path, sizeof(path), proc, "opt/libfake.so.1");
	assert_text(path, "the driver\n");

	/* A root on a shared mount, with a peer: the mount would propagate. */
	in_box("mkdir \"$ROOT/shr\" \"$ROOT/peer\" && mount -t tmpfs shr \"$ROOT/shr\" && "
	       "mount --make-shared \"$ROOT/shr\" && mount --bind \"$ROOT/shr\" \"$ROOT/peer\" && "
	       "mkdir \"$ROOT/shr/dev\"");
	set_path(&f[0], "/lib/libfake.so.1");
	f[0].flags = 0;
	files_job(&job, OP_MOUNT_FILES, 1, 0);
	snprintf(job.root_path, sizeof(job.root_path), "%s/shr", root);
	job.check_root = 0;
	run_job(&job, box.pidfd, box.rootfd, &tree, 1, f, &msg);
	close(tree);
	assert_int_equal(msg.stage, STAGE_FILES);
	assert_int_equal(msg.files.res[0].status, FILE_FAILED);
	assert_int_equal(msg.files.res[0].step, FSTEP_SHARED);
	path_of(path, sizeof(path), proc, "peer/lib");
	assert_int_equal(lstat(path, &st), -1);
	in_box("umount \"$ROOT/peer\" \"$ROOT/shr\" \"$ROOT/opt/libfake.so.1\" "
	       "\"$ROOT/opt/lib/libfake.so.1\" \"$ROOT/vol\" \"$ROOT/mnt\"");
}

/*
 * Any user: a path held by something else stops a create before anything
 * is made, and a remove leaves it alone.
 */
static void test_conflict(void **state)
{
	static struct helper_job job;
	static struct helper_msg msg;
	auto_close int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
	auto_close int slash = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	char path[PATH_MAX];

	(void)state;
	assert_true(self >= 0 && slash >= 0);
	path_of(path, sizeof(path), "", "dev/nvidiactl");
	assert_int_equal(close(open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)), 0);
	job_init(&job, OP_CREATE, false, nodes, N_NODES);
	run_job(&job, self, slash, NULL, 0, NULL, &msg);
	assert_int_equal(msg.stage, STAGE_OK);
	for (size_t i = 0; i < N_NODES; i++) {
		char name[64];

		if (i == 1) {
			assert_int_equal(msg.res[i].status, NODE_CONFLICT);
			assert_true(S_ISREG(msg.res[i].mode));
			continue;
		}
		assert_int_equal(msg.res[i].status, NODE_UNTOUCHED);
		assert_gone("", dev_name(&nodes[i], name, sizeof(name)));
	}

	job.op = OP_REMOVE;
	run_job(&job, self, slash, NULL, 0, NULL, &msg);
	for (size_t i = 0; i < N_NODES; i++)
		assert_int_equal(msg.res[i].status, i == 1 ? NODE_CONFLICT : NODE_ABSENT);
	assert_int_equal(access(path, F_OK), 0);
}

/* Any user: the host's own /dev is refused, whatever the job asks. */
static void test_host_dev(void **state)
{
	static struct helper_job job;
	static struct helper_msg msg;
	auto_close int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
	auto_close int slash = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

	(void)state;
	assert_true(self >= 0 && slash >= 0);
	job_init(&job, OP_REMOVE, false, nodes, N_NODES);
	job.check_root = 0;
	job.root_path[0] = '\0';
	run_job(&job, self, slash, NULL, 0, NULL, &msg);
	assert_int_equal(msg.stage, STAGE_HOST_DEV);
	assert_int_equal(msg.err, EXDEV);
	assert_int_equal(msg.res[0].status, NODE_UNTOUCHED);
}

/*
 * Any user: a node job asks about its /dev (the directory's st_dev and
 * file system) before it makes anything, and a refusal stops it there;
 * a files job does not ask.
 */
static void test_probe(void **state)
{
	static struct helper_job job;
	static struct helper_msg msg;
	auto_close int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
	auto_close int slash = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	char dev[PATH_MAX];
	struct stat st;

	(void)state;
	assert_true(self >= 0 && slash >= 0);
	path_of(dev, sizeof(dev), "", "dev");
	assert_int_equal(stat(dev, &st), 0);
	job_init(&job, OP_CREATE, false, nodes, N_NODES);
	probe_answer = 0;
	run_job(&job, self, slash, NULL, 0, NULL, &msg);
	probe_answer = HELPER_GO;
	assert_int_equal(n_probes, 1);
	assert_true(last_probe.dev == (uint64_t)st.st_dev);
	assert_true(last_probe.fs_type != 0);
	assert_int_equal(msg.stage, STAGE_DEV_SHARED);
	assert_int_equal(msg.err, EXDEV);
	for (size_t i = 0; i < N_NODES; i++) {
		char name[64];

		assert_int_equal(msg.res[i].status, NODE_UNTOUCHED);
		assert_gone("", dev_name(&nodes[i], name, sizeof(name)));
	}
	/* Removing asks too: a /dev swapped for a host volume loses nothing. */
	job.op = OP_REMOVE;
	probe_answer = 0;
	run_job(&job, self, slash, NULL, 0, NULL, &msg);
	probe_answer = HELPER_GO;
	assert_int_equal(n_probes, 1);
	assert_int_equal(msg.stage, STAGE_DEV_SHARED);
	job_init(&job, OP_UNMOUNT_FILES, false, NULL, 0);
	run_job(&job, self, slash, NULL, 0, NULL, &msg);
	assert_int_equal(n_probes, 0);
}

/*
 * Any user: with a root path and its identity, a target whose own root is
 * that directory (it pivoted into it) is served from its root; one whose
 * root is another directory, from the root path; an identity that matches
 * neither is refused.
 */
static void test_root_identity(void **state)
{
	static struct helper_job job;
	static struct helper_msg msg;
	auto_close int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
	auto_close int slash = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	auto_close int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);

	(void)state;
	assert_true(self >= 0 && slash >= 0 && rootfd >= 0);
	job_init(&job, OP_REMOVE, false, nodes, N_NODES);
	/* As after pivot_root: the path means nothing below the new root. */
	snprintf(job.root_path, sizeof(job.root_path), "/no/such/rootfs");
	run_job(&job, self, rootfd, NULL, 0, NULL, &msg);
	assert_status(&msg, NODE_ABSENT);
	/* Before it: the root is found by its path. */
	job_init(&job, OP_REMOVE, false, nodes, N_NODES);
	run_job(&job, self, slash, NULL, 0, NULL, &msg);
	assert_status(&msg, NODE_ABSENT);
	/* Neither is the directory the identity names. */
	job.root_ino++;
	run_job(&job, self, slash, NULL, 0, NULL, &msg);
	assert_int_equal(msg.stage, STAGE_ROOT_ID);
	run_job(&job, self, rootfd, NULL, 0, NULL, &msg);
	assert_int_equal(msg.stage, STAGE_ROOT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_nodes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nodes_walk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bound_nodes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_walls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_conflict, setup, teardown),
		cmocka_unit_test_setup_teardown(test_host_dev, setup, teardown),
		cmocka_unit_test_setup_teardown(test_probe, setup, teardown),
		cmocka_unit_test_setup_teardown(test_root_identity, setup, teardown),
	};

	return cmocka_run_group_tests_name("helper", tests, group_setup, group_teardown);
}
