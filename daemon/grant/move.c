// SPDX-License-Identifier: Apache-2.0
/*
 * The move transaction (grant_move): GPUs go from one container to another
 * in one step, each in its mode. The source loses them in the kernel
 * (grants, then nodes) before the destination gets them as any grant does
 * (txn_grant_apply), so the two containers are never both able to open a
 * moved GPU. The move journal comes first and the destination's record is
 * the commit; recover.c settles a move a crash cut short. This file must
 * not give the destination anything before the source has lost it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/state.h"
#include "core/config.h"
#include "cleanup.h"
#include "grant.h"
#include "log.h"
#include "sys/fault.h"
#include "txn.h"
#include "v1dev.h"
#include "view/view.h"
#include "watch/watch.h"

/*
 * Resolves the destination into t: a PID or a cgroup as any grant does; a
 * label names the container of a lease, reached through a live process.
 */
static int move_target(struct daemon *d, const struct dg_target_args *ta, struct target *t,
		       struct dg_error *err)
{
	struct lease *l;

	if (!ta->container || ta->has_pid || ta->cgroup)
		return txn_resolve_target(d, ta, t, err);
	l = txn_find_lease(d, ta, t, err);
	if (!l)
		return -(err->errnum ? err->errnum : EINVAL);
	if (txn_live_target(d, l, t) < 0)
		return dg_error_set(err, DG_E_NO_TARGET, ESRCH, "%s has no live process",
				    lease_label(l));
	return 0;
}

/* The leases before and after a move, and the source's nodes that go. */
struct move_plan {
	struct lease *src_next; /* the source without what moves */
	struct lease *gone;	/* what moves, as a lease of the source */
	struct lease *dst_next; /* the destination with it */
	struct dg_node gone_nodes[DG_MAX_NODES];
	size_t n_gone;
};

/* For auto_cleanup(): frees the plan's leases. */
static void move_plan_done(struct move_plan *p)
{
	lease_free(p->src_next);
	lease_free(p->gone);
	lease_free(p->dst_next);
}

/*
 * Checks that the source's GPU lg may go to lease dst (NULL: a new lease):
 * it is on this host and grantable, its instance still exists, and dst
 * holds no part of it. Writes the GPU of the inventory to *ret.
 */
static int move_check_gpu(const struct dg_inventory *inv, const struct lease_gpu *lg,
			  const struct lease *dst, const struct dg_gpu **ret, struct dg_error *err)
{
	const struct dg_gpu *g = inventory_find_uuid(inv, lg->uuid);

	if (!g || g->problem[0] || g->excluded)
		return dg_error_set(err, DG_E_UNAVAILABLE, EIO, "GPU %s cannot be granted now: %s",
				    lg->uuid,
				    !g		    ? "it is not on this host"
				    : g->problem[0] ? g->problem
						    : "the gpu-allow list excludes it");
	if (lg->instance && !mig_find_gi(g, lg->gi))
		return dg_error_set(err, DG_E_UNAVAILABLE, ENODEV,
				    "GPU instance %u:%u is not on this host any more", g->index,
				    lg->gi);
	if (dst && lease_find_gpu(dst, lg->uuid)) {
		dg_error_set(err, DG_E_UNAVAILABLE, EEXIST, "%s holds %sGPU %u already",
			     lease_label(dst),
			     lease_find_gpu(dst, lg->uuid)->instance ? "an instance of " : "",
			     g->index);
		dg_error_hint(err, "move only GPUs the destination does not hold; a container "
				   "holds one instance of a GPU or all of it");
		return -EEXIST;
	}
	*ret = g;
	return 0;
}

/* Adds lg to lease dst as the source held it: the whole GPU, or the same instance. */
static int move_add(struct lease *dst, const struct lease_gpu *lg, const struct dg_gpu *g)
{
	if (lg->instance)
		return lease_add_instance(dst, g, mig_find_gi(g, lg->gi));
	return lease_add_gpu(dst, g, lg->shared);
}

/*
 * Fills p with the leases before and after: what the source keeps, what
 * moves and what the destination gets, and the moved GPUs' UUIDs go to the
 * reply. Every refusal happens here, before any change. A moved GPU keeps
 * its time limit: the destination's lease gets the source's expiry when it
 * has none or a later one.
 */
