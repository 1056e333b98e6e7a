// SPDX-License-Identifier: Apache-2.0
/*
 * Start-up reconciliation (see reconcile.h): the records in the state
 * directory say which containers hold what, and the kernel is made to
 * agree. Unfinished journals are finished or rolled back, leases of ended
 * containers released, live ones adopted with their gates, grants rebuilt
 * from the grants map where a record was lost, and grants, pins and
 * counters that no lease explains removed. It runs once, before devgated
 * serves, and logs one line per correction.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lease/state.h"
#include "cleanup.h"
#include "gate/devlist.h"
#include "gate/guard.h"
#include "sys/fault.h"
#include "grant/grant.h"
#include "sys/target.h"
#include "util.h"
#include "log.h"
#include "metrics/metrics.h"
#include "reconcile.h"
#include "grant/refresh.h"
#include "watch/heal.h"
#include "watch/watch.h"

static void adopt_path(struct daemon *d, struct lease *l, int cgfd, unsigned int *fixes)
{
	auto_free char *path = NULL;

	if (cgroup_path_of(&d->cg, cgfd, &path) < 0 || strcmp(path, l->cgroup) == 0)
		return;
	log_notice("reconcile: %s moved from cgroup %s to %s", lease_label(l), l->cgroup, path);
	free(l->cgroup);
	l->cgroup = TAKE_PTR(path);
	(void)state_save(d->state, l);
	(*fixes)++;
}

static void adopt_grants(struct daemon *d, struct lease *l, int cgfd, unsigned int *fixes)
{
	struct dg_node nodes[DG_MAX_NODES];
	size_t n = lease_nodes(l, d->inv, nodes, DG_MAX_NODES);

	for (size_t i = 0; i < l->n_gpus; i++) {
		if (!inventory_find_uuid(d->inv, l->gpus[i].uuid))
			log_warning("reconcile: GPU %s of %s is no longer on this host; lease kept",
				    l->gpus[i].uuid, lease_label(l));
	}
	/* Grants are re-put unconditionally: cheap, and exact afterwards. */
	for (size_t i = 0; i < n; i++) {
		if (bpfgate_grant_put(d->bg, l->cgid, &nodes[i]) < 0)
			log_error("reconcile: cannot restore grant %u:%u of %s", nodes[i].major,
				  nodes[i].minor, lease_label(l));
	}
	if (guard_needed(d->bg, l->cgid, cgfd, NULL) > 0) {
		struct dg_error err = { 0 };

		if (guard_apply(d->bg, l->cgid, cgfd, NULL, &err) < 0)
			log_error("reconcile: cannot re-apply gates to %s: %s", lease_label(l),
				  err.message);
		else
			log_notice("reconcile: re-applied gates to %s", lease_label(l));
		(*fixes)++;
	}
}

static void finish_move(void *data, const struct lease *gone, uint64_t to)
{
	grant_finish_move(data, gone, to);
	fault_point("reconcile.move");
}

/*
 * Journals first: finish the revokes, roll back the grants a crash cut
 * short, then settle the moves (their destination's grant rolled back
 * already if it had not committed).
 */
static void reconcile_journals(struct daemon *d, unsigned int *fixes)
{
	struct lease_table revoking = { 0 }, pending = { 0 };

	if (state_revoking_load(d->state, &revoking) == 0) {
		for (size_t i = 0; i < revoking.n; i++, (*fixes)++) {
			grant_finish_revoke(d, revoking.v[i]);
			fault_point("reconcile.revoke");
		}
	}
	if (state_pending_load(d->state, &pending) == 0) {
		for (size_t i = 0; i < pending.n; i++, (*fixes)++) {
			grant_rollback(d, pending.v[i]);
			fault_point("reconcile.rollback");
		}
	}
	lease_table_clear(&revoking);
	lease_table_clear(&pending);
	(void)state_moving_each(d->state, finish_move, d);
}

/* Returns another lease than l that holds GPU uuid, or NULL when none does. */
static struct lease *other_holder(const struct lease_table *t, const struct lease *l,
				  const char *uuid)
{
	for (size_t i = 0; i < t->n; i++) {
		struct lease *o = t->v[i];

		if (o != l && lease_find_gpu(o, uuid))
			return o;
	}
	return NULL;
}

/* Returns whether two leases' bookings of one GPU may stand together (both shared, or other
 * instances). */
static bool bookings_fit(const struct lease_gpu *a, const struct lease_gpu *b)
{
	if (a->instance != b->instance)
		return false; /* a MIG instance and the whole GPU exclude each other */
	return a->instance ? a->gi != b->gi : a->shared && b->shared;
}

