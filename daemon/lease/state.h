/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lease records, one file per lease (leases/CGID.json), each replaced
 * atomically with rename, and a lock file so two daemons never share one
 * directory. The records describe kernel objects (grants, gates, pins)
 * that outlive devgated but not a reboot, so they live on tmpfs
 * (/run/devgate/state) and are never fsync'd: a daemon crash loses no
 * written page, and after a reboot there is nothing left to describe.
 *
 * Two more kinds of file make every crash recoverable (reconcile.c):
 *   CGID.pending   a grant in flight: the lease it will make, written before
 *                  the first kernel change, removed once the record commits;
 *                  found at start, the grant is rolled back.
 *   CGID.revoking  a full revoke in flight: its record is already gone;
 *                  found at start, the revoke is finished, never undone.
 *   CGID.moving    a move in flight from CGID: what moves, and to which
 *                  cgroup; found at start, finished if the destination's
 *                  record holds it, given back to the source if not.
 * A record that does not parse is moved to leases/broken/ and counted.
 */
#ifndef DEVGATE_STATE_H
#define DEVGATE_STATE_H

#include "errors.h"
#include "lease.h"

#include "paths.h"

struct state;

/*
 * legacy_dir: where an older devgated kept durable records
 * (/var/lib/devgate); its records move here once, so an upgrade keeps the
 * leases of running containers. NULL: none.
 */
int state_open(const char *dir, const char *legacy_dir, struct state **ret, struct dg_error *err);
void state_close(struct state *s);

/* Loads every lease; damaged files are moved aside (see state_broken()). */
int state_load(struct state *s, struct lease_table *out, struct dg_error *err);
/* Records moved to leases/broken/ since start. */
size_t state_broken(const struct state *s);
int state_save(struct state *s, const struct lease *l);
int state_remove(struct state *s, uint64_t cgid);

int state_pending_save(struct state *s, const struct lease *next);
int state_pending_clear(struct state *s, uint64_t cgid);
/* Every grant in flight, as the lease it was to make. */
int state_pending_load(struct state *s, struct lease_table *out);

/* l: the lease as it was before the revoke (what must go). */
int state_revoking_mark(struct state *s, const struct lease *l);
int state_revoking_clear(struct state *s, uint64_t cgid);
/* Every full revoke in flight, as the lease it revokes. */
int state_revoking_load(struct state *s, struct lease_table *out);

/* gone: the part of the source's lease that moves; to: the destination's cgroup. */
int state_moving_mark(struct state *s, const struct lease *gone, uint64_t to);
int state_moving_clear(struct state *s, uint64_t cgid);
/* Calls fn for every move in flight; an unreadable journal is dropped. */
int state_moving_each(struct state *s,
		      void (*fn)(void *data, const struct lease *gone, uint64_t to), void *data);

#endif
