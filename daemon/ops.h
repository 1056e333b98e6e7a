/* SPDX-License-Identifier: Apache-2.0 */
#ifndef DEVGATE_OPS_H
#define DEVGATE_OPS_H

#include <json-c/json.h>

#include "daemon.h"
#include "protocol.h"

/*
 * Runs one validated request; *ret is the reply's result object. Returns 1
 * when the connection becomes a stream (watch, events with follow).
 */
int ops_dispatch(struct daemon *d, enum dg_op op, json_object *args, json_object **ret,
		 struct dg_error *err);

/* The inventory with each GPU's holders, as 'list' returns it. */
json_object *ops_inventory_json(struct daemon *d, bool free_only);
/* "free", "held", "shared" or "unusable". */
const char *ops_gpu_state(const struct daemon *d, const struct dg_gpu *gpu);

#endif
