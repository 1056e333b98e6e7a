// SPDX-License-Identifier: Apache-2.0
/*
 * Request dispatch: one decoded request in, one reply struct out, through a
 * table of handlers by operation. Here alone are a request's authority
 * checked, its latency and outcome counted, and a refusal logged (once).
 *
 * This file must not see sockets or JSON (server.c does the wire), and its
 * handlers only call the modules that do the work.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "byname.h"
#include "core/config.h"
#include "view/events.h"
#include "grant/grant.h"
#include "log.h"
#include "metrics/metrics.h"
#include "ops.h"
#include "peer.h"
#include "inventory/reload.h"
#include "inventory/rescan.h"
#include "util.h"
#include "version.h"
#include "view/metrics_page.h"
#include "view/view.h"
#include "waiting.h"

typedef int (*op_fn)(struct daemon *d, const struct dg_request *req, union dg_reply *reply,
		     struct dg_arena *a, struct dg_error *err);

static int op_ping(struct daemon *d, const struct dg_request *req, union dg_reply *reply,
		   struct dg_arena *a, struct dg_error *err)
{
	struct dg_ping_reply *p = &reply->ping;

	(void)req;
	(void)a;
	(void)err;
	p->version = DEVGATE_VERSION;
	p->pid = getpid();
	p->leases = (int64_t)d->leases.n;
	p->hook_allow_env = d->cfg->hook_env;
	p->has_settings = true;
	p->settings = (struct dg_settings){
		.socket = d->cfg->socket_path,
		.state_dir = d->cfg->state_dir,
		.pin_root = d->cfg->pin_root,
		.host_root = d->inv->host_root,
		.cgroup_root = d->cg.mount,
		.metrics_listen = d->cfg->metrics_listen,
	};
	return 0;
}

static int op_list(struct daemon *d, const struct dg_request *req, union dg_reply *reply,
		   struct dg_arena *a, struct dg_error *err)
{
	if (view_inventory(d->inv, &d->leases, &d->cfg->policy, req->u.list.free, &reply->list, a) <
	    0)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	return 0;
}

static int op_status(struct daemon *d, const struct dg_request *req, union dg_reply *reply,
		     struct dg_arena *a, struct dg_error *err)
{
	struct dg_status_reply *s = &reply->status;

	(void)req;
	s->leases = d->leases.n ? dg_arena_alloc(a, d->leases.n * sizeof(*s->leases)) : NULL;
	if (d->leases.n && !s->leases)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	for (size_t i = 0; i < d->leases.n; i++) {
		if (view_lease(d->inv, d->leases.v[i], &s->leases[i], a) < 0)
			return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	}
	s->n_leases = d->leases.n;
	return 0;
}

static int op_watch(struct daemon *d, const struct dg_request *req, union dg_reply *reply,
		    struct dg_arena *a, struct dg_error *err)
{
	(void)d;
	(void)req;
	(void)a;
	(void)err;
	reply->watch.watching = true;
	return 0;
}

static int op_metrics(struct daemon *d, const struct dg_request *req, union dg_reply *reply,
		      struct dg_arena *a, struct dg_error *err)
{
	char *text = NULL;
	size_t len = 0;
	int r = metrics_render(d, &text, &len);

	(void)req;
	if (r < 0)
		return dg_error_set(err, DG_E_INTERNAL, -r, "cannot render metrics: %s",
				    strerror(-r));
	/* JSON escaping can double it; a reply line must stay under DG_REPLY_MAX. */
	if (len > DG_REPLY_MAX / 2) {
		free(text);
		dg_error_set(err, DG_E_INTERNAL, EMSGSIZE,
			     "the metrics document (%zu bytes) is too "
			     "large for a reply",
			     len);
		dg_error_hint(err, "scrape it over HTTP: devgated --metrics-listen 127.0.0.1:PORT");
		return -EMSGSIZE;
	}
	reply->metrics.format = "prometheus text 0.0.4";
	reply->metrics.text = dg_arena_strdup(a, text);
	free(text);
	if (!reply->metrics.text)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	return 0;
}

