// SPDX-License-Identifier: Apache-2.0
/*
 * Resolves a container name users know by asking each runtime devgated is
 * configured for (rtapi.c, rtstate.c), then proves the answer from the
 * kernel: the PID the runtime's state gives must run now, be the process
 * that state describes (its start time, where the state records it) and sit
 * in the cgroup the state names. A name is never guessed from cgroup paths,
 * and a state tree only root can change is read at all (a symlinked or
 * foreign one could name any process). It reads; it changes no container and
 * no lease.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "names.h"
#include "rt.h"
#include "sys/cgroup.h"
#include "sys/cgroup1.h"
#include "sys/target.h"

/* CRI before runc: where both read one root, the pod's names win. */
enum {
	RT_DOCKER,
	RT_PODMAN,
	RT_LXD,
	RT_LXC,
	RT_CRI,
	RT_RUNC,
	RT_N
};

static const char *const rt_names[RT_N] = { "docker", "podman", "lxd", "lxc", "cri", "runc" };

int names_runtime_known(const char *runtime)
{
	for (int i = 0; i < RT_N; i++) {
		if (strcmp(rt_names[i], runtime) == 0)
			return 1;
	}
	return 0;
}

static const char *where_of(const struct names_conf *c, int rt);

bool names_may_wait(const struct names_conf *c, const char *runtime)
{
	static const int sockets[] = { RT_DOCKER, RT_LXD, RT_LXC };

	for (size_t i = 0; i < sizeof(sockets) / sizeof(sockets[0]); i++) {
		const char *where = where_of(c, sockets[i]);

		if (where && *where && (!runtime || strcmp(runtime, rt_names[sockets[i]]) == 0))
			return true;
	}
	return false;
}

void name_match_done(struct name_match *m)
{
	free(m->cgroup);
	m->cgroup = NULL;
}

/* Names runtimes accept: Docker's, podman's and LXD's rules, all within these. */
static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 253 || s[0] == '.' || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return false;
	}
	return true;
}

/* A CRI container's NAMESPACE/POD/CONTAINER: three names, no more. */
static bool cri_form(const char *s)
{
	char buf[NAMES_NAME_MAX], *save = NULL;
	int parts = 0;

	if (!strchr(s, '/') || strlen(s) >= sizeof(buf) || s[strlen(s) - 1] == '/' ||
	    strstr(s, "//"))
		return false;
	memcpy(buf, s, strlen(s) + 1);
	for (char *p = strtok_r(buf, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
		if (!name_ok(p) || ++parts > 3)
			return false;
	}
	return parts == 3;
}

static const char *where_of(const struct names_conf *c, int rt)
{
	switch (rt) {
	case RT_DOCKER:
		return c->docker_socket;
	case RT_PODMAN:
		return c->podman_storage;
	case RT_LXD:
		return c->lxd_socket;
	case RT_LXC:
		return c->lxc_path;
	case RT_CRI:
		return c->cri_root;
	default:
		return c->runc_root;
	}
}

__attribute__((format(printf, 3, 4))) static void append(char *buf, size_t n, const char *fmt, ...)
{
	size_t len = strlen(buf);
	va_list ap;

	if (len >= n)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + len, n - len, fmt, ap);
	va_end(ap);
}

/* path is a directory that root alone can change: no symlink, root's, not g/o-writable. */
static int dir_rootonly(const char *path, bool last, char *why, size_t n)
{
	struct stat st;

	if ((last ? lstat(path, &st) : stat(path, &st)) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode))
		snprintf(why, n, "refused: %s is a symlink", path);
	else if (!S_ISDIR(st.st_mode))
		snprintf(why, n, "refused: %s is not a directory", path);
	else if (st.st_uid != 0)
		snprintf(why, n, "refused: %s belongs to uid %u, not root", path,
			 (unsigned)st.st_uid);
	/* A sticky directory (/tmp) lets no one else move root's entries. */
	else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && (last || !(st.st_mode & S_ISVTX)))
		snprintf(why, n, "refused: %s is writable by others than root", path);
	else
		return 0;
	return -EPERM;
}

/*
 * root and each directory above it are root's alone; why says which is not.
 * follow: root may be a symlink (its target is the caller's to check).
 */
static int dirs_trusted(const char *root, bool follow, char *why, size_t n)
{
	char up[PATH_MAX];
	size_t len = strlen(root);
	int r;

	while (len > 1 && root[len - 1] == '/')
		len--;
	if (root[0] != '/' || len >= sizeof(up)) {
		snprintf(why, n, "refused: %.200s is not an absolute path", root);
		return -EINVAL;
	}
	memcpy(up, root, len);
	up[len] = '\0';
	r = dir_rootonly(up, !follow, why, n);
	while (r == 0 && strcmp(up, "/") != 0) {
		char *s = strrchr(up, '/');

		s[s == up] = '\0'; /* "/run" goes to "/" */
		r = dir_rootonly(up, false, why, n);
	}
	if (r < 0 && r != -EPERM && r != -ENOENT)
		snprintf(why, n, "cannot check %.200s: %s", up, strerror(-r));
	return r;
}

