// SPDX-License-Identifier: Apache-2.0
/*
 * The steps that the lease transactions share (see txn.h): finding the
 * container and its lease, the grants map, the kernel side of a grant and
 * its undo, the steps of a revoke, the node lists, and the swap into the
 * lease table. The order of the steps, which makes a crash recoverable
 * (see grant.h), lives in the transaction files (request.c, revoke.c,
 * move.c, ...). This file must not call back into them, nor include
 * grant.h, nor use the cgroup watch (a new lease's watch is the caller's
 * step): the transactions build on it, so it stays one level below them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lease/state.h"
#include "core/config.h"
#include "cleanup.h"
#include "driverfs.h"
#include "gate/guard.h"
#include "instance.h"
#include "log.h"
#include "node/nodes.h"
#include "proof.h"
#include "select.h"
#include "sys/fault.h"
#include "sys/holders.h"
#include "sys/target.h"
#include "txn.h"
#include "util.h"
#include "v1dev.h"

/* ---- node lists ---- */

/*
 * A node a removal left in place because devgate did not make it (the
 * lease keeps it, lease.h): txn_remove_nodes's status, never a helper's.
 */
#define NODE_KEPT (NODE_FAILED + 1)

/* Returns the word a reply uses for a node's status, such as "created". */
static const char *status_name(int status)
{
	static const char *const names[] = {
		[NODE_UNTOUCHED] = "untouched", [NODE_CREATED] = "created",
		[NODE_PRESENT] = "present",	[NODE_REMOVED] = "removed",
		[NODE_ABSENT] = "absent",	[NODE_CONFLICT] = "conflict",
		[NODE_FAILED] = "failed",	[NODE_KEPT] = "kept",
	};

	return status >= 0 && status <= NODE_KEPT ? names[status] : "unknown";
}

int txn_node_statuses(const struct dg_node *nodes, const struct node_result *res, size_t n,
		      struct dg_node_status **ret, size_t *ret_n, struct dg_arena *a)
{
	struct dg_node_status *v = n ? dg_arena_alloc(a, n * sizeof(*v)) : NULL;

	if (n && !v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char path[64];

		snprintf(path, sizeof(path), "/dev/%s", nodes[i].name);
		v[i].path = dg_arena_strdup(a, path);
		v[i].status = status_name(res[i].status);
		if (!v[i].path)
			return -ENOMEM;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

/* Returns true when set (n nodes) has a node with node's device numbers. */
static bool node_in(const struct dg_node *set, size_t n, const struct dg_node *node)
{
	for (size_t i = 0; i < n; i++) {
		if (set[i].major == node->major && set[i].minor == node->minor)
			return true;
	}
	return false;
}

size_t txn_node_diff(const struct dg_node *from, size_t n_from, const struct dg_node *minus,
		     size_t n_minus, struct dg_node *out)
{
	size_t n = 0;

	for (size_t i = 0; i < n_from; i++) {
		if (!node_in(minus, n_minus, &from[i]))
			out[n++] = from[i];
	}
	return n;
}

/* ---- the grants map ---- */

/* Returns true when nodes include a host device (--device), not only GPU-class nodes. */
static bool has_host_device(const struct bpfgate *bg, const struct dg_node *nodes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!bpfgate_is_guarded(bg, nodes[i].major, nodes[i].minor))
			return true;
	}
	return false;
}

/*
 * After host device grants were deleted: turns the gate's "some device is
 * granted" flag off again once no such grant is left on the host.
 */
static void devgrants_sync(struct bpfgate *bg, const struct dg_node *nodes, size_t n)
{
	int r;

	if (!has_host_device(bg, nodes, n))
		return;
	r = bpfgate_devgrants_sync(bg);
	if (r < 0)
		log_warning_errno(r, "cannot update the device grant flag: %m");
}

void txn_grants_del(struct bpfgate *bg, uint64_t cgid, const struct dg_node *nodes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = bpfgate_grant_del(bg, cgid, &nodes[i]);

		/* -ENOENT: an undo of a put that never happened. */
		if (r < 0 && r != -ENOENT)
			log_warning_errno(r, "cannot delete grant of %u:%u for cgroup %llu: %m",
					  nodes[i].major, nodes[i].minor, (unsigned long long)cgid);
	}
	devgrants_sync(bg, nodes, n);
}

