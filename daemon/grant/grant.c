// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lease/alloc.h"
#include "cleanup.h"
#include "gate/guard.h"
#include "sys/fault.h"
#include "grant.h"
#include "sys/holders.h"
#include "driver.h"
#include "driverfs.h"
#include "lease/hostdev.h"
#include "instance.h"
#include "log.h"
#include "metrics/metrics.h"
#include "node/nodes.h"
#include "lease/policy.h"
#include "select.h"
#include "sys/target.h"
#include "sys/topo.h"
#include "util.h"
#include "view/view.h"
#include "watch/watch.h"

static void target_donep(struct target *t)
{
	target_done(t);
}

static void lease_freep(struct lease **l)
{
	lease_free(*l);
}

static const char *status_name(int status)
{
	static const char *const names[] = {
		[NODE_UNTOUCHED] = "untouched", [NODE_CREATED] = "created",
		[NODE_PRESENT] = "present",	[NODE_REMOVED] = "removed",
		[NODE_ABSENT] = "absent",	[NODE_CONFLICT] = "conflict",
		[NODE_FAILED] = "failed",
	};

	return status >= 0 && status <= NODE_FAILED ? names[status] : "unknown";
}

static int node_statuses(const struct dg_node *nodes, const struct node_result *res, size_t n,
			 struct dg_node_status **ret, size_t *ret_n, struct dg_arena *a)
{
	struct dg_node_status *v = n ? dg_arena_alloc(a, n * sizeof(*v)) : NULL;

	if (n && !v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char path[64];

		snprintf(path, sizeof(path), "/dev/%s", nodes[i].name);
		v[i].path = dg_arena_strdup(a, path);
		v[i].status = status_name(res[i].status);
		if (!v[i].path)
			return -ENOMEM;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

static bool node_in(const struct dg_node *set, size_t n, const struct dg_node *node)
{
	for (size_t i = 0; i < n; i++) {
		if (set[i].major == node->major && set[i].minor == node->minor)
			return true;
	}
	return false;
}

/* Nodes of 'from' that 'minus' lacks. */
static size_t node_diff(const struct dg_node *from, size_t n_from, const struct dg_node *minus,
			size_t n_minus, struct dg_node *out)
{
	size_t n = 0;

	for (size_t i = 0; i < n_from; i++) {
		if (!node_in(minus, n_minus, &from[i]))
			out[n++] = from[i];
	}
	return n;
}

/* Whether nodes hold a host device (--device), not only GPU-class nodes. */
static bool has_host_device(struct daemon *d, const struct dg_node *nodes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!bpfgate_is_guarded(d->bg, nodes[i].major, nodes[i].minor))
			return true;
	}
	return false;
}

/* After device grants went: the gate's flag off again once none is left on the host. */
static void devgrants_sync(struct daemon *d, const struct dg_node *nodes, size_t n)
{
	int r;

	if (!has_host_device(d, nodes, n))
		return;
	r = bpfgate_devgrants_sync(d->bg);
	if (r < 0)
		log_warning_errno(r, "cannot update the device grant flag: %m");
}

static void grants_del(struct daemon *d, uint64_t cgid, const struct dg_node *nodes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = bpfgate_grant_del(d->bg, cgid, &nodes[i]);

		/* -ENOENT: an undo of a put that never happened. */
		if (r < 0 && r != -ENOENT)
			log_warning_errno(r, "cannot delete grant of %u:%u for cgroup %llu: %m",
					  nodes[i].major, nodes[i].minor, (unsigned long long)cgid);
	}
	devgrants_sync(d, nodes, n);
}

static int grants_put(struct daemon *d, uint64_t cgid, const struct dg_node *nodes, size_t n,
		      struct dg_error *err)
{
	/* The flag before the grant: a crash in between costs lookups, never an open. */
	if (has_host_device(d, nodes, n)) {
		int r = bpfgate_devgrants_set(d->bg, true);

		if (r < 0)
			return dg_error_set(err, DG_E_KERNEL, r,
					    "cannot set the device grant flag: %s", strerror(-r));
	}
	for (size_t i = 0; i < n; i++) {
		int r = bpfgate_grant_put(d->bg, cgid, &nodes[i]);

		if (r < 0)
			return dg_error_set(err, DG_E_KERNEL, r, "cannot add grant of %u:%u: %s",
					    nodes[i].major, nodes[i].minor, strerror(-r));
	}
	return 0;
}

static int resolve_target(struct daemon *d, const struct dg_target_args *ta, struct target *t,
			  struct dg_error *err)
{
	const char *cgroup = ta->cgroup;
	int64_t pid = ta->pid;
	bool has_pid = ta->has_pid;

	if (has_pid == !!cgroup)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "name the container by exactly one of a PID or a cgroup");
	if (has_pid) {
		if (pid <= 0 || pid > INT32_MAX)
			return dg_error_set(err, DG_E_INVALID, EINVAL, "PID %lld is out of range",
					    (long long)pid);
		return target_from_pid(&d->cg, d->self_cgroup, (pid_t)pid, t, err);
	}
	return target_from_cgroup(&d->cg, d->self_cgroup, cgroup, t, err);
}

/* Whether a grant asks for GPUs; one with only --device does not. */
static bool wants_gpus(const struct dg_grant_req *g)
{
	return g->gpus || g->has_count || g->model || g->arch || g->product || g->min_memory ||
	       g->min_cc || g->alias || g->profile || g->n_devices == 0;
}

/* The grant's own words, then its profile and alias from devgate.conf. */
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

static struct lease *lease_start(const struct target *t, const char *label)
{
	struct lease *l = t->cgroup ? lease_new(t->cgid) : NULL;

	if (!l)
		return NULL;
	l->cgroup = strdup(t->cgroup);
	l->container = label ? strdup(label) : lease_label_from_cgroup(t->cgroup);
	l->pid = t->pid;
	l->since = now_wall_s();
	if (!l->cgroup || (label && !l->container)) {
		lease_free(l);
		return NULL;
	}
	return l;
}

/* Adds the picked GPUs to next and their UUIDs to the reply. */
static int add_picked(struct daemon *d, struct lease *next, const bool *picked, bool shared,
		      bool card, struct dg_grant_reply *out, struct dg_arena *a)
{
	out->granted = dg_arena_alloc(a, d->inv->n_gpus * sizeof(*out->granted) + 1);
	if (!out->granted)
		return -ENOMEM;
	for (size_t i = 0; i < d->inv->n_gpus; i++) {
		if (!picked[i])
			continue;
		if (lease_add_gpu(next, &d->inv->gpus[i], shared) < 0)
			return -ENOMEM;
		if (card && d->inv->gpus[i].has_card)
			lease_gpu_add_card(next, &d->inv->gpus[i]);
		out->granted[out->n_granted++] = d->inv->gpus[i].uuid;
	}
	return 0;
}

