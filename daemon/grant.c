// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "cleanup.h"
#include "grant.h"
#include "jsonutil.h"
#include "log.h"
#include "metrics.h"
#include "nodes.h"
#include "target.h"
#include "util.h"
#include "watch.h"

#define MAX_NODES (DG_MAX_GPUS + 3)
#define GRANT_ACCESS (DG_ACC_READ | DG_ACC_WRITE)

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

static json_object *nodes_json(const struct dg_node *nodes, const struct node_result *res, size_t n)
{
	json_object *a = json_object_new_array();

	for (size_t i = 0; i < n; i++) {
		json_object *o = json_object_new_object();
		char path[64];

		snprintf(path, sizeof(path), "/dev/%s", nodes[i].name);
		json_object_object_add(o, "path", json_object_new_string(path));
		json_object_object_add(o, "status", json_object_new_string(status_name(res[i].status)));
		json_object_array_add(a, o);
	}
	return a;
}

json_object *grant_lease_json(const struct daemon *d, const struct lease *l)
{
	json_object *o = json_object_new_object(), *gpus = json_object_new_array();
	char id[32], since[64];

	snprintf(id, sizeof(id), "%llu", (unsigned long long)l->cgid);
	json_object_object_add(o, "cgroup_id", json_object_new_string(id));
	json_add_str(o, "cgroup", l->cgroup);
	json_add_str(o, "container", l->container);
	json_object_object_add(o, "pid", json_object_new_int(l->pid));
	format_time_utc(l->since, since, sizeof(since));
	json_object_object_add(o, "since", json_object_new_string(since));
	for (size_t i = 0; i < l->n_gpus; i++) {
		const struct dg_gpu *gpu = inventory_find_uuid(d->inv, l->gpus[i].uuid);
		json_object *g;

		if (gpu) {
			g = gpu_to_json(d->inv, gpu);
		} else { /* the GPU left the host; keep what the lease knows */
			g = json_object_new_object();
			json_object_object_add(g, "uuid", json_object_new_string(l->gpus[i].uuid));
			json_object_object_add(g, "minor", json_object_new_int64(l->gpus[i].minor));
			json_object_object_add(g, "problem",
					       json_object_new_string("no longer on this host"));
		}
		json_object_object_add(g, "shared", json_object_new_boolean(l->gpus[i].shared));
		json_object_array_add(gpus, g);
	}
	json_object_object_add(o, "gpus", gpus);
	return o;
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

static void grants_del(struct daemon *d, uint64_t cgid, const struct dg_node *nodes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = bpfgate_grant_del(d->bg, cgid, &nodes[i]);

		if (r < 0)
			log_warning_errno(r, "cannot delete grant of %u:%u for cgroup %llu: %m",
					  nodes[i].major, nodes[i].minor, (unsigned long long)cgid);
	}
}

static int grants_put(struct daemon *d, uint64_t cgid, const struct dg_node *nodes, size_t n,
		      struct dg_error *err)
{
	for (size_t i = 0; i < n; i++) {
		int r = bpfgate_grant_put(d->bg, cgid, &nodes[i], GRANT_ACCESS);

		if (r < 0)
			return dg_error_set(err, DG_E_KERNEL, r, "cannot add grant of %u:%u: %s",
					    nodes[i].major, nodes[i].minor, strerror(-r));
	}
	return 0;
}

static int resolve_target(struct daemon *d, json_object *args, struct target *t,
			  struct dg_error *err)
{
	const char *cgroup = json_get_str(args, "cgroup");
	int64_t pid = 0;
	bool has_pid = json_get_int(args, "pid", &pid);

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

static int request_from_args(json_object *args, struct alloc_request *req, struct dg_error *err)
{
	int64_t count = 0;

	if (json_get_int(args, "count", &count) && (count < 1 || count > DG_MAX_GPUS))
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "a GPU count must be between 1 and %d", DG_MAX_GPUS);
	req->count = (unsigned int)count;
	req->selectors = json_get_str(args, "gpus");
	req->model = json_get_str(args, "model");
	req->arch = json_get_str(args, "arch");
	req->product = json_get_str(args, "product");
	req->shared = json_get_bool(args, "shared");
	return alloc_check_request(req, err);
}

