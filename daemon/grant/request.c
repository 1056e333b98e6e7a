// SPDX-License-Identifier: Apache-2.0
/*
 * The grant transaction (grant_request) and the checks of a grant request:
 * what it asks for, which GPUs, MIG instances and host devices it gets, and
 * whether a grant --wait may wait (grant_wait_check, grant_target_gone).
 * The kernel steps are txn_grant_apply()'s (txn.c); this file must not
 * change the kernel or the state directory itself, and nothing may change
 * the lease table before the record is saved.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "cleanup.h"
#include "driver.h"
#include "grant.h"
#include "instance.h"
#include "lease/alloc.h"
#include "lease/hostdev.h"
#include "lease/policy.h"
#include "log.h"
#include "sys/target.h"
#include "sys/topo.h"
#include "txn.h"
#include "util.h"
#include "view/view.h"
#include "watch/watch.h"

/* Returns true when a grant asks for GPUs; one with only --device does not. */
static bool wants_gpus(const struct dg_grant_req *g)
{
	return g->gpus || g->has_count || g->model || g->arch || g->product || g->min_memory ||
	       g->min_cc || g->alias || g->profile || g->n_devices == 0;
}

/*
 * Builds the allocator's request from the grant's own words, then from its
 * profile and alias in devgate.conf (policy p), and checks it.
 */
static int alloc_request_from(const struct dg_policy *p, const struct dg_grant_req *g,
			      struct alloc_request *req, struct dg_error *err)
{
	struct policy_request pr = {
		.selectors = g->gpus,
		.count = g->has_count ? (unsigned int)g->count : 0,
		.has_count = g->has_count,
		.model = g->model,
		.arch = g->arch,
		.product = g->product,
		.min_memory = g->min_memory,
		.min_cc = g->min_cc,
		.shared = g->shared,
	};
	int r;

	if (g->has_count && (g->count < 1 || g->count > DG_MAX_GPUS))
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "a GPU count must be between 1 and %d", DG_MAX_GPUS);
	r = policy_resolve(p, g->profile, g->alias, &pr, err);
	if (r < 0)
		return r;
	*req = (struct alloc_request){
		.selectors = pr.selectors,
		.count = pr.count,
		.model = pr.model,
		.arch = pr.arch,
		.vendor = g->vendor,
		.product = pr.product,
		.min_memory = pr.min_memory,
		.min_cc = pr.min_cc,
		.shared = pr.shared,
		.same_numa = g->same_numa,
	};
	return alloc_check_request(req, err);
}

/* Checks a container label: 1 to 256 characters, none of them a control character. */
static int label_check(const char *label, struct dg_error *err)
{
	if (!label)
		return 0;
	if (!*label || strlen(label) > 256)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "container label must be 1 to 256 "
				    "characters");
	for (const char *p = label; *p; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "container label has control characters");
	}
	return 0;
}

/*
 * Adds the GPUs marked in picked to lease next (with their card nodes when
 * card is true) and their UUIDs to the reply. Returns -ENOMEM when out of
 * memory.
 */
static int add_picked(const struct dg_inventory *inv, struct lease *next, const bool *picked,
		      bool shared, bool card, struct dg_grant_reply *out, struct dg_arena *a)
{
	out->granted = dg_arena_alloc(a, inv->n_gpus * sizeof(*out->granted) + 1);
	if (!out->granted)
		return -ENOMEM;
	for (size_t i = 0; i < inv->n_gpus; i++) {
		if (!picked[i])
			continue;
		if (lease_add_gpu(next, &inv->gpus[i], shared) < 0)
			return -ENOMEM;
		if (card && inv->gpus[i].has_card)
			lease_gpu_add_card(next, &inv->gpus[i]);
		out->granted[out->n_granted++] = inv->gpus[i].uuid;
	}
	return 0;
}

/*
 * Adds the request's host devices (--device) to lease next and their
 * container paths to the reply. Fails with err set for a device the admin
 * does not allow, one the lease holds already, or too many devices.
 */