/* Adds the request's host devices to next and their paths to the reply. */
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
		int r = hostdev_parse(g->devices[i], d->inv, &d->cfg.device_allow, access, &dev,
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

/* grant --driver CAPS: what the lease, with its GPUs, does not have mounted yet. */
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

/* Swaps next in for old (or adds it), carrying the runtime-only fields. */
static void commit_lease(struct daemon *d, struct lease *old, struct lease *next)
{
	if (old) {
		next->watch = old->watch;
		old->watch = -1;
		lease_free(lease_table_take(&d->leases, old->cgid));
	} else {
		watch_add(d, next);
	}
	if (lease_table_add(&d->leases, next) < 0)
		log_error("out of memory recording the lease of cgroup %llu",
			  (unsigned long long)next->cgid);
}

static void emit(struct daemon *d, const char *type, const struct lease *l, const char *const *gpus,
		 size_t n)
{
	if (d->hooks.lease_changed)
		d->hooks.lease_changed(d, type, l, gpus, n);
}

struct grant_txn {
	struct dg_node nodes[DG_MAX_NODES];
	struct node_result res[DG_MAX_NODES];
	size_t n_nodes;
	struct dg_node added[DG_MAX_NODES]; /* grants new in this call */
	size_t n_added;
	struct guard_info guard;
	unsigned int driver_add; /* grant --driver: DG_DRV_* the lease does not have yet */
	size_t driver_from;	 /* where this call's files start in next->driver_files */
	bool driver_done;
	uint64_t t_nodes, t_bpf, t_state; /* ns per step, for -v */
};

/* Undoes a failed grant's kernel steps: what it added, nothing old. */
static void grant_undo(struct daemon *d, const struct target *t, const struct lease *old,
		       const struct node_opts *nopts, struct lease *next, struct grant_txn *x)
{
	struct dg_node made[DG_MAX_NODES];
	struct node_result tmp[DG_MAX_NODES];
	struct dg_error ignore = { 0 };
	size_t n = 0;

	grants_del(d, next->cgid, x->added, x->n_added);
	if (x->driver_done)
		driverfs_remove(t, next, x->driver_from);
	if (!old)
		(void)guard_remove(d->bg, next->cgid, t->cgfd, &ignore);
	for (size_t i = 0; i < x->n_nodes; i++) {
		if (x->res[i].status == NODE_CREATED)
			made[n++] = x->nodes[i];
	}
	if (n)
		(void)nodes_remove(t, nopts, made, n, tmp, &ignore);
	(void)state_pending_clear(d->state, next->cgid);
}

static int record_error(struct daemon *d, int r, const char *what, struct dg_error *err)
{
	return dg_error_set(err, DG_E_STATE, r, "cannot record the %s in %s: %s", what,
			    d->cfg.state_dir, strerror(-r));
}

/*
 * Kernel side of a grant; undoes its own steps when one fails. The
 * journal (state.h) comes first and the record last: a crash in between
 * is rolled back at the next start, and the record is the commit.
 */
static int grant_apply(struct daemon *d, const struct target *t, const struct lease *old,
		       struct lease *next, const struct dg_grant_req *g, struct grant_txn *x,
		       struct dg_error *err)
{
	struct node_opts nopts = {
		.mode = d->cfg.node_mode,
		.uid = d->cfg.node_uid,
		.gid = d->cfg.node_gid,
		.root_path = g->root,
		.check_root = g->has_root_id,
		.root_dev = (dev_t)g->root_id.dev,
		.root_ino = (ino_t)g->root_id.ino,
	};
	struct dg_node old_nodes[DG_MAX_NODES];
	size_t n_old = old ? lease_nodes(old, d->inv, old_nodes, DG_MAX_NODES) : 0;
	uint64_t t0 = now_mono_ns();
	int r;

	if (!next->has_majors) { /* what its nodes are made with (refresh.c) */
		next->majors = d->inv->majors;
		next->has_majors = true;
	}
	x->n_nodes = lease_nodes(next, d->inv, x->nodes, DG_MAX_NODES);
	x->n_added = node_diff(x->nodes, x->n_nodes, old_nodes, n_old, x->added);
	r = state_pending_save(d->state, next);
	if (r < 0)
		return record_error(d, r, "grant in flight", err);
	fault_point("grant.pending");
	r = nodes_create(t, &nopts, x->nodes, x->n_nodes, x->res, err);
	x->t_nodes = now_mono_ns() - t0;
	if (r < 0) {
		(void)state_pending_clear(d->state, next->cgid);
		return r;
	}
	fault_point("grant.nodes");
	r = grants_put(d, next->cgid, x->nodes, x->n_nodes, err);
	fault_point("grant.grants");
	if (r == 0)
		r = guard_apply(d->bg, next->cgid, t->cgfd, &x->guard, err);
	x->t_bpf = now_mono_ns() - t0 - x->t_nodes;
	fault_point("grant.guard");
	if (r == 0 && x->driver_add) {
		x->driver_from = next->n_driver_files;
		r = driverfs_add(d->inv->host_root, t, &nopts, next, x->driver_add, err);
		x->driver_done = r == 0;
	}
	if (r == 0) {
		r = state_save(d->state, next);
		if (r < 0)
			record_error(d, r, "lease", err);
	}
	x->t_state = now_mono_ns() - t0 - x->t_nodes - x->t_bpf;
	if (r < 0) {
		grant_undo(d, t, old, &nopts, next, x);
		return r;
	}
	fault_point("grant.record");
	(void)state_pending_clear(d->state, next->cgid);
	return 0;
}

static int grant_reply(struct daemon *d, const struct lease *l, const struct grant_txn *x,
		       struct dg_grant_reply *out, struct dg_arena *a)
{
	char w[256];
	int r = view_lease(d, l, &out->lease, a);

	if (r == 0)
		r = node_statuses(x->nodes, x->res, x->n_nodes, &out->nodes, &out->n_nodes, a);
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

/* Picks GPUs for cgid against what every other lease holds now; why: for a count. */
static int pick_gpus(struct daemon *d, uint64_t cgid, const struct alloc_request *req, bool *picked,
		     char *why, size_t len, struct dg_error *err)
{
	struct gpu_use use[DG_MAX_GPUS];

	alloc_usage(d->inv, &d->leases, cgid, use);
	return alloc_pick_why(d->inv, use, lease_table_find(&d->leases, cgid), req, picked, why,
			      len, err);
}

/* What the request says before any kernel object is looked at. */
static int grant_check(struct daemon *d, const struct dg_grant_req *g, struct alloc_request *req,
		       struct dg_error *err)
{
	int r = wants_gpus(g) ? alloc_request_from(&d->cfg.policy, g, req, err) : 0;

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
	/* An image asking for GPUs through its env is honoured only if the admin said so. */
	if (g->from_image && !d->cfg.hook_env) {
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

/* The lease as it will be after the grant, without the new GPUs yet. */
static struct lease *next_lease(const struct lease *old, const struct target *t, const char *label)
{
	struct lease *next = old ? lease_copy(old) : lease_start(t, label);

	if (!next)
		return NULL;
	if (old && label && (!old->container || strcmp(old->container, label) != 0)) {
		free(next->container);
		next->container = strdup(label);
		if (!next->container) {
			lease_free(next);
			return NULL;
		}
	}
	next->pid = t->pid;
	return next;
}

/* --profile naming a MIG profile, not a devgate.conf one: the instances it picks. */
static int mig_profile(struct daemon *d, const struct dg_grant_req *g, struct dg_grant_req *mg,
		       struct dg_arena *a, struct dg_error *err)
{
	char *spec = NULL;
	int r;

	*mg = *g;
	if (!instance_profile_request(&d->cfg.policy, g))
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
	struct grant_txn x = { 0 };
	struct lease *old;
	bool mig;
	int r;

	r = mig_profile(d, g_in, &mg, a, err);
	if (r > 0)
		g = &mg;
	if (r >= 0)
		r = grant_check(d, g, &req, err);
	if (r == 0)
		r = resolve_target(d, &g->target, &t, err);
	if (r < 0)
		return r;
	memset(picked, 0, sizeof(picked));
	mig = g->gpus && instance_spec(g->gpus);
	if (wants_gpus(g) && !mig) {
		if (!req.selectors) {
			topo_container_cpus(d->inv->host_root, &t, &cpus);
			req.cpus = &cpus;
		}
		r = pick_gpus(d, t.cgid, &req, picked, why, sizeof(why), err);
		/* A holder may have ended a moment ago, before the watch could say so. */
		if (r == -EBUSY && watch_release_ended(d, t.cgid) > 0) {
			*err = (struct dg_error){ 0 };
			r = pick_gpus(d, t.cgid, &req, picked, why, sizeof(why), err);
		}
		if (r < 0)
			return r;
	}
	if (wants_gpus(g) && d->inv->ctl_problem[0])
		return dg_error_set(err, DG_E_UNAVAILABLE, EIO, "cannot grant: %s",
				    d->inv->ctl_problem);
	old = lease_table_find(&d->leases, t.cgid);
	next = next_lease(old, &t, g->target.container);
	if (!next)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	/* alloc_usage() counted an instance the container holds: its GPU was not picked. */
	r = mig ? instance_add(d->inv, &d->leases, next, g->gpus, req.shared, out, a, err)
		: add_picked(d, next, picked, req.shared, g->card, out, a);
	if (r == -ENOMEM && !mig)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	if (r == 0)
		r = add_devices(d, next, g, out, a, err);
	if (r == 0)
		r = driver_request(g, next, &x.driver_add, err);
	if (r < 0)
		return r;
	/* A new ttl replaces the expiry; a grant without one keeps it. */
	if (g->has_ttl) {
		if (lease_expiry_new(now_wall_ceil_s(), g->ttl, &next->expires) < 0)
			return dg_error_set(err, DG_E_INVALID, ERANGE, "ttl out of range");
		next->kill_on_expiry = g->kill_on_expiry;
	}
	r = grant_apply(d, &t, old, next, g, &x, err);
	if (r < 0)
		return r;
	if (why[0])
		out->reason = dg_arena_strdup(a, why);
	if (grant_reply(d, next, &x, out, a) < 0)
		log_error("out of memory describing the grant to %s", lease_label(next));
	log_debug("grant to %s: nodes %llu us, bpf %llu us, state %llu us", lease_label(next),
		  (unsigned long long)x.t_nodes / 1000, (unsigned long long)x.t_bpf / 1000,
		  (unsigned long long)x.t_state / 1000);
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
	emit(d, "granted", next, out->granted, out->n_granted);
	commit_lease(d, old, TAKE_PTR(next));
	return 0;
}

/*
 * A grant that found its GPUs busy: may it wait? Not when it could not be
 * served even if no other lease held a GPU (more GPUs than match, an
 * excluded or broken one, a conflict with what the container holds).
 * *ret_pidfd: the target's process, which the waiter watches.
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
	int mig = instance_wait_check(d->inv, &d->cfg.policy, g, err);
	int r = mig < 0 ? mig : mig ? 0 : grant_check(d, g, &req, err);

	if (r == 0)
		r = resolve_target(d, &g->target, &t, err);
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

/* A waiting grant's container: still there? pidfd is its process when it was queued. */
bool grant_target_gone(struct daemon *d, const struct dg_target_args *ta, int pidfd)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	struct dg_error ignore = { 0 };

	if (ta->has_pid || pidfd_alive(pidfd) == 0)
		return pidfd_alive(pidfd) < 0;
	return resolve_target(d, ta, &t, &ignore) < 0;
}

/* A live process of the lease's container, to reach its /dev. */
static int live_target(struct daemon *d, const struct lease *l, struct target *t)
{
	struct dg_error ignore = { 0 };

	if (l->pid > 0 && target_from_pid(&d->cg, d->self_cgroup, l->pid, t, &ignore) == 0) {
		if (t->cgid == l->cgid)
			return 0;
		target_done(t);
	}
	if (target_from_cgroup(&d->cg, d->self_cgroup, l->cgroup, t, &ignore) == 0) {
		if (t->cgid == l->cgid)
			return 0;
		target_done(t);
	}
	return -ESRCH;
}

int grant_live_target(struct daemon *d, const struct lease *l, struct target *t)
{
	return live_target(d, l, t);
}

/*
 * The lease a revoke names; NULL with err set when there is none. Named by
 * PID, t is that process as resolved for this request (its nodes go
 * through it); otherwise t is left unresolved.
 */
static struct lease *find_lease(struct daemon *d, const struct dg_target_args *ta, struct target *t,
				struct dg_error *err)
{
	const char *label = ta->container, *cgroup = ta->cgroup;
	int64_t pid = ta->pid;
	bool has_pid = ta->has_pid;
	int given = has_pid + !!label + !!cgroup;
	struct lease *l = NULL;

	if (given != 1) {
		dg_error_set(err, DG_E_INVALID, EINVAL,
			     "name the container by exactly one of a PID, "
			     "a cgroup or a container label");
		return NULL;
	}
	if (label) {
		if (lease_table_find_label(&d->leases, label, &l) == -EEXIST)
			dg_error_set(err, DG_E_INVALID, EEXIST,
				     "several leases carry the label '%s'; "
				     "name the container by PID or cgroup",
				     label);
		else if (!l) {
			/* Labels exist only in leases: an unknown one names nothing. */
			dg_error_set(err, DG_E_NO_TARGET, ENOENT, "no container is labelled '%s'",
				     label);
			dg_error_hint(err,
				      "'devgatectl status' lists the labels of containers that "
				      "hold GPUs");
		}
		return l;
	}
	if (cgroup) {
		for (size_t i = 0; i < d->leases.n; i++) {
			if (strcmp(d->leases.v[i]->cgroup, cgroup) == 0)
				l = d->leases.v[i];
		}
		if (!l)
			dg_error_set(err, DG_E_NOT_GRANTED, ENOENT, "cgroup %s holds no GPU",
				     cgroup);
		return l;
	}
	if (pid <= 0 || pid > INT32_MAX) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "PID %lld is out of range", (long long)pid);
		return NULL;
	}
	if (target_from_pid(&d->cg, d->self_cgroup, (pid_t)pid, t, err) < 0)
		return NULL;
	l = lease_table_find(&d->leases, t->cgid);
	if (!l)
		dg_error_set(err, DG_E_NOT_GRANTED, ENOENT, "PID %lld (cgroup %s) holds no GPU",
			     (long long)pid, t->cgroup);
	return l;
}

/*
 * Marks in drop[] the lease GPUs named by the selector: all if "all", or
 * if NULL when only_devices is false (a revoke that names nothing takes
 * everything).
 */
static int revoke_select(struct daemon *d, const struct lease *l, const char *spec,
			 bool only_devices, bool *drop, struct dg_error *err)
{
	bool sel[DG_MAX_GPUS];
	bool all = spec ? strcmp(spec, "all") == 0 : !only_devices;
	int r;

	for (size_t i = 0; i < l->n_gpus; i++)
		drop[i] = all;
	if (!spec || all)
		return 0;
	if (instance_spec(spec))
		return instance_select(d->inv, l, spec, drop, err);
	r = select_gpus(d->inv, spec, sel, err);
	if (r < 0)
		return r;
	for (size_t g = 0; g < d->inv->n_gpus; g++) {
		bool held = false;

		if (!sel[g])
			continue;
		for (size_t i = 0; i < l->n_gpus; i++) {
			if (strcasecmp(l->gpus[i].uuid, d->inv->gpus[g].uuid) == 0) {
				drop[i] = true;
				held = true;
			}
		}
		if (!held)
			return dg_error_set(err, DG_E_NOT_GRANTED, ENOENT,
					    "%s does not hold GPU %u (%s)", lease_label(l),
					    d->inv->gpus[g].index, d->inv->gpus[g].uuid);
	}
	return 0;
}

/*
 * Removes nodes from l's container; best effort (a gone container has no
 * /dev). Through known, a process of l's cgroup that this request resolved
 * already, when there is one: the helper still checks it runs.
 */
/* Nodes gone from l, and all of l's driver files when files. */
static void remove_nodes(struct daemon *d, const struct lease *l, const struct target *known,
			 const struct dg_node *gone, size_t n_gone, struct node_result *res,
			 bool files)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	struct node_opts nopts = { .mode = d->cfg.node_mode };
	struct dg_error err = { 0 };
	bool reuse = known && known->pidfd >= 0 && known->cgid == l->cgid;

	if ((n_gone || files) && !reuse && live_target(d, l, &t) < 0) {
		log_info("%s has no live process; its /dev needs no cleanup", lease_label(l));
		return;
	}
	if (files)
		driverfs_remove(reuse ? known : &t, l, 0);
	if (n_gone && nodes_remove(reuse ? known : &t, &nopts, gone, n_gone, res, &err) < 0)
		log_warning("cannot remove nodes from %s: %s", lease_label(l), err.message);
	for (size_t i = 0; i < n_gone; i++) {
		if (res[i].status == NODE_CONFLICT)
			log_warning("left /dev/%s in %s alone: it is no longer our node",
				    gone[i].name, lease_label(l));
	}
}

