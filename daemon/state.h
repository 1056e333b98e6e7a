/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The state directory: one file per lease, leases/CGID.json, each replaced
 * atomically (write, fsync, rename, fsync dir), and a lock file so two
 * daemons never share one directory.
 */
#ifndef DEVGATE_STATE_H
#define DEVGATE_STATE_H

#include "errors.h"
#include "lease.h"

#include "paths.h"

struct state;

int state_open(const char *dir, struct state **ret, struct dg_error *err);
void state_close(struct state *s);

/* Loads every lease; a file that does not parse is an error naming it. */
int state_load(struct state *s, struct lease_table *out, struct dg_error *err);
int state_save(struct state *s, const struct lease *l);
int state_remove(struct state *s, uint64_t cgid);

#endif