int txn_grants_put(struct bpfgate *bg, uint64_t cgid, const struct dg_node *nodes, size_t n,
		   struct dg_error *err)
{
	size_t bad = 0;
	int r;

	/* The flag before the grant: a crash in between costs lookups, never an open. */
	if (has_host_device(bg, nodes, n) && (r = bpfgate_devgrants_set(bg, true)) < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "cannot set the device grant flag: %s",
				    strerror(-r));
	/* Every node, not only those added: one lost meanwhile is back. One syscall. */
	r = bpfgate_grants_put(bg, cgid, nodes, n, &bad);
	if (r < 0) /* bad < n: the node that failed */
		return dg_error_set(err, DG_E_KERNEL, r, "cannot add grant of %u:%u: %s",
				    nodes[bad].major, nodes[bad].minor, strerror(-r));
	return 0;
}

/* ---- finding the container and its lease ---- */

int txn_resolve_target(struct daemon *d, const struct dg_target_args *ta, struct target *t,
		       struct dg_error *err)
{
	const char *cgroup = ta->cgroup;
	int64_t pid = ta->pid;
	bool has_pid = ta->has_pid;

	if (has_pid == !!cgroup)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "name the container by exactly one of a PID or a cgroup");
	if (has_pid) {
		if (pid <= 0 || pid > INT32_MAX)
			return dg_error_set(err, DG_E_INVALID, EINVAL, "PID %lld is out of range",
					    (long long)pid);
		return target_from_pid(&d->cg, d->self_cgroup, (pid_t)pid, t, err);
	}
	return target_from_cgroup(&d->cg, d->self_cgroup, cgroup, t, err);
}

/*
 * Tries the lease's recorded PID first, then its cgroup's first process;
 * either must still be in the lease's cgroup.
 */
int txn_live_target(struct daemon *d, const struct lease *l, struct target *t)
{
	struct dg_error ignore = { 0 };

	if (l->pid > 0 && target_from_pid(&d->cg, d->self_cgroup, l->pid, t, &ignore) == 0) {
		if (t->cgid == l->cgid)
			return 0;
		target_done(t);
	}
	if (target_from_cgroup(&d->cg, d->self_cgroup, l->cgroup, t, &ignore) == 0) {
		if (t->cgid == l->cgid)
			return 0;
		target_done(t);
	}
	return -ESRCH;
}

struct lease *txn_find_lease(struct daemon *d, const struct dg_target_args *ta, struct target *t,
			     struct dg_error *err)
{
	const char *label = ta->container, *cgroup = ta->cgroup;
	int64_t pid = ta->pid;
	bool has_pid = ta->has_pid;
	int given = has_pid + !!label + !!cgroup;
	struct lease *l = NULL;

	if (given != 1) {
		dg_error_set(err, DG_E_INVALID, EINVAL,
			     "name the container by exactly one of a PID, "
			     "a cgroup or a container label");
		return NULL;
	}
	if (label) {
		if (lease_table_find_label(&d->leases, label, &l) == -EEXIST)
			dg_error_set(err, DG_E_INVALID, EEXIST,
				     "several leases carry the label '%s'; "
				     "name the container by PID or cgroup",
				     label);
		else if (!l) {
			/* Labels exist only in leases: an unknown one names nothing. */
			dg_error_set(err, DG_E_NO_TARGET, ENOENT, "no container is labelled '%s'",
				     label);
			dg_error_hint(err,
				      "'devgatectl status' lists the labels of containers that "
				      "hold GPUs");
		}
		return l;
	}
	if (cgroup) {
		for (size_t i = 0; i < d->leases.n; i++) {
			if (strcmp(d->leases.v[i]->cgroup, cgroup) == 0)
				l = d->leases.v[i];
		}
		if (!l)
			dg_error_set(err, DG_E_NOT_GRANTED, ENOENT, "cgroup %s holds no GPU",
				     cgroup);
		return l;
	}
	if (pid <= 0 || pid > INT32_MAX) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "PID %lld is out of range", (long long)pid);
		return NULL;
	}
	if (target_from_pid(&d->cg, d->self_cgroup, (pid_t)pid, t, err) < 0)
		return NULL;
	l = lease_table_find(&d->leases, t->cgid);
	if (!l)
		dg_error_set(err, DG_E_NOT_GRANTED, ENOENT, "PID %lld (cgroup %s) holds no GPU",
			     (long long)pid, t->cgroup);
	return l;
}

