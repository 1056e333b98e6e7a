/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Grant, revoke and release: the transactions that change who holds what.
 *
 * Ordering makes every crash recoverable by reconcile.c, which makes the
 * kernel match the state directory:
 *   grant:   nodes -> grants map -> gates -> state   (state last)
 *   revoke:  state -> grants map -> nodes -> gates   (state first)
 *   move:    journal -> source's grants, nodes -> the destination's grant
 *            (its record is the commit) -> the source's record
 * so the kernel never holds less than the state says after an
 * acknowledged change, and anything extra is removed on restart.
 */
#ifndef DEVGATE_GRANT_H
#define DEVGATE_GRANT_H

#include "core/daemon.h"
#include "wire.h"

/*
 * Each fills its reply (strings in a) and reports the change through
 * d->hooks; on failure err says why and nothing changed.
 */
int grant_request(struct daemon *d, const struct dg_grant_req *req, struct dg_grant_reply *out,
		  struct dg_arena *a, struct dg_error *err);
int grant_revoke(struct daemon *d, const struct dg_revoke_req *req, struct dg_revoke_reply *out,
		 struct dg_arena *a, struct dg_error *err);
/* More time for a lease that expires; nothing else about it changes. */
int grant_extend(struct daemon *d, const struct dg_extend_req *req, struct dg_extend_reply *out,
		 struct dg_arena *a, struct dg_error *err);
/*
 * The lease's expiry passed: revoked as a full revoke is (with kill, if
 * the lease asked for it), reported as "expired".
 */
void grant_expire(struct daemon *d, uint64_t cgid);
/*
 * GPUs (req->gpus, of those from holds) go to another container, each in
 * its mode, in one transaction: from loses them in the kernel before to
 * gets them. Journal CGID.moving; see grant_finish_move.
 */
int grant_move(struct daemon *d, const struct dg_move_req *req, struct dg_move_reply *out,
	       struct dg_arena *a, struct dg_error *err);
/*
 * For grant --wait, when the GPUs were busy: 0 if the request may wait
 * (*ret_pidfd: its target's process), -ENODEV when it could never be
 * served, or the error the grant itself would give.
 */
int grant_wait_check(struct daemon *d, const struct dg_grant_req *g, int *ret_pidfd,
		     struct dg_error *err);
/* Whether a waiting grant's container ended (by its process, or its cgroup's). */
bool grant_target_gone(struct daemon *d, const struct dg_target_args *ta, int pidfd);
/* A live process of the lease's container, to reach its /dev; -ESRCH when none. */
struct target;
int grant_live_target(struct daemon *d, const struct lease *l, struct target *t);
/* The container ended: drop its lease and everything devgate put on it. */
void grant_release(struct daemon *d, uint64_t cgid, const char *why);

/*
 * Recovery (reconcile.c). A grant whose record never committed is rolled
 * back: what it added beyond the committed lease goes, nodes included. A
 * full revoke that was under way is finished.
 */
void grant_rollback(struct daemon *d, const struct lease *pending);
void grant_finish_revoke(struct daemon *d, const struct lease *was);
/* A move in flight: finished if to's record holds what moved, else given back. */
void grant_finish_move(struct daemon *d, const struct lease *gone, uint64_t to);

#endif
