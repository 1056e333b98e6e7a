/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proof before "granted": from inside the container's cgroups, each
 * granted GPU-class node must reach its driver and a GPU-class node it was
 * not granted must not be opened by devgate's grants. Private to
 * daemon/grant/ (txn.c calls it before a grant's record is saved, so a
 * failure is rolled back whole).
 */
#ifndef DEVGATE_PROOF_H
#define DEVGATE_PROOF_H

#include <stddef.h>

#include "core/daemon.h"
#include "errors.h"
#include "gpu.h"
#include "lease/lease.h"
#include "sys/target.h"

/*
 * Proves lease next's nodes (n of them) on t's container, unless its device
 * layers (the device programs in effect on its cgroup, its v1 devices
 * list) are those next->proof_fp says were proven last. On success
 * next->proof_fp is the layers' fingerprint. Fails with err set
 * (DG_E_UNPROVEN) naming the layer that still denies, or why the proof
 * could not run; the caller then undoes the grant. effective: the digest
 * of the programs in effect on t's cgroup as the gate step just read them
 * (0: not read), spared a query again when the process is there.
 */
int proof_check(struct daemon *d, const struct target *t, struct lease *next,
		const struct dg_node *nodes, size_t n, uint64_t effective, struct dg_error *err);

#endif
