// SPDX-License-Identifier: Apache-2.0
/*
 * Rewrites a request that names its container by a runtime's name into one
 * that names the cgroup the runtime's state gives for it, before ops.c
 * dispatches it. devgated resolves, not devatectl: it reads runtime state
 * as root, and the answer is proved against the kernel (names.c), so a
 * caller gains nothing it could not do with --cgroup. A lease's own label
 * wins over a runtime's name in revoke and extend, so labels given at grant
 * time work as before; so do a move's source and destination.
 *
 * The runtimes are asked in a forked worker (byname_start): a dockerd, LXD
 * or LXC monitor that accepts and never answers holds that one request for
 * its timeouts, never devgated's loop. The worker only reads (names/) and
 * answers over a pipe; the parent applies the answer. It changes no lease.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"

#include "byname.h"
#include "core/config.h"
#include "lease/lease.h"
#include "names/names.h"
#include "sys/target.h"
#include "util.h"

/*
 * The worker's whole time: each runtime gives up after its own 3 s (names/),
 * so only several stuck runtimes together come near this.
 */
#define BYNAME_DEADLINE_NS (15 * 1000000000ull)

static void names_conf_of(const struct daemon *d, struct names_conf *ret)
{
	const struct dg_config *c = d->cfg;

	*ret = (struct names_conf){
		.cgroup_v1 = d->cg.v1,
		.docker_socket = c->docker_socket,
		.lxd_socket = c->lxd_socket,
		.podman_storage = c->podman_storage,
		.runc_root = c->runc_root,
		.lxc_path = c->lxc_path,
		.cri_root = c->cri_root,
	};
}

/*
 * How one target of a request is looked up. label_first: a lease's label
 * wins; keep_name: the runtime's name stays as the label the lease gets (a
 * grant's, a move's destination).
 */
struct spec {
	struct dg_target_args *t;
	bool label_first, keep_name, missing_ok;
};

/* The targets req names, at most two (a move's source and destination). */
static int specs_of(struct dg_request *req, struct spec ret[2])
{
	switch (req->op) {
	case DG_OP_GRANT:
		ret[0] = (struct spec){ &req->u.grant.target, false, true, false };
		return 1;
	case DG_OP_REVOKE:
		ret[0] = (struct spec){ &req->u.revoke.target, true, false,
					req->u.revoke.missing_ok };
		return 1;
	case DG_OP_EXTEND:
		ret[0] = (struct spec){ &req->u.extend.target, true, false, false };
		return 1;
	case DG_OP_MOVE:
		/* The source holds a lease; the destination may get its first. */
		ret[0] = (struct spec){ &req->u.move.from, true, false, false };
		ret[1] = (struct spec){ &req->u.move.to, true, true, false };
		return 2;
	default:
		return 0;
	}
}

/* 1 when s's target is a runtime's name to look up, 0 when not, < 0 when invalid. */
static int needs_lookup(struct daemon *d, const struct spec *s, struct dg_error *err)
{
	const struct dg_target_args *t = s->t;
	struct lease *l;
	char what[256];
	int r;

	if (!t->container || t->has_pid || t->cgroup) {
		if (t->runtime)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "a runtime goes with a container name alone, not "
					    "with a PID or cgroup");
		return 0;
	}
	if (s->label_first && !t->runtime &&
	    lease_table_find_label(&d->leases, t->container, &l) != -ENOENT)
		return 0;
	/* Before the runtimes' state, whose cgroups a v1 host cannot match. */
	snprintf(what, sizeof(what), "container '%.200s'", t->container);
	r = target_check_v2(&d->cg, what, err);
	return r < 0 ? r : 1;
}

/* Copies s into a buffer of n bytes; -ENAMETOOLONG if longer. */
static int copy_str(char *buf, size_t n, const char *s)
{
	if (!s || strlen(s) >= n)
		return -ENAMETOOLONG;
	memcpy(buf, s, strlen(s) + 1);
	return 0;
}

/* One target's answer, as the worker sends it: names_resolve's result. */
struct answer {
	int r;
	struct dg_error err;
	char runtime[16];
	char name[NAMES_NAME_MAX];
	char cgroup[PATH_MAX];
};

/* Rewrites s's target from its answer a. */
static int apply(struct dg_request *req, const struct spec *s, const struct answer *a,
		 struct dg_error *err)
{
	struct dg_target_args *t = s->t;