/*
 * Returns a new, empty lease for t's container, labelled label (or a label
 * made from its cgroup path when label is NULL); NULL when out of memory.
 */
static struct lease *lease_start(const struct target *t, const char *label)
{
	struct lease *l = t->cgroup ? lease_new(t->cgid) : NULL;

	if (!l)
		return NULL;
	l->cgroup = strdup(t->cgroup);
	l->container = label ? strdup(label) : lease_label_from_cgroup(t->cgroup);
	l->pid = t->pid;
	l->since = now_wall_s();
	if (!l->cgroup || (label && !l->container)) {
		lease_free(l);
		return NULL;
	}
	return l;
}

struct lease *txn_next_lease(const struct lease *old, const struct target *t, const char *label)
{
	struct lease *next = old ? lease_copy(old) : lease_start(t, label);

	if (!next)
		return NULL;
	if (old && label && (!old->container || strcmp(old->container, label) != 0)) {
		free(next->container);
		next->container = strdup(label);
		if (!next->container) {
			lease_free(next);
			return NULL;
		}
	}
	next->pid = t->pid;
	return next;
}

/* ---- the kernel side of a grant ---- */

void txn_node_opts(const struct daemon *d, const struct lease *l, struct node_opts *ret)
{
	*ret = (struct node_opts){
		.mode = d->cfg->node_mode,
		.uid = d->cfg->node_uid,
		.gid = d->cfg->node_gid,
		.root_path = l->root,
		.check_root = l->root != NULL,
		.root_dev = (dev_t)l->root_dev,
		.root_ino = (ino_t)l->root_ino,
	};
}

/*
 * Marks in next which of its nodes devgate did not make (lease.h, kept):
 * one the helper found in place is kept when this grant brings it, and
 * stays as old had it when old held it already; one this grant made is
 * devgate's. Returns 1 when that changed next's list, 0 when not, -ENOMEM.
 */
static int keep_found(const struct lease *old, const struct dg_node *old_nodes, size_t n_old,
		      struct lease *next, const struct txn_grant *x)
{
	bool keep[DG_MAX_NODES];

	for (size_t i = 0; i < x->n_nodes; i++)
		keep[i] = x->res[i].status == NODE_PRESENT &&
			  (!node_in(old_nodes, n_old, &x->nodes[i]) ||
			   lease_node_kept(old, x->nodes[i].name));
	return lease_keep_nodes(next, x->nodes, keep, x->n_nodes);
}

int txn_record_error(const char *state_dir, int r, const char *what, struct dg_error *err)
{
	return dg_error_set(err, DG_E_STATE, r, "cannot record the %s in %s: %s", what, state_dir,
			    strerror(-r));
}

/*
 * Undoes the kernel steps of a grant that failed: removes what this call
 * added (grants, driver files, the gate of a new lease, the nodes it
 * created) and clears the journal. What old held stays.
 */
static void grant_undo(struct daemon *d, const struct target *t, const struct lease *old,
		       const struct node_opts *nopts, struct lease *next, struct txn_grant *x)
{
	struct dg_node made[DG_MAX_NODES];
	struct node_result tmp[DG_MAX_NODES];
	struct dg_error ignore = { 0 };
	size_t n = 0;

	txn_grants_del(d->bg, next->cgid, x->added, x->n_added);
	v1dev_undo(d, old, next);
	if (x->driver_done)
		driverfs_remove(t, next, x->driver_from);
	if (!old)
		(void)guard_remove(d->bg, next->cgid, d->cg.v1 ? -1 : t->cgfd, &ignore);
	for (size_t i = 0; i < x->n_nodes; i++) {
		if (x->res[i].status == NODE_CREATED)
			made[n++] = x->nodes[i];
	}
	if (n)
		(void)nodes_remove(t, nopts, made, n, tmp, &ignore);
	(void)state_pending_clear(d->state, next->cgid);
}

/*
 * The journal (state.h) comes first and the record last: a crash in
 * between is rolled back at the next start, and the record is the commit.
 * The fault points let faults.bats crash the daemon between the steps.
 */
int txn_grant_apply(struct daemon *d, const struct target *t, const struct lease *old,
		    struct lease *next, struct txn_grant *x, struct dg_error *err)
{
	struct node_opts nopts;
	struct dg_node old_nodes[DG_MAX_NODES];
	size_t n_old = old ? lease_nodes(old, d->inv, old_nodes, DG_MAX_NODES) : 0;
	uint64_t t0 = now_mono_ns();
	int r;

