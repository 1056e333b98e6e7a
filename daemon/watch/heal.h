/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Healing a displaced gate: putting devgate's gate back on a leased cgroup
 * when someone else changed its device programs (systemd's daemon-reload,
 * runc update). Learned of at once from attach events where the kernel
 * allows tracing programs, otherwise by the heal check every heal-ms, and
 * in any case by the periodic re-check.
 */
#ifndef DEVGATE_HEAL_H
#define DEVGATE_HEAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/daemon.h"

/* Makes the heal check's timer (d->heal_fd) and arms it. */
int heal_init(struct daemon *d);
void heal_fini(struct daemon *d);
/* A lease was granted: wakes the heal check if it sleeps for want of leases. */
void heal_wake(struct daemon *d);
/* The heal timer fired: compares a batch of leases' device programs with the last seen. */
void heal_tick(struct daemon *d);
/*
 * Periodic, after watch_tick: re-pins the maps, sweeps stray counters and
 * re-checks the gates of a batch of leases.
 */
void heal_recheck(struct daemon *d);
/*
 * cgroup v1: puts back the rules of lease l that its devices list lost (a
 * runtime rewrote it); full: into every sub-cgroup too. reconcile.c calls
 * it at start, the heal check and the periodic re-check after.
 */
void heal_cgroup1(struct daemon *d, struct lease *l, bool full);
/* attach_watch_fn: someone else (pid) changed cgroup_id's device programs at ts_ns. */
void heal_attach_changed(void *ctx, uint64_t cgroup_id, uint32_t pid, uint64_t ts_ns);
/* attach_watch_replace_fn: someone asked to replace program old_id by new_id on cgroup_id. */
void heal_attach_replaced(void *ctx, uint64_t cgroup_id, uint32_t old_id, uint32_t new_id);

#endif
