/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host character devices granted by path (grant --device HOST[:PATH]), the
 * way lxc-device add does. devgated reads the numbers from the host node
 * itself; the client names only paths.
 */
#ifndef DEVGATE_HOSTDEV_H
#define DEVGATE_HOSTDEV_H

#include "errors.h"
#include "gpu.h"
#include "lease.h"

/*
 * "HOST[:PATH]" -> a lease device. The PATH separator is the last ':'
 * followed by '/', so "/dev/char/1:7" is a HOST alone. HOST: an absolute
 * host path, symlinks followed, to a character device that is not of a
 * GPU-class major (majors). PATH (default: HOST): /dev/NAME with one
 * component NAME, not "nvidia*" (GPU nodes' names). DG_E_INVALID otherwise.
 */
int hostdev_parse(const char *spec, const struct dg_inventory *inv, struct lease_device *ret,
		  struct dg_error *err);

#endif