/* Returns another lease whose booking of lg's GPU conflicts with l's, or NULL. */
static struct lease *double_booker(const struct lease_table *t, const struct lease *l,
				   const struct lease_gpu *lg)
{
	const struct lease_use *u = lease_table_use(t, lg->uuid);
	const struct lease_use *ug = lg->instance ? lease_table_use_gi(t, lg->uuid, lg->gi) : NULL;
	uint32_t whole = u ? u->n_exclusive + u->n_shared : 0, gi;

	/* The counts tell without a walk (a walk per GPU of each lease is n^2). */
	if (!(u && u->n_exclusive && whole >= 2) && !(ug && ug->n_exclusive >= 2) &&
	    !(whole && lease_table_instance_holder(t, lg->uuid, 0, &gi)))
		return NULL;
	for (size_t i = 0; i < t->n; i++) {
		struct lease *o = t->v[i];
		const struct lease_gpu *og = o != l ? lease_find_gpu(o, lg->uuid) : NULL;

		if (og && !bookings_fit(lg, og))
			return o;
	}
	return NULL;
}

/*
 * Two records booking one GPU where one of them is exclusive (records edited
 * by hand, restored from a backup): the older lease keeps it, the younger
 * loses it, and both are logged.
 */
static void reconcile_double_bookings(struct daemon *d, unsigned int *fixes)
{
	for (size_t i = 0; i < d->leases.n; i++) {
		struct lease *l = d->leases.v[i];

		for (size_t g = 0; l && g < l->n_gpus; g++) {
			struct lease *o = double_booker(&d->leases, l, &l->gpus[g]);
			struct dg_node nodes[1 + DG_MAX_CAPS];
			struct lease *young;
			char uuid[sizeof(l->gpus[g].uuid)];
			size_t n;

			if (!o)
				continue;
			young = o->since > l->since || (o->since == l->since && o->cgid > l->cgid)
					? o
					: l;
			snprintf(uuid, sizeof(uuid), "%s", l->gpus[g].uuid);
			n = lease_gpu_nodes(lease_find_gpu(young, uuid), d->inv, nodes,
					    ARRAY_SIZE(nodes));
			log_error(
				"reconcile: GPU %s is booked by %s and %s, not both shared; %s keeps "
				"it, %s loses it",
				uuid, lease_label(l), lease_label(o),
				lease_label(young == l ? o : l), lease_label(young));
			lease_table_del_gpu(&d->leases, young, uuid);
			/* Its grants go now, or the rebuild below would prove them again. */
			for (size_t k = 0; k < n; k++)
				(void)bpfgate_grant_del(d->bg, young->cgid, &nodes[k]);
			if (lease_holds(young))
				(void)state_save(d->state, young);
			(*fixes)++;
			if (young == l)
				g--;
		}
	}
}

/*
 * A lease keyed in the other hierarchy than devgated's: its container may
 * still run, so the v1 rules devgate added go (its nodes stay, denied).
 */
static void deny_v1_rules(struct daemon *d, const struct lease *l)
{
	for (size_t i = 0; l->cg1_path && d->cg1.fd >= 0 && i < l->n_cg1_added; i++) {
		int r = devlist_deny(&d->cg1, l->cg1_path, l->cg1_added[i].rule);

		if (r < 0 && r != -ENOENT)
			log_warning_errno(-r,
					  "reconcile: cannot deny '%s' in v1 devices cgroup %s: %m",
					  l->cg1_added[i].rule, l->cg1_path);
	}
}

/* Releases the leases whose containers ended and adopts those still running. */
static void reconcile_leases(struct daemon *d, unsigned int *fixes)
{
	auto_free uint64_t *ids = lease_table_ids(&d->leases);
	size_t n = d->leases.n;

	if (!ids)
		return;
	for (size_t i = 0; i < n; i++) {
		struct lease *l = lease_table_find(&d->leases, ids[i]);
		auto_close int cgfd = -1;
		/* Keyed in the other hierarchy (cgroup v2 mounted or gone since): its id names
		 * nothing here, or another's cgroup. */
		int r = l->v1_keyed == d->cg.v1 ? cgroup_open_id(&d->cg, l->cgid, &cgfd) : -EXDEV;
		char note[40];

		if (!lease_holds(l) || r < 0 || cgroup_populated(cgfd) <= 0) {
			if (r == -EXDEV)
				deny_v1_rules(d, l);
			grant_release(d, l->cgid,
				      r == -EXDEV
					      ? "reconcile: its cgroup id is of the other cgroup "
						"hierarchy (v1 devices or v2) than this devgated's"
				      : r < 0 ? "reconcile: cgroup gone while devgated was "
						"down"
					      : "reconcile: container ended while "
						"devgated was down");
			(*fixes)++;
			continue;
		}
		adopt_path(d, l, cgfd, fixes);
		/* Numbers of a driver since reloaded (a refresh cut short, or done while
		 * devgated was down): moved first, so the grants below are the new ones. */
		if (refresh_due(d, l) || !l->has_majors)
			*fixes += refresh_lease(d, l) > 0;
		adopt_grants(d, l, cgfd, fixes);
		heal_cgroup1(d, l, true);
		grant_sweep_driver(d, l);
		watch_add(d, l);
		log_info("reconcile: adopted lease of %s (%zu GPU(s)%s)", lease_label(l), l->n_gpus,
			 lease_devices_note(l->n_devices, note, sizeof(note)));
	}
}