	txn_node_opts(d, next, &nopts);

	if (!next->has_majors) { /* what its nodes are made with (refresh.c) */
		next->majors = d->inv->majors;
		next->has_majors = true;
	}
	x->n_nodes = lease_nodes(next, d->inv, x->nodes, DG_MAX_NODES);
	x->n_added = txn_node_diff(x->nodes, x->n_nodes, old_nodes, n_old, x->added);
	r = v1dev_plan(d, t, next, x->nodes, x->n_nodes, err);
	if (r < 0)
		return r;
	r = state_pending_save(d->state, next);
	if (r < 0)
		return txn_record_error(d->cfg->state_dir, r, "grant in flight", err);
	fault_point("grant.pending");
	r = nodes_create(t, &nopts, x->nodes, x->n_nodes, x->res, err);
	x->t_nodes = now_mono_ns() - t0;
	if (r < 0) {
		(void)state_pending_clear(d->state, next->cgid);
		return r;
	}
	/* A rollback after a crash must leave what was there before too. */
	r = keep_found(old, old_nodes, n_old, next, x);
	if (r > 0 && (r = state_pending_save(d->state, next)) < 0)
		txn_record_error(d->cfg->state_dir, r, "grant in flight", err);
	else if (r == -ENOMEM)
		dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	if (r < 0) {
		grant_undo(d, t, old, &nopts, next, x);
		return r;
	}
	fault_point("grant.nodes");
	r = txn_grants_put(d->bg, next->cgid, x->nodes, x->n_nodes, err);
	fault_point("grant.grants");
	if (r == 0 && !d->cg.v1) { /* cgroup v1 alone: its devices list is the gate */
		r = guard_ensure(d->bg, next->cgid, t->cgfd, old ? old->progs_digest : 0, &x->guard,
				 err);
		/* Settled as proven here: the heal's next look is one query. */
		next->progs_digest = x->guard.settled;
	}
	if (r == 0)
		r = v1dev_apply(d, next, err);
	x->t_bpf = now_mono_ns() - t0 - x->t_nodes;
	fault_point("grant.guard");
	if (r == 0) /* "granted" only once the container gets it: before the commit */
		r = proof_check(d, t, next, x->nodes, x->n_nodes, x->guard.effective, err);
	if (r == 0 && x->driver_add) {
		x->driver_from = next->n_driver_files;
		r = driverfs_add(d->inv->host_root, d->state, t, &nopts, next, x->driver_add, err);
		x->driver_done = r == 0;
	}
	if (r == 0) { /* the record, and the journal's end */
		r = state_pending_commit(d->state, next);
		if (r < 0)
			txn_record_error(d->cfg->state_dir, r, "lease", err);
	}
	x->t_state = now_mono_ns() - t0 - x->t_nodes - x->t_bpf;
	if (r < 0) {
		grant_undo(d, t, old, &nopts, next, x);
		return r;
	}
	fault_point("grant.record");
	return 0;
}

/* ---- taking away ---- */

int txn_revoke_select(const struct dg_inventory *inv, const struct lease *l, const char *spec,
		      bool only_devices, bool *drop, struct dg_error *err)
{
	bool sel[DG_MAX_GPUS];
	bool all = spec ? strcmp(spec, "all") == 0 : !only_devices;
	int r;

	for (size_t i = 0; i < l->n_gpus; i++)
		drop[i] = all;
	if (!spec || all)
		return 0;
	if (instance_spec(spec))
		return instance_select(inv, l, spec, drop, err);
	r = select_gpus(inv, spec, sel, err);
	if (r < 0)
		return r;
	for (size_t g = 0; g < inv->n_gpus; g++) {
		bool held = false;

		if (!sel[g])
			continue;
		for (size_t i = 0; i < l->n_gpus; i++) {
			if (strcasecmp(l->gpus[i].uuid, inv->gpus[g].uuid) == 0) {
				drop[i] = true;
				held = true;
			}
		}
		if (!held)
			return dg_error_set(err, DG_E_NOT_GRANTED, ENOENT,
					    "%s does not hold GPU %u (%s)", lease_label(l),
					    inv->gpus[g].index, inv->gpus[g].uuid);
	}
	return 0;
}

