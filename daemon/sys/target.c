// SPDX-License-Identifier: Apache-2.0
/*
 * Resolves what a request names (a PID or a cgroup path) into a target: a
 * pidfd on the container's process, its root directory (O_PATH), its
 * cgroup and the cgroup's id, each read while the pidfd proves the process
 * is still the same. It refuses targets that would gate devgated itself or
 * the root cgroup, and processes outside their container's mount
 * namespace. On a host with cgroup v1 alone its cgroup is its v1 devices
 * cgroup. It never enters a namespace and never writes anywhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "target.h"
#include "util.h"

int pidfd_open_pid(pid_t pid)
{
	long fd = syscall(SYS_pidfd_open, pid, 0);

	return fd < 0 ? -errno : (int)fd;
}

/*
 * A pidfd turns readable when its process exits. Not pidfd_send_signal(0):
 * without CAP_KILL (devgated has none) that fails with EPERM for any
 * process of another user, so a container running as uid 1000 looked dead.
 */
int pidfd_alive(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	int r = poll(&p, 1, 0);

	if (r < 0)
		return -errno;
	return r > 0 ? -ESRCH : 0;
}

void target_done(struct target *t)
{
	t->pidfd = safe_close(t->pidfd);
	t->rootfd = safe_close(t->rootfd);
	t->cgfd = safe_close(t->cgfd);
	free(t->cgroup);
	t->cgroup = NULL;
	free(t->proc_cg);
	t->proc_cg = NULL;
}

int target_check_v2(const struct cgroot *root, const char *what, struct dg_error *err)
{
	if (root->fd >= 0)
		return 0;
	dg_error_set(err, DG_E_TARGET_UNSUPPORTED, ENOMEDIUM, "%s cannot be gated: %s", what,
		     CGROUP_NO_V2_WHY);
	dg_error_hint(err, "%s", CGROUP_NO_V2_HINT);
	return -ENOMEDIUM;
}

static int check_cgroup(const struct cgroot *root, const char *self_cgroup, const char *cgroup,
			const char *what, struct dg_error *err)
{
	if (strcmp(cgroup, "/") == 0) {
		dg_error_set(err, DG_E_TARGET_UNSUPPORTED, EINVAL,
			     "%s is in the root cgroup of %s, not in a container's cgroup", what,
			     root->v1 ? "the cgroup v1 devices hierarchy" : "cgroup v2");
		dg_error_hint(err,
			      "devgate gates a container's own cgroup; name a process inside a "
			      "container whose runtime uses cgroup v2");
		return -EINVAL;
	}
	if (self_cgroup && cgroup_path_is_ancestor(cgroup, self_cgroup)) {
		dg_error_set(err, DG_E_TARGET_UNSUPPORTED, EINVAL,
			     "%s is in cgroup %s, which holds devgated itself", what, cgroup);
		dg_error_hint(err, "run the container in a cgroup of its own");
		return -EINVAL;
	}
	return 0;
}

static int open_cgroup(const struct cgroot *root, struct target *t, const char *what,
		       struct dg_error *err)
{
	int r = cgroup_open_path(root, t->cgroup, &t->cgfd);

	if (r == -ENOENT)
		return dg_error_set(err, DG_E_NO_TARGET, ENOENT,
				    "%s: cgroup %s does not exist under %s", what, t->cgroup,
				    root->mount);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "%s: cannot open cgroup %s%s: %s", what,
				    root->mount, t->cgroup, strerror(-r));
	r = cgroup_id_of(t->cgfd, &t->cgid);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "cannot read the id of cgroup %s: %s",
				    t->cgroup, strerror(-r));
	return 0;
}

int proc_stat(int dirfd, const char *path, pid_t *ppid, uint64_t *start)
{
	auto_free char *text = NULL;
	unsigned long long st;
	const char *p;
	int parent;

	if (read_file_at(dirfd, path, 4096, &text, NULL) < 0)
		return -ESRCH;
	/* After the command name, which may hold spaces and parentheses. */
	p = strrchr(text, ')');
	if (!p || sscanf(p + 2,
			 "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
			 "%*d %*d %*d %llu",
			 &parent, &st) != 2)
		return -EINVAL;
	if (ppid)
		*ppid = parent;
	if (start)
		*start = st;
	return 0;
}

/* When pid started, in clock ticks since boot; 0 when it is gone. */
static uint64_t start_time(pid_t pid)
{
	uint64_t start = 0;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	return proc_stat(AT_FDCWD, path, NULL, &start) < 0 ? 0 : start;
}

