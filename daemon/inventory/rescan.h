/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Keeping the inventory true while devgated runs. The kernel says when a
 * GPU appears, falls off the bus or its driver comes and goes (uevents on a
 * NETLINK_KOBJECT_UEVENT socket); SIGHUP and 'devgatectl rescan' ask too.
 * Each re-reads the host and swaps the inventory: a GPU that vanished stays
 * listed, unusable, with its leases kept and their holders told; a new one
 * is grantable at once.
 */
#ifndef DEVGATE_RESCAN_H
#define DEVGATE_RESCAN_H

#include <stdbool.h>
#include <stddef.h>

#include "core/daemon.h"
#include "wire.h"

/* The uevent socket in d->uevent_fd; -errno (devgated runs on without it). */
int rescan_open(struct daemon *d);
void rescan_close(struct daemon *d);
/* Reads the pending uevents; re-reads the inventory when one is about a GPU. */
void rescan_uevents(struct daemon *d);

/* Whether one kernel uevent (NUL-separated KEY=VALUE) is about a GPU or its driver. */
bool rescan_uevent_relevant(const char *msg, size_t len);

/*
 * Re-reads the inventory now. out (may be NULL) gets what changed, its
 * strings in a. On failure the old inventory stays.
 */
int rescan_run(struct daemon *d, const char *why, struct dg_rescan_reply *out, struct dg_arena *a,
	       struct dg_error *err);

#endif