/* A state root (runc's, containers-storage's) and each directory above it are root's alone. */
static int root_trusted(const char *root, char *why, size_t n)
{
	int r = dirs_trusted(root, false, why, n);

	if (r == -EPERM)
		append(why, n, "; a state root and the directories above it must be root's alone");
	return r;
}

/*
 * An API socket (dockerd's, LXD's) is root's, not a symlink, not writable by
 * all, in directories root alone can change: anyone else could have put a
 * server of their own there, whose answers name any process.
 */
static int socket_trusted(const char *sock, char *why, size_t n)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(sock, '/');
	struct stat st;
	int r = 0;

	if (sock[0] != '/' || strlen(sock) >= sizeof(dir)) {
		snprintf(why, n, "refused: %.200s is not an absolute path", sock);
		return -EINVAL;
	}
	if (lstat(sock, &st) < 0)
		return -errno;
	if (!S_ISSOCK(st.st_mode))
		snprintf(why, n, "refused: %s is not a socket", sock);
	else if (st.st_uid != 0)
		snprintf(why, n, "refused: %s belongs to uid %u, not root", sock,
			 (unsigned)st.st_uid);
	else if (st.st_mode & S_IWOTH)
		snprintf(why, n, "refused: %s is writable by all", sock);
	else
		r = 1;
	if (r == 1) {
		char real[PATH_MAX];

		memcpy(dir, sock, (size_t)(slash - sock) + 1);
		dir[slash == sock ? 1 : slash - sock] = '\0';
		/* /var/run is a symlink to /run: the path's directories, then where it leads. */
		r = dirs_trusted(dir, true, why, n);
		if (r == 0)
			r = realpath(dir, real) ? dirs_trusted(real, false, why, n) : -errno;
	} else {
		r = -EPERM;
	}
	if (r == -EPERM)
		append(why, n, "; an API socket and the directories above it must be root's alone");
	return r;
}

static int ask(const struct names_conf *c, int rt, const char *name, struct rt_found *f, char *why,
	       size_t n)
{
	int r;

	switch (rt) {
	case RT_DOCKER:
		r = socket_trusted(c->docker_socket, why, n);
		return r < 0 ? r : rt_docker(c->docker_socket, name, f, why, n);
	case RT_PODMAN:
		r = root_trusted(c->podman_storage, why, n);
		if (r == 0 && c->runc_root && *c->runc_root)
			r = root_trusted(c->runc_root, why, n);
		return r < 0 ? r : rt_podman(c->podman_storage, c->runc_root, name, f, why, n);
	case RT_LXD:
		r = socket_trusted(c->lxd_socket, why, n);
		return r < 0 ? r : rt_lxd(c->lxd_socket, name, f, why, n);
	case RT_LXC:
		return rt_lxc(c->lxc_path, name, f, why, n);
	case RT_CRI:
		/* No CRI root is the usual host (no Kubernetes): no such name, as rt_cri says. */
		r = root_trusted(c->cri_root, why, n);
		if (r == -ENOENT)
			return 0;
		return r < 0 ? r : rt_cri(c->cri_root, name, f, why, n);
	default:
		r = root_trusted(c->runc_root, why, n);
		return r < 0 ? r : rt_runc(c->runc_root, name, f, why, n);
	}
}

/*
 * The kernel's side of a runtime's answer: its PID runs, started when the
 * state says, in a cgroup whose last component the state names (Docker's
 * systemd driver wraps the ID: docker-ID.scope). 0 and the cgroup, or
 * negative errno and why.
 */
