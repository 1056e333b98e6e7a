// SPDX-License-Identifier: Apache-2.0
/*
 * Moves a lease to the driver's new numbers after a driver reload (the
 * four steps in refresh.h). It works only on leases whose recorded numbers
 * differ from the inventory's, and never while the driver is gone; every
 * step is idempotent, so it keeps no journal.
 */
#include <errno.h>
#include <string.h>

#include "lease/state.h"
#include "core/config.h"
#include "cleanup.h"
#include "sys/fault.h"
#include "log.h"
#include "metrics/metrics.h"
#include "node/nodes.h"
#include "refresh.h"
#include "sys/target.h"
#include "txn.h"
#include "v1dev.h"

/* One major of the record against the inventory's: only where both know it. */
static bool major_moved(bool had, uint32_t was, bool has, uint32_t is)
{
	return had && has && was != is;
}

static bool majors_moved(const struct dg_majors *rec, const struct dg_majors *inv)
{
	return major_moved(rec->has_nvidia, rec->nvidia, inv->has_nvidia, inv->nvidia) ||
	       major_moved(rec->has_uvm, rec->uvm, inv->has_uvm, inv->uvm) ||
	       major_moved(rec->has_caps, rec->caps, inv->has_caps, inv->caps) ||
	       major_moved(rec->has_kfd, rec->kfd, inv->has_kfd, inv->kfd);
}

/* The inventory's GPU of lg, where it lives now with other numbers; NULL otherwise. */
static const struct dg_gpu *renumbered(const struct dg_inventory *inv, const struct lease_gpu *lg)
{
	const struct dg_gpu *g = inventory_find_uuid(inv, lg->uuid);

	if (!g || g->gone || g->family != lg->family)
		return NULL;
	return g->minor != lg->minor || (lg->card && g->card_minor != lg->card_minor) ? g : NULL;
}

bool refresh_due(const struct daemon *d, const struct lease *l)
{
	if (l->has_majors && majors_moved(&l->majors, &d->inv->majors))
		return true;
	for (size_t i = 0; i < l->n_gpus; i++) {
		if (renumbered(d->inv, &l->gpus[i]))
			return true;
	}
	return false;
}

static uint32_t major_then(const struct dg_majors *rec, const struct dg_majors *now, uint32_t m)
{
	if (major_moved(rec->has_nvidia, rec->nvidia, now->has_nvidia, now->nvidia) &&
	    m == now->nvidia)
		return rec->nvidia;
	if (major_moved(rec->has_uvm, rec->uvm, now->has_uvm, now->uvm) && m == now->uvm)
		return rec->uvm;
	if (major_moved(rec->has_caps, rec->caps, now->has_caps, now->caps) && m == now->caps)
		return rec->caps;
	if (major_moved(rec->has_kfd, rec->kfd, now->has_kfd, now->kfd) && m == now->kfd)
		return rec->kfd;
	return m;
}

/* l's nodes as they were made: its recorded minors under its recorded majors. */
static size_t nodes_then(const struct lease *l, const struct dg_inventory *inv, struct dg_node *out)
{
	struct dg_inventory then = *inv;
	size_t n;

	if (l->has_majors) {
		for (size_t i = 0; i < then.n_ctl; i++)
			then.ctl[i].major = major_then(&l->majors, &inv->majors, then.ctl[i].major);
		then.majors.nvidia = major_then(&l->majors, &inv->majors, inv->majors.nvidia);
		then.majors.caps = major_then(&l->majors, &inv->majors, inv->majors.caps);
	}
	n = lease_nodes(l, &then, out, DG_MAX_NODES);
	return n;
}

static bool node_in(const struct dg_node *set, size_t n, const struct dg_node *x)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(set[i].name, x->name) == 0 && set[i].major == x->major &&
		    set[i].minor == x->minor)
			return true;
	}
	return false;
}

/* The nodes of from that to lacks. */
static size_t nodes_minus(const struct dg_node *from, size_t n, const struct dg_node *to, size_t m,
			  struct dg_node *out)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (!node_in(to, m, &from[i]))
			out[k++] = from[i];
	}
	return k;
}

/* The lease at the inventory's numbers. */
static void renumber(struct lease *l, const struct dg_inventory *inv)
{
	for (size_t i = 0; i < l->n_gpus; i++) {
		const struct dg_gpu *g = renumbered(inv, &l->gpus[i]);

		if (g) {
			l->gpus[i].minor = g->minor;
			l->gpus[i].card_minor = g->card_minor;
		}
	}
	l->majors = inv->majors;
	l->has_majors = true;
}

/* Step 2: the container's stale nodes out and the new ones in, by the node helper. */
static int replace_nodes(struct daemon *d, const struct lease *l, const struct dg_node *gone,
			 size_t n_gone, const struct dg_node *add, size_t n_add)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	struct node_opts o;
	struct node_result res[DG_MAX_NODES];
	struct dg_error err = { 0 };
	int r;

	txn_node_opts(d, l, &o);

	if (txn_live_target(d, l, &t) < 0) {
		log_info("%s has no live process; its /dev needs no refresh", lease_label(l));
		return 0;
	}
	r = n_gone ? nodes_remove(&t, &o, gone, n_gone, res, &err) : 0;
	for (size_t i = 0; r == 0 && i < n_gone; i++) {
		if (res[i].status == NODE_CONFLICT)
			log_warning("left /dev/%s in %s alone: it is no longer our node",
				    gone[i].name, lease_label(l));
	}
	if (r == 0 && n_add)
		r = nodes_create(&t, &o, add, n_add, res, &err);
	if (r < 0)
		log_warning("cannot replace the nodes of %s after a driver reload: %s",
			    lease_label(l), err.message);
	return r;
}

