// SPDX-License-Identifier: Apache-2.0
/*
 * MIG instances for the grant transactions: parses "GPU:GI" and "MIG-<uuid>"
 * lists, checks an instance against what other leases hold, picks free
 * instances of a MIG profile, and marks a lease's instances for a revoke.
 * It only reads the inventory and the lease table and adds to a lease that
 * is not in the table yet; it must not change the table, the kernel or the
 * state directory (the transactions in this folder do that).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lease/alloc.h"
#include "cleanup.h"
#include "instance.h"
#include "lease/policy.h"
#include "select.h"
#include "util.h"

/* Returns true when s looks like NVML's name of a MIG device (a compute instance). */
static bool is_mig_uuid(const char *s)
{
	return strncasecmp(s, "MIG-", 4) == 0;
}

bool instance_spec(const char *spec)
{
	auto_free char *copy = spec ? strdup(spec) : NULL;
	char *rest = copy, sel[96];
	uint32_t gi;

	for (char *s = strsep(&rest, ","); s; s = strsep(&rest, ",")) {
		s = strstrip(s);
		if (is_mig_uuid(s) || mig_selector_parse(s, sel, sizeof(sel), &gi) != -ENOENT)
			return true;
	}
	return false;
}

/* Returns l's instance of GPU uuid, or NULL when l holds none (or holds the whole GPU). */
static const struct lease_gpu *instance_held(const struct lease *l, const char *uuid)
{
	const struct lease_gpu *g = l ? lease_find_gpu(l, uuid) : NULL;

	return g && g->instance ? g : NULL;
}

/* Returns the single GPU that sel names; NULL with err set when it names none or several. */
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

/*
 * Returns the GPU that has a compute instance with NVML's UUID uuid and
 * writes that instance's GPU instance id to *ret_gi; NULL with err set when
 * no instance has that UUID.
 */
static const struct dg_gpu *by_mig_uuid(const struct dg_inventory *inv, const char *uuid,
					uint32_t *ret_gi, struct dg_error *err)
{
	for (size_t i = 0; i < inv->n_gpus; i++) {
		const struct dg_gpu *gpu = &inv->gpus[i];

		for (size_t k = 0; k < gpu->n_gi; k++) {
			for (size_t c = 0; c < gpu->gi[k].n_ci; c++) {
				if (strcasecmp(gpu->gi[k].ci[c].uuid, uuid) == 0) {
					*ret_gi = gpu->gi[k].id;
					return gpu;
				}
			}
		}
	}
	dg_error_set(err, DG_E_NO_GPU, ENODEV, "no MIG instance has the UUID %s", uuid);
	if (inv->nvml_problem[0])
		dg_error_hint(err, "MIG UUIDs are not known: %s", inv->nvml_problem);
	else
		dg_error_hint(err, "'devgatectl list' shows the instances and their UUIDs");
	return NULL;
}

/*
 * Returns true when s has the form of an NVML MIG UUID: "MIG-" and a UUID
 * (8-4-4-4-12 hex digits), or, before driver R470, "MIG-GPU-<uuid>/<gi>/<ci>".
 */
static bool mig_uuid_valid(const char *s)
{
	static const int groups[] = { 8, 4, 4, 4, 12 };
	const char *p = s + 4;

	if (strncasecmp(p, "GPU-", 4) == 0)
		return strlen(p) < 80 && p[strspn(p, "0123456789abcdefABCDEF-/GPU")] == '\0';
	for (size_t i = 0; i < ARRAY_SIZE(groups); i++) {
		if (strspn(p, "0123456789abcdefABCDEF") != (size_t)groups[i])
			return false;
		p += groups[i];
		if (*p != (i + 1 < ARRAY_SIZE(groups) ? '-' : '\0'))
			return false;
		p += *p == '-';
	}
	return true;
}

/*
 * Resolves an instance as grant and revoke name it (GPU:GI or MIG-<uuid>):
 * returns its GPU and writes its GPU instance id to *gi; NULL with err set
 * when s names no instance.
 */