	if (a->r == -ENOENT && s->label_first) {
		if (s->missing_ok)
			return 0;
		/* The words labels always had; the hint adds where names were sought. */
		dg_error_set(err, DG_E_NO_TARGET, ENOENT, "no container is labelled '%s'",
			     t->container);
		dg_error_hint(err,
			      "'devgatectl status' lists the labels of containers that hold "
			      "GPUs; no runtime has that name either: %s",
			      a->err.hint);
		return a->r;
	}
	if (a->r < 0) {
		*err = a->err;
		return a->r;
	}
	t->cgroup = dg_arena_strdup(&req->arena, a->cgroup);
	t->runtime = dg_arena_strdup(&req->arena, a->runtime);
	t->container = s->keep_name ? dg_arena_strdup(&req->arena, a->name) : NULL;
	if (!t->cgroup || !t->runtime || (s->keep_name && !t->container))
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	return 0;
}

struct byname_job {
	pid_t pid;
	int pidfd;
	int rfd; /* the pipe's read end */
	uint64_t tag, deadline_ns;
	int n, which[2]; /* the targets sent, by their index in specs_of */
	struct dg_request req;
};

/* Resolves s's target into a. */
static void resolve(const struct names_conf *conf, const struct spec *s, struct answer *a)
{
	const struct dg_target_args *t = s->t;
	struct name_match m = { 0 };

	a->r = names_resolve(conf, t->container, t->runtime, &m, &a->err);
	if (a->r == 0 && (copy_str(a->runtime, sizeof(a->runtime), m.runtime) < 0 ||
			  copy_str(a->name, sizeof(a->name), m.name) < 0 ||
			  copy_str(a->cgroup, sizeof(a->cgroup), m.cgroup) < 0))
		a->r = dg_error_set(&a->err, DG_E_INTERNAL, ENAMETOOLONG,
				    "the cgroup of '%s' is too long", t->container);
	name_match_done(&m);
}

/* The worker: resolves each target asked and writes the answers on fd. */
static _Noreturn void worker(const struct names_conf *conf, const struct spec *s, int n,
			     const int *which, int fd)
{
	static struct answer a[2];
	size_t off = 0, len = (size_t)n * sizeof(a[0]);

	for (int i = 0; i < n; i++)
		resolve(conf, &s[which[i]], &a[i]);
	while (off < len) {
		ssize_t w = write(fd, (char *)a + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(1);
		off += (size_t)w;
	}
	_exit(0);
}

/*
 * Killed workers not reaped yet: a SIGKILLed worker ends at once unless it
 * sleeps uninterruptibly, and devgated never waits for it (single thread).
 */
#define REAP_MAX 64
static int reap_fds[REAP_MAX];
static size_t reap_n;

static bool reaped(int pidfd)
{
	siginfo_t si = { 0 };

	return waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG) == 0 && si.si_pid != 0;
}

void byname_reap(void)
{
	for (size_t i = 0; i < reap_n;) {
		if (reaped(reap_fds[i])) {
			close(reap_fds[i]);
			reap_fds[i] = reap_fds[--reap_n];
		} else {
			i++;
		}
	}
}

void byname_job_free(struct daemon *d, struct byname_job *j)
{
	if (!j)
		return;
	if (j->pidfd >= 0) {
		(void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, j->pidfd, NULL);
		(void)syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
		if (reaped(j->pidfd) || reap_n == REAP_MAX) {
			close(j->pidfd);
		} else {
			reap_fds[reap_n++] = j->pidfd;
		}
	}
	if (j->rfd >= 0)
		close(j->rfd);
	dg_request_done(&j->req);
	free(j);
}

uint64_t byname_job_tag(const struct byname_job *j)
{
	return j->tag;
}

bool byname_job_late(const struct byname_job *j, uint64_t now_ns)
{
	return now_ns >= j->deadline_ns;
}

/* Forks the worker for j's targets; 0, or negative errno and err. */
static int job_fork(struct daemon *d, struct byname_job *j, const struct spec *s,
		    struct dg_error *err)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct names_conf conf;
	int p[2];

	names_conf_of(d, &conf);
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return dg_error_set(err, DG_E_INTERNAL, errno, "pipe: %m");
	j->pid = fork();
	if (j->pid == 0) {
		/* Nothing of devgated's stays open here: a client's hangup stays seen. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 ||
		    prctl(PR_SET_NAME, "devgated-names") < 0 || dup2(p[1], 3) < 0)
			_exit(1);
		(void)close_range(4, ~0U, 0);
		worker(&conf, s, j->n, j->which, 3);
	}
	close(p[1]);
	j->rfd = p[0];
	if (j->pid < 0)
		return dg_error_set(err, DG_E_INTERNAL, errno, "cannot fork a name lookup: %m");
	j->pidfd = (int)syscall(SYS_pidfd_open, j->pid, 0);
	if (j->pidfd < 0) {
		int e = errno;

		kill(j->pid, SIGKILL);
		(void)waitpid(j->pid, NULL, 0);
		return dg_error_set(err, DG_E_INTERNAL, e, "pidfd_open: %s", strerror(e));
	}
	/* Its end wakes the loop (server_lookup_event); the request waits till then. */
	ev.data.u64 = j->tag;
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, j->pidfd, &ev) < 0)
		return dg_error_set(err, DG_E_INTERNAL, errno, "cannot poll a name lookup: %m");
	return 0;
}

