/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Noticing that a container ended or that its runtime changed its device
 * programs. cgroup.events changes wake us through inotify, so a lease is
 * released as soon as the cgroup empties; a periodic tick re-applies gates
 * that a runtime replaced (runc update) and catches anything inotify missed.
 */
#ifndef DEVGATE_WATCH_H
#define DEVGATE_WATCH_H

#include "core/daemon.h"

int watch_init(struct daemon *d);
void watch_fini(struct daemon *d);
int watch_add(struct daemon *d, struct lease *l);
void watch_del(struct daemon *d, struct lease *l);
/* inotify fd readable. */
void watch_handle(struct daemon *d);
/* Timer fired. */
void watch_tick(struct daemon *d);
/* Heal timer fired: compares every lease's device programs with the last seen. */
void watch_heal_tick(struct daemon *d);
/* attach_watch_fn: someone else (PID) changed cgroup_id's device programs at ts_ns. */
void watch_attach_changed(void *ctx, uint64_t cgroup_id, uint32_t pid, uint64_t ts_ns);
/* attach_watch_replace_fn: someone asked to replace old_id by new_id on cgroup_id. */
void watch_attach_replaced(void *ctx, uint64_t cgroup_id, uint32_t old_id, uint32_t new_id);
/* Before a grant is refused for want of a GPU: release leases whose container
 * has ended unseen. Returns how many. */
size_t watch_release_ended(struct daemon *d, uint64_t except_cgid);

#endif
