// SPDX-License-Identifier: Apache-2.0
/*
 * The schema of every request, reply and event, and the op table that ties
 * each operation to them (see wire.h). Adding a field to the protocol is
 * one table entry here; nothing else in the tree writes message keys.
 */
#include <errno.h>
#include <string.h>

#include "cleanup.h"
#include "gpu.h"
#include "util.h"
#include "wire.h"

/* Requests */

static const struct dg_field target_fields[] = {
	DG_INT_OPT("pid", struct dg_target_args, pid, has_pid, 1, INT32_MAX),
	/* Bounded: each is logged, and a label or source has no use for more. */
	DG_STR_MAX("cgroup", struct dg_target_args, cgroup, 4095),
	DG_STR_MAX("container", struct dg_target_args, container, DG_LABEL_MAX),
	DG_STR_MAX("runtime", struct dg_target_args, runtime, 16),
	DG_STR_MAX("source", struct dg_target_args, source, DG_SOURCE_MAX),
};
static const struct dg_schema target_schema =
	DG_SCHEMA("target", struct dg_target_args, target_fields);

static const struct dg_field list_req_fields[] = {
	DG_BOOL("free", struct dg_list_req, free),
};

static const struct dg_field root_id_fields[] = {
	DG_ID("dev", struct dg_root_id, dev),
	DG_ID("ino", struct dg_root_id, ino),
};
static const struct dg_schema root_id_schema =
	DG_SCHEMA("root_id", struct dg_root_id, root_id_fields);

static const struct dg_field grant_req_fields[] = {
	DG_EMBED(struct dg_grant_req, target, &target_schema),
	DG_STR_OPT("gpus", struct dg_grant_req, gpus),
	DG_STRS_OPT("devices", struct dg_grant_req, devices, n_devices),
	DG_INT_OPT("count", struct dg_grant_req, count, has_count, 1, DG_MAX_GPUS),
	DG_STR_OPT("model", struct dg_grant_req, model),
	DG_STR_OPT("arch", struct dg_grant_req, arch),
	DG_STR_OPT("vendor", struct dg_grant_req, vendor),
	DG_STR_OPT("product", struct dg_grant_req, product),
	DG_STR_OPT("min_memory", struct dg_grant_req, min_memory),
	DG_STR_OPT("min_cc", struct dg_grant_req, min_cc),
	DG_STR_OPT("alias", struct dg_grant_req, alias),
	DG_STR_OPT("profile", struct dg_grant_req, profile),
	DG_BOOL("shared", struct dg_grant_req, shared),
	DG_BOOL("card", struct dg_grant_req, card),
	DG_STR_OPT("root", struct dg_grant_req, root),
	DG_OBJ_OPT("root_id", struct dg_grant_req, root_id, has_root_id, &root_id_schema),
	DG_BOOL("from_image", struct dg_grant_req, from_image),
	DG_INT_OPT("ttl", struct dg_grant_req, ttl, has_ttl, 1, DURATION_MAX_S),
	DG_BOOL("kill_on_expiry", struct dg_grant_req, kill_on_expiry),
	DG_STR_OPT("access", struct dg_grant_req, access),
	DG_STR_OPT("driver", struct dg_grant_req, driver),
	DG_BOOL("same_numa", struct dg_grant_req, same_numa),
	DG_INT_OPT("wait", struct dg_grant_req, wait, has_wait, 0, DURATION_MAX_S),
	DG_INT_OPT("priority", struct dg_grant_req, priority, has_priority, DG_PRIORITY_MIN,
		   DG_PRIORITY_MAX),
};

static const struct dg_field revoke_req_fields[] = {
	DG_EMBED(struct dg_revoke_req, target, &target_schema),
	DG_STR_OPT("gpus", struct dg_revoke_req, gpus),
	DG_STRS_OPT("devices", struct dg_revoke_req, devices, n_devices),
	DG_BOOL("missing_ok", struct dg_revoke_req, missing_ok),
	DG_INT_OPT("kill", struct dg_revoke_req, kill, has_kill, 1, 64),
};

static const struct dg_field events_req_fields[] = {
	DG_BOOL("follow", struct dg_events_req, follow),
};