static int add_devices(struct daemon *d, struct lease *next, const struct dg_grant_req *g,
		       struct dg_grant_reply *out, struct dg_arena *a, struct dg_error *err)
{
	out->granted_devices =
		g->n_devices ? dg_arena_alloc(a, g->n_devices * sizeof(*out->granted_devices))
			     : NULL;
	if (g->n_devices && !out->granted_devices)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	uint32_t access = 0;

	if (g->access && hostdev_access_parse(g->access, &access, err) < 0)
		return -EINVAL;
	/* Read and write, the default, is stored as 0: such a record reads as before. */
	if (access == (DG_ACC_READ | DG_ACC_WRITE))
		access = 0;
	for (size_t i = 0; i < g->n_devices; i++) {
		struct lease_device dev;
		char path[40];
		int r = hostdev_parse(g->devices[i], d->inv, &d->cfg->device_allow, access, &dev,
				      err);

		if (r < 0)
			return r;
		r = lease_add_device(next, &dev);
		if (r == -EEXIST) {
			dg_error_set(err, DG_E_INVALID, EEXIST,
				     "device '%s' as /dev/%s: the container holds that device or "
				     "that node name already",
				     dev.host, dev.name);
			dg_error_hint(err, "'devgatectl status' shows what each container holds");
			return -EEXIST;
		}
		if (r == -E2BIG)
			return dg_error_set(err, DG_E_INVALID, E2BIG,
					    "at most %d devices in one lease", DG_MAX_DEVICES);
		if (r < 0)
			return dg_error_set(err, DG_E_INTERNAL, -r, "out of memory");
		if (r == 0)
			continue;
		snprintf(path, sizeof(path), "/dev/%s", dev.name);
		out->granted_devices[out->n_granted_devices] = dg_arena_strdup(a, path);
		if (!out->granted_devices[out->n_granted_devices++])
			return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

/*
 * For grant --driver CAPS: writes to *add the driver capabilities that
 * lease next, with its GPUs, does not have mounted yet (0 without
 * --driver). Fails for an unknown capability or a lease without a GPU.
 */
static int driver_request(const struct dg_grant_req *g, const struct lease *next, unsigned int *add,
			  struct dg_error *err)
{
	unsigned int caps;
	char bad[32];

	*add = 0;
	if (!g->driver)
		return 0;
	if (driver_caps_parse(g->driver, &caps, bad, sizeof(bad)) < 0) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "driver capability '%s' is unknown", bad);
		dg_error_hint(err,
			      "give utility, compute, video, graphics (comma separated) or all");
		return -EINVAL;
	}
	if (next->n_gpus == 0)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "the driver's files go with a GPU; the request grants none");
	*add = caps & ~next->driver_caps;
	return 0;
}

/*
 * grant --root (root's alone: ops.c): a new lease takes the root and its
 * identity, and keeps them, so its nodes are removed where they were made.
 * A later grant may name the same root (by identity) or none; one that
 * names another, or a root for a lease made without one, is refused.
 */
static int root_request(const struct dg_grant_req *g, const struct lease *old, struct lease *next,
			struct dg_error *err)
{
	if (!g->root)
		return 0;
	if (old &&
	    (!old->root || old->root_dev != g->root_id.dev || old->root_ino != g->root_id.ino)) {
		dg_error_set(err, DG_E_INVALID, EXDEV,
			     "%s holds nodes made in %.200s/dev; a grant below root %.200s would "
			     "put more elsewhere",
			     lease_label(old), old->root ? old->root : "its own root", g->root);
		dg_error_hint(err, "grant again without --root, or revoke the lease first");
		return -EXDEV;
	}
	if (!old && lease_set_root(next, g->root, g->root_id.dev, g->root_id.ino) < 0)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	return 0;
}

/*
 * Fills the reply of a grant that committed: the lease, each node's status,
 * and a warning when device programs that devgate does not manage sit on
 * the container's ancestor cgroups. Returns -ENOMEM when out of memory.
 */