static int move_plan(const struct dg_inventory *inv, const struct lease *src,
		     const struct lease *dst_old, const struct target *dt,
		     const struct dg_move_req *req, struct move_plan *p, struct dg_move_reply *out,
		     struct dg_arena *a, struct dg_error *err)
{
	struct dg_node src_nodes[DG_MAX_NODES], next_nodes[DG_MAX_NODES];
	bool drop[DG_MAX_GPUS], named;
	int r = txn_revoke_select(inv, src, req->gpus, false, drop, err);

	if (r < 0)
		return r;
	p->src_next = lease_copy(src);
	p->gone = lease_copy(src);
	/* A destination named by its runtime's name (server/byname.c) is labelled so. */
	named = req->to.cgroup && req->to.container;
	p->dst_next = txn_next_lease(dst_old, dt, named ? req->to.container : NULL);
	if (p->dst_next && named) {
		free(p->dst_next->runtime);
		p->dst_next->runtime = req->to.runtime ? strdup(req->to.runtime) : NULL;
	}
	out->moved = dg_arena_alloc(a, src->n_gpus * sizeof(*out->moved) + 1);
	if (!p->src_next || !p->gone || !p->dst_next || !out->moved)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	for (size_t i = 0; i < src->n_devices; i++)
		lease_del_device(p->gone, src->devices[i].name);
	for (size_t i = 0; i < src->n_gpus; i++) {
		const struct dg_gpu *g = NULL;

		if (!drop[i]) {
			lease_del_gpu(p->gone, src->gpus[i].uuid);
			continue;
		}
		r = move_check_gpu(inv, &src->gpus[i], dst_old, &g, err);
		if (r < 0)
			return r;
		lease_del_gpu(p->src_next, src->gpus[i].uuid);
		if (move_add(p->dst_next, &src->gpus[i], g) < 0)
			return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
		out->moved[out->n_moved++] = dg_arena_strdup(a, g->uuid);
	}
	if (out->n_moved == 0)
		return dg_error_set(err, DG_E_NOT_GRANTED, ENOENT, "%s holds no GPU",
				    lease_label(src));
	/* The driver's files stay with the source until its last GPU leaves. */
	if (p->src_next->n_gpus == 0)
		lease_driver_clear(p->src_next);
	if (src->expires > 0 &&
	    (p->dst_next->expires <= 0 || src->expires < p->dst_next->expires)) {
		p->dst_next->expires = src->expires;
		p->dst_next->kill_on_expiry = src->kill_on_expiry;
	}
	p->n_gone = txn_node_diff(src_nodes, lease_nodes(src, inv, src_nodes, DG_MAX_NODES),
				  next_nodes,
				  lease_nodes(p->src_next, inv, next_nodes, DG_MAX_NODES),
				  p->gone_nodes);
	return 0;
}

/*
 * Gives the source back what it lost after the destination's grant failed
 * (and undid itself): its grants and nodes, and clears the journal.
 */
static void move_undo(struct daemon *d, const struct lease *src, const struct target *st,
		      const struct move_plan *p)
{
	struct dg_error err = { 0 };

	if (txn_grants_put(d->bg, src->cgid, p->gone_nodes, p->n_gone, &err) < 0)
		log_error("cannot give %s its grants back: %s", lease_label(src), err.message);
	if (v1dev_apply(d, src, &err) < 0)
		log_error("cannot give %s its v1 device rules back: %s", lease_label(src),
			  err.message);
	txn_restore_nodes(d, src, st, p->gone_nodes, p->n_gone);
	(void)state_moving_clear(d->state, src->cgid);
}

/*
 * Reports the source's processes that still hold a moved GPU's nodes, and
 * signals them when the request asked for a kill, as a revoke does.
 */
static void move_holders(struct daemon *d, const struct lease *src, const struct move_plan *p,
			 const struct dg_move_req *req, struct dg_move_reply *out,
			 struct dg_arena *a)
{
	struct dg_revoke_req rq = { .kill = req->kill, .has_kill = req->has_kill };
	struct dg_revoke_reply rp = { 0 };

	if (txn_report_holders(&d->cg, src, NULL, p->gone_nodes, p->n_gone, &rq, &rp, a) < 0)
		log_error("out of memory describing the holders in %s", lease_label(src));
	out->holders = rp.holders;
	out->n_holders = rp.n_holders;
	out->killed = rp.killed;
}