/* Its counters, by key: every node it could have counted is in the inventory. */
static void drop_counters(struct daemon *d, uint64_t cgid)
{
	struct dg_node nodes[DG_MAX_NODES];
	size_t n = inventory_nodes(d->inv, nodes, DG_MAX_NODES);

	(void)bpfgate_counters_drop(d->bg, cgid, nodes, n);
}

/* Puts the runtime's programs back on a cgroup devgate no longer guards. */
static void unguard_cgroup(struct daemon *d, uint64_t cgid, const char *who)
{
	struct dg_error err = { 0 };
	auto_close int cgfd = -1;

	/* A removed cgroup has nothing attached any more: then only the pins go. */
	(void)cgroup_open_id(&d->cg, cgid, &cgfd);
	if (guard_remove(d->bg, cgid, cgfd, &err) < 0)
		log_error("cannot restore the device programs of %s: %s", who, err.message);
	drop_counters(d, cgid);
}

static void unguard_lease(struct daemon *d, struct lease *l)
{
	unguard_cgroup(d, l->cgid, lease_label(l));
	watch_del(d, l);
}

void grant_rollback(struct daemon *d, const struct lease *pending)
{
	const struct lease *committed = lease_table_find(&d->leases, pending->cgid);
	struct dg_node p_nodes[DG_MAX_NODES], c_nodes[DG_MAX_NODES], extra[DG_MAX_NODES];
	struct node_result res[DG_MAX_NODES] = { 0 };
	size_t n_p = lease_nodes(pending, d->inv, p_nodes, DG_MAX_NODES);
	size_t n_c = committed ? lease_nodes(committed, d->inv, c_nodes, DG_MAX_NODES) : 0;
	size_t n_x = node_diff(p_nodes, n_p, c_nodes, n_c, extra);

	grants_del(d, pending->cgid, extra, n_x);
	remove_nodes(d, pending, NULL, extra, n_x, res, false);
	if (!committed)
		unguard_cgroup(d, pending->cgid, lease_label(pending));
	(void)state_pending_clear(d->state, pending->cgid);
	log_notice("reconcile: rolled back the unfinished grant to %s (%zu node(s) and grant(s))",
		   lease_label(pending), n_x);
}

