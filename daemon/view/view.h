/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devgated's state as clients see it: the wire structs of common/wire.h,
 * filled from the inventory and the lease table. Strings live in the arena
 * or point into the state they describe, so a view is encoded before the
 * state changes.
 */
#ifndef DEVGATE_VIEW_H
#define DEVGATE_VIEW_H

#include "gpu.h"
#include "lease/lease.h"
#include "lease/policy.h"
#include "wire.h"

/*
 * One word for what a GPU is now: "free", "held", "shared", "split" (one of
 * its MIG instances is held), "unusable" or "excluded".
 */
const char *view_gpu_state(const struct lease_table *t, const struct dg_gpu *gpu);
/* What clients see of one GPU, strings in the arena. 0, or -ENOMEM. */
int view_gpu(const struct dg_inventory *inv, const struct dg_gpu *gpu, struct dg_gpu_info *out,
	     struct dg_arena *a);
/*
 * What clients see of a lease (its GPUs described from inv), copied into
 * the arena. 0, or -ENOMEM.
 */
int view_lease(const struct dg_inventory *inv, const struct lease *l, struct dg_lease_info *out,
	       struct dg_arena *a);
/*
 * The reply to 'list' (only free GPUs with free_only): inv's GPUs, who in
 * t holds them, and the policy's aliases. 0, or -ENOMEM.
 */
int view_inventory(const struct dg_inventory *inv, const struct lease_table *t,
		   const struct dg_policy *policy, bool free_only, struct dg_list_reply *out,
		   struct dg_arena *a);
/* Writes the "rwm" letters of a DG_ACC_* mask into buf. */
void view_access_str(uint32_t access, char *buf, size_t len);

#endif
