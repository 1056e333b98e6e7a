// SPDX-License-Identifier: Apache-2.0
/*
 * Puts a re-read devgate.conf's policy in force (see reload.h). The new
 * configuration is built whole before anything moves, so a file that does
 * not parse, or that devgated does not trust (config_load), changes
 * nothing; it never takes a GPU from a lease (a held GPU that turns
 * excluded is only reported).
 */
#include <errno.h>
#include <stdlib.h>

#include "cleanup.h"
#include "core/config.h"
#include "core/daemon.h"
#include "lease/lease.h"
#include "log.h"
#include "lease/policy.h"
#include "reload.h"

/*
 * Logs each GPU that the new gpu-allow excludes while a lease holds it (the
 * lease keeps it) and returns how many there are. was[i] says whether GPU i
 * was excluded before the reload.
 */
static size_t report_held(struct daemon *d, const bool *was, const char *why)
{
	size_t n = 0;

	for (size_t i = 0; i < d->inv->n_gpus; i++) {
		const struct dg_gpu *gpu = &d->inv->gpus[i];
		const struct lease_use *u = lease_table_use(&d->leases, gpu->uuid);

		if (!gpu->excluded || was[i] || !u || (!u->n_exclusive && !u->n_shared))
			continue;
		n++;
		log_warning("%s: GPU %u (%s) is excluded now; its %u lease(s) keep it until "
			    "revoked, new grants of it are refused",
			    why, gpu->index, gpu->uuid, u->n_exclusive + u->n_shared);
	}
	return n;
}

int reload_run(struct daemon *d, const char *why, struct reload_result *out, struct dg_error *err)
{
	struct dg_config next;
	bool was[DG_MAX_GPUS] = { false };
	int r;

	*out = (struct reload_result){ 0 };
	if (config_init(&next) < 0)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	r = d->hooks.load_config(&next, err);
	if (r < 0) {
		config_free(&next);
		log_error("%s: configuration refused, the policy in force stays: %s", why,
			  err->message);
		if (err->hint[0])
			log_error("%s: hint: %s", why, err->hint);
		return r;
	}
	for (size_t i = 0; i < d->inv->n_gpus; i++)
		was[i] = d->inv->gpus[i].excluded;
	config_take_policy(d->cfg, &next, out->restart, sizeof(out->restart));
	config_free(&next);
	policy_apply(&d->cfg->policy, d->inv);
	for (size_t i = 0; i < d->inv->n_gpus; i++)
		out->excluded += d->inv->gpus[i].excluded;
	out->newly_held = report_held(d, was, why);
	out->aliases = d->cfg->policy.n_aliases;
	out->profiles = d->cfg->policy.n_profiles;
	out->device_allow = d->cfg->device_allow.n;
	if (out->restart[0])
		log_warning("%s: %s changed; that takes effect at the next start", why,
			    out->restart);
	log_notice("%s: policy reloaded: %zu of %zu GPU(s) excluded, %zu alias(es), "
		   "%zu profile(s), %zu device-allow entries",
		   why, out->excluded, d->inv->n_gpus, out->aliases, out->profiles,
		   out->device_allow);
	/* GPUs allowed again may serve waiting grants. */
	if (d->hooks.capacity_changed)
		d->hooks.capacity_changed(d);
	return 0;
}