/*
 * Finishes a move after the destination's record (the commit): the
 * source's record, its gate when it holds nothing more, the journal, the
 * observers, and last the lease table.
 */
static void move_commit(struct daemon *d, struct lease *src, struct lease *dst_old,
			struct move_plan *p, struct dg_move_reply *out)
{
	bool keeps = lease_holds(p->src_next);
	int r = keeps ? state_save(d->state, p->src_next) : state_remove(d->state, src->cgid);

	if (r < 0)
		log_error_errno(r, "cannot record the move from %s: %m (the journal keeps it)",
				lease_label(src));
	if (!keeps)
		txn_unguard_cgroup(d, src->cgid, lease_label(src));
	if (r == 0)
		(void)state_moving_clear(d->state, src->cgid);
	txn_emit(d, keeps ? "revoked" : "released", p->src_next, out->moved, out->n_moved);
	txn_emit(d, "granted", p->dst_next, out->moved, out->n_moved);
	if (!dst_old)
		watch_add(d, p->dst_next);
	txn_commit(&d->leases, dst_old, TAKE_PTR(p->dst_next));
	if (keeps) {
		txn_commit(&d->leases, src, TAKE_PTR(p->src_next));
	} else {
		watch_del(d, src);
		lease_free(lease_table_take(&d->leases, src->cgid));
	}
}

/*
 * There is a gap where neither container can open the GPUs, never an
 * overlap. The handler runs alone in the single-threaded loop, so no other
 * request sees the lease table between the steps.
 */
int grant_move(struct daemon *d, const struct dg_move_req *req, struct dg_move_reply *out,
	       struct dg_arena *a, struct dg_error *err)
{
	auto_cleanup(target_donep) struct target st = TARGET_INIT, dt = TARGET_INIT;
	auto_cleanup(move_plan_done) struct move_plan p = { 0 };
	struct node_result res[DG_MAX_NODES] = { 0 };
	struct txn_grant x = { 0 };
	struct lease *src, *dst_old;
	char from[280];
	int r;

	src = txn_find_lease(d, &req->from, &st, err);
	if (!src)
		return -(err->errnum ? err->errnum : EINVAL);
	r = move_target(d, &req->to, &dt, err);
	if (r < 0)
		return r;
	if (dt.cgid == src->cgid)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "the source and the destination are one container (%s)",
				    lease_label(src));
	if (d->inv->ctl_problem[0])
		return dg_error_set(err, DG_E_UNAVAILABLE, EIO, "cannot grant: %s",
				    d->inv->ctl_problem);
	dst_old = lease_table_find(&d->leases, dt.cgid);
	r = move_plan(d->inv, src, dst_old, &dt, req, &p, out, a, err);
	if (r < 0)
		return r;
	r = state_moving_mark(d->state, p.gone, dt.cgid);
	if (r < 0)
		return txn_record_error(d->cfg->state_dir, r, "move", err);
	fault_point("move.journal");
	txn_grants_del(d->bg, src->cgid, p.gone_nodes, p.n_gone);
	v1dev_revoke(d, src, p.src_next, p.gone_nodes, p.n_gone);
	fault_point("move.grants");
	txn_remove_nodes(d, src, &st, p.gone_nodes, p.n_gone, res, false);
	fault_point("move.nodes");
	r = txn_grant_apply(d, &dt, dst_old, p.dst_next, &x, err);
	if (r < 0) {
		move_undo(d, src, &st, &p);
		return r;
	}
	fault_point("move.commit");
	if (src->n_driver_files && !p.src_next->n_driver_files)
		txn_remove_nodes(d, src, &st, NULL, 0, res, true);
	move_holders(d, src, &p, req, out, a);
	snprintf(from, sizeof(from), "%s", lease_label(src));
	if (view_lease(d->inv, p.src_next, &out->from, a) < 0 ||
	    view_lease(d->inv, p.dst_next, &out->to, a) < 0)
		log_error("out of memory describing the move from %s", from);
	log_info("moved %zu GPU(s) from %s to %s (cgroup %s, PID %d)", out->n_moved, from,
		 lease_label(p.dst_next), p.dst_next->cgroup, (int)p.dst_next->pid);
	move_commit(d, src, dst_old, &p, out);
	return 0;
}