static void grants_move(struct daemon *d, uint64_t cgid, const struct dg_node *nodes, size_t n,
			bool put)
{
	for (size_t i = 0; i < n; i++) {
		int r = put ? bpfgate_grant_put(d->bg, cgid, &nodes[i])
			    : bpfgate_grant_del(d->bg, cgid, &nodes[i]);

		if (r < 0 && r != -ENOENT)
			log_error_errno(r, "refresh: cannot %s grant %u:%u of cgroup %llu: %m",
					put ? "add" : "delete", nodes[i].major, nodes[i].minor,
					(unsigned long long)cgid);
	}
}

/* "nvidia-uvm 511:0 -> 510:0, ..." for the log. */
static void describe(const struct dg_node *gone, size_t n_gone, const struct dg_node *add,
		     size_t n_add, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n_add && off < len; i++) {
		const struct dg_node *was = NULL;

		for (size_t k = 0; k < n_gone && !was; k++)
			was = strcmp(gone[k].name, add[i].name) == 0 ? &gone[k] : NULL;
		if (was)
			off += (size_t)snprintf(buf + off, len - off, "%s%s %u:%u -> %u:%u",
						i ? ", " : "", add[i].name, was->major, was->minor,
						add[i].major, add[i].minor);
		else
			off += (size_t)snprintf(buf + off, len - off, "%s%s %u:%u", i ? ", " : "",
						add[i].name, add[i].major, add[i].minor);
	}
}

static void tell(struct daemon *d, const struct lease *l)
{
	const char *uuids[DG_MAX_GPUS];
	size_t n = 0;

	for (size_t i = 0; i < l->n_gpus && n < DG_MAX_GPUS; i++)
		uuids[n++] = l->gpus[i].uuid;
	metrics_inc(d->metrics, METRIC_REFRESHES, 1);
	if (d->hooks.lease_changed)
		d->hooks.lease_changed(d, "refreshed", l, uuids, n);
}

/* The v1 rules of next into l; next takes l's, freed with it. */
static void swap_cg1(struct lease *l, struct lease *next)
{
	struct lease_cg1_rule *v = l->cg1_added;
	size_t n = l->n_cg1_added;

	l->cg1_added = next->cg1_added;
	l->n_cg1_added = next->n_cg1_added;
	next->cg1_added = v;
	next->n_cg1_added = n;
}

int refresh_lease(struct daemon *d, struct lease *l)
{
	struct dg_node was[DG_MAX_NODES], now[DG_MAX_NODES];
	struct dg_node gone[DG_MAX_NODES], add[DG_MAX_NODES];
	struct lease *next;
	size_t n_was, n_now, n_gone, n_add;
	char what[512];
	int r;

	if (!l->has_majors) {
		/* A record from before live refreshes: its majors are taken to be the host's. */
		l->majors = d->inv->majors;
		l->has_majors = true;
	}
	if (!refresh_due(d, l))
		return 0;
	next = lease_copy(l);
	if (!next)
		return -ENOMEM;
	renumber(next, d->inv);
	n_was = nodes_then(l, d->inv, was);
	n_now = lease_nodes(next, d->inv, now, DG_MAX_NODES);
	n_gone = nodes_minus(was, n_was, now, n_now, gone);
	n_add = nodes_minus(now, n_now, was, n_was, add);
	grants_move(d, l->cgid, add, n_add, true);
	v1dev_refresh_add(d, next, gone, n_gone, add, n_add);
	fault_point("refresh.grants");
	r = replace_nodes(d, l, gone, n_gone, add, n_add);
	fault_point("refresh.nodes");
	grants_move(d, l->cgid, gone, n_gone, false);
	v1dev_refresh_drop(d, next, gone, n_gone);
	(void)bpfgate_counters_drop(d->bg, l->cgid, gone, n_gone);
	fault_point("refresh.old");
	if (r == 0) {
		r = state_save(d->state, next);
		if (r < 0)
			log_error_errno(r, "refresh: cannot record the lease of %s: %m",
					lease_label(l));
	}
	if (r == 0) {
		fault_point("refresh.record");
		/* In place: the table counts GPUs by UUID, which a refresh keeps. */
		memcpy(l->gpus, next->gpus, l->n_gpus * sizeof(*l->gpus));
		l->majors = next->majors;
		l->has_majors = true;
		swap_cg1(l, next);
	}
	lease_free(next);
	if (r < 0)
		return r;
	if (!n_gone && !n_add)
		return 0; /* a major none of its nodes uses */
	describe(gone, n_gone, add, n_add, what, sizeof(what));
	log_notice("refreshed %s after a driver reload: %s", lease_label(l), what);
	tell(d, l);
	return 1;
}

size_t refresh_leases(struct daemon *d)
{
	size_t failed = 0;

	for (size_t i = 0; i < d->leases.n; i++) {
		if (refresh_due(d, d->leases.v[i]) && refresh_lease(d, d->leases.v[i]) < 0)
			failed++;
	}
	return failed;
}
