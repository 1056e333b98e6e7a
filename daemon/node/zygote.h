/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The zygote: a small process started once, before devgated loads its BPF
 * objects and grows, whose one job is to fork node helpers for it. So
 * devgated itself never forks per request: no copy of its page tables, and
 * no copy-on-write faults in devgated while a helper lives. It is
 * devgated-node (node_main.c), a static program devgated executes from a
 * sealed memfd, so a helper copies a few mappings instead of every library
 * devgated links; where that cannot run, a fork of devgated. Helpers stay
 * single-use; the zygote reads nothing from devgated but its setup and
 * one-byte requests, and dies with it.
 */
#ifndef DEVGATE_ZYGOTE_H
#define DEVGATE_ZYGOTE_H

#include <linux/filter.h>

#include "helper/forkloop.h"

/*
 * Starts the zygote: devgated-node, whose helpers run helper_main() under
 * filter; where it cannot be executed, a fork of devgated whose children
 * run fn. 0, or -errno: the caller then forks helpers itself.
 */
int zygote_start(zygote_child_fn fn, const struct sock_fprog *filter);
/* Stops the zygote (it exits when its socket closes) and waits for it. */
void zygote_stop(void);
/*
 * Asks the zygote for the next child and returns at once: it forks while
 * devgated goes on, and child_spawn() then only collects it.
 */
void child_order(void);
/*
 * Gets a new child into *ret: from the zygote (collecting the one ordered
 * earlier, if any), or, when the zygote is gone, forked by devgated
 * itself. 0, or -errno.
 */
int child_spawn(struct child *ret);
/*
 * Ends child c: SIGKILL if it still runs (a helper replies as its last act,
 * so nothing is lost), waits for it if devgated forked it, and closes its
 * descriptors. Nothing happens for an empty c.
 */
void child_end(struct child *c);

#endif