/* Marks in drop[] the lease devices the request names (all on a full revoke). */
static int revoke_select_devices(const struct lease *l, const struct dg_revoke_req *req, bool *drop,
				 struct dg_error *err)
{
	for (size_t i = 0; i < l->n_devices; i++)
		drop[i] = !req->gpus && req->n_devices == 0;
	for (size_t k = 0; k < req->n_devices; k++) {
		const struct lease_device *dev = lease_find_device(l, req->devices[k]);

		if (!dev) {
			dg_error_set(err, DG_E_NOT_GRANTED, ENOENT, "%s does not hold device '%s'",
				     lease_label(l), req->devices[k]);
			dg_error_hint(err, "name a device by its container path or host path; "
					   "'devgatectl status' lists them");
			return -ENOENT;
		}
		drop[dev - l->devices] = true;
	}
	return 0;
}

/* next: old without what the request names; their UUIDs and paths go to the reply. */
static int revoke_plan(struct daemon *d, const struct lease *old, const struct dg_revoke_req *req,
		       struct lease **next, struct dg_revoke_reply *out, struct dg_arena *a,
		       struct dg_error *err)
{
	bool drop[DG_MAX_GPUS], drop_dev[DG_MAX_DEVICES] = { 0 };
	int r = revoke_select(d, old, req->gpus, req->n_devices > 0, drop, err);