static int prove(bool v1, int rt, const struct rt_found *f, char **ret, char *why, size_t n)
{
	auto_close int pidfd = -1;
	auto_free char *cg = NULL;
	uint64_t start = 0;
	char stat[64];
	const char *tail;
	bool same;

	if (f->pid <= 0) {
		snprintf(why, n, "%s",
			 f->stopped[0] ? f->stopped : "its runtime names no running process");
		return -ESRCH;
	}
	pidfd = f->pid <= INT32_MAX ? pidfd_open_pid((pid_t)f->pid) : -ESRCH;
	if (pidfd < 0 || (v1 ? cgroup1_devices_of_pid : cgroup_of_pid)((pid_t)f->pid, &cg) < 0) {
		snprintf(why, n, "its PID %lld is gone", f->pid);
		return -ESRCH;
	}
	snprintf(stat, sizeof(stat), "/proc/%lld/stat", f->pid);
	if (f->start && (proc_stat(AT_FDCWD, stat, NULL, &start) < 0 || start != f->start)) {
		snprintf(why, n, "PID %lld is another process than the one the state names",
			 f->pid);
		return -ESRCH;
	}
	tail = strrchr(cg, '/') ? strrchr(cg, '/') + 1 : cg;
	switch (f->cg_match) {
	case RT_CG_PATH:
		same = strcmp(cg, f->cgroup_want) == 0 ||
		       (f->cgroup_alt[0] && strcmp(cg, f->cgroup_alt) == 0);
		break;
	case RT_CG_SUBTREE:
		/* Never the root: that would be every process's. */
		same = strcmp(f->cgroup_want, "/") != 0 &&
		       cgroup_path_is_ancestor(f->cgroup_want, cg) == 1;
		break;
	default:
		same = strcmp(tail, f->cgroup_want) == 0 ||
		       (rt == RT_DOCKER && strstr(tail, f->cgroup_want) != NULL);
	}
	if (!same) {
		snprintf(why, n,
			 "PID %lld is in cgroup %.200s, not in the one the state names (%.100s)",
			 f->pid, cg, f->cgroup_want);
		return -ESTALE;
	}
	if (pidfd_alive(pidfd) < 0) {
		snprintf(why, n, "its PID %lld is gone", f->pid);
		return -ESRCH;
	}
	/* Below the container's own cgroup, the grant is the whole container's. */
	if (f->cg_match == RT_CG_SUBTREE && strcmp(cg, f->cgroup_want) != 0) {
		free(cg);
		cg = strdup(f->cgroup_want);
		if (!cg)
			return -ENOMEM;
	}
	*ret = TAKE_PTR(cg);
	return 0;
}

struct search {
	struct name_match m[RT_N];
	struct rt_found f[RT_N];
	int n;
	char searched[DG_HINT_MAX];
	char found[DG_ERRMSG_MAX / 2];
	char why[512];
	char stuck[512]; /* the first runtime that did not answer in time */
};

/* Asks one runtime; a match that is the same process as an earlier one is dropped. */
static int search_one(struct search *s, const struct names_conf *c, int rt, const char *name)
{
	struct rt_found *f = &s->f[s->n];
	const char *where = where_of(c, rt);
	int r;

	if (!where || !*where)
		return 0;
	*f = (struct rt_found){ 0 };
	s->why[0] = '\0';
	r = ask(c, rt, name, f, s->why, sizeof(s->why));
	append(s->searched, sizeof(s->searched), "%s%s %s", s->searched[0] ? ", " : "",
	       rt_names[rt], where);
	if (r == -ETIMEDOUT && !s->stuck[0])
		memcpy(s->stuck, s->why, sizeof(s->stuck));
	if (r < 0) {
		/* A runtime that is not there is not an error: it has no such name. */
		append(s->searched, sizeof(s->searched), " (%s)",
		       r == -ENOENT || r == -ECONNREFUSED ? "not running" : s->why);
		return 0;
	}
	if (r == 0)
		return 0;
	for (int i = 0; i < s->n; i++) {
		if (f->pid && s->f[i].pid == f->pid)
			return 0;
	}
	s->m[s->n] = (struct name_match){ .runtime = rt_names[rt], .pid = (pid_t)f->pid };
	/* Both fit: the runtimes' readers keep them shorter than NAMES_*_MAX. */
	rt_copy(s->m[s->n].id, sizeof(s->m[s->n].id), f->id);
	rt_copy(s->m[s->n].name, sizeof(s->m[s->n].name), f->name);
	/* Long hex IDs shortened as their runtimes print them; short ones whole. */
	append(s->found, sizeof(s->found), "%s%s (ID %.*s)", s->n ? ", " : "", rt_names[rt],
	       strlen(f->id) > 32 ? 12 : 32, f->id);
	s->n++;
	return 0;
}

int names_resolve(const struct names_conf *c, const char *name, const char *runtime,
		  struct name_match *ret, struct dg_error *err)
{
	auto_free struct search *s = NULL;
	int rt = -1, r;

