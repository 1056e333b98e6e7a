/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lease records: a lease as JSON, the form state.c keeps in the state
 * directory (leases/CGID.json, and the journals CGID.pending, CGID.revoking
 * and CGID.moving). One schema table per record struct (record.c) both
 * writes and reads them, with common/schema.c's encoder and decoder.
 */
#ifndef DEVGATE_RECORD_H
#define DEVGATE_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "lease.h"

/* Returns the record of l, or NULL when out of memory. */
json_object *record_encode(const struct lease *l);
/*
 * Reads the record o into a new lease (*ret, for lease_free) and returns 0.
 * Returns -EINVAL when o is not a valid record, with why saying what is
 * wrong, or -ENOMEM.
 */
int record_decode(json_object *o, struct lease **ret, char *why, size_t why_len);

/*
 * A move's journal: {"to": "CGID", "lease": the record of the part that
 * moves}. Encoding returns NULL when out of memory; decoding returns as
 * record_decode, and the destination's cgroup id in *to.
 */
json_object *record_move_encode(const struct lease *gone, uint64_t to);
int record_move_decode(json_object *o, struct lease **ret, uint64_t *to, char *why, size_t why_len);

#endif