	if (r == 0)
		r = revoke_select_devices(old, req, drop_dev, err);
	if (r < 0)
		return r;
	*next = lease_copy(old);
	out->revoked = dg_arena_alloc(a, old->n_gpus * sizeof(*out->revoked) + 1);
	out->revoked_devices =
		dg_arena_alloc(a, old->n_devices * sizeof(*out->revoked_devices) + 1);
	if (!*next || !out->revoked || !out->revoked_devices) {
		dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < old->n_devices; i++) {
		char path[40];

		if (!drop_dev[i])
			continue;
		snprintf(path, sizeof(path), "/dev/%s", old->devices[i].name);
		out->revoked_devices[out->n_revoked_devices++] = dg_arena_strdup(a, path);
		lease_del_device(*next, old->devices[i].name);
	}
	for (size_t i = 0; i < old->n_gpus; i++) {
		if (!drop[i])
			continue;
		out->revoked[out->n_revoked++] = dg_arena_strdup(a, old->gpus[i].uuid);
		lease_del_gpu(*next, old->gpus[i].uuid);
	}
	if ((*next)->n_gpus == 0)
		lease_driver_clear(*next);
	return 0;
}

/* The lease of what a revoke takes away: old's GPUs that next lacks. */
static struct lease *gone_lease(const struct lease *old, const struct lease *next)
{
	struct lease *g = lease_copy(old);

	for (size_t i = 0; g && i < old->n_gpus; i++) {
		if (lease_find_gpu(next, old->gpus[i].uuid))
			lease_del_gpu(g, old->gpus[i].uuid);
	}
	for (size_t i = 0; g && i < old->n_devices; i++) {
		char path[40];

		snprintf(path, sizeof(path), "/dev/%s", old->devices[i].name);
		if (lease_find_device(next, path))
			lease_del_device(g, old->devices[i].name);
	}
	return g;
}

/*
 * A revoke after its journal is written, from the kernel out: grants
 * first (the GPU closes at once), then the record, the nodes, the gates.
 * Also how reconcile finishes one a crash interrupted: every step is
 * idempotent.
 */
static void revoke_steps(struct daemon *d, const struct lease *old, const struct lease *next,
			 const struct target *t, struct node_result *res, struct dg_node *gone,
			 size_t *n_gone)
{
	struct dg_node old_nodes[DG_MAX_NODES], new_nodes[DG_MAX_NODES];
	size_t n_old = lease_nodes(old, d->inv, old_nodes, DG_MAX_NODES);
	size_t n_new = lease_nodes(next, d->inv, new_nodes, DG_MAX_NODES);
	int r;

	*n_gone = node_diff(old_nodes, n_old, new_nodes, n_new, gone);
	grants_del(d, old->cgid, gone, *n_gone);
	fault_point("revoke.grants");
	r = lease_holds(next) ? state_save(d->state, next) : state_remove(d->state, next->cgid);
	if (r < 0)
		log_error_errno(r, "cannot record the revoke from %s: %m (the journal keeps it)",
				lease_label(old));
	fault_point("revoke.record");
	/* The driver's files go with the last GPU. */
	remove_nodes(d, old, t, gone, *n_gone, res, old->n_driver_files && !next->n_driver_files);
	fault_point("revoke.nodes");
	if (!lease_holds(next))
		unguard_cgroup(d, old->cgid, lease_label(old));
	if (r == 0)
		(void)state_revoking_clear(d->state, old->cgid);
}

/*
 * Processes that still hold a revoked device (opened before the revoke):
 * reported, and with kill signalled, so "revoked" can mean nobody in the
 * container can use it any more.
 */
static int report_holders(struct daemon *d, const struct lease *l, const struct dg_node *gone,
			  size_t n_gone, const struct dg_revoke_req *req,
			  struct dg_revoke_reply *out, struct dg_arena *a)
{
	struct holder h[HOLDERS_MAX];
	auto_close int cgfd = -1;
	size_t n;

	if (n_gone == 0 || cgroup_open_id(&d->cg, l->cgid, &cgfd) < 0)
		return 0;
	n = holders_find(cgfd, gone, n_gone, h, ARRAY_SIZE(h));
	out->holders = n ? dg_arena_alloc(a, n * sizeof(*out->holders)) : NULL;
	if (n && !out->holders)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char path[64];

		snprintf(path, sizeof(path), "/dev/%s", h[i].node.name);
		out->holders[i] = (struct dg_holder_proc){
			.pid = h[i].pid,
			.comm = dg_arena_strdup(a, h[i].comm),
			.node = dg_arena_strdup(a, path),
		};
		if (!out->holders[i].comm || !out->holders[i].node)
			return -ENOMEM;
		log_notice("%s: PID %d (%s) still holds %s", lease_label(l), (int)h[i].pid,
			   h[i].comm, path);
	}
	out->n_holders = n;
	if (req->has_kill && n) {
		out->killed = (int64_t)holders_signal(h, n, l->cgroup, (int)req->kill);
		log_notice("%s: sent signal %d to %lld holder(s)", lease_label(l), (int)req->kill,
			   (long long)out->killed);
	}
	return 0;
}

/*
 * Revokes what req names from old (in the table); t: the target the
 * request resolved, if any. A full revoke reports full_type ("released",
 * or "expired" at expiry).
 */
static int revoke_lease(struct daemon *d, struct lease *old, const struct dg_revoke_req *req,
			const struct target *t, const char *full_type, struct dg_revoke_reply *out,
			struct dg_arena *a, struct dg_error *err)
{
	auto_cleanup(lease_freep) struct lease *next = NULL, *gone = NULL;
	struct node_result res[DG_MAX_NODES] = { 0 };
	struct dg_node gone_nodes[DG_MAX_NODES];
	size_t n_gone = 0;
	char note[40];
	int r;

