// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "cleanup.h"
#include "events.h"
#include "grant.h"
#include "jsonutil.h"
#include "metrics.h"
#include "ops.h"
#include "util.h"
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

const char *ops_gpu_state(const struct daemon *d, const struct dg_gpu *gpu)
{
	if (gpu->problem[0])
		return "unusable";
	/* Exclusive and shared holders never mix: the first holder tells. */
	for (size_t i = 0; i < d->leases.n; i++) {
		const struct lease_gpu *g = lease_find_gpu(d->leases.v[i], gpu->uuid);

		if (g)
			return g->shared ? "shared" : "held";
	}
	return "free";
}

json_object *ops_inventory_json(struct daemon *d, bool free_only)
{
	json_object *o = json_object_new_object(), *gpus = json_object_new_array();
	json_object *driver = json_object_new_object();

	for (size_t i = 0; i < d->inv->n_gpus; i++) {
		const struct dg_gpu *gpu = &d->inv->gpus[i];
		const char *state = ops_gpu_state(d, gpu);
		json_object *g;

		if (free_only && strcmp(state, "free") != 0)
			continue;
		g = gpu_to_json(d->inv, gpu);
		json_object_object_add(g, "state", json_object_new_string(state));
		json_object_object_add(g, "holders", holders_json(d, gpu));
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
	return 1;
}

static int op_metrics(struct daemon *d, json_object *args, json_object **ret, struct dg_error *err)
{
	auto_free char *text = NULL;
	size_t len = 0;
	int r = metrics_render(d, &text, &len);

	(void)args;
	if (r < 0)
		return dg_error_set(err, DG_E_INTERNAL, -r, "cannot render metrics: %s", strerror(-r));
	/* JSON escaping can double it; a reply line must stay under DG_MSG_MAX. */
	if (len > DG_MSG_MAX / 2) {
		dg_error_set(err, DG_E_INTERNAL, EMSGSIZE, "the metrics document (%zu bytes) is too "
			     "large for a reply", len);
		dg_error_hint(err, "scrape it over HTTP: devgated --metrics-listen 127.0.0.1:PORT");
		return -EMSGSIZE;
	}
	*ret = json_object_new_object();
	json_add_str(*ret, "format", "prometheus text 0.0.4");
	json_add_str(*ret, "text", text);
	return 0;
}

static int op_events(struct daemon *d, json_object *args, json_object **ret, struct dg_error *err)
{
	bool follow = json_get_bool(args, "follow");

	(void)err;
	*ret = json_object_new_object();
	json_object_object_add(*ret, "events",
			       d->events ? events_recent(d->events) : json_object_new_array());
	json_object_object_add(*ret, "follow", json_object_new_boolean(follow));
	return follow ? 1 : 0;
}

static const op_fn handlers[DG_OP_MAX] = {
	[DG_OP_PING] = op_ping,	    [DG_OP_LIST] = op_list,	[DG_OP_GRANT] = grant_request,
	[DG_OP_REVOKE] = grant_revoke, [DG_OP_STATUS] = op_status, [DG_OP_WATCH] = op_watch,
	[DG_OP_METRICS] = op_metrics,	[DG_OP_EVENTS] = op_events,
};

/* Counters and latency of the requests that change leases. */
static void account(struct daemon *d, enum dg_op op, int r, const struct dg_error *err,
		    uint64_t ns)
{
	metrics_observe(d->metrics, op, ns);
	if (r < 0)
		metrics_request_failed(d->metrics, op, dg_error_is_set(err) ? err->code
									 : DG_E_INTERNAL);
	else if (op == DG_OP_GRANT)
		metrics_inc(d->metrics, METRIC_GRANTS, 1);
	else if (op == DG_OP_REVOKE)
		metrics_inc(d->metrics, METRIC_REVOKES, 1);
}

int ops_dispatch(struct daemon *d, enum dg_op op, json_object *args, json_object **ret,
		 struct dg_error *err)
{
	uint64_t start = now_mono_ns();
	int r;

	if ((int)op < 0 || op >= DG_OP_MAX || !handlers[op])
		return dg_error_set(err, DG_E_PROTOCOL, ENOSYS, "operation not supported");
	if (op == DG_OP_GRANT || op == DG_OP_REVOKE)
		metrics_hook_call(d->metrics, json_get_str(args, "source"));
	r = handlers[op](d, args, ret, err);
	account(d, op, r, err, now_mono_ns() - start);
	return r;
}
