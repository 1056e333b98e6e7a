// SPDX-License-Identifier: Apache-2.0
/*
 * Rewrites a request that names its container by a runtime's name into one
 * that names the cgroup the runtime's state gives for it, before ops.c
 * dispatches it. devgated resolves, not devatectl: it reads runtime state
 * as root, and the answer is proved against the kernel (names.c), so a
 * caller gains nothing it could not do with --cgroup. A lease's own label
 * wins over a runtime's name in revoke and extend, so labels given at grant
 * time work as before; so do a move's source and destination. It changes no
 * lease.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"

#include "byname.h"
#include "core/config.h"
#include "lease/lease.h"
#include "names/names.h"
#include "sys/target.h"

static void names_conf_of(const struct dg_config *c, struct names_conf *ret)
{
	*ret = (struct names_conf){
		.docker_socket = c->docker_socket,
		.lxd_socket = c->lxd_socket,
		.podman_storage = c->podman_storage,
		.runc_root = c->runc_root,
		.lxc_path = c->lxc_path,
		.cri_root = c->cri_root,
	};
}

/*
 * Rewrites one target named by a runtime's name alone. label_first: a
 * lease's label wins; keep_name: the runtime's name stays as the label the
 * lease gets (a grant's, a move's destination).
 */
static int rewrite_target(struct daemon *d, struct dg_request *req, struct dg_target_args *t,
			  bool label_first, bool keep_name, bool missing_ok, struct dg_error *err)
{
	struct names_conf conf;
	struct name_match m = { 0 };
	struct dg_error why = { 0 };
	struct lease *l;
	char what[256];
	int r;

	names_conf_of(d->cfg, &conf);
	if (!t->container || t->has_pid || t->cgroup) {
		if (t->runtime)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "a runtime goes with a container name alone, not "
					    "with a PID or cgroup");
		return 0;
	}
	if (label_first && !t->runtime &&
	    lease_table_find_label(&d->leases, t->container, &l) != -ENOENT)
		return 0;
	/* Before the runtimes' state, whose cgroups a v1 host cannot match. */
	snprintf(what, sizeof(what), "container '%.200s'", t->container);
	r = target_check_v2(&d->cg, what, err);
	if (r < 0)
		return r;
	r = names_resolve(&conf, t->container, t->runtime, &m, &why);
	if (r == -ENOENT && label_first) {
		if (missing_ok)
			return 0;
		/* The words labels always had; the hint adds where names were sought. */
		dg_error_set(err, DG_E_NO_TARGET, ENOENT, "no container is labelled '%s'",
			     t->container);
		dg_error_hint(err,
			      "'devgatectl status' lists the labels of containers that hold "
			      "GPUs; no runtime has that name either: %s",
			      why.hint);
		return r;
	}
	if (r < 0) {
		*err = why;
		return r;
	}
	t->cgroup = dg_arena_strdup(&req->arena, m.cgroup);
	t->runtime = m.runtime;
	t->container = keep_name ? dg_arena_strdup(&req->arena, m.name) : NULL;
	name_match_done(&m);
	if (!t->cgroup || (keep_name && !t->container))
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	return 0;
}

int byname_rewrite(struct daemon *d, struct dg_request *req, struct dg_error *err)
{
	int r;

	switch (req->op) {
	case DG_OP_GRANT:
		return rewrite_target(d, req, &req->u.grant.target, false, true, false, err);
	case DG_OP_REVOKE:
		return rewrite_target(d, req, &req->u.revoke.target, true, false,
				      req->u.revoke.missing_ok, err);
	case DG_OP_EXTEND:
		return rewrite_target(d, req, &req->u.extend.target, true, false, false, err);
	case DG_OP_MOVE:
		/* The source holds a lease; the destination may get its first. */
		r = rewrite_target(d, req, &req->u.move.from, true, false, false, err);
		return r < 0 ? r : rewrite_target(d, req, &req->u.move.to, true, true, false, err);
	default:
		return 0;
	}
}

#define LIST_MAX 512

int byname_list(struct daemon *d, struct dg_containers_reply *out, struct dg_arena *a,
		struct dg_error *err)
{
	auto_free struct name_match *m = calloc(LIST_MAX, sizeof(*m));
	char searched[2048];
	struct names_conf conf;
	size_t n = 0;
	int r = 0;

	if (!m)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	names_conf_of(d->cfg, &conf);
	names_list(&conf, m, LIST_MAX, &n, searched, sizeof(searched));
	out->found = dg_arena_alloc(a, (n + 1) * sizeof(*out->found));
	out->searched = dg_arena_strdup(a, searched);
	for (size_t i = 0; i < n; i++) {
		struct dg_found_info *f = out->found ? &out->found[i] : NULL;

		if (f) {
			*f = (struct dg_found_info){ .runtime = m[i].runtime, .pid = m[i].pid };
			f->name = dg_arena_strdup(a, m[i].name);
			f->id = dg_arena_strdup(a, m[i].id);
			f->cgroup = dg_arena_strdup(a, m[i].cgroup);
			if (!f->name || !f->id || !f->cgroup)
				r = -ENOMEM;
		}
		name_match_done(&m[i]);
	}
	if (!out->found || !out->searched || r < 0)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	out->n_found = n;
	return 0;
}
