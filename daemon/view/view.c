// SPDX-License-Identifier: Apache-2.0
/*
 * devgated's state as clients see it: fills the reply structs of
 * common/wire.h (list, status, grant replies) from the inventory and the
 * lease table. It only reads that state; it must not change a lease or the
 * inventory, nor encode JSON (the server encodes the structs it fills).
 * Strings are copied into the caller's arena or point into the state they
 * describe, so a reply is encoded before that state changes; view_lease()
 * copies everything, as a revoke frees the lease before its reply goes out.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "devgate.h"
#include "driver.h"
#include "gpu_arch.h"
#include "util.h"
#include "view.h"

/*
 * What a GPU is to clients, one word: "excluded" (by policy), "unusable"
 * (the inventory found a problem), "held" (a lease holds it whole),
 * "shared", "split" (a lease holds one of its MIG instances) or "free".
 */
const char *view_gpu_state(const struct lease_table *t, const struct dg_gpu *gpu)
{
	const struct lease_use *u = lease_table_use(t, gpu->uuid);

	if (gpu->excluded)
		return "excluded";
	if (gpu->problem[0])
		return "unusable";
	/* Exclusive and shared holders never mix (reconcile sees to it). */
	if (u && u->n_exclusive)
		return "held";
	if (u && u->n_shared)
		return "shared";
	for (size_t i = 0; gpu->mig && i < gpu->n_gi; i++) {
		u = lease_table_use_gi(t, gpu->uuid, gpu->gi[i].id);
		if (u && u->n_exclusive)
			return "split";
	}
	return "free";
}

/* The PCI vendor and device ids as "10de:20b0", in the arena; NULL without memory. */
static char *product_id(struct dg_arena *a, unsigned int vendor, unsigned int device)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%04x:%04x", vendor, device);
	return dg_arena_strdup(a, buf);
}

/* A device node as clients see it: its path under /dev and its numbers. -ENOMEM. */
static int node_info(const struct dg_node *node, struct dg_node_info *out, struct dg_arena *a)
{
	char path[64];

	snprintf(path, sizeof(path), "/dev/%s", node->name);
	out->path = dg_arena_strdup(a, path);
	out->major = node->major;
	out->minor = node->minor;
	return out->path ? 0 : -ENOMEM;
}

/* Fills out with what clients see of one GPU of the inventory. 0, or -ENOMEM. */
int view_gpu(const struct dg_inventory *inv, const struct dg_gpu *gpu, struct dg_gpu_info *out,
	     struct dg_arena *a)
{
	struct dg_node node = { 0 };

	*out = (struct dg_gpu_info){
		.index = gpu->index,
		.has_index = true,
		.minor = gpu->minor,
		.uuid = gpu->uuid,
		.vendor = vendor_name(gpu->family),
		.pci = gpu->pci,
		.model = gpu->model,
		.arch = gpu->arch ? gpu->arch : "unknown",
		.has_node = true,
		.problem = gpu->problem[0] ? gpu->problem : NULL,
	};
	out->product = product_id(a, gpu->vendor, gpu->device);
	if (gpu->memory_mib) {
		out->memory_mib = (int64_t)gpu->memory_mib;
		out->has_memory_mib = true;
	}
	out->numa_node = gpu->numa_node;
	out->has_numa_node = gpu->numa_known;
	if (gpu->cc) {
		char cc[16];

		gpu_cc_format(gpu->cc, cc, sizeof(cc));
		out->cc = dg_arena_strdup(a, cc);
		if (!out->cc)
			return -ENOMEM;
	}
	gpu_node(inv, gpu, &node);
	if (!out->product || node_info(&node, &out->node, a) < 0)
		return -ENOMEM;
	return 0;
}

