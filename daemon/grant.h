/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Grant, revoke and release: the transactions that change who holds what.
 *
 * Ordering makes every crash recoverable by reconcile.c, which makes the
 * kernel match the state directory:
 *   grant:   nodes -> grants map -> gates -> state   (state last)
 *   revoke:  state -> grants map -> nodes -> gates   (state first)
 * so the kernel never holds less than the state says after an
 * acknowledged change, and anything extra is removed on restart.
 */
#ifndef DEVGATE_GRANT_H
#define DEVGATE_GRANT_H

#include <json-c/json.h>

#include "daemon.h"

int grant_request(struct daemon *d, json_object *args, json_object **ret, struct dg_error *err);
int grant_revoke(struct daemon *d, json_object *args, json_object **ret, struct dg_error *err);
/* The container ended: drop its lease and everything devgate put on it. */
void grant_release(struct daemon *d, uint64_t cgid, const char *why);

/* A lease as shown to clients: GPUs expanded from the inventory. */
json_object *grant_lease_json(const struct daemon *d, const struct lease *l);

#endif