static const struct dg_field extend_req_fields[] = {
	DG_EMBED(struct dg_extend_req, target, &target_schema),
	DG_INT_OPT("by", struct dg_extend_req, by, has_by, 1, DURATION_MAX_S),
	DG_INT_OPT("ttl", struct dg_extend_req, ttl, has_ttl, 1, DURATION_MAX_S),
};

static const struct dg_field move_req_fields[] = {
	DG_OBJ("from", struct dg_move_req, from, &target_schema),
	DG_OBJ("to", struct dg_move_req, to, &target_schema),
	DG_STR("gpus", struct dg_move_req, gpus),
	DG_INT_OPT("kill", struct dg_move_req, kill, has_kill, 1, 64),
};

/* An op without arguments decodes into an empty struct. */
struct no_args {
	char unused;
};
static const struct dg_schema no_args_schema = { "operation", sizeof(struct no_args), NULL, 0 };

#define REQ(op, type, table)                            \
	static const struct dg_schema op##_req_schema = \
		DG_SCHEMA("operation '" #op "'", type, table)
REQ(list, struct dg_list_req, list_req_fields);
REQ(grant, struct dg_grant_req, grant_req_fields);
REQ(revoke, struct dg_revoke_req, revoke_req_fields);
REQ(events, struct dg_events_req, events_req_fields);
REQ(extend, struct dg_extend_req, extend_req_fields);
REQ(move, struct dg_move_req, move_req_fields);

/* Replies */

static const struct dg_field node_fields[] = {
	DG_STR("path", struct dg_node_info, path),
	DG_INT("major", struct dg_node_info, major),
	DG_INT("minor", struct dg_node_info, minor),
};
static const struct dg_schema node_schema = DG_SCHEMA("node", struct dg_node_info, node_fields);

static const struct dg_field gpu_fields[] = {
	DG_INT_OPT("index", struct dg_gpu_info, index, has_index, 0, 0),
	DG_INT("minor", struct dg_gpu_info, minor),
	DG_STR("uuid", struct dg_gpu_info, uuid),
	DG_STR_OPT("vendor", struct dg_gpu_info, vendor),
	DG_STR_OPT("pci", struct dg_gpu_info, pci),
	DG_STR_OPT("product", struct dg_gpu_info, product),
	DG_STR_OPT("model", struct dg_gpu_info, model),
	DG_STR_OPT("arch", struct dg_gpu_info, arch),
	DG_STR_OPT("cc", struct dg_gpu_info, cc),
	DG_INT_OPT("memory_mib", struct dg_gpu_info, memory_mib, has_memory_mib, 0, 0),
	DG_INT_OPT("numa_node", struct dg_gpu_info, numa_node, has_numa_node, 0, 0),
	DG_OBJ_OPT("node", struct dg_gpu_info, node, has_node, &node_schema),
	DG_STR_OPT("problem", struct dg_gpu_info, problem),
};
static const struct dg_schema gpu_schema = DG_SCHEMA("GPU", struct dg_gpu_info, gpu_fields);

static const struct dg_field holder_fields[] = {
	DG_STR_OPT("container", struct dg_holder_info, container),
	DG_STR_OPT("runtime", struct dg_holder_info, runtime),
	DG_STR("cgroup", struct dg_holder_info, cgroup),
	DG_INT("pid", struct dg_holder_info, pid),
	DG_BOOL("shared", struct dg_holder_info, shared),
};
static const struct dg_schema holder_schema =
	DG_SCHEMA("holder", struct dg_holder_info, holder_fields);

static const struct dg_field ci_fields[] = {
	DG_INT("ci", struct dg_ci_info, ci),
	DG_INT("minor", struct dg_ci_info, minor),
	DG_STR_OPT("uuid", struct dg_ci_info, uuid),
};
static const struct dg_schema ci_schema =
	DG_SCHEMA("compute instance", struct dg_ci_info, ci_fields);

static const struct dg_field instance_fields[] = {
	DG_INT("gi", struct dg_instance_info, gi),
	DG_INT("minor", struct dg_instance_info, minor),
	DG_STR_OPT("profile", struct dg_instance_info, profile),
	DG_STR_OPT("uuid", struct dg_instance_info, uuid),
	DG_STR("state", struct dg_instance_info, state),
	DG_OBJS("compute_instances", struct dg_instance_info, cis, n_cis, &ci_schema),
	DG_OBJ_OPT("holder", struct dg_instance_info, holder, has_holder, &holder_schema),
};
static const struct dg_schema instance_schema =
	DG_SCHEMA("GPU instance", struct dg_instance_info, instance_fields);

static const struct dg_field list_gpu_fields[] = {
	DG_EMBED(struct dg_list_gpu, gpu, &gpu_schema),
	DG_STR("state", struct dg_list_gpu, state),
	DG_OBJS("holders", struct dg_list_gpu, holders, n_holders, &holder_schema),
	DG_BOOL_OPT("mig", struct dg_list_gpu, mig, has_mig),
	DG_OBJS_OPT("instances", struct dg_list_gpu, instances, n_instances, &instance_schema),
};
static const struct dg_schema list_gpu_schema =
	DG_SCHEMA("GPU", struct dg_list_gpu, list_gpu_fields);

static const struct dg_field driver_fields[] = {
	DG_BOOL("loaded", struct dg_driver_info, loaded),
	DG_INT_OPT("nvidia_major", struct dg_driver_info, nvidia_major, has_nvidia_major, 0, 0),
	DG_INT_OPT("uvm_major", struct dg_driver_info, uvm_major, has_uvm_major, 0, 0),
};
static const struct dg_schema driver_schema =
	DG_SCHEMA("driver", struct dg_driver_info, driver_fields);

static const struct dg_field alias_fields[] = {
	DG_STR("name", struct dg_alias_info, name),
	DG_STR("product", struct dg_alias_info, product),
};
static const struct dg_schema alias_schema = DG_SCHEMA("alias", struct dg_alias_info, alias_fields);

static const struct dg_field list_fields[] = {
	DG_STR("host_root", struct dg_list_reply, host_root),
	DG_BOOL("free_only", struct dg_list_reply, free_only),
	DG_OBJ("driver", struct dg_list_reply, driver, &driver_schema),
	DG_OBJS("gpus", struct dg_list_reply, gpus, n_gpus, &list_gpu_schema),
	DG_OBJS("control_nodes", struct dg_list_reply, control_nodes, n_control_nodes,
		&node_schema),
	DG_STR_OPT("control_problem", struct dg_list_reply, control_problem),
	DG_STR_OPT("nvml_problem", struct dg_list_reply, nvml_problem),
	DG_OBJS_OPT("aliases", struct dg_list_reply, aliases, n_aliases, &alias_schema),
};

static const struct dg_field lease_gpu_fields[] = {
	DG_EMBED(struct dg_lease_gpu, gpu, &gpu_schema),
	DG_INT_OPT("gi", struct dg_lease_gpu, gi, has_gi, 0, 0),
	DG_BOOL("shared", struct dg_lease_gpu, shared),
	DG_NUM_OPT("gpu_seconds", struct dg_lease_gpu, gpu_seconds, has_gpu_seconds),
};
static const struct dg_schema lease_gpu_schema =
	DG_SCHEMA("GPU", struct dg_lease_gpu, lease_gpu_fields);

static const struct dg_field lease_device_fields[] = {
	DG_STR("path", struct dg_lease_device, path),
	DG_STR("host", struct dg_lease_device, host),
	DG_STR("type", struct dg_lease_device, type),
	DG_INT("major", struct dg_lease_device, major),
	DG_INT("minor", struct dg_lease_device, minor),
	DG_STR_OPT("access", struct dg_lease_device, access),
};
static const struct dg_schema lease_device_schema =
	DG_SCHEMA("device", struct dg_lease_device, lease_device_fields);

static const struct dg_field lease_fields[] = {
	DG_ID("cgroup_id", struct dg_lease_info, cgroup_id),
	DG_STR("cgroup", struct dg_lease_info, cgroup),
	DG_STR_OPT("container", struct dg_lease_info, container),
	DG_STR_OPT("runtime", struct dg_lease_info, runtime),
	DG_INT("pid", struct dg_lease_info, pid),
	DG_STR("since", struct dg_lease_info, since),
	DG_OBJS("gpus", struct dg_lease_info, gpus, n_gpus, &lease_gpu_schema),
	DG_OBJS_OPT("devices", struct dg_lease_info, devices, n_devices, &lease_device_schema),
	DG_STR_OPT("expires", struct dg_lease_info, expires),
	DG_INT_OPT("expires_in", struct dg_lease_info, expires_in, has_expires_in, 0, 0),
	DG_BOOL_OPT("kill_on_expiry", struct dg_lease_info, kill_on_expiry, has_kill_on_expiry),
	DG_STR_OPT("driver", struct dg_lease_info, driver),
	DG_INT_OPT("driver_files", struct dg_lease_info, driver_files, has_driver_files, 0, 0),
	DG_NUM_OPT("gpu_seconds", struct dg_lease_info, gpu_seconds, has_gpu_seconds),
};
const struct dg_schema dg_lease_schema = DG_SCHEMA("lease", struct dg_lease_info, lease_fields);

static const struct dg_field node_status_fields[] = {
	DG_STR("path", struct dg_node_status, path),
	DG_STR("status", struct dg_node_status, status),
};
static const struct dg_schema node_status_schema =
	DG_SCHEMA("node", struct dg_node_status, node_status_fields);

static const struct dg_field grant_fields[] = {
	DG_EMBED(struct dg_grant_reply, lease, &dg_lease_schema),
	DG_STRS("granted", struct dg_grant_reply, granted, n_granted),
	DG_STRS_OPT("granted_devices", struct dg_grant_reply, granted_devices, n_granted_devices),
	DG_OBJS("nodes", struct dg_grant_reply, nodes, n_nodes, &node_status_schema),
	DG_STRS("warnings", struct dg_grant_reply, warnings, n_warnings),
	DG_STR_OPT("reason", struct dg_grant_reply, reason),
};

static const struct dg_field holder_proc_fields[] = {
	DG_INT("pid", struct dg_holder_proc, pid),
	DG_STR("comm", struct dg_holder_proc, comm),
	DG_STR("node", struct dg_holder_proc, node),
};
static const struct dg_schema holder_proc_schema =
	DG_SCHEMA("holder", struct dg_holder_proc, holder_proc_fields);

static const struct dg_field revoke_fields[] = {
	DG_EMBED_OPT(struct dg_revoke_reply, lease, has_lease, &dg_lease_schema),
	DG_STRS("revoked", struct dg_revoke_reply, revoked, n_revoked),
	DG_STRS_OPT("revoked_devices", struct dg_revoke_reply, revoked_devices, n_revoked_devices),
	DG_OBJS("nodes", struct dg_revoke_reply, nodes, n_nodes, &node_status_schema),
	DG_OBJS("holders", struct dg_revoke_reply, holders, n_holders, &holder_proc_schema),
	DG_INT("killed", struct dg_revoke_reply, killed),
};

static const struct dg_field extend_fields[] = {
	DG_EMBED(struct dg_extend_reply, lease, &dg_lease_schema),
};

static const struct dg_field move_fields[] = {
	DG_OBJ("from", struct dg_move_reply, from, &dg_lease_schema),
	DG_OBJ("to", struct dg_move_reply, to, &dg_lease_schema),
	DG_STRS("moved", struct dg_move_reply, moved, n_moved),
	DG_OBJS("holders", struct dg_move_reply, holders, n_holders, &holder_proc_schema),
	DG_INT("killed", struct dg_move_reply, killed),
};

static const struct dg_field status_fields[] = {
	DG_OBJS("leases", struct dg_status_reply, leases, n_leases, &dg_lease_schema),
};

static const struct dg_field settings_fields[] = {
	DG_STR("socket", struct dg_settings, socket),
	DG_STR("state_dir", struct dg_settings, state_dir),
	DG_STR("pin_root", struct dg_settings, pin_root),
	DG_STR("host_root", struct dg_settings, host_root),
	DG_STR_OPT("cgroup_root", struct dg_settings, cgroup_root),
	DG_STR_OPT("metrics_listen", struct dg_settings, metrics_listen),
};
static const struct dg_schema settings_schema =
	DG_SCHEMA("settings", struct dg_settings, settings_fields);

static const struct dg_field ping_fields[] = {
	DG_STR("version", struct dg_ping_reply, version),
	DG_INT("pid", struct dg_ping_reply, pid),
	DG_INT("leases", struct dg_ping_reply, leases),
	DG_BOOL("hook_allow_env", struct dg_ping_reply, hook_allow_env),
	DG_OBJ_OPT("settings", struct dg_ping_reply, settings, has_settings, &settings_schema),
};

static const struct dg_field metrics_fields[] = {
	DG_STR("format", struct dg_metrics_reply, format),
	DG_STR("text", struct dg_metrics_reply, text),
};

static const struct dg_field denied_fields[] = {
	DG_STR("time", struct dg_denied_event, time),
	DG_STR("type", struct dg_denied_event, type),
	DG_STR_OPT("container", struct dg_denied_event, container),
	DG_STR_OPT("cgroup", struct dg_denied_event, cgroup),
	DG_ID("cgroup_id", struct dg_denied_event, cgroup_id),
	DG_STR("device", struct dg_denied_event, device),
	DG_STR_OPT("node", struct dg_denied_event, node),
	DG_STR_OPT("gpu", struct dg_denied_event, gpu),
	DG_STR("access", struct dg_denied_event, access),
};
const struct dg_schema dg_denied_event_schema =
	DG_SCHEMA("event", struct dg_denied_event, denied_fields);

static const struct dg_field events_fields[] = {
	DG_OBJS("events", struct dg_events_reply, events, n_events, &dg_denied_event_schema),
	DG_BOOL("follow", struct dg_events_reply, follow),
};

static const struct dg_field watch_fields[] = {
	DG_BOOL("watching", struct dg_watch_reply, watching),
};

static const struct dg_field rescan_fields[] = {
	DG_INT("gpus", struct dg_rescan_reply, gpus),
	DG_STRS("appeared", struct dg_rescan_reply, appeared, n_appeared),
	DG_STRS("vanished", struct dg_rescan_reply, vanished, n_vanished),
	DG_STRS("changed", struct dg_rescan_reply, changed, n_changed),
};

static const struct dg_field watch_event_fields[] = {
	DG_STR("type", struct dg_watch_event, type),
	DG_OBJ("lease", struct dg_watch_event, lease, &dg_lease_schema),
	DG_STRS("gpus", struct dg_watch_event, gpus, n_gpus),
};
static const struct dg_schema watch_event_schema =
	DG_SCHEMA("event", struct dg_watch_event, watch_event_fields);

static const struct dg_field wait_event_fields[] = {
	DG_STR("type", struct dg_wait_event, type),
	DG_INT("position", struct dg_wait_event, position),
	DG_INT("of", struct dg_wait_event, of),
	DG_STR_OPT("reason", struct dg_wait_event, reason),
};
static const struct dg_schema wait_event_schema =
	DG_SCHEMA("event", struct dg_wait_event, wait_event_fields);

static const struct dg_field waiter_fields[] = {
	DG_INT("position", struct dg_waiter_info, position),
	DG_INT("priority", struct dg_waiter_info, priority),
	DG_STR_OPT("container", struct dg_waiter_info, container),
	DG_STR_OPT("cgroup", struct dg_waiter_info, cgroup),
	DG_INT_OPT("pid", struct dg_waiter_info, pid, has_pid, 0, 0),
	DG_STR("request", struct dg_waiter_info, request),
	DG_INT("waited_ms", struct dg_waiter_info, waited_ms),
	DG_INT_OPT("timeout", struct dg_waiter_info, timeout, has_timeout, 0, 0),
	DG_INT("uid", struct dg_waiter_info, uid),
};
static const struct dg_schema waiter_schema =
	DG_SCHEMA("waiter", struct dg_waiter_info, waiter_fields);

static const struct dg_field queue_fields[] = {
	DG_OBJS("waiters", struct dg_queue_reply, waiters, n_waiters, &waiter_schema),
};

static const struct dg_field reload_fields[] = {
	DG_INT("excluded", struct dg_reload_reply, excluded),
	DG_INT("newly_held", struct dg_reload_reply, newly_held),
	DG_INT("aliases", struct dg_reload_reply, aliases),
	DG_INT("profiles", struct dg_reload_reply, profiles),
	DG_INT("device_allow", struct dg_reload_reply, device_allow),
	DG_STR_OPT("restart", struct dg_reload_reply, restart),
};

static const struct dg_field found_fields[] = {
	DG_STR("runtime", struct dg_found_info, runtime),
	DG_STR("name", struct dg_found_info, name),
	DG_STR("id", struct dg_found_info, id),
	DG_INT("pid", struct dg_found_info, pid),
	DG_STR("cgroup", struct dg_found_info, cgroup),
};
static const struct dg_schema found_schema =
	DG_SCHEMA("container", struct dg_found_info, found_fields);

static const struct dg_field containers_fields[] = {
	DG_OBJS("containers", struct dg_containers_reply, found, n_found, &found_schema),
	DG_STR("searched", struct dg_containers_reply, searched),
};

#define REPLY(op, type, table)                            \
	static const struct dg_schema op##_reply_schema = \
		DG_SCHEMA("reply to '" #op "'", type, table)
REPLY(ping, struct dg_ping_reply, ping_fields);
REPLY(list, struct dg_list_reply, list_fields);
REPLY(grant, struct dg_grant_reply, grant_fields);
REPLY(revoke, struct dg_revoke_reply, revoke_fields);
REPLY(status, struct dg_status_reply, status_fields);
REPLY(watch, struct dg_watch_reply, watch_fields);
REPLY(metrics, struct dg_metrics_reply, metrics_fields);
REPLY(events, struct dg_events_reply, events_fields);
REPLY(rescan, struct dg_rescan_reply, rescan_fields);
REPLY(extend, struct dg_extend_reply, extend_fields);
REPLY(move, struct dg_move_reply, move_fields);
REPLY(queue, struct dg_queue_reply, queue_fields);
REPLY(reload, struct dg_reload_reply, reload_fields);
REPLY(containers, struct dg_containers_reply, containers_fields);

/* The one table of operations: what each takes, answers and streams. */
static const struct dg_op_info op_table[DG_OP_MAX] = {
	[DG_OP_PING] = { "ping", &no_args_schema, &ping_reply_schema, NULL, false },
	[DG_OP_LIST] = { "list", &list_req_schema, &list_reply_schema, NULL, false },
	/* Events only while a grant with "wait" is queued (its place), before the reply. */
	[DG_OP_GRANT] = { "grant", &grant_req_schema, &grant_reply_schema, &wait_event_schema,
			  true },
	[DG_OP_REVOKE] = { "revoke", &revoke_req_schema, &revoke_reply_schema, NULL, true },
	[DG_OP_STATUS] = { "status", &no_args_schema, &status_reply_schema, NULL, false },
	[DG_OP_WATCH] = { "watch", &no_args_schema, &watch_reply_schema, &watch_event_schema,
			  false },
	[DG_OP_METRICS] = { "metrics", &no_args_schema, &metrics_reply_schema, NULL, false },
	[DG_OP_EVENTS] = { "events", &events_req_schema, &events_reply_schema,
			   &dg_denied_event_schema, false },
	/* Changes no lease, but makes devgated re-read the host: the admin's call. */
	[DG_OP_RESCAN] = { "rescan", &no_args_schema, &rescan_reply_schema, NULL, true },
	[DG_OP_EXTEND] = { "extend", &extend_req_schema, &extend_reply_schema, NULL, true },
	[DG_OP_MOVE] = { "move", &move_req_schema, &move_reply_schema, NULL, true },
	[DG_OP_QUEUE] = { "queue", &no_args_schema, &queue_reply_schema, NULL, false },
	/* The admin's policy again, from devgate.conf: the admin's call, like rescan. */
	[DG_OP_RELOAD] = { "reload", &no_args_schema, &reload_reply_schema, NULL, true },
	/* Changes nothing, but reads the runtimes' state as root: the admin's call. */
	[DG_OP_CONTAINERS] = { "containers", &no_args_schema, &containers_reply_schema, NULL,
			       true },
};

const struct dg_op_info *dg_op_info(enum dg_op op)
{
	return (int)op >= 0 && op < DG_OP_MAX ? &op_table[op] : NULL;
}

int dg_op_from_name(const char *name, enum dg_op *ret)
{
	for (int i = 0; i < DG_OP_MAX; i++) {
		if (strcmp(op_table[i].name, name) == 0) {
			*ret = (enum dg_op)i;
			return 0;
		}
	}
	return -ENOENT;
}

static int request_header(json_object *msg, enum dg_op *op, json_object **args,
			  struct dg_error *err)
{
	json_object *name;

	json_object_object_foreach (msg, key, val) {
		(void)val;
		if (strcmp(key, "v") != 0 && strcmp(key, "op") != 0 && strcmp(key, "args") != 0)
			return dg_error_set(err, DG_E_PROTOCOL, EPROTO,
					    "request has unknown field '%s'", key);
	}
	if (!json_object_object_get_ex(msg, "op", &name) ||
	    !json_object_is_type(name, json_type_string))
		return dg_error_set(err, DG_E_PROTOCOL, EPROTO, "request lacks 'op'");
	if (dg_op_from_name(json_object_get_string(name), op) < 0)
		return dg_error_set(err, DG_E_PROTOCOL, EPROTO, "unknown operation '%s'",
				    json_object_get_string(name));
	if (json_object_object_get_ex(msg, "args", args) && *args &&
	    !json_object_is_type(*args, json_type_object))
		return dg_error_set(err, DG_E_PROTOCOL, EPROTO, "'args' must be an object");
	return 0;
}

int dg_request_decode(const char *line, struct dg_request *req, struct dg_error *err)
{
	auto_json json_object *msg = dg_message_parse(line, err);
	auto_json json_object *empty = json_object_new_object();
	json_object *args = NULL;
	int r;

	*req = (struct dg_request){ 0 };
	if (!msg)
		return -EPROTO;
	r = request_header(msg, &req->op, &args, err);
	if (r < 0)
		return r;
	r = dg_decode(op_table[req->op].args, args ? args : empty, &req->u, &req->arena, err);
	if (r < 0)
		dg_arena_free(&req->arena);
	return r;
}

json_object *dg_request_encode(const struct dg_request *req)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "v", json_object_new_int(DG_PROTO_VERSION));
	json_object_object_add(o, "op", json_object_new_string(op_table[req->op].name));
	json_object_object_add(o, "args", dg_encode(op_table[req->op].args, &req->u));
	return o;
}