/* The host devices of a lease (grant --device), with their access letters. -ENOMEM. */
static int view_devices(const struct lease *l, struct dg_lease_info *out, struct dg_arena *a)
{
	out->devices = l->n_devices ? dg_arena_alloc(a, l->n_devices * sizeof(*out->devices))
				    : NULL;
	if (l->n_devices && !out->devices)
		return -ENOMEM;
	for (size_t i = 0; i < l->n_devices; i++) {
		struct dg_lease_device *v = &out->devices[i];
		uint32_t acc = l->devices[i].access;
		char path[40], access[8];

		snprintf(path, sizeof(path), "/dev/%s", l->devices[i].name);
		view_access_str(acc ? acc : DG_ACC_READ | DG_ACC_WRITE, access, sizeof(access));
		*v = (struct dg_lease_device){
			.path = dg_arena_strdup(a, path),
			.host = dg_arena_strdup(a, l->devices[i].host),
			.type = l->devices[i].block ? "b" : "c",
			.major = l->devices[i].major,
			.minor = l->devices[i].minor,
			.access = dg_arena_strdup(a, access),
		};
		if (!v->path || !v->host || !v->access)
			return -ENOMEM;
	}
	out->n_devices = l->n_devices;
	return 0;
}

/*
 * Fills out with what clients see of lease l: its container, times, GPUs
 * (with GPU-seconds), driver files and host devices. Everything is copied
 * into the arena. 0, or -ENOMEM.
 */
int view_lease(const struct dg_inventory *inv, const struct lease *l, struct dg_lease_info *out,
	       struct dg_arena *a)
{
	int64_t now_ms = now_wall_ms();
	char since[64];

	/*
	 * Copies, not pointers into l: a revoke frees the lease before its reply
	 * is encoded.
	 */
	format_time_utc(l->since, since, sizeof(since));
	*out = (struct dg_lease_info){
		.cgroup_id = l->cgid,
		.cgroup = dg_arena_strdup(a, l->cgroup ? l->cgroup : ""),
		.container = l->container ? dg_arena_strdup(a, l->container) : NULL,
		.runtime = l->runtime ? dg_arena_strdup(a, l->runtime) : NULL,
		.pid = l->pid,
		.since = dg_arena_strdup(a, since),
		.n_gpus = l->n_gpus,
	};
	out->gpus = l->n_gpus ? dg_arena_alloc(a, l->n_gpus * sizeof(*out->gpus)) : NULL;
	if (!out->since || !out->cgroup || (l->container && !out->container) ||
	    (l->runtime && !out->runtime) || (l->n_gpus && !out->gpus))
		return -ENOMEM;
	if (l->expires > 0) {
		char expires[64];

		format_time_utc(l->expires, expires, sizeof(expires));
		out->expires = dg_arena_strdup(a, expires);
		out->expires_in = lease_expiry_left(l, now_wall_s());
		out->has_expires_in = true;
		out->kill_on_expiry = l->kill_on_expiry;
		out->has_kill_on_expiry = true;
		if (!out->expires)
			return -ENOMEM;
	}
	if (l->driver_caps) {
		char caps[64];

		driver_caps_text(l->driver_caps, caps, sizeof(caps));
		out->driver = dg_arena_strdup(a, caps);
		out->driver_files = (int64_t)l->n_driver_files;
		out->has_driver_files = true;
		if (!out->driver)
			return -ENOMEM;
	}
	out->gpu_seconds = (double)lease_total_ms(l, now_ms) / 1000.0;
	out->has_gpu_seconds = true;
	for (size_t i = 0; i < l->n_gpus; i++) {
		const struct dg_gpu *gpu = inventory_find_uuid(inv, l->gpus[i].uuid);
		struct dg_lease_gpu *g = &out->gpus[i];

		g->shared = l->gpus[i].shared;
		g->gi = l->gpus[i].gi;
		g->has_gi = l->gpus[i].instance;
		g->gpu_seconds = (double)lease_gpu_ms(l, l->gpus[i].uuid, now_ms) / 1000.0;
		g->has_gpu_seconds = true;
		if (gpu) {
			if (view_gpu(inv, gpu, &g->gpu, a) < 0)
				return -ENOMEM;
			continue;
		}
		/* The GPU left the host; keep what the lease knows. */
		g->gpu.uuid = dg_arena_strdup(a, l->gpus[i].uuid);
		if (!g->gpu.uuid)
			return -ENOMEM;
		g->gpu.minor = l->gpus[i].minor;
		g->gpu.vendor = vendor_name(l->gpus[i].family);
		g->gpu.problem = "no longer on this host";
	}
	return view_devices(l, out, a);
}