static const struct dg_gpu *resolve(const struct dg_inventory *inv, const char *s, uint32_t *gi,
				    struct dg_error *err)
{
	char sel[96];

	if (is_mig_uuid(s) && !mig_uuid_valid(s)) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "'%s' is not a MIG UUID", s);
		dg_error_hint(err, "NVML's form is MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx; "
				   "'devgatectl list' shows each instance's");
		return NULL;
	}
	if (is_mig_uuid(s))
		return by_mig_uuid(inv, s, gi, err);
	if (mig_selector_parse(s, sel, sizeof(sel), gi) < 0) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "'%s' is not a MIG instance", s);
		dg_error_hint(err, "give GPU:GI (GPU index, UUID or PCI bus id, and GPU "
				   "instance id, e.g. 0:1) or a MIG-<uuid> for each; whole GPUs "
				   "in a grant of their own");
		return NULL;
	}
	return one_gpu(inv, sel, err);
}

/*
 * Returns 0 when lease next may take instance gi of gpu now, or -EBUSY with
 * err naming the other lease that holds the instance or the whole GPU.
 */
static int busy(const struct lease_table *leases, const struct lease *next,
		const struct dg_gpu *gpu, uint32_t gi, struct dg_error *err)
{
	const struct lease_use *u = lease_table_use(leases, gpu->uuid);
	const struct lease *who = NULL;
	char text[80];

	if (u && u->n_exclusive)
		who = lease_table_holder(leases, u, false, next->cgid);
	if (!who && u && u->n_shared)
		who = lease_table_holder(leases, u, true, next->cgid);
	if (who) {
		holder_text(who, text, sizeof(text));
		dg_error_set(err, DG_E_UNAVAILABLE, EBUSY,
			     "GPU %u is held whole by %s; its instances are not free", gpu->index,
			     text);
		dg_error_hint(err, "an instance and the whole GPU exclude each other");
		return -EBUSY;
	}
	u = lease_table_use_gi(leases, gpu->uuid, gi);
	who = u && u->n_exclusive ? lease_table_holder(leases, u, false, next->cgid) : NULL;
	if (who) {
		holder_text(who, text, sizeof(text));
		dg_error_set(err, DG_E_UNAVAILABLE, EBUSY, "GPU instance %u:%u is held by %s",
			     gpu->index, gi, text);
		dg_error_hint(err, "'devgatectl list' shows the free instances");
		return -EBUSY;
	}
	return 0;
}

/* Returns true when gpu may be granted once it is free: not excluded, not gone, no problem. */
static bool grantable(const struct dg_gpu *gpu)
{
	return !gpu->excluded && !gpu->gone && !gpu->problem[0];
}

/*
 * Checks that instance gi of gpu exists and may be granted at all, whether
 * or not someone holds it now. Writes the instance to *ret; fails with err
 * set when the GPU cannot be granted, is not in MIG mode or lacks gi.
 */