	r = revoke_plan(d, old, req, &next, out, a, err);
	if (r == 0 && !(gone = gone_lease(old, next)))
		r = dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	if (r < 0)
		return r;
	/* The journal first: after a crash the revoke is finished, never undone. */
	r = state_revoking_mark(d->state, gone);
	if (r < 0)
		return record_error(d, r, "revoke", err);
	fault_point("revoke.journal");
	revoke_steps(d, old, next, t, res, gone_nodes, &n_gone);
	if (report_holders(d, old, gone_nodes, n_gone, req, out, a) < 0)
		log_error("out of memory describing the holders in %s", lease_label(old));
	out->has_lease = true;
	if (view_lease(d, next, &out->lease, a) < 0 ||
	    node_statuses(gone_nodes, res, n_gone, &out->nodes, &out->n_nodes, a) < 0)
		log_error("out of memory describing the revoke from %s", lease_label(old));
	log_info("revoked %zu GPU(s)%s from %s", out->n_revoked,
		 lease_devices_note(out->n_revoked_devices, note, sizeof(note)), lease_label(old));
	emit(d, lease_holds(next) ? "revoked" : full_type, next, out->revoked, out->n_revoked);
	if (!lease_holds(next)) {
		watch_del(d, old);
		lease_free(lease_table_take(&d->leases, old->cgid));
		return 0;
	}
	commit_lease(d, old, TAKE_PTR(next));
	return 0;
}

int grant_revoke(struct daemon *d, const struct dg_revoke_req *req, struct dg_revoke_reply *out,
		 struct dg_arena *a, struct dg_error *err)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	struct lease *old = find_lease(d, &req->target, &t, err);

	if (!old && req->missing_ok &&
	    (err->code == DG_E_NOT_GRANTED ||
	     (err->code == DG_E_NO_TARGET && req->target.container))) {
		memset(err, 0, sizeof(*err));
		return 0;
	}
	if (!old)
		return -(err->errnum ? err->errnum : EINVAL);
	return revoke_lease(d, old, req, &t, "released", out, a, err);
}

void grant_expire(struct daemon *d, uint64_t cgid)
{
	struct lease *l = lease_table_find(&d->leases, cgid);
	struct dg_revoke_req req = { .kill = 9 };
	struct dg_revoke_reply out = { 0 };
	struct dg_error err = { 0 };
	struct dg_arena a = { 0 };
	char when[64];

	if (!l || l->expires <= 0)
		return;
	req.has_kill = l->kill_on_expiry;
	format_time_utc(l->expires, when, sizeof(when));
	log_notice("the lease of %s expired at %s: revoking it%s", lease_label(l), when,
		   l->kill_on_expiry ? " and killing its holders" : "");
	if (revoke_lease(d, l, &req, NULL, "expired", &out, &a, &err) < 0)
		log_error("cannot revoke the expired lease of cgroup %llu: %s",
			  (unsigned long long)cgid, err.message);
	else
		metrics_inc(d->metrics, METRIC_EXPIRATIONS, 1);
	dg_arena_free(&a);
}

int grant_extend(struct daemon *d, const struct dg_extend_req *req, struct dg_extend_reply *out,
		 struct dg_arena *a, struct dg_error *err)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	auto_cleanup(lease_freep) struct lease *next = NULL;
	struct lease *old;
	int64_t now = now_wall_ceil_s(), expires;
	char when[64];
	int r;

	if (req->has_by == req->has_ttl)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "say how much longer with exactly one of by or ttl");
	old = find_lease(d, &req->target, &t, err);
	if (!old)
		return -(err->errnum ? err->errnum : EINVAL);
	if (old->expires <= 0) {
		dg_error_set(err, DG_E_INVALID, ENOENT, "the lease of %s does not expire",
			     lease_label(old));
		dg_error_hint(err, "give it a time to live with 'devgatectl grant ... --ttl "
				   "DURATION'; extend only moves an expiry");
		return -ENOENT;
	}
	r = req->has_by ? lease_expiry_extend(old->expires, now, req->by, &expires)
			: lease_expiry_new(now, req->ttl, &expires);
	if (r < 0)
		return dg_error_set(err, DG_E_INVALID, ERANGE,
				    "the lease would end more than %lld days from now",
				    (long long)(DURATION_MAX_S / 86400));
	next = lease_copy(old);
	if (!next)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	next->expires = expires;
	r = state_save(d->state, next);
	if (r < 0)
		return record_error(d, r, "new expiry", err);
	format_time_utc(expires, when, sizeof(when));
	log_info("the lease of %s now expires at %s", lease_label(next), when);
	if (view_lease(d, next, &out->lease, a) < 0)
		log_error("out of memory describing the lease of %s", lease_label(next));
	emit(d, "extended", next, NULL, 0);
	/* Out of the table and back: it keeps per-GPU counts. */
	commit_lease(d, old, TAKE_PTR(next));
	return 0;
}

void grant_release(struct daemon *d, uint64_t cgid, const char *why)
{
	struct lease *l = lease_table_find(&d->leases, cgid);
	struct dg_node nodes[DG_MAX_NODES];
	const char *gpus[DG_MAX_GPUS];
	char note[40];
	size_t n;
	int r;

	if (!l)
		return;
	r = state_remove(d->state, cgid);
	if (r < 0)
		log_error_errno(r, "cannot remove the lease file of %s: %m", lease_label(l));
	fault_point("release.record");
	n = lease_nodes(l, d->inv, nodes, DG_MAX_NODES);
	grants_del(d, cgid, nodes, n);
	fault_point("release.grants");
	unguard_lease(d, l);
	log_info("released %zu GPU(s)%s of %s: %s", l->n_gpus,
		 lease_devices_note(l->n_devices, note, sizeof(note)), lease_label(l), why);
	metrics_inc(d->metrics, METRIC_RELEASES, 1);
	for (size_t i = 0; i < l->n_gpus && i < DG_MAX_GPUS; i++)
		gpus[i] = l->gpus[i].uuid;
	emit(d, "released", l, gpus, l->n_gpus < DG_MAX_GPUS ? l->n_gpus : DG_MAX_GPUS);
	lease_free(lease_table_take(&d->leases, cgid));
}

static int add_lease_gpu(struct lease *l, const struct lease_gpu *g)
{
	struct dg_gpu gpu = { .family = g->family,
			      .minor = g->minor,
			      .has_card = g->card,
			      .card_minor = g->card_minor };
	int r;

	snprintf(gpu.uuid, sizeof(gpu.uuid), "%s", g->uuid);
	r = lease_add_gpu(l, &gpu, g->shared);
	if (r >= 0 && g->card)
		lease_gpu_add_card(l, &gpu);
	return r;
}

