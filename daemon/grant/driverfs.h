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
#include "node/nodes.h"
#include "sys/target.h"

/*
 * Mounts the driver files of capabilities caps (DG_DRV_*) into t's
 * container, reading them under host_root, and records them in l
 * (driver_caps and driver_files). Fails with err set when the host has no
 * driver or no file of those capabilities, or a mount fails.
 */
int driverfs_add(const char *host_root, const struct target *t, const struct node_opts *o,
		 struct lease *l, unsigned int caps, struct dg_error *err);
/*
 * Unmounts l's driver files from t's container, starting at index from of
 * l->driver_files (0: all of them). Best effort: a failure is logged.
 */
void driverfs_remove(const struct target *t, const struct lease *l, size_t from);

#endif
