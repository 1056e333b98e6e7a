// SPDX-License-Identifier: Apache-2.0
/*
 * The wait queue at run time (grant --wait). A grant that found its GPUs
 * busy waits here; after every turn of the loop, waiting_run answers the
 * waiters whose time ran out, tries every waiter again in queue order when
 * GPUs may have freed, and tells each one whose place changed. A GPU that
 * frees goes to the first waiter it satisfies.
 *
 * This file must not touch sockets or leases: it reaches the clients and
 * the grant path only through struct waiting_ops (server.c fills it), so a
 * waiter is served by the very path a new request takes. The order itself
 * is queue.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "cleanup.h"
#include "log.h"
#include "metrics/metrics.h"
#include "queue.h"
#include "util.h"
#include "waiting.h"

struct waiting {
	struct queue queue; /* the waiters, in serving order */
	bool dirty;	    /* GPUs may have freed: try the waiters */
	bool moved;	    /* places changed: tell the waiters */
	uint64_t dirty_ns;  /* the wake-up that set dirty, for the served log line */
	int epfd;
	struct metrics *metrics;
	const struct waiting_ops *ops;
	void *ctx;
};

/* One waiting grant: kept until it is served, times out or is cancelled. */
struct waiter {
	struct queue_entry e;
	void *client;
	struct dg_request req; /* the grant; its arena is the waiter's */
	int pidfd;	       /* the target's process when it was queued */
	size_t told_pos, told_of;
	char reason[DG_ERRMSG_MAX]; /* why it cannot be served now */
};

int waiting_new(int epfd, struct metrics *m, const struct waiting_ops *ops, void *ctx,
		struct waiting **ret)
{
	struct waiting *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->epfd = epfd;
	w->metrics = m;
	w->ops = ops;
	w->ctx = ctx;
	*ret = w;
	return 0;
}

void waiting_free(struct waiting *w)
{
	if (!w)
		return;
	queue_fini(&w->queue);
	free(w);
}

static struct waiter *waiter_at(const struct waiting *w, size_t i)
{
	return w->queue.v[i]->owner;
}

static void waiter_free(struct waiter *wt)
{
	safe_close(wt->pidfd);
	dg_request_done(&wt->req);
	free(wt);
}

/* Writes the name the log gives the waiter's target: its container, PID or cgroup. */
static void waiter_log_name(const struct waiter *wt, char *buf, size_t len)
{
	const struct dg_target_args *t = &wt->req.u.grant.target;

	if (t->container)
		snprintf(buf, len, "%s", t->container);
	else if (t->has_pid)
		snprintf(buf, len, "PID %lld", (long long)t->pid);
	else
		snprintf(buf, len, "cgroup %s", t->cgroup);
}

/* Takes the waiter out of the line; the caller frees it. */
static void waiter_take(struct waiting *w, struct waiter *wt)
{
	(void)queue_remove(&w->queue, &wt->e);
	w->moved = true;
	metrics_queue_length(w->metrics, w->queue.n);
}

/* Takes the waiter out of the line, frees it and sends its client msg, the last line. */
static void waiter_answer(struct waiting *w, struct waiter *wt, json_object *msg)
{
	void *client = wt->client;

	waiter_take(w, wt);
	waiter_free(wt);
	w->ops->answer(w->ctx, client, msg);
}

static void waiter_fail(struct waiting *w, struct waiter *wt, const struct dg_error *err)
{
	auto_json json_object *msg = dg_reply_error(err);

	waiter_answer(w, wt, msg);
}

void waiting_cancel(struct waiting *w, struct waiter *wt, const char *why)
{
	char name[128];

	waiter_take(w, wt);
	waiter_log_name(wt, name, sizeof(name));
	log_info("the waiting grant for %s was cancelled: %s", name, why);
	metrics_inc(w->metrics, METRIC_QUEUE_CANCELLED, 1);
	waiter_free(wt);
}

static void waiter_init(struct waiter *wt, void *client, uid_t uid, const struct dg_request *req,
			int pidfd, const char *reason)
{
	wt->pidfd = pidfd;
	wt->client = client;
	wt->e = (struct queue_entry){
		.priority = req->u.grant.priority,
		.since_ns = now_mono_ns(),
		.uid = uid,
		.owner = wt,
	};
	if (req->u.grant.wait)
		wt->e.deadline_ns = wt->e.since_ns + (uint64_t)req->u.grant.wait * 1000000000ull;
	snprintf(wt->reason, sizeof(wt->reason), "%s", reason);
}