	if (runtime && !names_runtime_known(runtime)) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "unknown runtime '%.64s'", runtime);
		dg_error_hint(err, "one of docker, podman, lxd, lxc, cri, runc");
		return -EINVAL;
	}
	/* A pod's container is CRI's alone: no other runtime has '/' in a name. */
	if (strchr(name, '/') && cri_form(name) && (!runtime || strcmp(runtime, "cri") == 0))
		runtime = "cri";
	else if (!name_ok(name)) {
		dg_error_set(err, DG_E_NO_TARGET, ENOENT, "'%.256s' is not a container name", name);
		dg_error_hint(
			err,
			"names are 1 to 253 letters, digits, '_', '.' and '-', not "
			"starting with '.' or '-'; a CRI container is NAMESPACE/POD/CONTAINER");
		return -ENOENT;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (int i = 0; i < RT_N; i++) {
		if (!runtime || strcmp(runtime, rt_names[i]) == 0)
			search_one(s, c, i, name);
	}
	if (s->n == 0 && s->stuck[0]) {
		/* Not "no such name": the runtime that did not answer may have it. */
		dg_error_set(err, DG_E_NO_TARGET, ETIMEDOUT,
			     "cannot tell whether '%s' is a container: %s", name, s->stuck);
		dg_error_hint(err, "searched %s; name the container by --pid or --cgroup meanwhile",
			      s->searched);
		return -ETIMEDOUT;
	}
	if (s->n == 0) {
		dg_error_set(err, DG_E_NO_TARGET, ENOENT, "no container is named '%s'", name);
		dg_error_hint(err, "searched %s", s->searched[0] ? s->searched : "no runtime");
		return -ENOENT;
	}
	if (s->n > 1) {
		dg_error_set(err, DG_E_INVALID, EEXIST, "'%s' names %d containers: %s", name, s->n,
			     s->found);
		dg_error_hint(err, "say which: --runtime %s (or name it by --pid)",
			      s->m[0].runtime);
		return -EEXIST;
	}
	rt = 0;
	while (strcmp(rt_names[rt], s->m[0].runtime) != 0)
		rt++;
	r = prove(c->cgroup_v1, rt, &s->f[0], &s->m[0].cgroup, s->why, sizeof(s->why));
	if (r < 0) {
		dg_error_set(err, DG_E_NO_TARGET, -r,
			     "%s container '%s' (ID %.12s) is not running: %s", s->m[0].runtime,
			     name, s->m[0].id, s->why);
		dg_error_hint(err, "start it, then grant again");
		return -ESRCH;
	}
	*ret = s->m[0];
	return 0;
}

struct lister {
	const struct names_conf *c;
	int rt;
	struct name_match *out;
	size_t n, max;
};

/* One name a runtime listed: kept when it runs and the kernel agrees. */
static void list_one(void *ctx, const char *name)
{
	struct lister *ls = ctx;
	struct rt_found f = { 0 };
	auto_free char *cg = NULL;
	struct name_match *m;
	char why[512] = "";

	if (ls->n >= ls->max || !name_ok(name) ||
	    ask(ls->c, ls->rt, name, &f, why, sizeof(why)) != 1 || f.pid <= 0)
		return;
	/* podman's and CRI's containers are runc's too: the first, richer answer stays. */
	for (size_t i = 0; i < ls->n; i++) {
		if (ls->out[i].pid == f.pid)
			return;
	}
	if (prove(ls->c->cgroup_v1, ls->rt, &f, &cg, why, sizeof(why)) < 0)
		return;
	m = &ls->out[ls->n];
	*m = (struct name_match){ .runtime = rt_names[ls->rt], .pid = (pid_t)f.pid };
	if (rt_copy(m->id, sizeof(m->id), f.id) < 0 ||
	    rt_copy(m->name, sizeof(m->name), f.name) < 0)
		return;
	m->cgroup = TAKE_PTR(cg);
	ls->n++;
}

static int list_rt(struct lister *ls, char *why, size_t n)
{
	const struct names_conf *c = ls->c;

	int r;

	switch (ls->rt) {
	case RT_DOCKER:
		r = socket_trusted(c->docker_socket, why, n);
		return r < 0 ? r : rt_docker_list(c->docker_socket, list_one, ls, why, n);
	case RT_PODMAN:
		return rt_podman_list(c->podman_storage, list_one, ls);
	case RT_LXD:
		r = socket_trusted(c->lxd_socket, why, n);
		return r < 0 ? r : rt_lxd_list(c->lxd_socket, list_one, ls, why, n);
	case RT_LXC:
		return rt_dir_list(c->lxc_path, "config", list_one, ls);
	case RT_CRI:
		return rt_dir_list(c->cri_root, "state.json", list_one, ls);
	default:
		return rt_dir_list(c->runc_root, "state.json", list_one, ls);
	}
}

int names_list(const struct names_conf *c, struct name_match *ret, size_t max, size_t *n,
	       char *searched, size_t sn)
{
	struct lister ls = { .c = c, .out = ret, .max = max };

	searched[0] = '\0';
	for (int i = 0; i < RT_N; i++) {
		const char *where = where_of(c, i);
		char why[512] = "";
		int r;

		if (!where || !*where)
			continue;
		ls.rt = i;
		r = list_rt(&ls, why, sizeof(why));
		append(searched, sn, "%s%s %s", searched[0] ? ", " : "", rt_names[i], where);
		if (r < 0)
			append(searched, sn, " (%s)",
			       r == -ENOENT || r == -ECONNREFUSED ? "not running"
			       : why[0]				  ? why
								  : strerror(-r));
	}
	*n = ls.n;
	return 0;
}