/*
 * The helper still checks that the process it enters runs, so reusing a
 * target this request resolved is safe.
 */
void txn_remove_nodes(struct daemon *d, const struct lease *l, const struct target *known,
		      const struct dg_node *gone, size_t n_gone, struct node_result *res,
		      bool files)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	struct node_opts nopts;
	struct dg_error err = { 0 };
	bool reuse = known && known->pidfd >= 0 && known->cgid == l->cgid;
	struct dg_node mine[DG_MAX_NODES];
	struct node_result got[DG_MAX_NODES] = { 0 };
	size_t at[DG_MAX_NODES], n = 0;

	/* Only the nodes devgate made go; what was there before stays. */
	for (size_t i = 0; i < n_gone; i++) {
		if (lease_node_kept(l, gone[i].name)) {
			res[i].status = NODE_KEPT;
			log_info("left /dev/%s in %s: it was there before devgate granted it",
				 gone[i].name, lease_label(l));
			continue;
		}
		at[n] = i;
		mine[n++] = gone[i];
	}
	if ((n || files) && !reuse && txn_live_target(d, l, &t) < 0) {
		log_info("%s has no live process; its /dev needs no cleanup", lease_label(l));
		return;
	}
	if (files)
		driverfs_remove(reuse ? known : &t, l, 0);
	txn_node_opts(d, l, &nopts);
	if (n && nodes_remove(reuse ? known : &t, &nopts, mine, n, got, &err) < 0)
		log_warning("cannot remove nodes from %s: %s", lease_label(l), err.message);
	for (size_t k = 0; k < n; k++) {
		res[at[k]] = got[k];
		if (got[k].status == NODE_CONFLICT)
			log_warning("left /dev/%s in %s alone: it is no longer our node",
				    mine[k].name, lease_label(l));
	}
}

void txn_restore_nodes(struct daemon *d, const struct lease *l, const struct target *known,
		       const struct dg_node *nodes, size_t n)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	struct node_opts nopts;
	struct node_result res[DG_MAX_NODES];
	struct dg_error err = { 0 };
	bool reuse = known && known->pidfd >= 0 && known->cgid == l->cgid;

	txn_node_opts(d, l, &nopts);
	if (n && (reuse || txn_live_target(d, l, &t) == 0) &&
	    nodes_create(reuse ? known : &t, &nopts, nodes, n, res, &err) < 0)
		log_warning("cannot make the nodes of %s again: %s", lease_label(l), err.message);
}

/*
 * Drops cgroup cgid's access counters. Every node it could have counted is
 * in the inventory, so the inventory's nodes are the keys to delete.
 */
static void drop_counters(struct daemon *d, uint64_t cgid)
{
	struct dg_node nodes[DG_MAX_NODES];
	size_t n = inventory_nodes(d->inv, nodes, DG_MAX_NODES);

	(void)bpfgate_counters_drop(d->bg, cgid, nodes, n);
}

void txn_unguard_cgroup(struct daemon *d, uint64_t cgid, const char *who)
{
	struct dg_error err = { 0 };
	auto_close int cgfd = -1;

	/* A removed cgroup has nothing attached any more: then only the pins go. */
	if (!d->cg.v1)
		(void)cgroup_open_id(&d->cg, cgid, &cgfd);
	if (guard_remove(d->bg, cgid, cgfd, &err) < 0)
		log_error("cannot restore the device programs of %s: %s", who, err.message);
	drop_counters(d, cgid);
}

/*
 * From the kernel out: the grants go first, so the GPU closes at once,
 * then the record, the nodes and the gate. The driver's files go with the
 * last GPU. A partial revoke's record is its journal, renamed into place
 * at the end (state_revoke_end): until then a crash finishes the revoke.
 */