int waiting_add(struct waiting *w, void *client, uid_t uid, struct dg_request *req, int pidfd,
		const char *reason, struct waiter **ret, struct dg_error *err)
{
	struct waiter *wt = calloc(1, sizeof(*wt));
	struct epoll_event ev;
	char name[128];

	if (!wt) {
		safe_close(pidfd);
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	}
	waiter_init(wt, client, uid, req, pidfd, reason);
	if (queue_add(&w->queue, &wt->e) < 0) {
		waiter_free(wt);
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	}
	wt->req = *req; /* the arena too: the waiter owns the request now */
	*req = (struct dg_request){ .op = DG_OP_GRANT };
	wt->e.grant = &wt->req.u.grant;
	w->moved = true;
	metrics_queue_length(w->metrics, w->queue.n);
	ev = (struct epoll_event){ .events = EPOLLIN, .data.u64 = TAG_WAITER | wt->e.seq };
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, pidfd, &ev) < 0)
		log_debug("cannot poll the target of a waiting grant: %m; the periodic check will");
	waiter_log_name(wt, name, sizeof(name));
	log_info("the grant for %s waits (priority %lld, position %zu of %zu): %s", name,
		 (long long)wt->e.priority, queue_position(&w->queue, &wt->e), w->queue.n,
		 wt->reason);
	*ret = wt;
	return 0;
}

void waiting_wake(struct waiting *w, uint64_t since_ns)
{
	/* Leases released at start (reconcile) come before the queue exists: none waits. */
	if (!w || w->dirty)
		return;
	w->dirty = true;
	w->dirty_ns = since_ns;
}

/*
 * Tries the waiter's grant again. Returns true when it left the line
 * (served, or refused for another reason than busy GPUs), false when it
 * still waits.
 */
static bool waiter_try(struct waiting *w, struct waiter *wt)
{
	struct dg_error err = { 0 };
	struct dg_arena arena = { 0 };
	auto_json json_object *msg = NULL;
	union dg_reply reply;
	uint64_t waited;
	char name[128];
	int r = w->ops->retry(w->ctx, wt->client, &wt->req, &reply, &arena, &err);

	if (r == WAITING_BUSY) {
		snprintf(wt->reason, sizeof(wt->reason), "%s", err.message);
		dg_arena_free(&arena);
		return false;
	}
	waited = now_mono_ns() - wt->e.since_ns;
	waiter_log_name(wt, name, sizeof(name));
	if (r == 0) {
		/* The second figure counts from the wake-up that freed a GPU. */
		log_info(
			"served the waiting grant for %s after %.1f ms in the queue, %.1f ms after "
			"the event that freed its GPUs",
			name, (double)waited / 1e6,
			w->dirty_ns ? (double)(now_mono_ns() - w->dirty_ns) / 1e6 : 0.0);
		metrics_queue_served(w->metrics, waited);
	} else {
		metrics_inc(w->metrics, METRIC_QUEUE_CANCELLED, 1);
	}
	msg = r < 0 ? dg_reply_error(&err) : dg_reply_encode(DG_OP_GRANT, &reply);
	waiter_answer(w, wt, msg);
	dg_arena_free(&arena);
	return true;
}

static void waiters_serve(struct waiting *w)
{
	w->dirty = false;
	for (size_t i = 0; i < w->queue.n;) {
		if (!waiter_try(w, waiter_at(w, i)))
			i++;
	}
}

static void waiter_timeout(struct waiting *w, struct waiter *wt)
{
	struct dg_error err = { 0 };

	dg_error_set(&err, DG_E_UNAVAILABLE, ETIMEDOUT,
		     "waited %llds in the queue and no GPU became free: %s",
		     (long long)wt->req.u.grant.wait, wt->reason);
	dg_error_hint(&err, "wait longer (--wait=TIMEOUT, or --wait alone for no limit), ask "
			    "with a higher --priority, or see who holds the GPUs with "
			    "'devgatectl list'");
	log_info("a waiting grant timed out: %s", err.message);
	metrics_inc(w->metrics, METRIC_QUEUE_TIMEOUTS, 1);
	waiter_fail(w, wt, &err);
}

/* Sends each waiter whose place changed its new place. */
static void waiters_tell(struct waiting *w)
{
	w->moved = false;
	for (size_t i = 0; i < w->queue.n; i++) {
		struct waiter *wt = waiter_at(w, i);
		auto_json json_object *msg = NULL;
		union dg_stream_event ev = {
			.wait = { .type = "waiting",
				  .position = (int64_t)i + 1,
				  .of = (int64_t)w->queue.n,
				  .reason = wt->reason },
		};

		if (wt->told_pos == i + 1 && wt->told_of == w->queue.n)
			continue;
		wt->told_pos = i + 1;
		wt->told_of = w->queue.n;
		msg = dg_event_encode(DG_OP_GRANT, &ev);
		if (w->ops->tell(w->ctx, wt->client, msg) < 0) {
			/* Its client was cut and the waiter went with it: start again. */
			w->moved = true;
			return;
		}
	}
}

