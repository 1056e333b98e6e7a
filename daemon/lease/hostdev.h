/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host devices granted by path (grant --device HOST[:PATH]), the way
 * lxc-device add does. devgated reads the numbers and the type from the
 * host node itself; the client names only paths, and the numbers alone
 * decide.
 *
 * Without the admin's device-allow list (devgate.conf) only the character
 * devices that are safe in any container are granted: /dev/null, /dev/zero,
 * /dev/full, /dev/random, /dev/urandom, /dev/tty, /dev/ptmx, /dev/net/tun
 * and /dev/fuse (hostdev_safe). Every other character device (host memory,
 * consoles, the kernel log, input, USB, watchdogs, TPMs, VFIO, loop control,
 * and any the kernel adds tomorrow) and every block device (a disk) only
 * where device-allow names it. GPU-class devices never: they are --gpu's.
 */
#ifndef DEVGATE_HOSTDEV_H
#define DEVGATE_HOSTDEV_H

#include <stdint.h>
#include <sys/types.h>

#include "errors.h"
#include "gpu.h"
#include "lease.h"

#define HOSTDEV_MAX_ALLOW 32

/*
 * One device-allow entry: a host path (compared by the node it names, char
 * or block) or numbers, a char device's or with "b:" a block device's.
 */
struct hostdev_allow_entry {
	char path[128]; /* "" when by numbers */
	bool block;	/* numbers of a block device (b:MAJ:MIN) */
	uint32_t major;
	int64_t minor; /* -1: any minor of major */
};

struct hostdev_allow {
	struct hostdev_allow_entry e[HOSTDEV_MAX_ALLOW];
	size_t n;
};

/*
 * Replaces the device-allow list with value, "/dev/mem, 1:4, 21:*, b:7:*"
 * (empty: no list). Returns 0, or a negative errno with err set
 * (DG_E_INVALID) and the list as it was.
 */
int hostdev_set_allow(struct hostdev_allow *a, const char *value, struct dg_error *err);
/* Writes the device-allow list as the file has it; "" when none. */
void hostdev_allow_text(const struct hostdev_allow *a, char *buf, size_t len);

/*
 * Returns the usual path of the character device rdev ("/dev/null") when it
 * is one that any container may be given without device-allow, else NULL.
 */
const char *hostdev_safe(dev_t rdev);

/*
 * Returns what rdev is when it is a character device that devgate knows to
 * reach past a container ("the host's physical memory (/dev/mem)"), or NULL
 * when it does not know it (refused all the same unless hostdev_safe or
 * device-allow says otherwise). proc_devices is the text of /proc/devices,
 * for the majors that drivers take at load time; with NULL only fixed majors
 * are known.
 */
const char *hostdev_breakout(dev_t rdev, const char *proc_devices);

/*
 * Parses an access mode, as lease_access_parse, into *ret. Returns 0, or
 * -EINVAL with err set (DG_E_INVALID).
 */
int hostdev_access_parse(const char *s, uint32_t *ret, struct dg_error *err);

/*
 * Turns "HOST[:PATH]" into a lease device in *ret, with access (DG_ACC_*
 * bits) as the mode the gate allows. Returns 0, or a negative errno with
 * err set (DG_E_INVALID or DG_E_PERM).
 *
 * PATH starts after the last ':' that a '/' follows, so "/dev/char/1:7" is
 * a HOST alone. HOST is an absolute host path (symlinks followed) to a
 * character device that is not GPU-class and is safe (hostdev_safe) or
 * named by allow; or to a block device that allow names.
 * PATH (by default HOST) is /dev/NAME with NAME one component, and not a
 * GPU node's name (nvidia*, kfd).
 */
int hostdev_parse(const char *spec, const struct dg_inventory *inv,
		  const struct hostdev_allow *allow, uint32_t access, struct lease_device *ret,
		  struct dg_error *err);

#endif