/* The process among the PIDs of text (cgroup.procs) that started first. */
static int oldest_in(char *text, pid_t *ret)
{
	uint64_t best = 0;
	char *save = NULL;

	*ret = 0;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		pid_t pid;
		uint64_t st;

		if (parse_pid(l, &pid) < 0 || !(st = start_time(pid)))
			continue;
		if (!*ret || st < best) {
			*ret = pid;
			best = st;
		}
	}
	return *ret ? 0 : -ESRCH;
}

/*
 * The process of the cgroup that started first: a container's init, which
 * the runtime put in the container's own mount namespace. Processes the
 * container starts later cannot be older.
 */
static int oldest_pid(int cgfd, pid_t *ret)
{
	auto_free char *text = NULL;
	int r = read_file_at(cgfd, "cgroup.procs", (size_t)1024 * 1024, &text, NULL);

	return r < 0 ? r : oldest_in(text, ret);
}

/*
 * The inits found last, by cgroup, with the cgroup.procs they were found
 * in, each held by a pidfd opened while its start time was still the one
 * judged. While a cgroup lists the very same PIDs and the held init still
 * runs (one poll), that PID is still the init and the oldest: a PID that
 * went and came again is a process started since, so younger. This spares
 * a /proc/PID/stat read per process of the container on each request. A
 * slot's pidfd is closed when the slot is reused or its init is found gone.
 */
struct init_memo {
	uint64_t cgid;
	int pidfd; /* the init's; valid while procs is set */
	pid_t init;
	size_t len;
	char *procs;
};

static struct init_memo memo[8];
static unsigned int memo_next;

static void memo_clear(struct init_memo *m)
{
	if (m->procs)
		safe_close(m->pidfd);
	free(m->procs);
	*m = (struct init_memo){ .pidfd = -1 };
}

static bool memo_hit(struct init_memo *m, const struct target *t, const char *procs, size_t len)
{
	if (!m->procs || m->cgid != t->cgid || m->len != len || memcmp(m->procs, procs, len) != 0)
		return false;
	if (pidfd_alive(m->pidfd) == 0)
		return true;
	memo_clear(m);
	return false;
}

static void memo_put(const struct target *t, const char *procs, size_t len, pid_t init)
{
	struct init_memo *m = &memo[memo_next++ % ARRAY_SIZE(memo)];
	uint64_t start = start_time(init);
	int fd;

	/* A cgroup already kept is kept in its own slot. */
	for (size_t i = 0; i < ARRAY_SIZE(memo); i++) {
		if (memo[i].procs && memo[i].cgid == t->cgid)
			m = &memo[i];
	}
	memo_clear(m);
	fd = start ? pidfd_open_pid(init) : -1;
	/* The stat after the pidfd: a PID reused in between has another start. */
	if (fd < 0 || start_time(init) != start || !(m->procs = malloc(len))) {
		safe_close(fd);
		return;
	}
	memcpy(m->procs, procs, len);
	*m = (struct init_memo){
		.cgid = t->cgid, .pidfd = fd, .init = init, .len = len, .procs = m->procs
	};
}

/* oldest_pid of t's cgroup, from memo when nothing changed there. */
static int container_init(const struct target *t, pid_t *ret)
{
	auto_free char *text = NULL, *copy = NULL;
	size_t len = 0;
	char alone[16];
	int r = read_file_at(t->cgfd, "cgroup.procs", (size_t)1024 * 1024, &text, &len);

	if (r < 0)
		return r;
	/* Alone in its cgroup: the oldest with nothing to compare. */
	snprintf(alone, sizeof(alone), "%d\n", (int)t->pid);
	if (strcmp(text, alone) == 0) {
		*ret = t->pid;
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(memo); i++) {
		if (memo_hit(&memo[i], t, text, len)) {
			*ret = memo[i].init;
			return 0;
		}
	}
	copy = strndup(text, len);
	if (!copy)
		return -ENOMEM;
	r = oldest_in(copy, ret);
	if (r == 0)
		memo_put(t, text, len, *ret);
	return r;
}

