// SPDX-License-Identifier: Apache-2.0
/*
 * The release transaction (grant_release): the container ended, so its
 * lease goes with everything devgate put on it (reconcile.c also releases
 * a lease that holds nothing). The record goes first, then the grants, the
 * gate and the cgroup watch. It does not remove nodes, since an ended
 * container's /dev needs no cleanup; taking GPUs from a container that
 * runs is a revoke (revoke.c), which must not be done here.
 */
#include "lease/state.h"
#include "grant.h"
#include "log.h"
#include "metrics/metrics.h"
#include "sys/fault.h"
#include "txn.h"
#include "watch/watch.h"

/* Takes the gate off lease l's cgroup and stops watching it. */
static void unguard_lease(struct daemon *d, struct lease *l)
{
	txn_unguard_cgroup(d, l->cgid, lease_label(l));
	watch_del(d, l);
}

void grant_release(struct daemon *d, uint64_t cgid, const char *why)
{
	struct lease *l = lease_table_find(&d->leases, cgid);
	struct dg_node nodes[DG_MAX_NODES];
	const char *gpus[DG_MAX_GPUS];
	char note[40];
	size_t n;
	int r;

	if (!l)
		return;
	r = state_remove(d->state, cgid);
	if (r < 0)
		log_error_errno(r, "cannot remove the lease file of %s: %m", lease_label(l));
	fault_point("release.record");
	n = lease_nodes(l, d->inv, nodes, DG_MAX_NODES);
	txn_grants_del(d->bg, cgid, nodes, n);
	fault_point("release.grants");
	unguard_lease(d, l);
	log_info("released %zu GPU(s)%s of %s: %s", l->n_gpus,
		 lease_devices_note(l->n_devices, note, sizeof(note)), lease_label(l), why);
	metrics_inc(d->metrics, METRIC_RELEASES, 1);
	for (size_t i = 0; i < l->n_gpus && i < DG_MAX_GPUS; i++)
		gpus[i] = l->gpus[i].uuid;
	txn_emit(d, "released", l, gpus, l->n_gpus < DG_MAX_GPUS ? l->n_gpus : DG_MAX_GPUS);
	lease_free(lease_table_take(&d->leases, cgid));
}
