// SPDX-License-Identifier: Apache-2.0
/*
 * The revoke transaction (grant_revoke) and the expiry of a lease
 * (grant_expire, a full revoke): plans what the lease keeps, writes the
 * revoke journal, runs the revoke steps (txn.c), reports the processes that
 * still hold a revoked device, and commits the lease table. Once the
 * journal is written a revoke is finished, never undone, even after a
 * crash; this file must not change the kernel before the journal.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lease/state.h"
#include "core/config.h"
#include "cleanup.h"
#include "grant.h"
#include "log.h"
#include "metrics/metrics.h"
#include "sys/fault.h"
#include "txn.h"
#include "util.h"
#include "view/view.h"
#include "watch/watch.h"

/*
 * Sets drop[i] for each host device of lease l that the request names, and
 * for all of them on a full revoke (no GPU and no device named). Fails with
 * DG_E_NOT_GRANTED when l lacks a named device.
 */
static int revoke_select_devices(const struct lease *l, const struct dg_revoke_req *req, bool *drop,
				 struct dg_error *err)
{
	for (size_t i = 0; i < l->n_devices; i++)
		drop[i] = !req->gpus && req->n_devices == 0;
	for (size_t k = 0; k < req->n_devices; k++) {
		const struct lease_device *dev = lease_find_device(l, req->devices[k]);

		if (!dev) {
			dg_error_set(err, DG_E_NOT_GRANTED, ENOENT, "%s does not hold device '%s'",
				     lease_label(l), req->devices[k]);
			dg_error_hint(err, "name a device by its container path or host path; "
					   "'devgatectl status' lists them");
			return -ENOENT;
		}
		drop[dev - l->devices] = true;
	}
	return 0;
}

/*
 * Writes to *next a copy of lease old without the GPUs and devices the
 * request names, and puts their UUIDs and paths in the reply. The driver's
 * files go when no GPU is left.
 */
static int revoke_plan(const struct dg_inventory *inv, const struct lease *old,
		       const struct dg_revoke_req *req, struct lease **next,
		       struct dg_revoke_reply *out, struct dg_arena *a, struct dg_error *err)
{
	bool drop[DG_MAX_GPUS], drop_dev[DG_MAX_DEVICES] = { 0 };
	int r = txn_revoke_select(inv, old, req->gpus, req->n_devices > 0, drop, err);

	if (r == 0)
		r = revoke_select_devices(old, req, drop_dev, err);
	if (r < 0)
		return r;
	*next = lease_copy(old);
	out->revoked = dg_arena_alloc(a, old->n_gpus * sizeof(*out->revoked) + 1);
	out->revoked_devices =
		dg_arena_alloc(a, old->n_devices * sizeof(*out->revoked_devices) + 1);
	if (!*next || !out->revoked || !out->revoked_devices) {
		dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < old->n_devices; i++) {
		char path[40];

		if (!drop_dev[i])
			continue;
		snprintf(path, sizeof(path), "/dev/%s", old->devices[i].name);
		out->revoked_devices[out->n_revoked_devices++] = dg_arena_strdup(a, path);
		lease_del_device(*next, old->devices[i].name);
	}
	for (size_t i = 0; i < old->n_gpus; i++) {
		if (!drop[i])
			continue;
		out->revoked[out->n_revoked++] = dg_arena_strdup(a, old->gpus[i].uuid);
		lease_del_gpu(*next, old->gpus[i].uuid);
	}
	if ((*next)->n_gpus == 0)
		lease_driver_clear(*next);
	return 0;
}

/*
 * Revokes what req names from lease old, which is in the table; t is the
 * target the request resolved, or NULL. A revoke that leaves the lease
 * holding nothing is reported to the observers as full_type ("released",
 * or "expired" at expiry) and drops the lease from the table.
 */
static int revoke_lease(struct daemon *d, struct lease *old, const struct dg_revoke_req *req,
			const struct target *t, const char *full_type, struct dg_revoke_reply *out,
			struct dg_arena *a, struct dg_error *err)
{
	auto_cleanup(lease_freep) struct lease *next = NULL, *gone = NULL;
	struct node_result res[DG_MAX_NODES] = { 0 };
	struct dg_node gone_nodes[DG_MAX_NODES];
	size_t n_gone = 0;
	char note[40];
	uint64_t t0, t1, t2;
	int r;