void waiting_run(struct waiting *w)
{
	uint64_t now = now_mono_ns();

	for (size_t i = 0; i < w->queue.n;) {
		const struct queue_entry *e = w->queue.v[i];

		if (e->deadline_ns && e->deadline_ns <= now)
			waiter_timeout(w, e->owner);
		else
			i++;
	}
	if (w->dirty)
		waiters_serve(w);
	while (w->moved)
		waiters_tell(w);
}

int waiting_timeout_ms(const struct waiting *w)
{
	uint64_t next = queue_next_deadline(&w->queue), now = now_mono_ns();

	if (w->dirty || w->moved)
		return 0;
	if (!next)
		return -1;
	return next <= now ? 0 : (int)((next - now + 999999) / 1000000);
}

/* Drops the waiter if its container ended; returns whether it did. */
static bool waiter_check(struct waiting *w, struct waiter *wt)
{
	struct dg_error err = { 0 };

	if (!w->ops->gone(w->ctx, &wt->req.u.grant.target, wt->pidfd))
		return false;
	dg_error_set(&err, DG_E_NO_TARGET, ESRCH,
		     "the container ended while its grant waited in the queue");
	log_info("a waiting grant was dropped: %s", err.message);
	metrics_inc(w->metrics, METRIC_QUEUE_CANCELLED, 1);
	waiter_fail(w, wt, &err);
	return true;
}

void waiting_event(struct waiting *w, uint64_t tag)
{
	for (size_t i = 0; i < w->queue.n; i++) {
		struct waiter *wt = waiter_at(w, i);

		if ((TAG_WAITER | wt->e.seq) != tag)
			continue;
		/*
		 * For a cgroup target that was only its first process: the pidfd
		 * leaves the loop and the periodic check watches the cgroup.
		 */
		if (!waiter_check(w, wt))
			(void)epoll_ctl(w->epfd, EPOLL_CTL_DEL, wt->pidfd, NULL);
		return;
	}
}

void waiting_check(struct waiting *w)
{
	for (size_t i = 0; i < w->queue.n;) {
		if (!waiter_check(w, waiter_at(w, i)))
			i++;
	}
}

/* Writes the grant's request as devgatectl spells it: "--gpus 2 --arch ampere --shared". */
static void request_text(const struct dg_grant_req *g, char *buf, size_t len)
{
	const struct {
		const char *opt, *val;
	} parts[] = {
		{ "--gpu", g->gpus },
		{ "--model", g->model },
		{ "--arch", g->arch },
		{ "--product", g->product },
		{ "--min-memory", g->min_memory },
		{ "--min-cc", g->min_cc },
		{ "--alias", g->alias },
		{ "--profile", g->profile },
	};
	size_t off = 0;

	buf[0] = '\0';
	if (g->has_count)
		off += (size_t)snprintf(buf, len, "--gpus %lld", (long long)g->count);
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]) && off < len; i++) {
		if (parts[i].val)
			off += (size_t)snprintf(buf + off, len - off, "%s%s %s", off ? " " : "",
						parts[i].opt, parts[i].val);
	}
	if (g->shared && off < len)
		snprintf(buf + off, len - off, "%s--shared", off ? " " : "");
}

/* Fills the listing of the entry at place pos; 0 or -ENOMEM. */
static int waiter_info(const struct queue_entry *e, size_t pos, uint64_t now,
		       struct dg_waiter_info *w, struct dg_arena *a)
{
	const struct dg_grant_req *g = e->grant;
	char text[512];

	request_text(g, text, sizeof(text));
	*w = (struct dg_waiter_info){
		.position = (int64_t)pos,
		.priority = e->priority,
		.container = g->target.container ? dg_arena_strdup(a, g->target.container) : NULL,
		.cgroup = g->target.cgroup ? dg_arena_strdup(a, g->target.cgroup) : NULL,
		.pid = g->target.pid,
		.has_pid = g->target.has_pid,
		.request = dg_arena_strdup(a, text),
		.waited_ms = (int64_t)((now - e->since_ns) / 1000000),
		.timeout = g->wait,
		.has_timeout = g->wait > 0,
		.uid = e->uid,
	};
	return w->request ? 0 : -ENOMEM;
}

int waiting_list(const struct waiting *w, struct dg_queue_reply *out, struct dg_arena *a)
{
	const struct queue *q = &w->queue;
	uint64_t now = now_mono_ns();

	out->waiters = q->n ? dg_arena_alloc(a, q->n * sizeof(*out->waiters)) : NULL;
	if (q->n && !out->waiters)
		return -ENOMEM;
	for (size_t i = 0; i < q->n; i++) {
		if (waiter_info(q->v[i], i + 1, now, &out->waiters[i], a) < 0)
			return -ENOMEM;
	}
	out->n_waiters = q->n;
	return 0;
}