static int label_check(const char *label, struct dg_error *err)
{
	if (!label)
		return 0;
	if (!*label || strlen(label) > 256)
		return dg_error_set(err, DG_E_INVALID, EINVAL, "container label must be 1 to 256 "
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

/* Adds the picked GPUs to next; returns how many. */
static size_t add_picked(struct daemon *d, struct lease *next, const bool *picked, bool shared,
			 json_object *granted)
{
	size_t n = 0;

	for (size_t i = 0; i < d->inv->n_gpus; i++) {
		if (!picked[i])
			continue;
		lease_add_gpu(next, &d->inv->gpus[i], shared);
		json_object_array_add(granted, json_object_new_string(d->inv->gpus[i].uuid));
		n++;
	}
	return n;
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

static void emit(struct daemon *d, const char *type, const struct lease *l, json_object *gpus)
{
	json_object *ev = json_object_new_object();

	json_object_object_add(ev, "type", json_object_new_string(type));
	json_object_object_add(ev, "lease", grant_lease_json(d, l));
	json_object_object_add(ev, "gpus", gpus ? json_object_get(gpus) : json_object_new_array());
	server_broadcast(d, "watch", ev);
	json_object_put(ev);
}

struct grant_txn {
	struct dg_node nodes[MAX_NODES];
	struct node_result res[MAX_NODES];
	size_t n_nodes;
	struct dg_node added[MAX_NODES]; /* grants new in this call */
	size_t n_added;
	struct guard_info guard;
	uint64_t t_nodes, t_bpf, t_state; /* ns per step, for -v */
};

/* Kernel side of a grant; undoes its own steps when one fails. */
static int grant_apply(struct daemon *d, const struct target *t, const struct lease *old,
		       struct lease *next, const char *root, struct grant_txn *x,
		       struct dg_error *err)
{
	struct node_opts nopts = {
		.mode = d->cfg.node_mode,
		.uid = d->cfg.node_uid,
		.gid = d->cfg.node_gid,
		.root_path = root,
	};
	struct dg_node old_nodes[MAX_NODES];
	size_t n_old = old ? lease_nodes(old, d->inv, old_nodes, MAX_NODES) : 0;
	uint64_t t0 = now_mono_ns();
	int r;

	x->n_nodes = lease_nodes(next, d->inv, x->nodes, MAX_NODES);
	x->n_added = node_diff(x->nodes, x->n_nodes, old_nodes, n_old, x->added);
	r = nodes_create(t, &nopts, x->nodes, x->n_nodes, x->res, err);
	x->t_nodes = now_mono_ns() - t0;
	if (r < 0)
		return r;
	r = grants_put(d, next->cgid, x->nodes, x->n_nodes, err);
	if (r == 0)
		r = bpfgate_guard(d->bg, next->cgid, t->cgfd, &x->guard, err);
	x->t_bpf = now_mono_ns() - t0 - x->t_nodes;
	if (r == 0) {
		r = state_save(d->state, next);
		if (r < 0)
			dg_error_set(err, DG_E_STATE, r, "cannot record the lease in %s: %s",
				     d->cfg.state_dir, strerror(-r));
	}
	x->t_state = now_mono_ns() - t0 - x->t_nodes - x->t_bpf;
	if (r == 0)
		return 0;

	grants_del(d, next->cgid, x->added, x->n_added);
	if (!old) {
		struct dg_error ignore = { 0 };

		(void)bpfgate_unguard(d->bg, next->cgid, t->cgfd, &ignore);
	}
	{
		struct dg_node made[MAX_NODES];
		struct node_result tmp[MAX_NODES];
		struct dg_error ignore = { 0 };
		size_t n = 0;

		for (size_t i = 0; i < x->n_nodes; i++) {
			if (x->res[i].status == NODE_CREATED)
				made[n++] = x->nodes[i];
		}
		if (n)
			(void)nodes_remove(t, &nopts, made, n, tmp, &ignore);
	}
	return r;
}

static json_object *grant_reply(struct daemon *d, const struct lease *l, json_object *granted,
				const struct grant_txn *x)
{
	json_object *o = grant_lease_json(d, l), *warnings = json_object_new_array();

	json_object_object_add(o, "granted", json_object_get(granted));
	json_object_object_add(o, "nodes", nodes_json(x->nodes, x->res, x->n_nodes));
	if (x->guard.ancestor_progs) {
		char w[256];

		snprintf(w, sizeof(w), "%u device program(s) on ancestor cgroups of %s are not "
			 "managed by devgate and may still deny the GPU", x->guard.ancestor_progs,
			 l->cgroup);
		json_object_array_add(warnings, json_object_new_string(w));
		log_warning("%s", w);
	}
	json_object_object_add(o, "warnings", warnings);
	return o;
}

/* Picks GPUs for cgid against what every other lease holds now. */
static int pick_gpus(struct daemon *d, uint64_t cgid, const struct alloc_request *req,
		     bool *picked, struct dg_error *err)
{
	struct gpu_use use[DG_MAX_GPUS];

	alloc_usage(d->inv, &d->leases, cgid, use);
	return alloc_pick(d->inv, use, lease_table_find(&d->leases, cgid), req, picked, err);
}

int grant_request(struct daemon *d, json_object *args, json_object **ret, struct dg_error *err)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	auto_cleanup(lease_freep) struct lease *next = NULL;
	auto_json json_object *granted = json_object_new_array();
	const char *label = json_get_str(args, "container");
	struct alloc_request req = { 0 };
	bool picked[DG_MAX_GPUS];
	struct grant_txn x = { 0 };
	struct lease *old;
	int r;

	r = request_from_args(args, &req, err);
	if (r == 0)
		r = label_check(label, err);
	/* An image asking for GPUs through its env is honoured only if the admin said so. */
	if (r == 0 && json_get_bool(args, "from_image") && !d->cfg.hook_env) {
		dg_error_set(err, DG_E_PERM, EPERM, "GPUs requested by the image's environment are "
			     "not honoured: hook-allow-env is off");
		dg_error_hint(err, "request GPUs with devgate's CDI devices or annotation, or start "
				   "devgated with --hook-allow-env");
		return -EPERM;
	}
	if (r == 0)
		r = resolve_target(d, args, &t, err);
	if (r < 0)
		return r;
	r = pick_gpus(d, t.cgid, &req, picked, err);
	/* A holder may have ended a moment ago, before the watch could say so. */
	if (r == -EBUSY && watch_release_ended(d, t.cgid) > 0) {
		*err = (struct dg_error){ 0 };
		r = pick_gpus(d, t.cgid, &req, picked, err);
	}
	if (r < 0)
		return r;
	old = lease_table_find(&d->leases, t.cgid);
	if (d->inv->ctl_problem[0])
		return dg_error_set(err, DG_E_UNAVAILABLE, EIO, "cannot grant: %s",
				    d->inv->ctl_problem);
	next = old ? lease_copy(old) : lease_start(&t, label);
	if (!next)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	if (old && label && (!old->container || strcmp(old->container, label) != 0)) {
		free(next->container);
		next->container = strdup(label);
	}
	next->pid = t.pid;
	add_picked(d, next, picked, req.shared, granted);
	r = grant_apply(d, &t, old, next, json_get_str(args, "root"), &x, err);
	if (r < 0)
		return r;
	*ret = grant_reply(d, next, granted, &x);
	log_debug("grant to %s: nodes %llu us, bpf %llu us, state %llu us", lease_label(next),
		  (unsigned long long)x.t_nodes / 1000, (unsigned long long)x.t_bpf / 1000,
		  (unsigned long long)x.t_state / 1000);
	if (json_object_array_length(granted))
		log_info("granted %zu GPU(s) to %s (cgroup %s, PID %d)",
			 json_object_array_length(granted), lease_label(next), next->cgroup,
			 (int)next->pid);
	emit(d, "granted", next, granted);
	commit_lease(d, old, TAKE_PTR(next));
	return 0;
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

/* The lease a revoke names; NULL with err set when there is none. */
static struct lease *find_lease(struct daemon *d, json_object *args, struct dg_error *err)
{
	const char *label = json_get_str(args, "container"), *cgroup = json_get_str(args, "cgroup");
	int64_t pid = 0;
	bool has_pid = json_get_int(args, "pid", &pid);
	int given = has_pid + !!label + !!cgroup;
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	struct lease *l = NULL;

	if (given != 1) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "name the container by exactly one of a PID, "
			     "a cgroup or a container label");
		return NULL;
	}
	if (label) {
		if (lease_table_find_label(&d->leases, label, &l) == -EEXIST)
			dg_error_set(err, DG_E_INVALID, EEXIST, "several leases carry the label '%s'; "
				     "name the container by PID or cgroup", label);
		else if (!l)
			dg_error_set(err, DG_E_NOT_GRANTED, ENOENT, "container '%s' holds no GPU", label);
		return l;
	}
	if (cgroup) {
		for (size_t i = 0; i < d->leases.n; i++) {
			if (strcmp(d->leases.v[i]->cgroup, cgroup) == 0)
				l = d->leases.v[i];
		}
		if (!l)
			dg_error_set(err, DG_E_NOT_GRANTED, ENOENT, "cgroup %s holds no GPU", cgroup);
		return l;
	}
	if (pid <= 0 || pid > INT32_MAX) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "PID %lld is out of range", (long long)pid);
		return NULL;
	}
	if (target_from_pid(&d->cg, d->self_cgroup, (pid_t)pid, &t, err) < 0)
		return NULL;
	l = lease_table_find(&d->leases, t.cgid);
	if (!l)
		dg_error_set(err, DG_E_NOT_GRANTED, ENOENT, "PID %lld (cgroup %s) holds no GPU",
			     (long long)pid, t.cgroup);
	return l;
}

