// SPDX-License-Identifier: Apache-2.0
/*
 * The cgroup v1 devices side of a grant. On hybrid and v1 hosts a runtime
 * may keep the device policy in the v1 devices controller, which the kernel
 * checks after any v2 program: there a grant also writes devices.allow, and
 * a revoke devices.deny. A lease records only the rules devgate added (what
 * the list lacked), so a revoke leaves the runtime's list as it was. The
 * order of the steps is the transactions' (txn.c, revoke.c); this file must
 * not save records or touch the grants map.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "gate/devlist.h"
#include "log.h"
#include "sys/cgroup.h"
#include "sys/cgroup1.h"
#include "v1dev.h"

/* Returns true when rule (from a lease) is about the device of node. */
static bool rule_is_node(const char *rule, const struct dg_node *node)
{
	char prefix[DEVLIST_RULE_MAX];
	int n = snprintf(prefix, sizeof(prefix), "%c %u:%u ", node->block ? 'b' : 'c', node->major,
			 node->minor);

	return strncmp(rule, prefix, (size_t)n) == 0;
}

static bool has_rule(const struct lease *l, const char *rule)
{
	for (size_t i = 0; l && i < l->n_cg1_added; i++) {
		if (strcmp(l->cg1_added[i].rule, rule) == 0)
			return true;
	}
	return false;
}

static int add_rule(struct lease *l, const char *rule)
{
	struct lease_cg1_rule *v;

	if (has_rule(l, rule))
		return 0;
	v = realloc(l->cg1_added, (l->n_cg1_added + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	snprintf(v[l->n_cg1_added].rule, sizeof(v->rule), "%s", rule);
	l->cg1_added = v;
	l->n_cg1_added++;
	return 0;
}

/* The v1 devices cgroup of t's process: 0 with *ret, 1 when it has none to mind. */
static int v1_path(struct daemon *d, const struct target *t, char **ret, struct dg_error *err)
{
	auto_free char *self = NULL;
	int r;

	if (d->cg1.fd < 0)
		return 1;
	r = cgroup1_devices_of_pid(t->pid, ret);
	if (r == -ENOMEDIUM)
		return 1;
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, -r,
				    "cannot read the v1 devices cgroup of PID %d: %s", (int)t->pid,
				    strerror(-r));
	/*
	 * The root cannot be restricted; and a process in devgated's own v1
	 * cgroup or above (a runtime that uses v2 alone) is not a container
	 * whose v1 list devgate may widen.
	 */
	if (strcmp(*ret, "/") == 0 ||
	    (cgroup1_devices_of_pid(getpid(), &self) == 0 && cgroup_path_is_ancestor(*ret, self))) {
		free(*ret);
		*ret = NULL;
		return 1;
	}
	return 0;
}

int v1dev_plan(struct daemon *d, const struct target *t, struct lease *next,
	       const struct dg_node *nodes, size_t n, struct dg_error *err)
{
	auto_free char *path = NULL, *list = NULL;
	int r = v1_path(d, t, &path, err);

	if (r != 0)
		return r < 0 ? r : 0;
	if (next->cg1_path && strcmp(next->cg1_path, path) != 0)
		log_notice("%s moved from v1 devices cgroup %s to %s", lease_label(next),
			   next->cg1_path, path);
	r = devlist_read(&d->cg1, path, &list);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, -r,
				    "cannot read the v1 devices cgroup %s: %s", path, strerror(-r));
	for (size_t i = 0; i < n; i++) {
		char rule[DEVLIST_RULE_MAX];

		r = devlist_missing(list, nodes[i].block, nodes[i].major, nodes[i].minor,
				    nodes[i].access, rule);
		if (r == -EINVAL)
			return dg_error_set(err, DG_E_KERNEL, EINVAL,
					    "cannot parse the devices.list of v1 cgroup %s", path);
		if (r > 0 && add_rule(next, rule) < 0)
			return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	}
	free(next->cg1_path);
	next->cg1_path = TAKE_PTR(path);
	return 0;
}

int v1dev_apply(struct daemon *d, const struct lease *l, struct dg_error *err)
{
	if (!l->cg1_path || d->cg1.fd < 0)
		return 0;
	for (size_t i = 0; i < l->n_cg1_added; i++) {
		int r = devlist_allow(&d->cg1, l->cg1_path, l->cg1_added[i].rule, err);

		if (r < 0)
			return r;
	}
	return 0;
}

void v1dev_undo(struct daemon *d, const struct lease *old, const struct lease *next)
{
	if (!next->cg1_path || d->cg1.fd < 0)
		return;
	for (size_t i = 0; i < next->n_cg1_added; i++) {
		const char *rule = next->cg1_added[i].rule;
		int r;

		if (has_rule(old, rule))
			continue;
		r = devlist_deny(&d->cg1, next->cg1_path, rule);
		if (r < 0 && r != -ENOENT)
			log_warning_errno(r, "cannot deny '%s' in v1 devices cgroup %s again: %m",
					  rule, next->cg1_path);
	}
}

void v1dev_revoke(struct daemon *d, const struct lease *old, struct lease *next,
		  const struct dg_node *gone, size_t n_gone)
{
	size_t kept = 0;

	for (size_t i = 0; i < next->n_cg1_added; i++) {
		bool go = false;

		for (size_t k = 0; k < n_gone && !go; k++)
			go = rule_is_node(next->cg1_added[i].rule, &gone[k]);
		if (!go)
			next->cg1_added[kept++] = next->cg1_added[i];
	}
	next->n_cg1_added = kept;
	v1dev_undo(d, next, old);
}