static int grant_reply(struct daemon *d, const struct lease *l, const struct txn_grant *x,
		       struct dg_grant_reply *out, struct dg_arena *a)
{
	char w[256];
	int r = view_lease(d->inv, l, &out->lease, a);

	if (r == 0)
		r = txn_node_statuses(x->nodes, x->res, x->n_nodes, &out->nodes, &out->n_nodes, a);
	if (r < 0 || !x->guard.ancestor_progs)
		return r;
	snprintf(w, sizeof(w),
		 "%u device program(s) on ancestor cgroups of %s are not "
		 "managed by devgate and may still deny the GPU",
		 x->guard.ancestor_progs, l->cgroup);
	log_warning("%s", w);
	out->warnings = dg_arena_alloc(a, sizeof(*out->warnings));
	if (!out->warnings)
		return -ENOMEM;
	out->warnings[0] = dg_arena_strdup(a, w);
	out->n_warnings = 1;
	return out->warnings[0] ? 0 : -ENOMEM;
}

/*
 * Picks GPUs for cgroup cgid against what every other lease holds now and
 * marks them in picked. For a count, why says how they were chosen.
 */
static int pick_gpus(const struct dg_inventory *inv, const struct lease_table *leases,
		     uint64_t cgid, const struct alloc_request *req, bool *picked, char *why,
		     size_t len, struct dg_error *err)
{
	struct gpu_use use[DG_MAX_GPUS];

	alloc_usage(inv, leases, cgid, use);
	return alloc_pick_why(inv, use, lease_table_find(leases, cgid), req, picked, why, len, err);
}

/*
 * Checks what the request says before any kernel object is looked at, and
 * builds the allocator's request in req when it asks for GPUs.
 */
static int grant_check(const struct dg_config *cfg, const struct dg_grant_req *g,
		       struct alloc_request *req, struct dg_error *err)
{
	int r = wants_gpus(g) ? alloc_request_from(&cfg->policy, g, req, err) : 0;

	if (r == 0 && g->access && !g->n_devices)
		r = dg_error_set(err, DG_E_INVALID, EINVAL,
				 "access is for --device nodes; the request names none");
	if (r == 0 && g->n_devices > DG_MAX_DEVICES)
		r = dg_error_set(err, DG_E_INVALID, E2BIG, "at most %d devices in one lease",
				 DG_MAX_DEVICES);
	if (r == 0)
		r = label_check(g->target.container, err);
	if (r < 0)
		return r;
	if (g->has_ttl && (g->ttl < 1 || g->ttl > DURATION_MAX_S))
		return dg_error_set(err, DG_E_INVALID, ERANGE,
				    "a ttl must be between 1 second and %lld days",
				    (long long)(DURATION_MAX_S / 86400));
	if (g->kill_on_expiry && !g->has_ttl) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "kill_on_expiry needs a ttl");
		dg_error_hint(err, "give the lease a time to live: --ttl DURATION");
		return -EINVAL;
	}
	if (g->has_root_id && !g->root)
		return dg_error_set(
			err, DG_E_INVALID, EINVAL,
			"a root_id names the identity of a root path: give the root too");
	/* A root path alone could name any directory in the target's mount namespace. */
	if (g->root && !g->has_root_id) {
		dg_error_set(err, DG_E_INVALID, EINVAL,
			     "a root path (%.200s) needs its identity (root_id): the directory the "
			     "caller opened, which devgate checks it finds there",
			     g->root);
		dg_error_hint(err, "devgatectl grant --root and the OCI hook send it");
		return -EINVAL;
	}
	/* An image asking for GPUs through its env is honoured only if the admin said so. */
	if (g->from_image && !cfg->hook_env) {
		dg_error_set(err, DG_E_PERM, EPERM,
			     "GPUs requested by the image's environment are "
			     "not honoured: hook-allow-env is off");
		dg_error_hint(err,
			      "request GPUs with devgate's CDI devices or annotation, or start "
			      "devgated with --hook-allow-env");
		return -EPERM;
	}
	return 0;
}

/*
 * For --profile naming a MIG profile rather than a devgate.conf one: copies
 * g to mg with the free instances it picks as the --gpu list. Returns 1
 * when mg is that rewritten request, 0 when g stands as it is.
 */