static int op_events(struct daemon *d, const struct dg_request *req, union dg_reply *reply,
		     struct dg_arena *a, struct dg_error *err)
{
	reply->events.follow = req->u.events.follow;
	if (d->events && events_recent(d->events, &reply->events, a) < 0)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	return 0;
}

static int op_grant(struct daemon *d, const struct dg_request *req, union dg_reply *reply,
		    struct dg_arena *a, struct dg_error *err)
{
	return grant_request(d, &req->u.grant, &reply->grant, a, err);
}

static int op_revoke(struct daemon *d, const struct dg_request *req, union dg_reply *reply,
		     struct dg_arena *a, struct dg_error *err)
{
	return grant_revoke(d, &req->u.revoke, &reply->revoke, a, err);
}

static int op_rescan(struct daemon *d, const struct dg_request *req, union dg_reply *reply,
		     struct dg_arena *a, struct dg_error *err)
{
	(void)req;
	return rescan_run(d, "devgatectl rescan", &reply->rescan, a, err);
}

static int op_reload(struct daemon *d, const struct dg_request *req, union dg_reply *reply,
		     struct dg_arena *a, struct dg_error *err)
{
	struct dg_reload_reply *out = &reply->reload;
	struct reload_result res;
	int r = reload_run(d, "devgatectl reload", &res, err);

	(void)req;
	if (r < 0)
		return r;
	*out = (struct dg_reload_reply){
		.excluded = (int64_t)res.excluded,
		.newly_held = (int64_t)res.newly_held,
		.aliases = (int64_t)res.aliases,
		.profiles = (int64_t)res.profiles,
		.device_allow = (int64_t)res.device_allow,
		.restart = res.restart[0] ? dg_arena_strdup(a, res.restart) : NULL,
	};
	if (res.restart[0] && !out->restart)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	return 0;
}

static int op_extend(struct daemon *d, const struct dg_request *req, union dg_reply *reply,
		     struct dg_arena *a, struct dg_error *err)
{
	return grant_extend(d, &req->u.extend, &reply->extend, a, err);
}

static int op_move(struct daemon *d, const struct dg_request *req, union dg_reply *reply,
		   struct dg_arena *a, struct dg_error *err)
{
	return grant_move(d, &req->u.move, &reply->move, a, err);
}

static int op_queue(struct daemon *d, const struct dg_request *req, union dg_reply *reply,
		    struct dg_arena *a, struct dg_error *err)
{
	(void)req;
	if (waiting_list(d->waiting, &reply->queue, a) < 0)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	return 0;
}

static int op_containers(struct daemon *d, const struct dg_request *req, union dg_reply *reply,
			 struct dg_arena *a, struct dg_error *err)
{
	(void)req;
	return byname_list(d, &reply->containers, a, err);
}

static const op_fn handlers[DG_OP_MAX] = {
	[DG_OP_PING] = op_ping,	      [DG_OP_LIST] = op_list,
	[DG_OP_GRANT] = op_grant,     [DG_OP_REVOKE] = op_revoke,
	[DG_OP_STATUS] = op_status,   [DG_OP_WATCH] = op_watch,
	[DG_OP_METRICS] = op_metrics, [DG_OP_EVENTS] = op_events,
	[DG_OP_RESCAN] = op_rescan,   [DG_OP_EXTEND] = op_extend,
	[DG_OP_MOVE] = op_move,	      [DG_OP_QUEUE] = op_queue,
	[DG_OP_RELOAD] = op_reload,   [DG_OP_CONTAINERS] = op_containers,
};

bool ops_streams(const struct dg_request *req)
{
	return req->op == DG_OP_WATCH || (req->op == DG_OP_EVENTS && req->u.events.follow);
}

/* Returns the request's "source" (the hook stage that sent it), or NULL. */
static const char *source_of(const struct dg_request *req)
{
	if (req->op == DG_OP_GRANT)
		return req->u.grant.target.source;
	if (req->op == DG_OP_REVOKE)
		return req->u.revoke.target.source;
	if (req->op == DG_OP_EXTEND)
		return req->u.extend.target.source;
	if (req->op == DG_OP_MOVE)
		return req->u.move.from.source;
	return NULL;
}

