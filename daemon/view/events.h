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

/* Sets d->events; reads the ring buffer of d->bg. */
int events_open(struct daemon *d, struct dg_error *err);
void events_free(struct events *e);
/* The ring buffer's epoll fd, for devgated's loop. */
int events_fd(const struct events *e);
/* Reads whatever the ring buffer holds. */
void events_consume(struct daemon *d);
/* The recent events, oldest first: a new array. */
/* The recent denials, oldest first; valid until the next events_consume(). */
int events_recent(const struct events *e, struct dg_events_reply *out, struct dg_arena *a);
uint64_t events_received(const struct events *e);

/*
 * One event as clients see it: time (RFC 3339 UTC), container and cgroup
 * (null for a cgroup without lease), cgroup_id, device ("c 195:1"), node and
 * gpu (null when unknown), access ("r", "rw", ...). wall_ms is when it
 * happened.
 */
/* A denial as clients see it: lease, node and GPU names filled in. */
int events_describe(const struct daemon *d, const struct dg_event *ev, int64_t wall_ms,
		    struct dg_denied_event *out, struct dg_arena *a);

#endif
