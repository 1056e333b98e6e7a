/* SPDX-License-Identifier: Apache-2.0 */
/* doctor --containers: the containers devgated finds, and how devgate would gate each. */
#ifndef DEVGATE_CLI_DOCTOR_CT_H
#define DEVGATE_CLI_DOCTOR_CT_H

#include <json-c/json.h>
#include <stdbool.h>

#include "gpu.h"

/*
 * Asks devgated at socket for every running container its runtimes list,
 * and says for each which mechanism a grant would use: "v2 BPF gate", "v2
 * gate + v1 devices PATH", or "cannot: REASON" (read-only checks; nothing
 * is granted). cg_mount: the cgroup v2 mount (NULL: none); inv: the GPUs
 * whose nodes a v1 parent must allow (NULL: none known). Returns the
 * containers as a JSON array, and in *failed whether any cannot be gated;
 * message and hint summarise. NULL on failure, with message saying why.
 */
json_object *doctor_containers(const char *socket, unsigned int timeout_s, const char *cg_mount,
			       const struct dg_inventory *inv, bool *failed, char *message,
			       size_t n, char *hint, size_t hn);

/* The v1 devices hierarchy as doctor reaches it: mountinfo's last one with devices.list. */
bool doctor_v1_usable(const char *path);

#endif