void grant_finish_revoke(struct daemon *d, const struct lease *gone)
{
	struct lease *committed = lease_table_find(&d->leases, gone->cgid);
	auto_cleanup(lease_freep) struct lease *was = committed ? lease_copy(committed)
								: lease_copy(gone);
	auto_cleanup(lease_freep) struct lease *next = was ? lease_copy(was) : NULL;
	struct node_result res[DG_MAX_NODES] = { 0 };
	struct dg_node nodes[DG_MAX_NODES];
	char note[40];
	size_t n = 0;

	if (!was || !next)
		return;
	/* was: what the record held (or the journal alone, if the record went). */
	for (size_t i = 0; i < gone->n_gpus; i++) {
		if (!lease_find_gpu(was, gone->gpus[i].uuid))
			(void)add_lease_gpu(was, &gone->gpus[i]);
		lease_del_gpu(next, gone->gpus[i].uuid);
	}
	for (size_t i = 0; i < gone->n_devices; i++) {
		(void)lease_add_device(was, &gone->devices[i]);
		lease_del_device(next, gone->devices[i].name);
	}
	revoke_steps(d, was, next, NULL, res, nodes, &n);
	if (committed && !lease_holds(next))
		lease_free(lease_table_take(&d->leases, gone->cgid));
	else if (committed)
		commit_lease(d, committed, TAKE_PTR(next));
	log_notice(
		"reconcile: finished the revoke of %zu GPU(s)%s from %s that a crash interrupted",
		gone->n_gpus, lease_devices_note(gone->n_devices, note, sizeof(note)),
		lease_label(gone));
}

/* ---- move: GPUs from one container to another, in one transaction ---- */

/* The destination: a PID or cgroup is resolved; a label names a lease's container. */
static int move_target(struct daemon *d, const struct dg_target_args *ta, struct target *t,
		       struct dg_error *err)
{
	struct lease *l;

	if (!ta->container || ta->has_pid || ta->cgroup)
		return resolve_target(d, ta, t, err);
	l = find_lease(d, ta, t, err);
	if (!l)
		return -(err->errnum ? err->errnum : EINVAL);
	if (live_target(d, l, t) < 0)
		return dg_error_set(err, DG_E_NO_TARGET, ESRCH, "%s has no live process",
				    lease_label(l));
	return 0;
}

struct move_plan {
	struct lease *src_next; /* the source without what moves */
	struct lease *gone;	/* what moves, as a lease of the source */
	struct lease *dst_next; /* the destination with it */
	struct dg_node gone_nodes[DG_MAX_NODES];
	size_t n_gone;
};

static void move_plan_done(struct move_plan *p)
{
	lease_free(p->src_next);
	lease_free(p->gone);
	lease_free(p->dst_next);
}

/* Whether a GPU of the source may go to dst; ret: the GPU in the inventory. */
static int move_check_gpu(struct daemon *d, const struct lease_gpu *lg, const struct lease *dst,
			  const struct dg_gpu **ret, struct dg_error *err)
{
	const struct dg_gpu *g = inventory_find_uuid(d->inv, lg->uuid);

	if (!g || g->problem[0] || g->excluded)
		return dg_error_set(err, DG_E_UNAVAILABLE, EIO, "GPU %s cannot be granted now: %s",
				    lg->uuid,
				    !g		    ? "it is not on this host"
				    : g->problem[0] ? g->problem
						    : "the gpu-allow list excludes it");
	if (lg->instance && !mig_find_gi(g, lg->gi))
		return dg_error_set(err, DG_E_UNAVAILABLE, ENODEV,
				    "GPU instance %u:%u is not on this host any more", g->index,
				    lg->gi);
	if (dst && lease_find_gpu(dst, lg->uuid)) {
		dg_error_set(err, DG_E_UNAVAILABLE, EEXIST, "%s holds %sGPU %u already",
			     lease_label(dst),
			     lease_find_gpu(dst, lg->uuid)->instance ? "an instance of " : "",
			     g->index);
		dg_error_hint(err, "move only GPUs the destination does not hold; a container "
				   "holds one instance of a GPU or all of it");
		return -EEXIST;
	}
	*ret = g;
	return 0;
}

/* lg, as the destination will hold it: the whole GPU or the same instance. */
static int move_add(struct lease *dst, const struct lease_gpu *lg, const struct dg_gpu *g)
{
	if (lg->instance)
		return lease_add_instance(dst, g, mig_find_gi(g, lg->gi));
	return lease_add_gpu(dst, g, lg->shared);
}

/*
 * The leases before and after: what the source keeps, what moves, what the
 * destination gets (each GPU in its mode). A moved GPU keeps its time
 * limit: the destination's lease gets the source's expiry when it has none
 * or a later one.
 */
static int move_plan(struct daemon *d, const struct lease *src, const struct lease *dst_old,
		     const struct target *dt, const struct dg_move_req *req, struct move_plan *p,
		     struct dg_move_reply *out, struct dg_arena *a, struct dg_error *err)
{
	struct dg_node src_nodes[DG_MAX_NODES], next_nodes[DG_MAX_NODES];
	bool drop[DG_MAX_GPUS];
	int r = revoke_select(d, src, req->gpus, false, drop, err);

	if (r < 0)
		return r;
	p->src_next = lease_copy(src);
	p->gone = lease_copy(src);
	p->dst_next = next_lease(dst_old, dt, NULL);
	out->moved = dg_arena_alloc(a, src->n_gpus * sizeof(*out->moved) + 1);
	if (!p->src_next || !p->gone || !p->dst_next || !out->moved)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	for (size_t i = 0; i < src->n_devices; i++)
		lease_del_device(p->gone, src->devices[i].name);
	for (size_t i = 0; i < src->n_gpus; i++) {
		const struct dg_gpu *g = NULL;

		if (!drop[i]) {
			lease_del_gpu(p->gone, src->gpus[i].uuid);
			continue;
		}
		r = move_check_gpu(d, &src->gpus[i], dst_old, &g, err);
		if (r < 0)
			return r;
		lease_del_gpu(p->src_next, src->gpus[i].uuid);
		if (move_add(p->dst_next, &src->gpus[i], g) < 0)
			return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
		out->moved[out->n_moved++] = dg_arena_strdup(a, g->uuid);
	}
	if (out->n_moved == 0)
		return dg_error_set(err, DG_E_NOT_GRANTED, ENOENT, "%s holds no GPU",
				    lease_label(src));
	/* The driver's files stay with the source until its last GPU leaves. */
	if (p->src_next->n_gpus == 0)
		lease_driver_clear(p->src_next);
	if (src->expires > 0 &&
	    (p->dst_next->expires <= 0 || src->expires < p->dst_next->expires)) {
		p->dst_next->expires = src->expires;
		p->dst_next->kill_on_expiry = src->kill_on_expiry;
	}
	p->n_gone = node_diff(src_nodes, lease_nodes(src, d->inv, src_nodes, DG_MAX_NODES),
			      next_nodes,
			      lease_nodes(p->src_next, d->inv, next_nodes, DG_MAX_NODES),
			      p->gone_nodes);
	return 0;
}