void txn_revoke_steps(struct daemon *d, const struct lease *old, struct lease *next,
		      const struct target *known, struct node_result *res, struct dg_node *gone,
		      size_t *n_gone)
{
	struct dg_node old_nodes[DG_MAX_NODES], new_nodes[DG_MAX_NODES];
	size_t n_old = lease_nodes(old, d->inv, old_nodes, DG_MAX_NODES);
	size_t n_new = lease_nodes(next, d->inv, new_nodes, DG_MAX_NODES);
	uint64_t t[5];
	int r;

	t[0] = now_mono_ns();
	*n_gone = txn_node_diff(old_nodes, n_old, new_nodes, n_new, gone);
	txn_grants_del(d->bg, old->cgid, gone, *n_gone);
	v1dev_revoke(d, old, next, gone, *n_gone);
	fault_point("revoke.grants");
	t[1] = now_mono_ns();
	r = state_revoke_record(d->state, next);
	if (r < 0)
		log_error_errno(r, "cannot record the revoke from %s: %m (the journal keeps it)",
				lease_label(old));
	fault_point("revoke.record");
	t[2] = now_mono_ns();
	txn_remove_nodes(d, old, known, gone, *n_gone, res,
			 old->n_driver_files && !next->n_driver_files);
	fault_point("revoke.nodes");
	t[3] = now_mono_ns();
	if (!lease_holds(next))
		txn_unguard_cgroup(d, old->cgid, lease_label(old));
	t[4] = now_mono_ns();
	if (r == 0 && (r = state_revoke_end(d->state, next)) < 0)
		log_error_errno(r, "cannot record the revoke from %s: %m (the journal keeps it)",
				lease_label(old));
	log_debug("revoke steps of %s: bpf %llu us, record %llu us, nodes %llu us, gate %llu us, "
		  "journal clear %llu us",
		  lease_label(old), (unsigned long long)(t[1] - t[0]) / 1000,
		  (unsigned long long)(t[2] - t[1]) / 1000,
		  (unsigned long long)(t[3] - t[2]) / 1000,
		  (unsigned long long)(t[4] - t[3]) / 1000,
		  (unsigned long long)(now_mono_ns() - t[4]) / 1000);
}

/*
 * Reporting the holders, and killing them on request, lets "revoked" mean
 * that nobody in the container can use the device any more.
 */
int txn_report_holders(const struct cgroot *cg, const struct lease *l, const struct target *t,
		       const struct dg_node *gone, size_t n_gone, const struct dg_revoke_req *req,
		       struct dg_revoke_reply *out, struct dg_arena *a)
{
	struct holder h[HOLDERS_MAX];
	auto_close int cgfd = -1;
	size_t n;

	if (n_gone == 0)
		return 0;
	/* The request's cgroup, already open and checked: no handle to open and check again. */
	if (t && t->cgfd >= 0 && t->cgid == l->cgid)
		n = holders_find(t->cgfd, gone, n_gone, h, ARRAY_SIZE(h));
	else if (cgroup_open_id(cg, l->cgid, &cgfd) == 0)
		n = holders_find(cgfd, gone, n_gone, h, ARRAY_SIZE(h));
	else
		return 0;
	out->holders = n ? dg_arena_alloc(a, n * sizeof(*out->holders)) : NULL;
	if (n && !out->holders)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char path[64];

		snprintf(path, sizeof(path), "/dev/%s", h[i].node.name);
		out->holders[i] = (struct dg_holder_proc){
			.pid = h[i].pid,
			.comm = dg_arena_strdup(a, h[i].comm),
			.node = dg_arena_strdup(a, path),
		};
		if (!out->holders[i].comm || !out->holders[i].node)
			return -ENOMEM;
		log_notice("%s: PID %d (%s) still holds %s", lease_label(l), (int)h[i].pid,
			   h[i].comm, path);
	}
	out->n_holders = n;
	if (req->has_kill && n) {
		out->killed = (int64_t)holders_signal(cg, h, n, l->cgroup, (int)req->kill);
		log_notice("%s: sent signal %d to %lld holder(s)", lease_label(l), (int)req->kill,
			   (long long)out->killed);
	}
	return 0;
}

/* ---- the commit ---- */

void txn_commit(struct lease_table *leases, struct lease *old, struct lease *next)
{
	if (old) {
		next->watch = old->watch;
		old->watch = -1;
		/* The same programs as once found settled are settled still (heal.c). */
		if (!next->progs_digest && old->cgid == next->cgid)
			next->progs_digest = old->progs_digest;
		lease_free(lease_table_take(leases, old->cgid));
	}
	if (lease_table_add(leases, next) < 0)
		log_error("out of memory recording the lease of cgroup %llu",
			  (unsigned long long)next->cgid);
}

void txn_emit(struct daemon *d, const char *type, const struct lease *l, const char *const *gpus,
	      size_t n)
{
	if (d->hooks.lease_changed)
		d->hooks.lease_changed(d, type, l, gpus, n);
}
