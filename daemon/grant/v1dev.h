/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cgroup v1 devices side of the lease transactions (hybrid and v1
 * hosts): the rules a lease adds to its container's devices list, written
 * with the v2 gate and denied again at revoke. Private to daemon/grant/.
 */
#ifndef DEVGATE_V1DEV_H
#define DEVGATE_V1DEV_H

#include <stddef.h>

#include "core/daemon.h"
#include "errors.h"
#include "gpu.h"
#include "sys/target.h"

/*
 * Records in next the v1 devices cgroup of t's process and the rules its
 * nodes (n of them) lack there: only what the list does not allow yet, so
 * what the runtime allowed is never devgate's to deny. Nothing to do (0)
 * where the process has no v1 devices cgroup.
 */
int v1dev_plan(struct daemon *d, const struct target *t, struct lease *next,
	       const struct dg_node *nodes, size_t n, struct dg_error *err);
/* Writes each rule of l that its list lacks; err names the v1 cgroup that refused. */
int v1dev_apply(struct daemon *d, const struct lease *l, struct dg_error *err);
/* Denies the rules next has beyond old (NULL: all of next's); best effort. */
void v1dev_undo(struct daemon *d, const struct lease *old, const struct lease *next);
/*
 * Denies in old's v1 cgroup the rules of the nodes gone, and drops them
 * from next, which keeps the rest.
 */
void v1dev_revoke(struct daemon *d, const struct lease *old, struct lease *next,
		  const struct dg_node *gone, size_t n_gone);
/*
 * A driver reload renumbered nodes (refresh.h): allows in next's v1 cgroup
 * each node of add that its list lacks, and records it; a node whose old
 * numbers were devgate's rule gets the same rule under the new ones.
 * Best effort: a refusal is logged and the rule left out.
 */
void v1dev_refresh_add(struct daemon *d, struct lease *next, const struct dg_node *gone,
		       size_t n_gone, const struct dg_node *add, size_t n_add);
/* Denies next's rules of the nodes gone (their numbers may be another driver's now). */
void v1dev_refresh_drop(struct daemon *d, struct lease *next, const struct dg_node *gone,
			size_t n_gone);

#endif
