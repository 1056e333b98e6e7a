/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver's user space in a container that asked for it (grant --driver
 * CAPS, or the devgate.io/driver annotation). The host's libraries and
 * tools of the running kernel module's version are bind-mounted read-only
 * at the host's paths, and each library also at its soname (the name ld.so
 * looks for, with or without an ld.so.cache), so that
 * dlopen("libcuda.so.1") finds it in the image's default library path.
 * The files are taken off again with the lease's last GPU.
 */
#ifndef DEVGATE_DRIVERFS_H
#define DEVGATE_DRIVERFS_H

#include <stddef.h>

#include "errors.h"
#include "lease/lease.h"
#include "lease/state.h"
#include "node/nodes.h"
#include "sys/target.h"

/*
 * Mounts the driver files of capabilities caps (DG_DRV_*) into t's
 * container, reading them under host_root, and records them in l
 * (driver_caps, driver_files, and the directories made: driver_dirs).
 * Before the mounts and after them l is written as the grant's journal
 * (state_pending_save): a crash in between leaves nothing that
 * driverfs_rollback() cannot find. A path where the image has a file of
 * its own is left alone; devgate's own mount of that very file, left by a
 * crash, becomes l's. Fails with err set, and l as it was, when the host
 * has no driver or no file of those capabilities, or a mount fails.
 */
int driverfs_add(const char *host_root, struct state *state, const struct target *t,
		 const struct node_opts *o, struct lease *l, unsigned int caps,
		 struct dg_error *err);
/*
 * Unmounts l's driver files from t's container, starting at index from of
 * l->driver_files (0: all of them), and removes the directories l made
 * that are empty then. Best effort: a failure is logged.
 */
void driverfs_remove(const struct target *t, const struct lease *l, size_t from);
/*
 * Takes out of t's container what the journal of a grant (pending) names
 * beyond its committed lease (NULL: none): devgate's mounts at its paths,
 * never the image's files, and its directories. Returns how many came out.
 */
size_t driverfs_rollback(const struct target *t, const struct lease *pending,
			 const struct lease *committed);
/*
 * Finds in the kernel's mount table of t's container devgate's mounts of
 * the host's driver files (unbindable, read-only, binding one of them)
 * that l does not record, and takes them off. Returns how many.
 */
size_t driverfs_sweep(const char *host_root, const struct target *t, const struct lease *l);

#endif