static int exists(const struct dg_inventory *inv, const struct dg_gpu *gpu, uint32_t gi,
		  const struct dg_mig_gi **ret, struct dg_error *err)
{
	if (!grantable(gpu))
		return dg_error_set(err, DG_E_UNAVAILABLE, ENODEV, "GPU %u cannot be granted: %s",
				    gpu->index,
				    gpu->problem[0] ? gpu->problem
				    : gpu->gone	    ? "it left the host"
						    : "the admin's gpu-allow list excludes it");
	if (!gpu->mig || !inv->majors.has_caps) {
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
	return 0;
}

/*
 * Checks that instance gi of gpu can go to lease next: it exists, next holds
 * no other part of the GPU, and no other lease holds it. Writes the
 * instance to *ret.
 */
static int check_one(const struct dg_inventory *inv, const struct lease_table *leases,
		     const struct lease *next, const struct dg_gpu *gpu, uint32_t gi,
		     const struct dg_mig_gi **ret, struct dg_error *err)
{
	const struct lease_gpu *mine = lease_find_gpu(next, gpu->uuid);
	int r = exists(inv, gpu, gi, ret, err);

	if (r < 0)
		return r;
	if (mine && !(mine->instance && mine->gi == gi)) {
		dg_error_set(err, DG_E_INVALID, EEXIST, "%s holds %s of GPU %u already",
			     lease_label(next), mine->instance ? "another instance" : "all",
			     gpu->index);
		dg_error_hint(err, "a container holds one instance of a GPU or the whole GPU; "
				   "revoke what it holds first");
		return -EEXIST;
	}
	return busy(leases, next, gpu, gi, err);
}

int instance_add(const struct dg_inventory *inv, const struct lease_table *leases,
		 struct lease *next, const char *spec, bool shared, struct dg_grant_reply *out,
		 struct dg_arena *a, struct dg_error *err)
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
		uint32_t id;
		const struct dg_gpu *gpu = resolve(inv, strstrip(s), &id, err);
		int r;

		if (!gpu)
			return -ENODEV;
		r = check_one(inv, leases, next, gpu, id, &gi, err);
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

/* Returns true when name has the form of an NVML MIG profile ("1g.18gb", "1g.18gb+me"). */
static bool looks_like_profile(const char *name)
{
	size_t n = strspn(name, "0123456789");

	return n > 0 && strncmp(name + n, "g.", 2) == 0;
}

/* Returns true when gpu has a GPU instance of the MIG profile name. */
static bool has_profile(const struct dg_gpu *gpu, const char *name)
{
	for (size_t k = 0; k < gpu->n_gi; k++) {
		if (strcasecmp(gpu->gi[k].profile, name) == 0)
			return true;
	}
	return false;
}

/* Returns true when some GPU of this host has an instance of the MIG profile name. */
static bool profile_here(const struct dg_inventory *inv, const char *name)
{
	for (size_t i = 0; i < inv->n_gpus; i++) {
		if (has_profile(&inv->gpus[i], name))
			return true;
	}
	return false;
}

bool instance_profile_request(const struct dg_policy *policy, const struct dg_grant_req *g)
{
	return g->profile && !g->gpus && !policy_has_profile(policy, g->profile);
}

/*
 * Returns gpu's first instance of the MIG profile name that no lease holds
 * (probe stands for the asking lease); NULL when there is none.
 */
static const struct dg_mig_gi *free_of_profile(const struct lease_table *leases,
					       const struct lease *probe, const struct dg_gpu *gpu,
					       const char *name)
{
	if (!grantable(gpu))
		return NULL;
	for (size_t k = 0; k < gpu->n_gi; k++) {
		struct dg_error ignored = { 0 };

		if (strcasecmp(gpu->gi[k].profile, name) == 0 &&
		    busy(leases, probe, gpu, gpu->gi[k].id, &ignored) == 0)
			return &gpu->gi[k];
	}
	return NULL;
}

/* Appends "UUID:GI" to the --gpu list *spec (of length *len), in a new string from a. */
static int append(char **spec, size_t *len, const struct dg_gpu *gpu, uint32_t gi,
		  struct dg_arena *a)
{
	size_t need = *len + strlen(gpu->uuid) + 16;
	char *next = dg_arena_alloc(a, need);

	if (!next)
		return -ENOMEM;
	*len = (size_t)snprintf(next, need, "%s%s%s:%u", *spec ? *spec : "", *spec ? "," : "",
				gpu->uuid, gi);
	*spec = next;
	return 0;
}

int instance_by_profile(const struct dg_inventory *inv, const struct lease_table *leases,
			const char *name, unsigned int count, char **spec, struct dg_arena *a,
			struct dg_error *err)
{
	struct lease probe = { .cgid = 0 };
	unsigned int found = 0;
	size_t len = 0;

	*spec = NULL;
	if (!profile_here(inv, name)) {
		if (!looks_like_profile(name))
			return 0;
		dg_error_set(err, DG_E_NO_GPU, ENODEV, "no MIG instance of profile %s on this host",
			     name);
		if (inv->nvml_problem[0])
			dg_error_hint(err, "profiles are not known: %s", inv->nvml_problem);
		else
			dg_error_hint(err,
				      "'devgatectl list' shows the instances and their profiles");
		return -ENODEV;
	}
	for (size_t i = 0; i < inv->n_gpus && found < count; i++) {
		const struct dg_gpu *gpu = &inv->gpus[i];
		const struct dg_mig_gi *gi = free_of_profile(leases, &probe, gpu, name);

		if (!gi)
			continue;
		if (append(spec, &len, gpu, gi->id, a) < 0)
			return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
		found++;
	}
	if (found < count) {
		dg_error_set(err, DG_E_UNAVAILABLE, EBUSY,
			     "%u of the %u MIG instances of profile %s asked for are free", found,
			     count, name);
		dg_error_hint(err, "a container holds at most one instance of each GPU; "
				   "'devgatectl list' shows who holds the others");
		return -EBUSY;
	}
	return 0;
}

/*
 * Checks that every instance spec names exists and may be granted once its
 * holder lets go; fails with err set for the first one that never could.
 */
static int spec_could_serve(const struct dg_inventory *inv, const char *spec, struct dg_error *err)
{
	auto_free char *copy = strdup(spec);
	char *rest = copy;

	if (!copy)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	for (char *s = strsep(&rest, ","); s; s = strsep(&rest, ",")) {
		const struct dg_mig_gi *gi;
		uint32_t id;
		const struct dg_gpu *gpu = resolve(inv, strstrip(s), &id, err);

		if (!gpu || exists(inv, gpu, id, &gi, err) < 0)
			return -ENODEV;
	}
	return 0;
}

/*
 * Checks that at least count grantable GPUs have an instance of the MIG
 * profile name: a container holds at most one instance of each GPU.
 */
static int profile_could_serve(const struct dg_inventory *inv, const char *name, unsigned int count,
			       struct dg_error *err)
{
	unsigned int n = 0;

	for (size_t i = 0; i < inv->n_gpus; i++)
		n += has_profile(&inv->gpus[i], name) && grantable(&inv->gpus[i]);
	if (n >= count)
		return 0;
	dg_error_set(err, DG_E_NO_GPU, ENODEV,
		     "%u GPU%s ha%s instances of profile %s; %u asked for", n, n == 1 ? "" : "s",
		     n == 1 ? "s" : "ve", name, count);
	dg_error_hint(err, "a container holds at most one instance of each GPU");
	return -ENODEV;
}

int instance_wait_check(const struct dg_inventory *inv, const struct dg_policy *policy,
			const struct dg_grant_req *g, struct dg_error *err)
{
	int r;

	if (g->gpus && instance_spec(g->gpus))
		r = spec_could_serve(inv, g->gpus, err);
	else if (instance_profile_request(policy, g) && profile_here(inv, g->profile))
		r = profile_could_serve(inv, g->profile, g->has_count ? (unsigned int)g->count : 1,
					err);
	else
		return 0;
	if (r < 0 && err->code == DG_E_UNAVAILABLE) {
		struct dg_error why = *err;

		*err = (struct dg_error){ 0 };
		dg_error_set(err, DG_E_NO_GPU, ENODEV, "not queued: %s", why.message);
	}
	return r < 0 ? r : 1;
}

int instance_select(const struct dg_inventory *inv, const struct lease *l, const char *spec,
		    bool *drop, struct dg_error *err)
{
	auto_free char *copy = strdup(spec);
	char *rest = copy;

	if (!copy)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	for (char *s = strsep(&rest, ","); s; s = strsep(&rest, ",")) {
		const struct lease_gpu *g;
		uint32_t id;
		const struct dg_gpu *gpu = resolve(inv, strstrip(s), &id, err);

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
