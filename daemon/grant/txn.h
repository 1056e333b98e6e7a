/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The steps that the lease transactions of this folder share: finding the
 * container and its lease, adding and deleting entries in the grants map,
 * the kernel side of a grant (with its undo), the steps of a revoke, and
 * the swap into the lease table. Private to daemon/grant/; other folders
 * call the transactions through grant.h.
 */
#ifndef DEVGATE_TXN_H
#define DEVGATE_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/daemon.h"
#include "errors.h"
#include "gate/guard.h"
#include "lease/lease.h"
#include "node/nodes.h"
#include "sys/target.h"
#include "wire.h"

/* For auto_cleanup(): releases a target that may be unresolved. */
static inline void target_donep(struct target *t)
{
	target_done(t);
}

/* For auto_cleanup(): frees a lease pointer that may be NULL. */
static inline void lease_freep(struct lease **l)
{
	lease_free(*l);
}

/* ---- finding the container and its lease ---- */

/*
 * Resolves the container a request names by exactly one of a PID or a
 * cgroup into t. Fails with err set when it names both or neither, or
 * when the target cannot be resolved.
 */
int txn_resolve_target(struct daemon *d, const struct dg_target_args *ta, struct target *t,
		       struct dg_error *err);

/*
 * Resolves a live process of lease l's container into t, to reach its
 * /dev. Returns -ESRCH when no process of the lease's cgroup is left.
 */
int txn_live_target(struct daemon *d, const struct lease *l, struct target *t);

/*
 * Returns the lease that a request names by a PID, a cgroup or a container
 * label, or NULL with err set when there is none. When the request names a
 * PID, t is that process as resolved for this request (its nodes go
 * through it); otherwise t is left unresolved.
 */
struct lease *txn_find_lease(struct daemon *d, const struct dg_target_args *ta, struct target *t,
			     struct dg_error *err);

/*
 * Returns a new copy of what the lease of t's container will be: old, or a
 * new lease when old is NULL, with t's PID and the label (when given).
 * The caller adds what the transaction grants. NULL when out of memory.
 */
struct lease *txn_next_lease(const struct lease *old, const struct target *t, const char *label);

/* ---- node lists ---- */

/* Writes to out the nodes of from that minus lacks, and returns how many. */
size_t txn_node_diff(const struct dg_node *from, size_t n_from, const struct dg_node *minus,
		     size_t n_minus, struct dg_node *out);

/* Describes each node and what happened to it ("created", ...) for a reply, in a. */
int txn_node_statuses(const struct dg_node *nodes, const struct node_result *res, size_t n,
		      struct dg_node_status **ret, size_t *ret_n, struct dg_arena *a);

/* ---- the grants map ---- */

/* Adds a grant of each node to cgroup cgid; fails with err set on the first that fails. */
int txn_grants_put(struct bpfgate *bg, uint64_t cgid, const struct dg_node *nodes, size_t n,
		   struct dg_error *err);

/* Deletes cgroup cgid's grants of nodes; best effort (a failure is logged). */
void txn_grants_del(struct bpfgate *bg, uint64_t cgid, const struct dg_node *nodes, size_t n);

/* ---- the kernel side of a grant ---- */

/*
 * How lease l's nodes are made and removed: devgated's --node-mode and
 * --node-owner, and l's root (grant --root) with its identity.
 */
void txn_node_opts(const struct daemon *d, const struct lease *l, struct node_opts *ret);

/* What the kernel side of a grant did, so it can be undone and reported. */
struct txn_grant {
	struct dg_node nodes[DG_MAX_NODES];   /* every node of the lease after the grant */
	struct node_result res[DG_MAX_NODES]; /* what became of each of them */
	size_t n_nodes;
	struct dg_node added[DG_MAX_NODES]; /* grants new in this call */
	size_t n_added;
	struct guard_info guard;
	unsigned int driver_add; /* grant --driver: DG_DRV_* the lease does not have yet */
	size_t driver_from;	 /* where this call's files start in next->driver_files */
	bool driver_done;
	uint64_t t_nodes, t_bpf, t_state; /* ns per step, for -v */
};

