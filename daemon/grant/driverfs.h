/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver's user space in a container that asked for it (grant --driver
 * CAPS, devgate.io/driver): the host's libraries and tools of the running
 * module's version, bind-mounted read-only at the host's paths, each
 * library also at its soname (what ld.so looks for, with or without an
 * ld.so.cache), so dlopen("libcuda.so.1") finds it in the image's default
 * library path. Taken off with the lease's last GPU.
 */
#ifndef DEVGATE_DRIVERFS_H
#define DEVGATE_DRIVERFS_H

#include "core/daemon.h"
#include "errors.h"
#include "lease/lease.h"
#include "node/nodes.h"
#include "sys/target.h"

/* Mounts caps' files into t; records them in l (driver_caps, driver_files). */
int driverfs_add(struct daemon *d, const struct target *t, const struct node_opts *o,
		 struct lease *l, unsigned int caps, struct dg_error *err);
/* Takes off l's driver files from index from on (0: all of them). */
void driverfs_remove(const struct target *t, const struct lease *l, size_t from);

#endif
