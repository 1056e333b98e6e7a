/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leases that expire (grant --ttl). One CLOCK_REALTIME timer is armed for
 * the earliest expiry in the table, never a poll of every lease: a lease
 * change can only bring that time forward (expiry_note), and when the timer
 * fires the expired leases go through d->hooks.lease_expired and the timer
 * is armed again for the earliest left. A lease that was extended or went
 * before its time costs one early wake-up, which finds nothing to do.
 */
#ifndef DEVGATE_EXPIRY_H
#define DEVGATE_EXPIRY_H

#include "core/daemon.h"

int expiry_init(struct daemon *d);
void expiry_fini(struct daemon *d);
/* A lease changed: arm the timer earlier if its expiry comes first. */
void expiry_note(struct daemon *d, const struct lease *l);
/*
 * Revokes every lease whose expiry has passed and arms the timer for the
 * next one; at start (after reconcile) and when the timer fires.
 */
void expiry_run(struct daemon *d);

#endif