/* The leases that hold a GPU whole (not one of its MIG instances). -ENOMEM. */
static int holders(const struct lease_table *t, const struct dg_gpu *gpu, struct dg_list_gpu *out,
		   struct dg_arena *a)
{
	size_t n = 0;

	for (size_t i = 0; i < t->n; i++) {
		const struct lease_gpu *g = lease_find_gpu(t->v[i], gpu->uuid);

		n += g && !g->instance;
	}
	out->holders = n ? dg_arena_alloc(a, n * sizeof(*out->holders)) : NULL;
	if (n && !out->holders)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++) {
		const struct lease *l = t->v[i];
		const struct lease_gpu *g = lease_find_gpu(l, gpu->uuid);

		if (!g || g->instance)
			continue;
		out->holders[out->n_holders++] = (struct dg_holder_info){
			.container = l->container,
			.runtime = l->runtime,
			.cgroup = l->cgroup,
			.pid = l->pid,
			.shared = g->shared,
		};
	}
	return 0;
}

/*
 * Whether a MIG GPU instance is held, and by which lease. There is at most
 * one holder: an instance is only ever granted whole.
 */
static void instance_holder(const struct lease_table *t, const struct dg_gpu *gpu, uint32_t gi,
			    struct dg_instance_info *out)
{
	const struct lease_use *u = lease_table_use_gi(t, gpu->uuid, gi);
	const struct lease *l = u && u->n_exclusive ? lease_table_holder(t, u, false, 0) : NULL;

	out->state = l ? "held" : "free";
	if (!l)
		return;
	out->holder = (struct dg_holder_info){
		.container = l->container,
		.runtime = l->runtime,
		.cgroup = l->cgroup,
		.pid = l->pid,
	};
	out->has_holder = true;
}

/*
 * The MIG instances of an NVIDIA GPU and who holds each; nothing for a GPU
 * of another vendor, or where the driver has no MIG support. -ENOMEM.
 */
static int instances(const struct dg_inventory *inv, const struct lease_table *t,
		     const struct dg_gpu *gpu, struct dg_list_gpu *out, struct dg_arena *a)
{
	if (gpu->family != DG_VENDOR_NVIDIA || !inv->majors.has_caps)
		return 0;
	out->has_mig = true;
	out->mig = gpu->mig;
	out->instances = gpu->n_gi ? dg_arena_alloc(a, gpu->n_gi * sizeof(*out->instances)) : NULL;
	if (gpu->n_gi && !out->instances)
		return -ENOMEM;
	for (size_t i = 0; i < gpu->n_gi; i++) {
		const struct dg_mig_gi *gi = &gpu->gi[i];
		struct dg_instance_info *v = &out->instances[i];

		*v = (struct dg_instance_info){
			.gi = gi->id,
			.minor = gi->minor,
			.profile = gi->profile[0] ? gi->profile : NULL,
			.uuid = gi->n_ci && gi->ci[0].uuid[0] ? gi->ci[0].uuid : NULL,
		};
		v->cis = gi->n_ci ? dg_arena_alloc(a, gi->n_ci * sizeof(*v->cis)) : NULL;
		if (gi->n_ci && !v->cis)
			return -ENOMEM;
		for (size_t c = 0; c < gi->n_ci; c++)
			v->cis[v->n_cis++] =
				(struct dg_ci_info){ gi->ci[c].id, gi->ci[c].minor,
						     gi->ci[c].uuid[0] ? gi->ci[c].uuid : NULL };
		instance_holder(t, gpu, gi->id, v);
	}
	out->n_instances = gpu->n_gi;
	return 0;
}

