/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Policy reload (SIGHUP, devgatectl reload): devgate.conf is read again with
 * the command line over it, as at start, and its policy (gpu-allow,
 * aliases, profiles, device-allow) replaces the one in force. A file that
 * does not parse is refused whole: the old policy stays. gpu-allow marks
 * GPUs excluded again; a GPU that becomes excluded while held keeps its
 * leases (listed excluded, with its holders) and is refused to new grants.
 * Other keys need a restart; a reload names those that changed.
 */
#ifndef DEVGATE_RELOAD_H
#define DEVGATE_RELOAD_H

#include <stddef.h>

#include "errors.h"

struct daemon;

struct reload_result {
	size_t excluded;   /* GPUs excluded now */
	size_t newly_held; /* of those, held GPUs that became excluded */
	size_t aliases, profiles, device_allow;
	char restart[512]; /* keys that changed but need a restart, ", " apart */
};

/* why: "SIGHUP" or "devgatectl reload", for the log. DG_E_CONFIG: nothing changed. */
int reload_run(struct daemon *d, const char *why, struct reload_result *out, struct dg_error *err);

#endif
