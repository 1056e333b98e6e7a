/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Denial events: the tally program writes "cgroup X was denied device Y"
 * into the BPF ring buffer (rate-limited there, one per container and device
 * per second). devgated reads it from its epoll loop, names the container
 * from the lease table and the device from the inventory, keeps the last
 * EVENTS_RECENT events and sends each one to clients streaming 'events'.
 */
#ifndef DEVGATE_EVENTS_H
#define DEVGATE_EVENTS_H

#include <stdint.h>

#include "core/daemon.h"
#include "devgate.h"
#include "wire.h"

#define EVENTS_RECENT 256

struct events;

/* Starts reading the ring buffer of d->bg and sets d->events. 0, or -errno with err set. */
int events_open(struct daemon *d, struct dg_error *err);
/* Stops reading and frees the kept events; NULL is fine. */
void events_free(struct events *e);
/* The ring buffer's epoll fd, for devgated's loop. */
int events_fd(const struct events *e);
/* Reads and reports whatever the ring buffer holds now. */
void events_consume(struct daemon *d);
/*
 * Fills out with the recent denials, oldest first: an array in the arena
 * whose strings stay valid until the next events_consume(). 0, or -ENOMEM.
 */
int events_recent(const struct events *e, struct dg_events_reply *out, struct dg_arena *a);
/* How many denial events devgated has read since it started. */
uint64_t events_received(const struct events *e);

/*
 * One denial as clients see it: time (RFC 3339 UTC, from wall_ms, when it
 * happened), container and cgroup (NULL for a cgroup without a lease),
 * cgroup_id, device ("c 195:1"), node and gpu (NULL when unknown), access
 * ("r", "rw", ...). Strings in the arena. 0, or -ENOMEM.
 */
int events_describe(const struct dg_inventory *inv, const struct lease_table *t,
		    const struct dg_event *ev, int64_t wall_ms, struct dg_denied_event *out,
		    struct dg_arena *a);

#endif
