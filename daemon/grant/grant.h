/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lease transactions, which change who holds what: grant, revoke,
 * extend and expire, move, release, and their recovery after a crash.
 * request.c, revoke.c, extend.c, move.c, release.c and recover.c hold them;
 * the steps they share are in txn.c.
 *
 * The order of the steps makes every crash recoverable by reconcile.c,
 * which makes the kernel match the state directory:
 *   grant:   nodes -> grants map -> gates -> state   (state last)
 *   revoke:  state -> grants map -> nodes -> gates   (state first)
 *   move:    journal -> source's grants, nodes -> the destination's grant
 *            (its record is the commit) -> the source's record
 * So after a change is acknowledged the kernel never holds less than the
 * state says, and anything extra is removed at the next start.
 */
#ifndef DEVGATE_GRANT_H
#define DEVGATE_GRANT_H

#include "core/daemon.h"
#include "wire.h"

/*
 * The request handlers below fill their reply (its strings are allocated
 * in a) and report the change through d->hooks. On failure they return a
 * negative errno, err says why, and nothing has changed.
 */
int grant_request(struct daemon *d, const struct dg_grant_req *req, struct dg_grant_reply *out,
		  struct dg_arena *a, struct dg_error *err);
int grant_revoke(struct daemon *d, const struct dg_revoke_req *req, struct dg_revoke_reply *out,
		 struct dg_arena *a, struct dg_error *err);
/* Gives a lease that expires more time; nothing else about it changes. */
int grant_extend(struct daemon *d, const struct dg_extend_req *req, struct dg_extend_reply *out,
		 struct dg_arena *a, struct dg_error *err);
/*
 * Called when the expiry of cgroup cgid's lease has passed: revokes the
 * whole lease as a full revoke does (killing its holders if the lease asked
 * for that) and reports it as "expired".
 */
void grant_expire(struct daemon *d, uint64_t cgid);
/*
 * Moves the GPUs req->gpus names from the container req->from to the
 * container req->to, each in the mode it was held, in one transaction: the
 * source loses them in the kernel before the destination gets them. The
 * move journal (CGID.moving) lets grant_finish_move() settle a crash.
 */
int grant_move(struct daemon *d, const struct dg_move_req *req, struct dg_move_reply *out,
	       struct dg_arena *a, struct dg_error *err);
/*
 * For grant --wait, after the GPUs were found busy: returns 0 when the
 * request may wait, with the target's process in *ret_pidfd; -ENODEV when
 * it could never be served; or the error the grant itself would give.
 */
int grant_wait_check(struct daemon *d, const struct dg_grant_req *g, int *ret_pidfd,
		     struct dg_error *err);
/*
 * Returns true when the container of a waiting grant has ended. pidfd is
 * its process when the grant was queued; a container named by cgroup has
 * ended only when its cgroup is gone too.
 */
bool grant_target_gone(struct daemon *d, const struct dg_target_args *ta, int pidfd);
/*
 * Called when cgroup cgid's container has ended (or its lease holds
 * nothing): drops the lease and everything devgate put on it. why is logged.
 */
void grant_release(struct daemon *d, uint64_t cgid, const char *why);

/*
 * Recovery, for reconcile.c at start. grant_rollback() undoes a grant
 * whose record never committed: what it added beyond the committed lease
 * goes, nodes included. grant_finish_revoke() finishes a revoke whose
 * journal was written; gone is that journal (what the revoke takes away).
 */
void grant_rollback(struct daemon *d, const struct lease *pending);
void grant_finish_revoke(struct daemon *d, const struct lease *gone);
/*
 * Settles a move a crash cut short: finished when the destination's record
 * (cgroup to) holds what moved, otherwise given back to the source.
 */
void grant_finish_move(struct daemon *d, const struct lease *gone, uint64_t to);
/*
 * Takes devgate's mounts of the driver's files that l does not record (a
 * crash, a record rebuilt from the kernel) out of l's container.
 */
void grant_sweep_driver(struct daemon *d, const struct lease *l);

#endif
