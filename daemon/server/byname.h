/* SPDX-License-Identifier: Apache-2.0 */
/* A request's container named the way users know it; private to server/. */
#ifndef DEVGATE_BYNAME_H
#define DEVGATE_BYNAME_H

#include "core/daemon.h"
#include "wire.h"

/*
 * Where a grant, revoke or extend names its container by --container alone
 * and that is not a lease's label, resolves it through the runtimes'
 * state (names/names.h) and rewrites the target to the cgroup the runtime
 * names, keeping the runtime's name as the grant's label. 0 when the
 * request goes on (rewritten or not), negative errno and err when not.
 */
int byname_rewrite(struct daemon *d, struct dg_request *req, struct dg_error *err);

/*
 * Every running container the configured runtimes list, proved from the
 * kernel (names_list), into out (strings in a). Changes nothing.
 */
int byname_list(struct daemon *d, struct dg_containers_reply *out, struct dg_arena *a,
		struct dg_error *err);

#endif
