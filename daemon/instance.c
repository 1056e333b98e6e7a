// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "cleanup.h"
#include "instance.h"
#include "select.h"
#include "util.h"

bool instance_spec(const char *spec)
{
	auto_free char *copy = spec ? strdup(spec) : NULL;
	char *rest = copy, sel[96];
	uint32_t gi;

	for (char *s = strsep(&rest, ","); s; s = strsep(&rest, ",")) {
		if (mig_selector_parse(strstrip(s), sel, sizeof(sel), &gi) != -ENOENT)
			return true;
	}
	return false;
}

/* The lease's instance of GPU uuid; NULL when it holds none (or all of the GPU). */
static const struct lease_gpu *instance_held(const struct lease *l, const char *uuid)
{
	const struct lease_gpu *g = l ? lease_find_gpu(l, uuid) : NULL;

	return g && g->instance ? g : NULL;
}

/* The one GPU sel names. */
static const struct dg_gpu *one_gpu(const struct dg_inventory *inv, const char *sel,
				    struct dg_error *err)
{
	bool picked[DG_MAX_GPUS];
	const struct dg_gpu *gpu = NULL;

	if (select_gpus(inv, sel, picked, err) < 0)
		return NULL;
	for (size_t i = 0; i < inv->n_gpus; i++) {
		if (!picked[i])
			continue;
		if (gpu) {
			dg_error_set(err, DG_E_INVALID, EINVAL,
				     "'%s' names several GPUs; an instance is of one GPU", sel);
			return NULL;
		}
		gpu = &inv->gpus[i];
	}
	return gpu;
}

/* Why the lease cannot take instance gi of gpu now; 0 when it can. */
static int busy(struct daemon *d, const struct lease *next, const struct dg_gpu *gpu, uint32_t gi,
		struct dg_error *err)
{
	const struct lease_use *u = lease_table_use(&d->leases, gpu->uuid);
	const struct lease *who = NULL;
	char text[80];

	if (u && u->n_exclusive)
		who = lease_table_holder(&d->leases, u, false, next->cgid);
	if (!who && u && u->n_shared)
		who = lease_table_holder(&d->leases, u, true, next->cgid);
	if (who) {
		holder_text(who, text, sizeof(text));
		dg_error_set(err, DG_E_UNAVAILABLE, EBUSY,
			     "GPU %u is held whole by %s; its instances are not free", gpu->index,
			     text);
		dg_error_hint(err, "an instance and the whole GPU exclude each other");
		return -EBUSY;
	}
	u = lease_table_use_gi(&d->leases, gpu->uuid, gi);
	who = u && u->n_exclusive ? lease_table_holder(&d->leases, u, false, next->cgid) : NULL;
	if (who) {
		holder_text(who, text, sizeof(text));
		dg_error_set(err, DG_E_UNAVAILABLE, EBUSY, "GPU instance %u:%u is held by %s",
			     gpu->index, gi, text);
		dg_error_hint(err, "'devgatectl list' shows the free instances");
		return -EBUSY;
	}
	return 0;
}

/* Whether instance gi of gpu can go to next; *ret its GI. */
static int check_one(struct daemon *d, const struct lease *next, const struct dg_gpu *gpu,
		     uint32_t gi, const struct dg_mig_gi **ret, struct dg_error *err)
{
	const struct lease_gpu *mine = lease_find_gpu(next, gpu->uuid);

	if (gpu->excluded || gpu->gone || gpu->problem[0])
		return dg_error_set(err, DG_E_UNAVAILABLE, ENODEV, "GPU %u cannot be granted: %s",
				    gpu->index,
				    gpu->problem[0] ? gpu->problem
				    : gpu->gone	    ? "it left the host"
						    : "the admin's gpu-allow list excludes it");
	if (!gpu->mig || !d->inv->majors.has_caps) {
		dg_error_set(err, DG_E_NO_GPU, ENODEV, "GPU %u is not in MIG mode", gpu->index);
		dg_error_hint(err, "grant it whole (--gpu %u); 'devgatectl list' shows instances",
			      gpu->index);
		return -ENODEV;
	}
	*ret = mig_find_gi(gpu, gi);
	if (!*ret) {
		dg_error_set(err, DG_E_NO_GPU, ENODEV, "GPU %u has no GPU instance %u", gpu->index,
			     gi);
		dg_error_hint(err, "'devgatectl list' shows the instances of each GPU");
		return -ENODEV;
	}
	if (mine && !(mine->instance && mine->gi == gi)) {
		dg_error_set(err, DG_E_INVALID, EEXIST, "%s holds %s of GPU %u already",
			     lease_label(next), mine->instance ? "another instance" : "all",
			     gpu->index);
		dg_error_hint(err, "a container holds one instance of a GPU or the whole GPU; "
				   "revoke what it holds first");
		return -EEXIST;
	}
	return busy(d, next, gpu, gi, err);
}

int instance_add(struct daemon *d, struct lease *next, const char *spec, bool shared,
		 struct dg_grant_reply *out, struct dg_arena *a, struct dg_error *err)
{
	auto_free char *copy = strdup(spec);
	char *rest = copy;
	size_t n = 1;

	if (shared)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "MIG instances are granted exclusively; drop --shared");
	for (const char *p = spec; *p; p++)
		n += *p == ',';
	out->granted = dg_arena_alloc(a, n * sizeof(*out->granted));
	if (!copy || !out->granted)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	for (char *s = strsep(&rest, ","); s; s = strsep(&rest, ",")) {
		const struct dg_mig_gi *gi = NULL;
		const struct dg_gpu *gpu;
		char sel[96];
		uint32_t id;
		int r = mig_selector_parse(strstrip(s), sel, sizeof(sel), &id);

		if (r < 0) {
			dg_error_set(err, DG_E_INVALID, EINVAL, "'%s' is not a MIG instance", s);
			dg_error_hint(err, "give GPU:GI (GPU index, UUID or PCI bus id, and GPU "
					   "instance id) for each, e.g. 0:1; whole GPUs in a grant "
					   "of their own");
			return -EINVAL;
		}
		gpu = one_gpu(d->inv, sel, err);
		if (!gpu)
			return -ENODEV;
		r = check_one(d, next, gpu, id, &gi, err);
		if (r == 0)
			r = lease_add_instance(next, gpu, gi);
		if (r < 0)
			return err->code ? r
					 : dg_error_set(err, DG_E_INVALID, -r,
							"the lease cannot take more GPUs");
		if (r > 0)
			out->granted[out->n_granted++] = gpu->uuid;
	}
	return 0;
}

int instance_select(struct daemon *d, const struct lease *l, const char *spec, bool *drop,
		    struct dg_error *err)
{
	auto_free char *copy = strdup(spec);
	char *rest = copy;

	if (!copy)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	for (char *s = strsep(&rest, ","); s; s = strsep(&rest, ",")) {
		const struct lease_gpu *g;
		const struct dg_gpu *gpu;
		char sel[96];
		uint32_t id;

		if (mig_selector_parse(strstrip(s), sel, sizeof(sel), &id) < 0)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "'%s' is not a MIG instance (GPU:GI)", s);
		gpu = one_gpu(d->inv, sel, err);
		if (!gpu)
			return -ENODEV;
		g = instance_held(l, gpu->uuid);
		if (!g || g->gi != id)
			return dg_error_set(err, DG_E_NOT_GRANTED, ENOENT,
					    "%s does not hold GPU instance %u:%u", lease_label(l),
					    gpu->index, id);
		drop[g - l->gpus] = true;
	}
	return 0;
}