bool ops_may_wait(const struct dg_request *req, int r, const struct dg_error *err)
{
	return r == -EBUSY && req->op == DG_OP_GRANT && req->u.grant.has_wait &&
	       err->code == DG_E_UNAVAILABLE;
}

/*
 * Counts a finished request and its latency, and logs it once if it was
 * refused. A grant that goes on to wait is counted when it leaves the queue.
 */
static void account(struct daemon *d, const struct ops_peer *peer, const struct dg_request *req,
		    int r, const struct dg_error *err, uint64_t ns)
{
	const char *op = dg_op_info(req->op)->name, *source = source_of(req);

	/* Not refused, not done: it waits (or waits on) in the queue. */
	if (ops_may_wait(req, r, err))
		return;
	metrics_observe(d->metrics, req->op, ns);
	if (r < 0) {
		metrics_request_failed(d->metrics, req->op,
				       dg_error_is_set(err) ? err->code : DG_E_INTERNAL);
		log_info("refused %s from uid %u pid %d%s%s%s: %s", op, (unsigned int)peer->uid,
			 (int)peer->pid, peer_pid_note(peer->pidfd), source ? " via " : "",
			 source ? source : "", dg_error_is_set(err) ? err->message : strerror(-r));
	} else if (req->op == DG_OP_GRANT) {
		metrics_inc(d->metrics, METRIC_GRANTS, 1);
	} else if (req->op == DG_OP_REVOKE) {
		metrics_inc(d->metrics, METRIC_REVOKES, 1);
	}
}

int ops_dispatch(struct daemon *d, const struct ops_peer *peer, const struct dg_request *req,
		 union dg_reply *reply, struct dg_arena *a, struct dg_error *err)
{
	uint64_t start = now_mono_ns();
	int r;

	memset(reply, 0, sizeof(*reply));
	if ((int)req->op < 0 || req->op >= DG_OP_MAX || !handlers[req->op])
		return dg_error_set(err, DG_E_PROTOCOL, ENOSYS, "operation not supported");
	if (source_of(req))
		metrics_hook_call(d->metrics, source_of(req));
	if (dg_op_info(req->op)->changes && !peer->admin) {
		dg_error_set(err, DG_E_PERM, EACCES, "'%s' %s: root or devgated's admin-group only",
			     dg_op_info(req->op)->name,
			     req->op == DG_OP_CONTAINERS ? "reads the runtimes' state"
							 : "changes leases");
		dg_error_hint(err, "run it as root, or ask the admin to add you to admin-group");
		r = -EACCES;
	} else if (req->op == DG_OP_GRANT && req->u.grant.n_devices && peer->uid != 0) {
		/* Any host character device (/dev/mem, /dev/kmsg): root's alone to hand out. */
		dg_error_set(err, DG_E_PERM, EACCES,
			     "granting host devices (--device) is for root only");
		dg_error_hint(err, "admin-group may grant GPUs; ask root for --device");
		r = -EACCES;
	} else if (req->op == DG_OP_GRANT && (req->u.grant.root || req->u.grant.has_root_id) &&
		   peer->uid != 0) {
		/* Nodes below any directory of the target's mount namespace: the hook's alone. */
		dg_error_set(err, DG_E_PERM, EACCES,
			     "a root path (--root) is for root only: the OCI hook's");
		dg_error_hint(err, "grant without --root: the nodes go into the container's own "
				   "/dev");
		r = -EACCES;
	} else {
		r = handlers[req->op](d, req, reply, a, err);
	}
	if (r < 0 && !dg_error_is_set(err))
		dg_error_set(err, DG_E_INTERNAL, -r, "request failed: %s", strerror(-r));
	account(d, peer, req, r, err, now_mono_ns() - start);
	return r;
}

int ops_wait_check(struct daemon *d, const struct ops_peer *peer, const struct dg_request *req,
		   int *ret_pidfd, struct dg_error *err)
{
	uint64_t start = now_mono_ns();
	int r = grant_wait_check(d, &req->u.grant, ret_pidfd, err);

	if (r < 0)
		account(d, peer, req, r, err, now_mono_ns() - start);
	return r;
}
