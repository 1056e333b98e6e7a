/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Noticing that a leased container ended. Changes of each lease's
 * cgroup.events wake devgated through inotify, so a lease is released as
 * soon as its cgroup empties; a periodic tick (recheck-ms) catches anything
 * inotify missed. An ended container goes to d->hooks.cgroup_ended.
 */
#ifndef DEVGATE_WATCH_H
#define DEVGATE_WATCH_H

#include "core/daemon.h"

/* Makes the inotify fd and the periodic timer (d->inotify_fd, d->timer_fd). */
int watch_init(struct daemon *d);
void watch_fini(struct daemon *d);
/* Watches l's cgroup.events (a lease was added); the periodic tick covers a failure. */
int watch_add(struct daemon *d, struct lease *l);
/* Stops watching l's cgroup (a lease goes or moves). */
void watch_del(struct daemon *d, struct lease *l);
/* The inotify fd is readable: hands the leases whose container ended to cgroup_ended. */
void watch_handle(struct daemon *d);
/* d->v1exit_fd is readable (cgroup v1 alone): checks the leases whose watched process exited. */
void watch_v1_handle(struct daemon *d);
/* The periodic timer fired: checks a batch of leases for an end inotify missed. */
void watch_tick(struct daemon *d);
/*
 * Before a grant is refused for want of a GPU: releases the leases whose
 * container has ended unseen, except except_cgid's. Returns how many.
 */
size_t watch_release_ended(struct daemon *d, uint64_t except_cgid);

#endif