static int mig_profile(struct daemon *d, const struct dg_grant_req *g, struct dg_grant_req *mg,
		       struct dg_arena *a, struct dg_error *err)
{
	char *spec = NULL;
	int r;

	*mg = *g;
	if (!instance_profile_request(&d->cfg->policy, g))
		return 0;
	if (g->has_count && (g->count < 1 || g->count > DG_MAX_GPUS))
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "a GPU count must be between 1 and %d", DG_MAX_GPUS);
	r = instance_by_profile(d->inv, &d->leases, g->profile,
				g->has_count ? (unsigned int)g->count : 1, &spec, a, err);
	if (r < 0 || !spec)
		return r;
	mg->gpus = spec;
	mg->profile = NULL;
	mg->has_count = false;
	return 1;
}

/* Logs what a committed grant gave, and its expiry when it set one. */
static void grant_log(const struct dg_grant_req *g, const struct lease *next,
		      const struct txn_grant *x, const struct dg_grant_reply *out, const char *why)
{
	log_debug("grant to %s: nodes %llu us, bpf %llu us, state %llu us", lease_label(next),
		  (unsigned long long)x->t_nodes / 1000, (unsigned long long)x->t_bpf / 1000,
		  (unsigned long long)x->t_state / 1000);
	if (out->n_granted)
		log_info("granted %zu GPU(s) to %s (cgroup %s, PID %d)%s%s", out->n_granted,
			 lease_label(next), next->cgroup, (int)next->pid, why[0] ? ": " : "", why);
	for (size_t i = 0; i < out->n_granted_devices; i++)
		log_info("granted device %s to %s (cgroup %s, PID %d)", out->granted_devices[i],
			 lease_label(next), next->cgroup, (int)next->pid);
	if (g->has_ttl) {
		char when[64];

		format_time_utc(next->expires, when, sizeof(when));
		log_info("the lease of %s expires at %s%s", lease_label(next), when,
			 next->kill_on_expiry ? "; its holders will be killed" : "");
	}
}

/*
 * Checks the request, picks what it gets, builds the lease as it will be
 * (next), and has txn_grant_apply() give it in the kernel; only after the
 * record is saved does the table change and the observers hear of it.
 */
int grant_request(struct daemon *d, const struct dg_grant_req *g_in, struct dg_grant_reply *out,
		  struct dg_arena *a, struct dg_error *err)
{
	struct dg_grant_req mg;
	const struct dg_grant_req *g = g_in;
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	auto_cleanup(lease_freep) struct lease *next = NULL;
	struct alloc_request req = { 0 };
	struct alloc_cpus cpus;
	bool picked[DG_MAX_GPUS];
	char why[512] = "";
	struct txn_grant x = { 0 };
	struct lease *old;
	bool mig;
	int r;

