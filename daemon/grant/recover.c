// SPDX-License-Identifier: Apache-2.0
/*
 * Crash recovery of the transactions, for reconcile.c at start: a grant
 * whose record never committed is rolled back (grant_rollback), a revoke
 * whose journal was written is finished (grant_finish_revoke), and a move
 * is finished or given back (grant_finish_move). Each works from the
 * journal and the committed lease table, and may run again after another
 * crash. This file must not add to what a committed lease holds.
 */
#include <stdio.h>

#include "lease/state.h"
#include "cleanup.h"
#include "driverfs.h"
#include "grant.h"
#include "log.h"
#include "txn.h"
#include "v1dev.h"

/*
 * Takes out the driver's files and directories the pending grant may have
 * put in its container beyond what the committed lease records.
 */
static void rollback_driver(struct daemon *d, const struct lease *pending,
			    const struct lease *committed)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	size_t n;

	if (pending->n_driver_files + pending->n_driver_dirs ==
		    (committed ? committed->n_driver_files + committed->n_driver_dirs : 0) ||
	    txn_live_target(d, pending, &t) < 0)
		return;
	n = driverfs_rollback(&t, pending, committed);
	if (n)
		log_notice("reconcile: took %zu driver file(s) and directories of the unfinished "
			   "grant out of %s",
			   n, lease_label(pending));
}

void grant_sweep_driver(struct daemon *d, const struct lease *l)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	size_t n;

	if (txn_live_target(d, l, &t) < 0)
		return;
	n = driverfs_sweep(d->inv->host_root, &t, l);
	if (n)
		log_notice("reconcile: took %zu mount(s) of the driver's files that no record "
			   "holds out of %s",
			   n, lease_label(l));
}

/*
 * Removes what the pending grant added beyond the committed lease: its
 * extra grants and nodes, its driver files, and the gate when no lease was
 * committed.
 */
void grant_rollback(struct daemon *d, const struct lease *pending)
{
	const struct lease *committed = lease_table_find(&d->leases, pending->cgid);
	struct dg_node p_nodes[DG_MAX_NODES], c_nodes[DG_MAX_NODES], extra[DG_MAX_NODES];
	struct node_result res[DG_MAX_NODES] = { 0 };
	size_t n_p = lease_nodes(pending, d->inv, p_nodes, DG_MAX_NODES);
	size_t n_c = committed ? lease_nodes(committed, d->inv, c_nodes, DG_MAX_NODES) : 0;
	size_t n_x = txn_node_diff(p_nodes, n_p, c_nodes, n_c, extra);

	txn_grants_del(d->bg, pending->cgid, extra, n_x);
	v1dev_undo(d, committed, pending);
	txn_remove_nodes(d, pending, NULL, extra, n_x, res, false);
	rollback_driver(d, pending, committed);
	if (!committed)
		txn_unguard_cgroup(d, pending->cgid, lease_label(pending));
	(void)state_pending_clear(d->state, pending->cgid);
	log_notice("reconcile: rolled back the unfinished grant to %s (%zu node(s) and grant(s))",
		   lease_label(pending), n_x);
}

/* Adds a GPU as a lease records it (lease_gpu) to lease l, with its card node if it had one. */
static int add_lease_gpu(struct lease *l, const struct lease_gpu *g)
{
	struct dg_gpu gpu = { .family = g->family,
			      .minor = g->minor,
			      .has_card = g->card,
			      .card_minor = g->card_minor };
	int r;

	snprintf(gpu.uuid, sizeof(gpu.uuid), "%s", g->uuid);
	r = lease_add_gpu(l, &gpu, g->shared);
	if (r >= 0 && g->card)
		lease_gpu_add_card(l, &gpu);
	return r;
}

/*
 * gone is the revoke journal: what the revoke takes away. The lease before
 * the revoke ("was") is the committed record with gone added back, or gone
 * alone when the record went already; the revoke steps then run again from
 * it, and the table gets what is left.
 */
void grant_finish_revoke(struct daemon *d, const struct lease *gone)
{
	struct lease *committed = lease_table_find(&d->leases, gone->cgid);
	auto_cleanup(lease_freep) struct lease *was = committed ? lease_copy(committed)
								: lease_copy(gone);
	auto_cleanup(lease_freep) struct lease *next = was ? lease_copy(was) : NULL;
	struct node_result res[DG_MAX_NODES] = { 0 };
	struct dg_node nodes[DG_MAX_NODES];
	char note[40];
	size_t n = 0;

	if (!was || !next)
		return;
	for (size_t i = 0; i < gone->n_gpus; i++) {
		if (!lease_find_gpu(was, gone->gpus[i].uuid))
			(void)add_lease_gpu(was, &gone->gpus[i]);
		lease_del_gpu(next, gone->gpus[i].uuid);
	}
	for (size_t i = 0; i < gone->n_devices; i++) {
		(void)lease_add_device(was, &gone->devices[i]);
		lease_del_device(next, gone->devices[i].name);
	}
	txn_revoke_steps(d, was, next, NULL, res, nodes, &n);
	if (committed && !lease_holds(next))
		lease_free(lease_table_take(&d->leases, gone->cgid));
	else if (committed)
		txn_commit(&d->leases, committed, TAKE_PTR(next));
	log_notice(
		"reconcile: finished the revoke of %zu GPU(s)%s from %s that a crash interrupted",
		gone->n_gpus, lease_devices_note(gone->n_devices, note, sizeof(note)),
		lease_label(gone));
}

/*
 * gone is the move journal (what moves, as a lease of the source) and to
 * the destination's cgroup. The move committed when the destination's
 * record holds every moved GPU: then the source's side is finished as a
 * revoke. Otherwise the source's record still holds them: its grants come
 * back with every lease's at start, and its nodes are made again here.
 */
void grant_finish_move(struct daemon *d, const struct lease *gone, uint64_t to)
{
	const struct lease *dst = lease_table_find(&d->leases, to);
	struct lease *src = lease_table_find(&d->leases, gone->cgid);
	struct dg_node nodes[DG_MAX_NODES];
	bool committed = dst != NULL;

	for (size_t i = 0; i < gone->n_gpus; i++)
		committed = committed && lease_find_gpu(dst, gone->gpus[i].uuid);
	if (committed) {
		grant_finish_revoke(d, gone);
		log_notice("reconcile: the move from %s to %s had committed: finished",
			   lease_label(gone), lease_label(dst));
	} else if (src) {
		txn_restore_nodes(d, src, NULL, nodes,
				  lease_nodes(gone, d->inv, nodes, DG_MAX_NODES));
		log_notice("reconcile: the move from %s had not committed: its GPU(s) stay there",
			   lease_label(src));
	}
	(void)state_moving_clear(d->state, gone->cgid);
}