int byname_start(struct daemon *d, struct dg_request *req, uint64_t tag, struct byname_job **ret,
		 struct dg_error *err)
{
	static const struct byname_job none = { .pid = -1, .pidfd = -1, .rfd = -1 };
	struct names_conf conf;
	struct byname_job *j;
	struct spec s[2];
	int n = specs_of(req, s), which[2], k = 0, r;
	bool wait = false;

	for (int i = 0; i < n; i++) {
		r = needs_lookup(d, &s[i], err);
		if (r < 0)
			return r;
		if (r)
			which[k++] = i;
	}
	if (k == 0)
		return 0;
	names_conf_of(d, &conf);
	for (int i = 0; i < k; i++)
		wait |= names_may_wait(&conf, s[which[i]].t->runtime);
	/* State files alone (runc, podman, CRI) are read at once: a fork costs more. */
	for (int i = 0; !wait && i < k; i++) {
		static struct answer a;

		resolve(&conf, &s[which[i]], &a);
		r = apply(req, &s[which[i]], &a, err);
		if (r < 0)
			return r;
	}
	if (!wait)
		return 0;
	j = malloc(sizeof(*j));
	if (!j)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	*j = none;
	j->n = k;
	memcpy(j->which, which, sizeof(which));
	j->tag = tag;
	j->deadline_ns = now_mono_ns() + BYNAME_DEADLINE_NS;
	r = job_fork(d, j, s, err);
	if (r < 0) {
		byname_job_free(d, j);
		return r;
	}
	/* The request waits here: its strings live in its own arena. */
	j->req = *req;
	*req = (struct dg_request){ 0 };
	*ret = j;
	return 1;
}

/* Reads the worker's answers into a; 0, or negative errno and err. */
static int job_read(struct byname_job *j, struct answer *a, struct dg_error *err)
{
	size_t off = 0, len = (size_t)j->n * sizeof(*a);

	while (off < len) {
		ssize_t n = read(j->rfd, (char *)a + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return dg_error_set(err, DG_E_INTERNAL, EPROTO,
					    "the name lookup ended without an answer");
		off += (size_t)n;
	}
	return 0;
}

int byname_finish(struct daemon *d, struct byname_job *j, bool late, struct dg_request *ret,
		  struct dg_error *err)
{
	static struct answer a[2];
	struct spec s[2];
	int r = 0;

	*ret = j->req;
	j->req = (struct dg_request){ 0 };
	specs_of(ret, s);
	if (late)
		r = dg_error_set(err, DG_E_NO_TARGET, ETIMEDOUT,
				 "the runtimes did not answer within %llu s: no container name "
				 "was resolved",
				 BYNAME_DEADLINE_NS / 1000000000ull);
	else
		r = job_read(j, a, err);
	for (int i = 0; r == 0 && i < j->n; i++) {
		/* A lease labelled so since the lookup began wins, as it would have then. */
		if (needs_lookup(d, &s[j->which[i]], err) == 1)
			r = apply(ret, &s[j->which[i]], &a[i], err);
	}
	byname_job_free(d, j);
	return r;
}

#define LIST_MAX 512

int byname_list(struct daemon *d, struct dg_containers_reply *out, struct dg_arena *a,
		struct dg_error *err)
{
	auto_free struct name_match *m = calloc(LIST_MAX, sizeof(*m));
	char searched[2048];
	struct names_conf conf;
	size_t n = 0;
	int r = 0;

	if (!m)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	names_conf_of(d, &conf);
	names_list(&conf, m, LIST_MAX, &n, searched, sizeof(searched));
	out->found = dg_arena_alloc(a, (n + 1) * sizeof(*out->found));
	out->searched = dg_arena_strdup(a, searched);
	for (size_t i = 0; i < n; i++) {
		struct dg_found_info *f = out->found ? &out->found[i] : NULL;

		if (f) {
			*f = (struct dg_found_info){ .runtime = m[i].runtime, .pid = m[i].pid };
			f->name = dg_arena_strdup(a, m[i].name);
			f->id = dg_arena_strdup(a, m[i].id);
			f->cgroup = dg_arena_strdup(a, m[i].cgroup);
			if (!f->name || !f->id || !f->cgroup)
				r = -ENOMEM;
		}
		name_match_done(&m[i]);
	}
	if (!out->found || !out->searched || r < 0)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	out->n_found = n;
	return 0;
}
