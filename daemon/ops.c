// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "grant.h"
#include "jsonutil.h"
#include "ops.h"
#include "version.h"

typedef int (*op_fn)(struct daemon *d, json_object *args, json_object **ret,
		     struct dg_error *err);

static int op_ping(struct daemon *d, json_object *args, json_object **ret, struct dg_error *err)
{
	json_object *o = json_object_new_object();

	(void)args;
	(void)err;
	json_object_object_add(o, "version", json_object_new_string(DEVGATE_VERSION));
	json_object_object_add(o, "pid", json_object_new_int(getpid()));
	json_object_object_add(o, "leases", json_object_new_int((int)d->leases.n));
	json_object_object_add(o, "hook_allow_env", json_object_new_boolean(d->cfg.hook_env));
	*ret = o;
	return 0;
}

static json_object *holders_json(struct daemon *d, const struct dg_gpu *gpu)
{
	json_object *a = json_object_new_array();

	for (size_t i = 0; i < d->leases.n; i++) {
		const struct lease *l = d->leases.v[i];
		const struct lease_gpu *g = lease_find_gpu(l, gpu->uuid);
		json_object *h;

		if (!g)
			continue;
		h = json_object_new_object();
		json_add_str(h, "container", l->container);
		json_add_str(h, "cgroup", l->cgroup);
		json_object_object_add(h, "pid", json_object_new_int(l->pid));
		json_object_object_add(h, "shared", json_object_new_boolean(g->shared));
		json_object_array_add(a, h);
	}
	return a;
}

static const char *gpu_state(const struct dg_gpu *gpu, json_object *holders)
{
	size_t n = json_object_array_length(holders);

	if (gpu->problem[0])
		return "unusable";
	if (n == 0)
		return "free";
	return json_object_get_boolean(
		       json_object_object_get(json_object_array_get_idx(holders, 0), "shared"))
		       ? "shared"
		       : "held";
}

json_object *ops_inventory_json(struct daemon *d, bool free_only)
{
	json_object *o = json_object_new_object(), *gpus = json_object_new_array();
	json_object *driver = json_object_new_object();

	for (size_t i = 0; i < d->inv->n_gpus; i++) {
		const struct dg_gpu *gpu = &d->inv->gpus[i];
		json_object *holders = holders_json(d, gpu), *g;
		const char *state = gpu_state(gpu, holders);

		if (free_only && strcmp(state, "free") != 0) {
			json_object_put(holders);
			continue;
		}
		g = gpu_to_json(d->inv, gpu);
		json_object_object_add(g, "state", json_object_new_string(state));
		json_object_object_add(g, "holders", holders);
		json_object_array_add(gpus, g);
	}
	json_object_object_add(o, "host_root", json_object_new_string(d->inv->host_root));
	json_object_object_add(o, "free_only", json_object_new_boolean(free_only));
	json_object_object_add(driver, "loaded", json_object_new_boolean(d->inv->majors.has_nvidia));
	if (d->inv->majors.has_nvidia)
		json_object_object_add(driver, "nvidia_major",
				       json_object_new_int64(d->inv->majors.nvidia));
	if (d->inv->majors.has_uvm)
		json_object_object_add(driver, "uvm_major", json_object_new_int64(d->inv->majors.uvm));
	json_object_object_add(o, "driver", driver);
	json_object_object_add(o, "gpus", gpus);
	json_object_object_add(o, "control_nodes", ctl_nodes_to_json(d->inv));
	if (d->inv->ctl_problem[0])
		json_object_object_add(o, "control_problem",
				       json_object_new_string(d->inv->ctl_problem));
	return o;
}

static int op_list(struct daemon *d, json_object *args, json_object **ret, struct dg_error *err)
{
	(void)err;
	*ret = ops_inventory_json(d, json_get_bool(args, "free"));
	return 0;
}

static int op_status(struct daemon *d, json_object *args, json_object **ret, struct dg_error *err)
{
	json_object *o = json_object_new_object(), *leases = json_object_new_array();

	(void)args;
	(void)err;
	for (size_t i = 0; i < d->leases.n; i++)
		json_object_array_add(leases, grant_lease_json(d, d->leases.v[i]));
	json_object_object_add(o, "leases", leases);
	*ret = o;
	return 0;
}

static int op_watch(struct daemon *d, json_object *args, json_object **ret, struct dg_error *err)
{
	(void)d;
	(void)args;
	(void)err;
	*ret = json_object_new_object();
	json_object_object_add(*ret, "watching", json_object_new_boolean(1));
	return 0;
}

static const op_fn handlers[DG_OP_MAX] = {
	[DG_OP_PING] = op_ping,	    [DG_OP_LIST] = op_list,	[DG_OP_GRANT] = grant_request,
	[DG_OP_REVOKE] = grant_revoke, [DG_OP_STATUS] = op_status, [DG_OP_WATCH] = op_watch,
};

int ops_dispatch(struct daemon *d, enum dg_op op, json_object *args, json_object **ret,
		 struct dg_error *err)
{
	if ((int)op < 0 || op >= DG_OP_MAX || !handlers[op])
		return dg_error_set(err, DG_E_PROTOCOL, ENOSYS, "operation not supported");
	return handlers[op](d, args, ret, err);
}
