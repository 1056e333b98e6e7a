/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Start-up reconciliation: the state directory is the truth, and the kernel
 * is made to match it. Leases of containers that ended are released; live
 * ones are adopted with their pinned gates; grants, pins and counters that
 * no lease explains are removed. One log line per correction.
 */
#ifndef DEVGATE_RECONCILE_H
#define DEVGATE_RECONCILE_H

#include "core/daemon.h"

/* Returns the number of corrections made, or a negative errno. */
int reconcile(struct daemon *d);

#endif