/* Returns the GPU whose own node grant k is (a card or render node counts), or NULL. */
static const struct dg_gpu *key_gpu(const struct daemon *d, const struct dg_grant_key *k)
{
	const struct dg_gpu *gpu = NULL;
	char node[64];

	/* A MIG capability node alone proves no lease form: its grant goes. */
	if (k->type != DG_DEV_CHAR ||
	    (d->inv->majors.has_caps && k->major == d->inv->majors.caps) ||
	    !inventory_find_node(d->inv, k->major, k->minor, node, sizeof(node), &gpu))
		return NULL;
	return gpu;
}

/*
 * Returns whether the grants map gives gpu to a cgroup other than cgid. An
 * exclusive GPU never has grants in two cgroups, so this proves that it was
 * shared, also when the records of both holders are lost.
 */
static bool granted_elsewhere(const struct daemon *d, const struct dg_grant_key *keys, size_t n,
			      uint64_t cgid, const struct dg_gpu *gpu)
{
	for (size_t i = 0; i < n; i++) {
		if (keys[i].cgroup_id != cgid && key_gpu(d, &keys[i]) == gpu)
			return true;
	}
	return false;
}

/*
 * Builds a lease for cgroup cgid from the GPUs its grants in the kernel
 * name; NULL when they name none.
 */
static struct lease *lease_from_grants(struct daemon *d, uint64_t cgid, const char *cgroup,
				       const struct dg_grant_key *keys, size_t n)
{
	struct lease *l = lease_new(cgid);

	if (!l)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const struct dg_gpu *gpu = keys[i].cgroup_id == cgid ? key_gpu(d, &keys[i]) : NULL;
		const struct lease *o;

		if (!gpu)
			continue;
		o = other_holder(&d->leases, NULL, gpu->uuid);
		/* Held exclusively elsewhere: not provably ours; its grant goes. */
		if (o && !lease_find_gpu(o, gpu->uuid)->shared)
			continue;
		(void)lease_add_gpu(l, gpu, o || granted_elsewhere(d, keys, n, cgid, gpu));
		if (gpu->has_card && keys[i].major == DG_DRM_MAJOR &&
		    keys[i].minor == gpu->card_minor)
			lease_gpu_add_card(l, gpu);
	}
	/* The grants were read with the inventory's numbers. */
	l->majors = d->inv->majors;
	l->has_majors = true;
	l->cgroup = strdup(cgroup);
	l->container = lease_label_from_cgroup(cgroup);
	l->since = now_wall_s();
	if (l->n_gpus && l->cgroup)
		return l;
	lease_free(l);
	return NULL;
}

/*
 * Records lost (removed, or moved aside as damaged) while the kernel still
 * grants a live container GPUs: the grants prove the lease, so it is
 * written again and adopted. What cannot be proven is left to
 * reconcile_grants() and reconcile_pins(), which remove it.
 */
