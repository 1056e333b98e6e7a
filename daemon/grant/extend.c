// SPDX-License-Identifier: Apache-2.0
/*
 * The extend transaction (grant_extend): moves the expiry of a lease that
 * expires, by a duration or to a new time to live from now. It saves the
 * record and swaps the lease into the table; it must not change anything
 * else about the lease, nor touch the kernel.
 */
#include <errno.h>

#include "lease/state.h"
#include "core/config.h"
#include "cleanup.h"
#include "grant.h"
#include "log.h"
#include "txn.h"
#include "util.h"
#include "view/view.h"

int grant_extend(struct daemon *d, const struct dg_extend_req *req, struct dg_extend_reply *out,
		 struct dg_arena *a, struct dg_error *err)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	auto_cleanup(lease_freep) struct lease *next = NULL;
	struct lease *old;
	int64_t now = now_wall_ceil_s(), expires;
	char when[64];
	int r;

	if (req->has_by == req->has_ttl)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "say how much longer with exactly one of by or ttl");
	old = txn_find_lease(d, &req->target, &t, err);
	if (!old)
		return -(err->errnum ? err->errnum : EINVAL);
	if (old->expires <= 0) {
		dg_error_set(err, DG_E_INVALID, ENOENT, "the lease of %s does not expire",
			     lease_label(old));
		dg_error_hint(err, "give it a time to live with 'devgatectl grant ... --ttl "
				   "DURATION'; extend only moves an expiry");
		return -ENOENT;
	}
	r = req->has_by ? lease_expiry_extend(old->expires, now, req->by, &expires)
			: lease_expiry_new(now, req->ttl, &expires);
	if (r < 0)
		return dg_error_set(err, DG_E_INVALID, ERANGE,
				    "the lease would end more than %lld days from now",
				    (long long)(DURATION_MAX_S / 86400));
	next = lease_copy(old);
	if (!next)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	next->expires = expires;
	r = state_save(d->state, next);
	if (r < 0)
		return txn_record_error(d->cfg->state_dir, r, "new expiry", err);
	format_time_utc(expires, when, sizeof(when));
	log_info("the lease of %s now expires at %s", lease_label(next), when);
	if (view_lease(d->inv, next, &out->lease, a) < 0)
		log_error("out of memory describing the lease of %s", lease_label(next));
	txn_emit(d, "extended", next, NULL, 0);
	/* Out of the table and back: the table keeps per-GPU counts. */
	txn_commit(&d->leases, old, TAKE_PTR(next));
	return 0;
}
