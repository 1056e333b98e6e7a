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
 *                  the first kernel change (and again before and after the
 *                  driver's files are mounted, naming them), removed once the
 *                  record commits; found at start, the grant is rolled back.
 *   CGID.revoking  a full revoke in flight: its record is already gone;
 *                  found at start, the revoke is finished, never undone.
 *   CGID.moving    a move in flight from CGID: what moves, and to which
 *                  cgroup; found at start, finished if the destination's
 *                  record holds it, given back to the source if not.
 * A record that does not parse is moved to leases/broken/ and counted.
 * What a record holds, and how older ones read, is record.c's.
 */
#ifndef DEVGATE_STATE_H
#define DEVGATE_STATE_H

#include "errors.h"
#include "lease.h"

#include "paths.h"

struct state;

/*
 * Opens the state directory dir (creating it) and takes its lock, so that
 * two daemons never share one. Returns 0 with the state in *ret, or a
 * negative errno with err set. legacy_dir is where an older devgated kept
 * durable records (/var/lib/devgate): its records move here once, so that
 * an upgrade keeps the leases of running containers; NULL when there is none.
 */
int state_open(const char *dir, const char *legacy_dir, struct state **ret, struct dg_error *err);
/* Closes s, which releases its lock; s may be NULL. */
void state_close(struct state *s);

/*
 * Adds the lease of every record in leases/ to out. A record that does not
 * load is moved to leases/broken/ (see state_broken) and the rest load.
 * Returns 0, or a negative errno with err set when leases/ cannot be read
 * or memory ran out. s keeps a pointer to out, the table devgated serves
 * from: when the directory is removed or moved away while devgated runs,
 * the next write makes it again and writes the record of every lease in
 * out again (logged as a warning).
 */
int state_load(struct state *s, struct lease_table *out, struct dg_error *err);
/* Returns how many records were moved to leases/broken/ since start. */
size_t state_broken(const struct state *s);
/* Writes l's record, replacing the one before at once. Returns 0 or a negative errno. */
int state_save(struct state *s, const struct lease *l);
/* Removes the record of cgroup cgid (none is fine). Returns 0 or a negative errno. */
int state_remove(struct state *s, uint64_t cgid);

/* Writes next, the lease a grant in flight will make, as its journal. 0 or a negative errno. */
int state_pending_save(struct state *s, const struct lease *next);
/* Removes the grant journal of cgroup cgid (none is fine). 0 or a negative errno. */
int state_pending_clear(struct state *s, uint64_t cgid);
/*
 * Commits next, whose journal state_pending_save wrote: its record, and the
 * journal's end. When the journal is next byte for byte it is renamed into
 * place (no write); otherwise the record is written and the journal removed.
 * Returns 0 or a negative errno.
 */
int state_pending_commit(struct state *s, const struct lease *next);
/*
 * Adds to out every grant in flight, as the lease it was to make. A journal
 * that does not load is dropped: it was never written whole, so nothing
 * was done after it. Returns 0 or a negative errno.
 */
int state_pending_load(struct state *s, struct lease_table *out);

/*
 * Writes the journal of a full revoke of l, the lease as it was before (what
 * must go). Returns 0 or a negative errno.
 */
int state_revoking_mark(struct state *s, const struct lease *l);
/*
 * Writes the journal of a revoke from gone's lease to next (gone: what
 * goes, as from lease_minus). A partial one journals next, whose record it
 * becomes at state_revoke_end; a full one moves the record itself aside as
 * the journal when it is gone's, byte for byte. One write at most.
 * Returns 0 or a negative errno.
 */
int state_revoke_begin(struct state *s, const struct lease *gone, const struct lease *next);
/* The record step of a revoke to next: removed, written, or left to state_revoke_end. */
int state_revoke_record(struct state *s, const struct lease *next);
/* Ends a revoke to next: its record in place (by a rename when it can) and no journal. */
int state_revoke_end(struct state *s, const struct lease *next);
/* Removes the revoke journals of cgroup cgid (none is fine). 0 or a negative errno. */
int state_revoking_clear(struct state *s, uint64_t cgid);
/* Adds to out every full revoke in flight, as the lease it revokes; as state_pending_load. */
int state_revoking_load(struct state *s, struct lease_table *out);

/*
 * Writes the journal of a move: gone is the part of the source's lease that
 * moves, to the destination's cgroup id. Returns 0 or a negative errno.
 */
int state_moving_mark(struct state *s, const struct lease *gone, uint64_t to);
/* Removes the move journal of source cgroup cgid (none is fine). 0 or a negative errno. */
int state_moving_clear(struct state *s, uint64_t cgid);
/*
 * Calls fn for every move in flight, with what moves and where to. A
 * journal that does not load is dropped. Returns 0 or a negative errno.
 */
int state_moving_each(struct state *s,
		      void (*fn)(void *data, const struct lease *gone, uint64_t to), void *data);

#endif