/* The driver's control nodes (nvidiactl, nvidia-uvm, ...) as clients see them. -ENOMEM. */
static int control_nodes(const struct dg_inventory *inv, struct dg_list_reply *out,
			 struct dg_arena *a)
{
	out->control_nodes =
		inv->n_ctl ? dg_arena_alloc(a, inv->n_ctl * sizeof(*out->control_nodes)) : NULL;
	if (inv->n_ctl && !out->control_nodes)
		return -ENOMEM;
	out->n_control_nodes = inv->n_ctl;
	for (size_t i = 0; i < inv->n_ctl; i++) {
		if (node_info(&inv->ctl[i], &out->control_nodes[i], a) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* The GPU kind names the policy defines (alias lines of devgate.conf). -ENOMEM. */
static int aliases(const struct dg_policy *p, struct dg_list_reply *out, struct dg_arena *a)
{
	out->aliases = p->n_aliases ? dg_arena_alloc(a, p->n_aliases * sizeof(*out->aliases))
				    : NULL;
	if (p->n_aliases && !out->aliases)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_aliases; i++)
		out->aliases[i] =
			(struct dg_alias_info){ p->aliases[i].name, p->aliases[i].product };
	out->n_aliases = p->n_aliases;
	return 0;
}

/*
 * Fills out with the reply to 'list': the driver, every GPU (only the free
 * ones with free_only) with its state, holders and MIG instances, the
 * policy's aliases and the control nodes. 0, or -ENOMEM.
 */
int view_inventory(const struct dg_inventory *inv, const struct lease_table *t,
		   const struct dg_policy *policy, bool free_only, struct dg_list_reply *out,
		   struct dg_arena *a)
{
	*out = (struct dg_list_reply){
		.host_root = inv->host_root,
		.free_only = free_only,
		.driver = {
			.loaded = inv->majors.has_nvidia,
			.nvidia_major = inv->majors.nvidia,
			.has_nvidia_major = inv->majors.has_nvidia,
			.uvm_major = inv->majors.uvm,
			.has_uvm_major = inv->majors.has_uvm,
		},
		.control_problem = inv->ctl_problem[0] ? inv->ctl_problem : NULL,
		.nvml_problem = inv->nvml_problem[0] ? inv->nvml_problem : NULL,
	};
	out->gpus = inv->n_gpus ? dg_arena_alloc(a, inv->n_gpus * sizeof(*out->gpus)) : NULL;
	if (inv->n_gpus && !out->gpus)
		return -ENOMEM;
	for (size_t i = 0; i < inv->n_gpus; i++) {
		const struct dg_gpu *gpu = &inv->gpus[i];
		const char *state = view_gpu_state(t, gpu);
		struct dg_list_gpu *g = &out->gpus[out->n_gpus];

		if (free_only && strcmp(state, "free") != 0)
			continue;
		*g = (struct dg_list_gpu){ 0 };
		g->state = state;
		if (view_gpu(inv, gpu, &g->gpu, a) < 0 || holders(t, gpu, g, a) < 0 ||
		    instances(inv, t, gpu, g, a) < 0)
			return -ENOMEM;
		out->n_gpus++;
	}
	if (aliases(policy, out, a) < 0)
		return -ENOMEM;
	return control_nodes(inv, out, a);
}

/* Writes the "rwm" letters of a DG_ACC_* mask into buf ("" for none). */
void view_access_str(uint32_t access, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s", access & DG_ACC_READ ? "r" : "",
		 access & DG_ACC_WRITE ? "w" : "", access & DG_ACC_MKNOD ? "m" : "");
}