	r = mig_profile(d, g_in, &mg, a, err);
	if (r > 0)
		g = &mg;
	if (r >= 0)
		r = grant_check(d->cfg, g, &req, err);
	if (r == 0)
		r = txn_resolve_target(d, &g->target, &t, err);
	if (r < 0)
		return r;
	memset(picked, 0, sizeof(picked));
	mig = g->gpus && instance_spec(g->gpus);
	if (wants_gpus(g) && !mig) {
		if (!req.selectors) {
			topo_container_cpus(d->inv->host_root, &t, &cpus);
			req.cpus = &cpus;
		}
		r = pick_gpus(d->inv, &d->leases, t.cgid, &req, picked, why, sizeof(why), err);
		/* A holder may have ended a moment ago, before the watch could say so. */
		if (r == -EBUSY && watch_release_ended(d, t.cgid) > 0) {
			*err = (struct dg_error){ 0 };
			r = pick_gpus(d->inv, &d->leases, t.cgid, &req, picked, why, sizeof(why),
				      err);
		}
		if (r < 0)
			return r;
	}
	if (wants_gpus(g) && d->inv->ctl_problem[0])
		return dg_error_set(err, DG_E_UNAVAILABLE, EIO, "cannot grant: %s",
				    d->inv->ctl_problem);
	old = lease_table_find(&d->leases, t.cgid);
	next = txn_next_lease(old, &t, g->target.container);
	/* A new label says anew whose name it is (server/byname.c sets runtime). */
	if (next && g->target.container) {
		free(next->runtime);
		next->runtime = g->target.runtime ? strdup(g->target.runtime) : NULL;
	}
	if (!next || (g->target.runtime && !next->runtime))
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	/* alloc_usage() counted an instance the container holds: its GPU was not picked. */
	r = mig ? instance_add(d->inv, &d->leases, next, g->gpus, req.shared, out, a, err)
		: add_picked(d->inv, next, picked, req.shared, g->card, out, a);
	if (r == -ENOMEM && !mig)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	if (r == 0)
		r = add_devices(d, next, g, out, a, err);
	if (r == 0)
		r = driver_request(g, next, &x.driver_add, err);
	if (r == 0)
		r = root_request(g, old, next, err);
	if (r < 0)
		return r;
	/* A new ttl replaces the expiry; a grant without one keeps it. */
	if (g->has_ttl) {
		if (lease_expiry_new(now_wall_ceil_s(), g->ttl, &next->expires) < 0)
			return dg_error_set(err, DG_E_INVALID, ERANGE, "ttl out of range");
		next->kill_on_expiry = g->kill_on_expiry;
	}
	r = txn_grant_apply(d, &t, old, next, &x, err);
	if (r < 0)
		return r;
	if (why[0])
		out->reason = dg_arena_strdup(a, why);
	if (grant_reply(d, next, &x, out, a) < 0)
		log_error("out of memory describing the grant to %s", lease_label(next));
	grant_log(g, next, &x, out, why);
	txn_emit(d, "granted", next, out->granted, out->n_granted);
	if (!old)
		watch_add(d, next);
	txn_commit(&d->leases, old, TAKE_PTR(next));
	return 0;
}

/*
 * It may not wait when it could not be served even if no other lease held
 * a GPU: more GPUs asked for than match, an excluded or broken one, or a
 * conflict with what the container holds.
 */
int grant_wait_check(struct daemon *d, const struct dg_grant_req *g, int *ret_pidfd,
		     struct dg_error *err)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	struct gpu_use use[DG_MAX_GPUS] = { 0 };
	struct alloc_request req = { 0 };
	struct dg_error why = { 0 };
	bool picked[DG_MAX_GPUS];
	/* Instances: grant_request checked the rest of the request before it found them busy. */
	int mig = instance_wait_check(d->inv, &d->cfg->policy, g, err);
	int r = mig < 0 ? mig : mig ? 0 : grant_check(d->cfg, g, &req, err);

	if (r == 0)
		r = txn_resolve_target(d, &g->target, &t, err);
	if (r < 0)
		return r;
	if (!mig && wants_gpus(g) &&
	    alloc_pick(d->inv, use, lease_table_find(&d->leases, t.cgid), &req, picked, &why) < 0) {
		dg_error_set(err, why.code == DG_E_UNAVAILABLE ? DG_E_NO_GPU : why.code, ENODEV,
			     "not queued: the request could not be served even with every GPU "
			     "free (%s)",
			     why.message);
		dg_error_hint(err, "ask for fewer GPUs or other ones; 'devgatectl list' shows "
				   "what this host has");
		return -ENODEV;
	}
	*ret_pidfd = TAKE_FD(t.pidfd);
	return 0;
}

/*
 * A container named by PID has ended when that process has. One named by
 * cgroup has ended when its first process did and the cgroup no longer
 * resolves (it may have another process).
 */
bool grant_target_gone(struct daemon *d, const struct dg_target_args *ta, int pidfd)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	struct dg_error ignore = { 0 };

	if (ta->has_pid || pidfd_alive(pidfd) == 0)
		return pidfd_alive(pidfd) < 0;
	return txn_resolve_target(d, ta, &t, &ignore) < 0;
}
