// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "grant.h"
#include "log.h"
#include "metrics.h"
#include "reconcile.h"
#include "watch.h"


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
		if (bpfgate_grant_put(d->bg, l->cgid, &nodes[i], DG_ACC_READ | DG_ACC_WRITE) < 0)
			log_error("reconcile: cannot restore grant %u:%u of %s", nodes[i].major,
				  nodes[i].minor, lease_label(l));
	}
	if (bpfgate_needs_guard(d->bg, l->cgid, cgfd) > 0) {
		struct dg_error err = { 0 };

		if (bpfgate_guard(d->bg, l->cgid, cgfd, NULL, &err) < 0)
			log_error("reconcile: cannot re-apply gates to %s: %s", lease_label(l),
				  err.message);
		else
			log_notice("reconcile: re-applied gates to %s", lease_label(l));
		(*fixes)++;
	}
}

/* Leases: release the ended, adopt the living. */
static void reconcile_leases(struct daemon *d, unsigned int *fixes)
{
	auto_free uint64_t *ids = lease_table_ids(&d->leases);
	size_t n = d->leases.n;

	if (!ids)
		return;
	for (size_t i = 0; i < n; i++) {
		struct lease *l = lease_table_find(&d->leases, ids[i]);
		auto_close int cgfd = -1;
		int r = cgroup_open_id(&d->cg, l->cgid, &cgfd);

		if (r < 0 || cgroup_populated(cgfd) <= 0) {
			grant_release(d, l->cgid, r < 0 ? "reconcile: cgroup gone while devgated was "
							  "down"
							: "reconcile: container ended while "
							  "devgated was down");
			(*fixes)++;
			continue;
		}
		adopt_path(d, l, cgfd, fixes);
		adopt_grants(d, l, cgfd, fixes);
		watch_add(d, l);
		log_info("reconcile: adopted lease of %s (%zu GPU(s))", lease_label(l), l->n_gpus);
	}
}

static bool lease_has_node(struct daemon *d, const struct lease *l, const struct dg_grant_key *k)
{
	struct dg_node nodes[DG_MAX_NODES];
	size_t n = lease_nodes(l, d->inv, nodes, DG_MAX_NODES);

	for (size_t i = 0; i < n; i++) {
		if (nodes[i].major == k->major && nodes[i].minor == k->minor &&
		    k->type == DG_DEV_CHAR)
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
		struct dg_node node = { .major = keys[i].major, .minor = keys[i].minor };

		if (l && lease_has_node(d, l, &keys[i]))
			continue;
		(void)bpfgate_grant_del(d->bg, keys[i].cgroup_id, &node);
		log_notice("reconcile: removed grant %u:%u of cgroup %llu that no lease holds",
			   keys[i].major, keys[i].minor, (unsigned long long)keys[i].cgroup_id);
		(*fixes)++;
	}
}

static void reconcile_pins(struct daemon *d, unsigned int *fixes)
{
	auto_free uint64_t *ids = NULL;
	size_t n = 0;

	if (bpfgate_guarded_list(d->bg, &ids, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct dg_error err = { 0 };
		auto_close int cgfd = -1;

		if (lease_table_find(&d->leases, ids[i]))
			continue;
		(void)cgroup_open_id(&d->cg, ids[i], &cgfd);
		if (bpfgate_unguard(d->bg, ids[i], cgfd, &err) < 0)
			log_error("reconcile: %s", err.message);
		(void)bpfgate_counters_drop(d->bg, ids[i]);
		log_notice("reconcile: removed gates of cgroup %llu that no lease holds%s",
			   (unsigned long long)ids[i], cgfd >= 0 ? "; runtime programs restored" : "");
		(*fixes)++;
	}
}

static bool leased(uint64_t cgid, const void *data)
{
	return lease_table_find(data, cgid) != NULL;
}

/* Counters of a cgroup with neither lease nor pins: a crash between steps. */
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

	reconcile_leases(d, &fixes);
	reconcile_grants(d, &fixes);
	reconcile_pins(d, &fixes);
	reconcile_counters(d, &fixes);
	if (fixes)
		log_notice("reconcile: %u correction(s)", fixes);
	metrics_inc(d->metrics, METRIC_RECONCILE_FIXES, fixes);
	return (int)fixes;
}