/* Marks in drop[] the lease GPUs named by the selector (all if NULL). */
static int revoke_select(struct daemon *d, const struct lease *l, const char *spec, bool *drop,
			 struct dg_error *err)
{
	bool sel[DG_MAX_GPUS];
	int r;

	for (size_t i = 0; i < l->n_gpus; i++)
		drop[i] = !spec || strcmp(spec, "all") == 0;
	if (!spec || strcmp(spec, "all") == 0)
		return 0;
	r = inventory_select(d->inv, spec, sel, err);
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
			return dg_error_set(err, DG_E_NOT_GRANTED, ENOENT, "%s does not hold GPU %u (%s)",
					    lease_label(l), d->inv->gpus[g].index,
					    d->inv->gpus[g].uuid);
	}
	return 0;
}

/* Removes nodes the container no longer holds; best effort, reported. */
static json_object *revoke_nodes(struct daemon *d, const struct lease *l, const struct dg_node *gone,
				 size_t n_gone)
{
	auto_cleanup(target_donep) struct target t = TARGET_INIT;
	struct node_opts nopts = { .mode = d->cfg.node_mode };
	struct node_result res[MAX_NODES] = { 0 };
	struct dg_error err = { 0 };

	if (n_gone == 0)
		return json_object_new_array();
	if (live_target(d, l, &t) < 0) {
		log_info("%s has no live process; its /dev needs no cleanup", lease_label(l));
		return nodes_json(gone, res, n_gone);
	}
	if (nodes_remove(&t, &nopts, gone, n_gone, res, &err) < 0)
		log_warning("cannot remove nodes from %s: %s", lease_label(l), err.message);
	for (size_t i = 0; i < n_gone; i++) {
		if (res[i].status == NODE_CONFLICT)
			log_warning("left /dev/%s in %s alone: it is no longer our node",
				    gone[i].name, lease_label(l));
	}
	return nodes_json(gone, res, n_gone);
}