/*
 * Gives t's container what lease next holds beyond old (NULL for a new
 * lease): the journal, nodes (below next's root, when it has one), grants,
 * gate, driver files, and last the record, which is the commit. next
 * learns which of its nodes were there before (kept). When a step fails it
 * undoes its own steps, leaving old as it was, and fails with err set. x
 * must start zeroed but for driver_add. Does not touch the lease table.
 */
int txn_grant_apply(struct daemon *d, const struct target *t, const struct lease *old,
		    struct lease *next, struct txn_grant *x, struct dg_error *err);

/* Sets err to "cannot record the WHAT in STATE_DIR" for error r, and returns r. */
int txn_record_error(const char *state_dir, int r, const char *what, struct dg_error *err);

/* ---- taking away ---- */

/*
 * Sets drop[i] for each GPU of l that spec names: all of them for "all",
 * and also for a NULL spec unless only_devices (a revoke that names
 * nothing takes everything). Fails with err set when l lacks a named GPU.
 */
int txn_revoke_select(const struct dg_inventory *inv, const struct lease *l, const char *spec,
		      bool only_devices, bool *drop, struct dg_error *err);

/*
 * The steps of a revoke after its journal is written, from lease old to
 * lease next: grants (and v1 rules, which next drops), record, nodes,
 * gate, journal cleared. Writes the nodes taken away to gone (*n_gone of
 * them) and what became of each to res. known is a target this request
 * resolved already, or NULL. Every step may run twice, so reconcile
 * finishes an interrupted revoke with it.
 */
void txn_revoke_steps(struct daemon *d, const struct lease *old, struct lease *next,
		      const struct target *known, struct node_result *res, struct dg_node *gone,
		      size_t *n_gone);

/*
 * Removes the nodes gone (n_gone of them) from lease l's container, and
 * all of l's driver files when files is true; writes what became of each
 * node to res ("kept" for one l keeps: devgate did not make it, and it
 * stays). Best effort: a container that ended has no /dev to clean.
 * known is a target of l's cgroup this request resolved already, or NULL.
 */
void txn_remove_nodes(struct daemon *d, const struct lease *l, const struct target *known,
		      const struct dg_node *gone, size_t n_gone, struct node_result *res,
		      bool files);

/* Makes nodes in lease l's container again (a move given back); best effort. */
void txn_restore_nodes(struct daemon *d, const struct lease *l, const struct target *known,
		       const struct dg_node *nodes, size_t n);

/*
 * Takes devgate's gate off cgroup cgid and puts the runtime's own device
 * programs back, then drops its counters. who names the cgroup in logs.
 */
void txn_unguard_cgroup(struct daemon *d, uint64_t cgid, const char *who);

/*
 * Reports the processes of l's cgroup that still hold one of the nodes
 * gone (they opened it before the revoke), in out->holders, and sends them
 * req->kill when req->has_kill. t is the target the request resolved, or
 * NULL: its open cgroup is used when it is l's. Returns -ENOMEM when the
 * reply cannot be filled.
 */
int txn_report_holders(const struct cgroot *cg, const struct lease *l, const struct target *t,
		       const struct dg_node *gone, size_t n_gone, const struct dg_revoke_req *req,
		       struct dg_revoke_reply *out, struct dg_arena *a);

/* ---- the commit ---- */

/*
 * Puts next into the lease table in place of old, carrying old's cgroup
 * watch over and freeing old. With old NULL, next is a new lease: the
 * caller adds its watch (watch_add) first, since this step knows only the
 * table.
 */
void txn_commit(struct lease_table *leases, struct lease *old, struct lease *next);

/* Tells the observers (d->hooks.lease_changed) that lease l changed: type, and the GPUs. */
void txn_emit(struct daemon *d, const char *type, const struct lease *l, const char *const *gpus,
	      size_t n);

#endif