static bool same_mntns(pid_t a, pid_t b)
{
	struct stat sa, sb;
	char pa[64], pb[64];

	snprintf(pa, sizeof(pa), "/proc/%d/ns/mnt", (int)a);
	snprintf(pb, sizeof(pb), "/proc/%d/ns/mnt", (int)b);
	return stat(pa, &sa) == 0 && stat(pb, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/*
 * Nodes go into the /dev of the container's mount namespace, never into one
 * a process of the container made for itself: a process that unshared a
 * user and mount namespace could bind-mount a host volume on its /dev, and
 * devgated would make GPU nodes in that host directory.
 */
static int check_mntns(const struct target *t, struct dg_error *err)
{
	pid_t init;

	if (container_init(t, &init) < 0 || init == t->pid || same_mntns(init, t->pid))
		return 0;
	dg_error_set(err, DG_E_TARGET_UNSUPPORTED, EXDEV,
		     "PID %d is in a mount namespace of its own, not its container's (that of PID "
		     "%d, the first process of cgroup %s)",
		     (int)t->pid, (int)init, t->cgroup);
	dg_error_hint(err, "name the container's init process, or its cgroup with --cgroup");
	return -EXDEV;
}

int target_from_pid(const struct cgroot *root, const char *self_cgroup, pid_t pid,
		    struct target *ret, struct dg_error *err)
{
	struct target t = TARGET_INIT;
	char what[64], path[64];
	int r;

	snprintf(what, sizeof(what), "PID %d", (int)pid);
	r = target_check_v2(root, what, err);
	if (r < 0)
		return r;
	t.pid = pid;
	t.pidfd = pidfd_open_pid(pid);
	if (t.pidfd < 0) {
		r = t.pidfd == -ESRCH || t.pidfd == -EINVAL
			    ? dg_error_set(err, DG_E_NO_TARGET, ESRCH, "no process with PID %d",
					   (int)pid)
			    : dg_error_set(err, DG_E_KERNEL, t.pidfd, "pidfd_open(%d): %s",
					   (int)pid, strerror(-t.pidfd));
		goto fail;
	}
	/* The text is kept: a later step of the request reads its v1 lines there. */
	r = cgroup_of_pid_kept(root, pid, &t.cgroup, &t.proc_cg);
	if (r == -ESRCH) {
		r = dg_error_set(err, DG_E_NO_TARGET, ESRCH, "no process with PID %d", (int)pid);
		goto fail;
	}
	if (r == -ENOMEDIUM) {
		r = dg_error_set(err, DG_E_TARGET_UNSUPPORTED, ENOMEDIUM,
				 "PID %d is not in a cgroup %s hierarchy", (int)pid,
				 root->v1 ? "v1 devices" : "v2");
		dg_error_hint(err, "devgate needs cgroup v2 (the unified hierarchy)");
		goto fail;
	}
	if (r < 0) {
		r = dg_error_set(err, DG_E_KERNEL, r, "cannot read /proc/%d/cgroup: %s", (int)pid,
				 strerror(-r));
		goto fail;
	}
	r = check_cgroup(root, self_cgroup, t.cgroup, what, err);
	if (r < 0)
		goto fail;
	r = open_cgroup(root, &t, what, err);
	if (r == 0)
		r = check_mntns(&t, err);
	if (r < 0)
		goto fail;
	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
	t.rootfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (t.rootfd < 0) {
		r = dg_error_set(err, DG_E_KERNEL, errno, "cannot open %s: %m", path);
		goto fail;
	}
	/* Everything above was read from this very process only if it still runs. */
	if (pidfd_alive(t.pidfd) < 0) {
		r = dg_error_set(err, DG_E_NO_TARGET, ESRCH,
				 "PID %d exited while devgate was resolving it", (int)pid);
		goto fail;
	}
	*ret = t;
	return 0;
fail:
	target_done(&t);
	return r;
}

int target_from_cgroup(const struct cgroot *root, const char *self_cgroup, const char *path,
		       struct target *ret, struct dg_error *err)
{
	auto_free char *what = NULL;
	auto_close int cgfd = -1;
	struct target probe = TARGET_INIT;
	pid_t pid;
	int r;

	if (path[0] != '/' || strstr(path, "/../") || strlen(path) > 4000)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "cgroup path '%s' must be absolute within the %s hierarchy",
				    path, root->v1 ? "v1 devices" : "v2");
	if (asprintf(&what, "cgroup %s", path) < 0)
		return -ENOMEM;
	r = target_check_v2(root, what, err);
	if (r < 0)
		return r;
	probe.cgroup = strdup(path);
	if (!probe.cgroup)
		return -ENOMEM;
	r = check_cgroup(root, self_cgroup, probe.cgroup, what, err);
	if (r == 0)
		r = open_cgroup(root, &probe, what, err);
	if (r < 0) {
		target_done(&probe);
		return r;
	}
	cgfd = TAKE_FD(probe.cgfd);
	target_done(&probe);
	r = oldest_pid(cgfd, &pid);
	if (r < 0)
		return dg_error_set(err, DG_E_NO_TARGET, ESRCH, "cgroup %s has no process", path);
	r = target_from_pid(root, self_cgroup, pid, ret, err);
	if (r == 0 && strcmp(ret->cgroup, path) != 0) {
		target_done(ret);
		return dg_error_set(err, DG_E_NO_TARGET, ESRCH, "processes of cgroup %s moved away",
				    path);
	}
	return r;
}
