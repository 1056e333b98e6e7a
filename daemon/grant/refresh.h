/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A driver reload renumbers what devgate granted: nvidia-uvm and
 * nvidia-caps take new dynamic majors, a GPU may come back with another
 * minor. Each lease records the majors its grants and nodes were made with
 * (lease.majors) and each GPU's minor; a refresh moves a lease from those
 * numbers to the inventory's, in this order:
 *
 *   1. grants map += the new numbers, and v1 devices.allow where the
 *      lease has a v1 cgroup             (refresh.grants)
 *   2. the container's stale nodes out, the new ones in (refresh.nodes)
 *   3. grants map -= the old numbers, and v1 devices.deny of devgate's
 *      rules under them                  (refresh.old)
 *   4. the record rewritten (rename)      <- the commit (refresh.record)
 *
 * Every step is idempotent, so a crash before the commit is finished at the
 * next start: reconcile finds the record's numbers behind the inventory and
 * runs the same refresh before it adopts the lease.
 */
#ifndef DEVGATE_REFRESH_H
#define DEVGATE_REFRESH_H

#include <stdbool.h>

#include "core/daemon.h"

/* Whether the lease's recorded numbers differ from d->inv's; never while the driver is gone. */
bool refresh_due(const struct daemon *d, const struct lease *l);
/*
 * Moves l to d->inv's numbers (see above); l is updated in place, in the
 * table. 1 refreshed, 0 nothing to do, -errno when its nodes could not be
 * replaced (the grants moved; the record stays behind, tried again later).
 */
int refresh_lease(struct daemon *d, struct lease *l);
/* Every lease that is due; returns how many failed. */
size_t refresh_leases(struct daemon *d);

#endif
