/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The /dev of each container that a node helper opened, checked and handed
 * devgated with its probe (helper.h), known again later (by mount id and
 * inode) so that node jobs in the same /dev need no helper: devgated makes
 * or removes the nodes itself, by single names relative to that directory.
 * Private to daemon/node.
 */
#ifndef DEVGATE_DEVCACHE_H
#define DEVGATE_DEVCACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "helper/helper.h"
#include "sys/target.h"

/* Whether devgated's own mount namespace has no mount of file system dev now. */
typedef bool (*devcache_unshared_fn)(dev_t dev);

/* At daemon start: watches devgated's own mount table for changes. */
void devcache_init(void);
/* At daemon exit: forgets every container. */
void devcache_fini(void);
/*
 * A number that changes whenever devgated's own mount table has changed
 * since the last call: a /dev approved under another number is no longer
 * known to be absent from it.
 */
uint64_t devcache_gen(void);
/*
 * Opens t's /dev (the caller closes it) when what t's root shows at "dev"
 * is still the directory on the mount kept for t, and devgated's own mount
 * namespace still has no mount of its file system (unshared, asked only
 * when devgated's mount table changed since it was last known); else
 * forgets t and returns -1: the job then goes to a helper.
 */
int devcache_open(const struct target *t, devcache_unshared_fn unshared);
/*
 * Keeps which directory devfd (a helper's /dev, approved while
 * devcache_gen() was gen; the caller keeps and closes it) is, as t's /dev.
 * Replaces what was kept for t's PID; evicts the least recently used when
 * full.
 */
void devcache_put(const struct target *t, int devfd, uint64_t gen);
/*
 * Whether job may go to a kept /dev: nodes (made or removed) in a
 * container's own mount and user namespaces, at single names in the /dev
 * of its root. Bound nodes, a root path (the hook's rootfs), the walk
 * without openat2 and a directory below /dev always go to a helper.
 */
bool devcache_serves(const struct helper_job *job);
/*
 * Does job in the /dev kept for t, if it still may (devcache_open), with
 * the helper's own code (helper_nodes) and no umask, as in a helper; res
 * as a helper's reply. False when it may not: the job goes to a helper.
 */
bool devcache_apply(const struct target *t, const struct helper_job *job, struct node_result *res,
		    devcache_unshared_fn unshared);

#endif
