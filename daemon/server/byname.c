// SPDX-License-Identifier: Apache-2.0
/*
 * Rewrites a request that names its container by a runtime's name into one
 * that names the cgroup the runtime's state gives for it, before ops.c
 * dispatches it. devgated resolves, not devatectl: it reads runtime state
 * as root, and the answer is proved against the kernel (names.c), so a
 * caller gains nothing it could not do with --cgroup. A lease's own label
 * wins over a runtime's name in revoke and extend, so labels given at grant
 * time work as before. It changes no lease.
 */
#include <errno.h>
#include <string.h>

#include "byname.h"
#include "core/config.h"
#include "lease/lease.h"
#include "names/names.h"

/* The target of req's operation; NULL for operations that name none. */
static struct dg_target_args *target_of(struct dg_request *req, bool *label_first, bool *missing_ok)
{
	*label_first = true;
	*missing_ok = false;
	switch (req->op) {
	case DG_OP_GRANT:
		*label_first = false;
		return &req->u.grant.target;
	case DG_OP_REVOKE:
		*missing_ok = req->u.revoke.missing_ok;
		return &req->u.revoke.target;
	case DG_OP_EXTEND:
		return &req->u.extend.target;
	default:
		return NULL;
	}
}

int byname_rewrite(struct daemon *d, struct dg_request *req, struct dg_error *err)
{
	const struct dg_config *c = d->cfg;
	const struct names_conf conf = {
		.docker_socket = c->docker_socket,
		.lxd_socket = c->lxd_socket,
		.podman_storage = c->podman_storage,
		.runc_root = c->runc_root,
		.lxc_path = c->lxc_path,
		.cri_root = c->cri_root,
	};
	struct name_match m = { 0 };
	struct dg_error why = { 0 };
	bool label_first, missing_ok;
	struct dg_target_args *t = target_of(req, &label_first, &missing_ok);
	struct lease *l;
	int r;

	if (!t || !t->container || t->has_pid || t->cgroup) {
		if (t && t->runtime)
			return dg_error_set(err, DG_E_INVALID, EINVAL,
					    "a runtime goes with a container name alone, not "
					    "with a PID or cgroup");
		return 0;
	}
	if (label_first && !t->runtime &&
	    lease_table_find_label(&d->leases, t->container, &l) != -ENOENT)
		return 0;
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
	t->container = label_first ? NULL : dg_arena_strdup(&req->arena, m.name);
	name_match_done(&m);
	if (!t->cgroup || (!label_first && !t->container))
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	return 0;
}
