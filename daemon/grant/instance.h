/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Grants of NVIDIA MIG instances (grant --gpu GPU:GI). One lease at a time
 * may hold an instance. A lease that holds an instance of a GPU and a lease
 * that holds the whole GPU exclude each other.
 *
 * The functions take only what they read: the inventory (inv), the lease
 * table (leases) and the admin's profiles (policy), not struct daemon.
 */
#ifndef DEVGATE_INSTANCE_H
#define DEVGATE_INSTANCE_H

#include <stdbool.h>

#include "errors.h"
#include "gpu.h"
#include "lease/lease.h"
#include "wire.h"

struct dg_policy;

/* Returns true when a --gpu list names MIG instances ("0:1", "MIG-..."), not whole GPUs. */
bool instance_spec(const char *spec);

/*
 * Adds each instance that spec names to next, a lease that is not in the
 * table yet, after checking it against what the other leases hold. The
 * UUIDs of the instances' GPUs go to out->granted. When an instance is
 * busy it fails with DG_E_UNAVAILABLE (exit 8) and err names the holder.
 */
int instance_add(const struct dg_inventory *inv, const struct lease_table *leases,
		 struct lease *next, const char *spec, bool shared, struct dg_grant_reply *out,
		 struct dg_arena *a, struct dg_error *err);

/*
 * Returns true for grant --profile NAME when devgate.conf defines no profile
 * called NAME: the user may mean a MIG profile.
 */
bool instance_profile_request(const struct dg_policy *policy, const struct dg_grant_req *g);

/*
 * Serves grant --profile NAME [--gpus N] when NAME is a MIG profile (NVML's
 * name, such as "1g.18gb") and not a devgate.conf profile: picks N free
 * instances of it, at most one per GPU, and writes them as a --gpu list to
 * *spec. Leaves *spec NULL and returns 0 when NAME is no MIG profile here.
 */
int instance_by_profile(const struct dg_inventory *inv, const struct lease_table *leases,
			const char *name, unsigned int count, char **spec, struct dg_arena *a,
			struct dg_error *err);

/*
 * Decides whether grant --wait of instances (or of a MIG profile) may wait.
 * Returns 1 when g asks for instances that could be served once their
 * holders let go, 0 when g asks for no instance, and a negative errno
 * (DG_E_NO_GPU in err) when the request could never be served.
 */
int instance_wait_check(const struct dg_inventory *inv, const struct dg_policy *policy,
			const struct dg_grant_req *g, struct dg_error *err);

/*
 * Sets drop[i] for each instance in lease l that spec names. Fails with
 * DG_E_NOT_GRANTED when l does not hold one of them.
 */
int instance_select(const struct dg_inventory *inv, const struct lease *l, const char *spec,
		    bool *drop, struct dg_error *err);

#endif