static void reconcile_rebuild(struct daemon *d, unsigned int *fixes)
{
	auto_free struct dg_grant_key *keys = NULL;
	size_t n = 0;

	if (bpfgate_grants_list(d->bg, &keys, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		auto_cleanup(target_done) struct target t = TARGET_INIT;
		auto_free char *path = NULL;
		auto_close int cgfd = -1;
		struct dg_error err = { 0 };
		struct lease *l;

		if (lease_table_find(&d->leases, keys[i].cgroup_id) ||
		    cgroup_open_id(&d->cg, keys[i].cgroup_id, &cgfd) < 0 ||
		    cgroup_path_of(&d->cg, cgfd, &path) < 0 ||
		    target_from_cgroup(&d->cg, d->self_cgroup, path, &t, &err) < 0)
			continue;
		l = lease_from_grants(d, keys[i].cgroup_id, path, keys, n);
		if (!l)
			continue;
		l->pid = t.pid;
		if (state_save(d->state, l) < 0 || lease_table_add(&d->leases, l) < 0) {
			lease_free(l);
			continue;
		}
		log_notice("reconcile: rebuilt the lost record of %s (%zu GPU(s)) from its grants",
			   lease_label(l), l->n_gpus);
		adopt_grants(d, l, cgfd, fixes);
		heal_cgroup1(d, l, true);
		grant_sweep_driver(d, l);
		watch_add(d, l);
		(*fixes)++;
	}
}

static bool lease_has_node(struct daemon *d, const struct lease *l, const struct dg_grant_key *k)
{
	struct dg_node nodes[DG_MAX_NODES];
	size_t n = lease_nodes(l, d->inv, nodes, DG_MAX_NODES);

	for (size_t i = 0; i < n; i++) {
		if (nodes[i].major == k->major && nodes[i].minor == k->minor &&
		    k->type == (nodes[i].block ? DG_DEV_BLOCK : DG_DEV_CHAR))
			return true;
	}
	return false;
}

static void reconcile_grants(struct daemon *d, unsigned int *fixes)
{
	auto_free struct dg_grant_key *keys = NULL;
	size_t n = 0;

	if (bpfgate_grants_list(d->bg, &keys, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		const struct lease *l = lease_table_find(&d->leases, keys[i].cgroup_id);
		struct dg_node node = { .major = keys[i].major,
					.minor = keys[i].minor,
					.block = keys[i].type == DG_DEV_BLOCK };

		if (l && lease_has_node(d, l, &keys[i]))
			continue;
		(void)bpfgate_grant_del(d->bg, keys[i].cgroup_id, &node);
		log_notice("reconcile: removed grant %c %u:%u of cgroup %llu that no lease holds",
			   node.block ? 'b' : 'c', keys[i].major, keys[i].minor,
			   (unsigned long long)keys[i].cgroup_id);
		(*fixes)++;
	}
}

static void reconcile_pins(struct daemon *d, unsigned int *fixes)
{
	auto_free uint64_t *ids = NULL;
	size_t n = 0;

	if (guard_list(d->bg, &ids, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct dg_error err = { 0 };
		auto_close int cgfd = -1;
		int r;

		if (lease_table_find(&d->leases, ids[i]))
			continue;
		(void)cgroup_open_id(&d->cg, ids[i], &cgfd);
		r = guard_remove(d->bg, ids[i], cgfd, &err);
		if (r < 0)
			log_error("reconcile: %s", err.message);
		if (r == 0)
			continue; /* only a storage left from an earlier lease */
		{
			struct dg_node nodes[DG_MAX_NODES];

			(void)bpfgate_counters_drop(d->bg, ids[i], nodes,
						    inventory_nodes(d->inv, nodes, DG_MAX_NODES));
		}
		log_notice("reconcile: removed gates of cgroup %llu that no lease holds%s",
			   (unsigned long long)ids[i],
			   cgfd >= 0 ? "; runtime programs restored" : "");
		(*fixes)++;
	}
}

static bool leased(uint64_t cgid, const void *data)
{
	return lease_table_find(data, cgid) != NULL;
}

/* Drops the counters of cgroups with neither lease nor pins, left by a crash between steps. */
static void reconcile_counters(struct daemon *d, unsigned int *fixes)
{
	int n = bpfgate_counters_sweep(d->bg, leased, &d->leases);

	if (n > 0) {
		log_notice("reconcile: removed %d counter(s) of cgroups that no lease holds", n);
		(*fixes)++;
	}
}

int reconcile(struct daemon *d)
{
	unsigned int fixes = 0;

	reconcile_journals(d, &fixes);
	reconcile_double_bookings(d, &fixes);
	reconcile_leases(d, &fixes);
	reconcile_rebuild(d, &fixes);
	reconcile_grants(d, &fixes);
	reconcile_pins(d, &fixes);
	reconcile_counters(d, &fixes);
	/* The gate's flag for device grants, from the grants that are left. */
	if (bpfgate_devgrants_sync(d->bg) < 0)
		log_error("reconcile: cannot set the device grant flag");
	if (fixes)
		log_notice("reconcile: %u correction(s)", fixes);
	metrics_inc(d->metrics, METRIC_RECONCILE_FIXES, fixes);
	return (int)fixes;
}