/* Makes nodes in l's container again (a move given back); best effort. */
static void restore_nodes(struct daemon *d, const struct lease *l, const struct target *known,
			  const struct dg_node *nodes, size_t n)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	struct node_opts nopts = { .mode = d->cfg.node_mode,
				   .uid = d->cfg.node_uid,
				   .gid = d->cfg.node_gid };
	struct node_result res[DG_MAX_NODES];
	struct dg_error err = { 0 };
	bool reuse = known && known->pidfd >= 0 && known->cgid == l->cgid;

	if (n && (reuse || live_target(d, l, &t) == 0) &&
	    nodes_create(reuse ? known : &t, &nopts, nodes, n, res, &err) < 0)
		log_warning("cannot make the nodes of %s again: %s", lease_label(l), err.message);
}

/* The destination's grant failed (and undid itself): the source gets it back. */
static void move_undo(struct daemon *d, const struct lease *src, const struct target *st,
		      const struct move_plan *p)
{
	struct dg_error err = { 0 };

	if (grants_put(d, src->cgid, p->gone_nodes, p->n_gone, &err) < 0)
		log_error("cannot give %s its grants back: %s", lease_label(src), err.message);
	restore_nodes(d, src, st, p->gone_nodes, p->n_gone);
	(void)state_moving_clear(d->state, src->cgid);
}

/* Holders in the source of a moved GPU's nodes: reported, signalled with kill. */
static void move_holders(struct daemon *d, const struct lease *src, const struct move_plan *p,
			 const struct dg_move_req *req, struct dg_move_reply *out,
			 struct dg_arena *a)
{
	struct dg_revoke_req rq = { .kill = req->kill, .has_kill = req->has_kill };
	struct dg_revoke_reply rp = { 0 };

	if (report_holders(d, src, p->gone_nodes, p->n_gone, &rq, &rp, a) < 0)
		log_error("out of memory describing the holders in %s", lease_label(src));
	out->holders = rp.holders;
	out->n_holders = rp.n_holders;
	out->killed = rp.killed;
}

/*
 * After the destination's record (the commit): the source's record, its
 * gate if it holds nothing more, the journal, the table.
 */
static void move_commit(struct daemon *d, struct lease *src, struct lease *dst_old,
			struct move_plan *p, struct dg_move_reply *out)
{
	bool keeps = lease_holds(p->src_next);
	int r = keeps ? state_save(d->state, p->src_next) : state_remove(d->state, src->cgid);

	if (r < 0)
		log_error_errno(r, "cannot record the move from %s: %m (the journal keeps it)",
				lease_label(src));
	if (!keeps)
		unguard_cgroup(d, src->cgid, lease_label(src));
	if (r == 0)
		(void)state_moving_clear(d->state, src->cgid);
	emit(d, keeps ? "revoked" : "released", p->src_next, out->moved, out->n_moved);
	emit(d, "granted", p->dst_next, out->moved, out->n_moved);
	commit_lease(d, dst_old, TAKE_PTR(p->dst_next));
	if (keeps) {
		commit_lease(d, src, TAKE_PTR(p->src_next));
	} else {
		watch_del(d, src);
		lease_free(lease_table_take(&d->leases, src->cgid));
	}
}

/*
 * The source loses the GPUs in the kernel (grants, then nodes) before the
 * destination gets them (nodes, grants, gate, record): a gap where neither
 * can open them, never an overlap. One handler of a single-threaded loop:
 * no other request sees the table between the steps.
 */
int grant_move(struct daemon *d, const struct dg_move_req *req, struct dg_move_reply *out,
	       struct dg_arena *a, struct dg_error *err)
{
	auto_cleanup(target_donep) struct target st = TARGET_INIT, dt = TARGET_INIT;
	auto_cleanup(move_plan_done) struct move_plan p = { 0 };
	struct node_result res[DG_MAX_NODES] = { 0 };
	const struct dg_grant_req g = { 0 };
	struct grant_txn x = { 0 };
	struct lease *src, *dst_old;
	char from[280];
	int r;

	src = find_lease(d, &req->from, &st, err);
	if (!src)
		return -(err->errnum ? err->errnum : EINVAL);
	r = move_target(d, &req->to, &dt, err);
	if (r < 0)
		return r;
	if (dt.cgid == src->cgid)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "the source and the destination are one container (%s)",
				    lease_label(src));
	if (d->inv->ctl_problem[0])
		return dg_error_set(err, DG_E_UNAVAILABLE, EIO, "cannot grant: %s",
				    d->inv->ctl_problem);
	dst_old = lease_table_find(&d->leases, dt.cgid);
	r = move_plan(d, src, dst_old, &dt, req, &p, out, a, err);
	if (r < 0)
		return r;
	r = state_moving_mark(d->state, p.gone, dt.cgid);
	if (r < 0)
		return record_error(d, r, "move", err);
	fault_point("move.journal");
	grants_del(d, src->cgid, p.gone_nodes, p.n_gone);
	fault_point("move.grants");
	remove_nodes(d, src, &st, p.gone_nodes, p.n_gone, res, false);
	fault_point("move.nodes");
	r = grant_apply(d, &dt, dst_old, p.dst_next, &g, &x, err);
	if (r < 0) {
		move_undo(d, src, &st, &p);
		return r;
	}
	fault_point("move.commit");
	if (src->n_driver_files && !p.src_next->n_driver_files)
		remove_nodes(d, src, &st, NULL, 0, res, true);
	move_holders(d, src, &p, req, out, a);
	snprintf(from, sizeof(from), "%s", lease_label(src));
	if (view_lease(d, p.src_next, &out->from, a) < 0 ||
	    view_lease(d, p.dst_next, &out->to, a) < 0)
		log_error("out of memory describing the move from %s", from);
	log_info("moved %zu GPU(s) from %s to %s (cgroup %s, PID %d)", out->n_moved, from,
		 lease_label(p.dst_next), p.dst_next->cgroup, (int)p.dst_next->pid);
	move_commit(d, src, dst_old, &p, out);
	return 0;
}

/*
 * A move a crash cut short: finished when the destination's record holds
 * what moved (the commit), else given back to the source, whose record
 * still holds it (its grants are re-put with every lease's; its nodes here).
 */
void grant_finish_move(struct daemon *d, const struct lease *gone, uint64_t to)
{
	const struct lease *dst = lease_table_find(&d->leases, to);
	struct lease *src = lease_table_find(&d->leases, gone->cgid);
	struct dg_node nodes[DG_MAX_NODES];
	bool committed = dst != NULL;

	for (size_t i = 0; i < gone->n_gpus; i++)
		committed = committed && lease_find_gpu(dst, gone->gpus[i].uuid);
	if (committed) {
		grant_finish_revoke(d, gone);
		log_notice("reconcile: the move from %s to %s had committed: finished",
			   lease_label(gone), lease_label(dst));
	} else if (src) {
		restore_nodes(d, src, NULL, nodes, lease_nodes(gone, d->inv, nodes, DG_MAX_NODES));
		log_notice("reconcile: the move from %s had not committed: its GPU(s) stay there",
			   lease_label(src));
	}
	(void)state_moving_clear(d->state, gone->cgid);
}
