/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Finding devgate's shared maps without their pins: in the programs on the
 * leased cgroups, or under the pin names of an earlier release. Private to
 * gate/.
 */
#ifndef DEVGATE_ADOPT_H
#define DEVGATE_ADOPT_H

#include <stdbool.h>
#include <stddef.h>

#include "gateobj.h"

/*
 * With the grants map's pin gone, fills fds (by enum shared_map, left -1
 * where not found) with the maps that devgate's programs on the cgroups
 * cgfds still use. Returns true when it found the grants map: the maps of
 * a gate on a cgroup that a lease record names are devgated's own.
 */
bool adopt_live_maps(const char *pin_root, const int *cgfds, size_t n, int fds[SHARED_MAPS]);
/*
 * Fills the fds still -1 of maps pinned under the name an earlier release
 * gave them, where no pin has the current name. Returns how many it filled.
 */
int adopt_old_pins(const char *pin_root, int fds[SHARED_MAPS]);

#endif