static void unguard_lease(struct daemon *d, struct lease *l)
{
	struct dg_error err = { 0 };
	auto_close int cgfd = -1;

	/* A removed cgroup has nothing attached any more: then only the pins go. */
	(void)cgroup_open_id(&d->cg, l->cgid, &cgfd);
	if (bpfgate_unguard(d->bg, l->cgid, cgfd, &err) < 0)
		log_error("cannot restore the device programs of %s: %s", lease_label(l),
			  err.message);
	(void)bpfgate_counters_drop(d->bg, l->cgid);
	watch_del(d, l);
}

int grant_revoke(struct daemon *d, json_object *args, json_object **ret, struct dg_error *err)
{
	auto_cleanup(lease_freep) struct lease *next = NULL;
	auto_json json_object *revoked = json_object_new_array();
	struct dg_node old_nodes[MAX_NODES], new_nodes[MAX_NODES], gone[MAX_NODES];
	size_t n_old, n_new, n_gone;
	bool drop[DG_MAX_GPUS];
	struct lease *old;
	json_object *reply;
	int r;

	old = find_lease(d, args, err);
	if (!old && err->code == DG_E_NOT_GRANTED && json_get_bool(args, "missing_ok")) {
		memset(err, 0, sizeof(*err));
		reply = json_object_new_object();
		json_object_object_add(reply, "revoked", json_object_get(revoked));
		*ret = reply;
		return 0;
	}
	if (!old)
		return -(err->errnum ? err->errnum : EINVAL);
	r = revoke_select(d, old, json_get_str(args, "gpus"), drop, err);
	if (r < 0)
		return r;
	next = lease_copy(old);
	if (!next)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	for (size_t i = 0; i < old->n_gpus; i++) {
		if (!drop[i])
			continue;
		json_object_array_add(revoked, json_object_new_string(old->gpus[i].uuid));
		lease_del_gpu(next, old->gpus[i].uuid);
	}
	r = next->n_gpus ? state_save(d->state, next) : state_remove(d->state, next->cgid);
	if (r < 0)
		return dg_error_set(err, DG_E_STATE, r, "cannot record the revoke in %s: %s",
				    d->cfg.state_dir, strerror(-r));
	n_old = lease_nodes(old, d->inv, old_nodes, MAX_NODES);
	n_new = lease_nodes(next, d->inv, new_nodes, MAX_NODES);
	n_gone = node_diff(old_nodes, n_old, new_nodes, n_new, gone);
	grants_del(d, old->cgid, gone, n_gone);
	reply = grant_lease_json(d, next);
	json_object_object_add(reply, "revoked", json_object_get(revoked));
	json_object_object_add(reply, "nodes", revoke_nodes(d, old, gone, n_gone));
	*ret = reply;
	log_info("revoked %zu GPU(s) from %s", json_object_array_length(revoked), lease_label(old));
	emit(d, next->n_gpus ? "revoked" : "released", next, revoked);
	if (next->n_gpus == 0) {
		unguard_lease(d, old);
		lease_free(lease_table_take(&d->leases, old->cgid));
		return 0;
	}
	commit_lease(d, old, TAKE_PTR(next));
	return 0;
}

void grant_release(struct daemon *d, uint64_t cgid, const char *why)
{
	struct lease *l = lease_table_find(&d->leases, cgid);
	struct dg_node nodes[MAX_NODES];
	size_t n;
	int r;

	if (!l)
		return;
	r = state_remove(d->state, cgid);
	if (r < 0)
		log_error_errno(r, "cannot remove the lease file of %s: %m", lease_label(l));
	n = lease_nodes(l, d->inv, nodes, MAX_NODES);
	grants_del(d, cgid, nodes, n);
	unguard_lease(d, l);
	log_info("released %zu GPU(s) of %s: %s", l->n_gpus, lease_label(l), why);
	metrics_inc(d->metrics, METRIC_RELEASES, 1);
	{
		json_object *gpus = json_object_new_array();

		for (size_t i = 0; i < l->n_gpus; i++)
			json_object_array_add(gpus, json_object_new_string(l->gpus[i].uuid));
		emit(d, "released", l, gpus);
		json_object_put(gpus);
	}
	lease_free(lease_table_take(&d->leases, cgid));
}