	r = revoke_plan(d->inv, old, req, &next, out, a, err);
	if (r == 0 && !(gone = lease_minus(old, next)))
		r = dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	if (r < 0)
		return r;
	/* The journal first: after a crash the revoke is finished, never undone. */
	t0 = now_mono_ns();
	r = state_revoke_begin(d->state, gone, next);
	if (r < 0)
		return txn_record_error(d->cfg->state_dir, r, "revoke", err);
	fault_point("revoke.journal");
	t1 = now_mono_ns();
	txn_revoke_steps(d, old, next, t, res, gone_nodes, &n_gone);
	t2 = now_mono_ns();
	if (txn_report_holders(&d->cg, old, t, gone_nodes, n_gone, req, out, a) < 0)
		log_error("out of memory describing the holders in %s", lease_label(old));
	log_debug("revoke from %s: journal %llu us, steps %llu us, holders %llu us",
		  lease_label(old), (unsigned long long)(t1 - t0) / 1000,
		  (unsigned long long)(t2 - t1) / 1000,
		  (unsigned long long)(now_mono_ns() - t2) / 1000);
	out->has_lease = true;
	if (view_lease(d->inv, next, &out->lease, a) < 0 ||
	    txn_node_statuses(gone_nodes, res, n_gone, &out->nodes, &out->n_nodes, a) < 0)
		log_error("out of memory describing the revoke from %s", lease_label(old));
	log_info("revoked %zu GPU(s)%s from %s", out->n_revoked,
		 lease_devices_note(out->n_revoked_devices, note, sizeof(note)), lease_label(old));
	txn_emit(d, lease_holds(next) ? "revoked" : full_type, next, out->revoked, out->n_revoked);
	if (!lease_holds(next)) {
		watch_del(d, old);
		lease_free(lease_table_take(&d->leases, old->cgid));
		return 0;
	}
	txn_commit(&d->leases, old, TAKE_PTR(next));
	return 0;
}

/*
 * With missing_ok, a container that holds nothing (or an unknown label) is
 * no error: the revoke succeeds with an empty reply.
 */
int grant_revoke(struct daemon *d, const struct dg_revoke_req *req, struct dg_revoke_reply *out,
		 struct dg_arena *a, struct dg_error *err)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	struct lease *old = txn_find_lease(d, &req->target, &t, err);

	if (!old && req->missing_ok &&
	    (err->code == DG_E_NOT_GRANTED ||
	     (err->code == DG_E_NO_TARGET && req->target.container))) {
		memset(err, 0, sizeof(*err));
		return 0;
	}
	if (!old)
		return -(err->errnum ? err->errnum : EINVAL);
	return revoke_lease(d, old, req, &t, "released", out, a, err);
}

/*
 * Revokes the whole lease through revoke_lease(), with SIGKILL to its
 * holders when the lease asked for it; logs a failure, since no client
 * waits for the answer.
 */
void grant_expire(struct daemon *d, uint64_t cgid)
{
	struct lease *l = lease_table_find(&d->leases, cgid);
	struct dg_revoke_req req = { .kill = 9 };
	struct dg_revoke_reply out = { 0 };
	struct dg_error err = { 0 };
	struct dg_arena a = { 0 };
	char when[64];

	if (!l || l->expires <= 0)
		return;
	req.has_kill = l->kill_on_expiry;
	format_time_utc(l->expires, when, sizeof(when));
	log_notice("the lease of %s expired at %s: revoking it%s", lease_label(l), when,
		   l->kill_on_expiry ? " and killing its holders" : "");
	if (revoke_lease(d, l, &req, NULL, "expired", &out, &a, &err) < 0)
		log_error("cannot revoke the expired lease of cgroup %llu: %s",
			  (unsigned long long)cgid, err.message);
	else
		metrics_inc(d->metrics, METRIC_EXPIRATIONS, 1);
	dg_arena_free(&a);
}