void dg_request_done(struct dg_request *req)
{
	dg_arena_free(&req->arena);
}

json_object *dg_reply_encode(enum dg_op op, const union dg_reply *reply)
{
	return dg_reply_ok(dg_encode(op_table[op].reply, reply));
}

int dg_reply_decode(enum dg_op op, const char *line, union dg_reply *reply, struct dg_arena *a,
		    struct dg_error *err)
{
	auto_json json_object *result = NULL;
	int r = dg_reply_parse(line, &result, err);

	if (r < 0)
		return r;
	return dg_decode(op_table[op].reply, result, reply, a, err);
}

json_object *dg_event_encode(enum dg_op op, const union dg_stream_event *ev)
{
	return dg_event_new(dg_encode(op_table[op].event, ev));
}

int dg_event_decode(enum dg_op op, const char *line, union dg_stream_event *ev, struct dg_arena *a,
		    struct dg_error *err)
{
	auto_json json_object *o = NULL;
	int r;

	if (!op_table[op].event)
		return dg_error_set(err, DG_E_PROTOCOL, EPROTO, "'%s' does not stream",
				    op_table[op].name);
	r = dg_event_parse(line, &o, err);
	if (r < 0)
		return r;
	return dg_decode(op_table[op].event, o, ev, a, err);
}
