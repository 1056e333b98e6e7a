// SPDX-License-Identifier: Apache-2.0
/*
 * The cgroup v1 devices side of a grant. On hybrid and v1 hosts a runtime
 * may keep the device policy in the v1 devices controller, which the kernel
 * checks after any v2 program: there a grant also writes devices.allow, and
 * a revoke devices.deny. A lease records only the rules devgate added (what
 * the list lacked), so a revoke leaves the runtime's list as it was. The
 * order of the steps is the transactions' (txn.c, revoke.c); this file must
 * not save records or touch the grants map. It widens only a v1 cgroup whose
 * every process is in the target's v2 cgroup (on a host with cgroup v1
 * alone: in its cgroups of the other v1 hierarchies): a process that moved
 * itself into another's v1 cgroup must not open the device there.
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
	/*
	 * The text the target was resolved from, this request: a move after
	 * it is as unseen as one after a read here; v1_owned's walk and the
	 * proof, which reads the process's cgroups again, guard both.
	 */
	r = t->proc_cg ? cgroup1_devices_parse(t->proc_cg, ret)
		       : cgroup1_devices_of_pid(t->pid, ret);
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

struct owner {
	const char *v2;	  /* the target's v2 cgroup */
	const char *text; /* cgroup v1 alone: the target's /proc/PID/cgroup */
	pid_t stranger;
	char *where; /* the stranger's v2 cgroup (its /proc/PID/cgroup, v1 alone) */
};

static int not_the_targets(pid_t pid, void *ctx)
{
	struct owner *o = ctx;
	auto_free char *v2 = NULL;
	int r = o->text ? proc_cgroup_read(pid, &v2) : cgroup_of_pid(pid, &v2);

	if (r == -ESRCH || r == -ENOENT)
		return 0; /* gone meanwhile */
	if (r < 0)
		return r;
	r = o->text ? cgroup1_within(o->text, v2) : cgroup_path_is_ancestor(o->v2, v2);
	if (r != 0)
		return r < 0 ? r : 0;
	o->stranger = pid;
	if (o->text) /* one line: "memory:/x, pids:/" */
		for (char *c = v2; *c; c++)
			*c = *c == '\n' && c[1] ? ' ' : *c;
	o->where = TAKE_PTR(v2);
	return 1;
}

/*
 * The v1 devices cgroup at path (and below) holds t's container alone: its
 * every process is in t's v2 cgroup or below. A process that can write
 * cgroupfs can join another container's, a host service's or a slice's v1
 * cgroup; its v2 cgroup still tells whose it is.
 */
static int v1_owned(struct daemon *d, const struct target *t, const char *path,
		    struct dg_error *err)
{
	auto_free char *text = NULL;
	struct owner o = { .v2 = t->cgroup };
	int r = 0;

	/* cgroup v1 alone: its other hierarchies tell whose a process is. */
	if (d->cg.v1 && (r = proc_cgroup_read(t->pid, &text)) == 0)
		o.text = text;
	if (r == 0)
		r = cgroup1_procs_walk(&d->cg1, path, 1, not_the_targets, &o);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, -r,
				    "cannot read the processes of the v1 devices cgroup %s: %s",
				    path, strerror(-r));
	if (r == 0)
		return 0;
	dg_error_set(err, DG_E_TARGET_UNSUPPORTED, EXDEV,
		     "the v1 devices cgroup %s of PID %d also holds PID %d of %s %s, which "
		     "is not the container's (%s): devgate widens no other's device list",
		     path, (int)t->pid, (int)o.stranger, o.text ? "v1 cgroups" : "cgroup", o.where,
		     o.text ? "in its other v1 hierarchies" : t->cgroup);
	dg_error_hint(err, "the container's process left its own v1 devices cgroup (a privileged "
			   "container can write cgroupfs); restart the container, then grant");
	free(o.where);
	return -EXDEV;
}

/*
 * The v1 cgroup of a lease that has rules stays where they are: a process
 * found in a cgroup below it is covered (an allow walks down); one found
 * elsewhere has left, and following it would leave the rules behind.
 */
static int v1_follow(const struct target *t, const struct lease *next, char **path,
		     struct dg_error *err)
{
	if (!next->cg1_path || strcmp(next->cg1_path, *path) == 0)
		return 0;
	if (next->n_cg1_added && cgroup_path_is_ancestor(next->cg1_path, *path)) {
		free(*path);
		*path = strdup(next->cg1_path);
		return *path ? 0 : dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	}
	if (next->n_cg1_added) {
		dg_error_set(err, DG_E_TARGET_UNSUPPORTED, EXDEV,
			     "PID %d is in the v1 devices cgroup %s, outside %s where %s holds "
			     "its v1 device rules",
			     (int)t->pid, *path, next->cg1_path, lease_label(next));
		dg_error_hint(err, "the container's process left its v1 devices cgroup after "
				   "the grant; revoke the lease, then grant again");
		return -EXDEV;
	}
	log_notice("%s moved from v1 devices cgroup %s to %s", lease_label(next), next->cg1_path,
		   *path);
	return 0;
}

int v1dev_plan(struct daemon *d, const struct target *t, struct lease *next,
	       const struct dg_node *nodes, size_t n, struct dg_error *err)
{
	auto_free char *path = NULL, *list = NULL;
	int r = v1_path(d, t, &path, err);

	if (r != 0)
		return r < 0 ? r : 0;
	r = v1_follow(t, next, &path, err);
	if (r < 0)
		return r;
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
	/* Nothing to write (the list allows it all) widens nothing. */
	if (next->n_cg1_added && (r = v1_owned(d, t, path, err)) < 0)
		return r;
	free(next->cg1_path);
	next->cg1_path = TAKE_PTR(path);
	next->v1_keyed = d->cg.v1;
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

/* The rule of gone's node that next recorded; NULL when the runtime's list had it. */
static const char *recorded(const struct lease *next, const struct dg_node *gone, size_t n_gone,
			    const char *name)
{
	for (size_t k = 0; k < n_gone; k++) {
		if (strcmp(gone[k].name, name) != 0)
			continue;
		for (size_t i = 0; i < next->n_cg1_added; i++) {
			if (rule_is_node(next->cg1_added[i].rule, &gone[k]))
				return next->cg1_added[i].rule;
		}
	}
	return NULL;
}

void v1dev_refresh_add(struct daemon *d, struct lease *next, const struct dg_node *gone,
		       size_t n_gone, const struct dg_node *add, size_t n_add)
{
	auto_free char *list = NULL;

	if (!next->cg1_path || d->cg1.fd < 0 || !n_add ||
	    devlist_read(&d->cg1, next->cg1_path, &list) < 0)
		return; /* a vanished cgroup is for watch.c */
	for (size_t i = 0; i < n_add; i++) {
		const char *was = recorded(next, gone, n_gone, add[i].name);
		const char *acc = was ? strrchr(was, ' ') : NULL;
		char rule[DEVLIST_RULE_MAX];
		struct dg_error err = { 0 };
		int r = 1;

		/* Ours under the old number is ours under the new (a rerun finds it allowed). */
		if (acc)
			snprintf(rule, sizeof(rule), "%c %u:%u%s", add[i].block ? 'b' : 'c',
				 add[i].major, add[i].minor, acc);
		else
			r = devlist_missing(list, add[i].block, add[i].major, add[i].minor,
					    add[i].access, rule);
		if (r <= 0)
			continue;
		if (devlist_allow(&d->cg1, next->cg1_path, rule, &err) < 0) {
			log_error("refresh: %s: %s", lease_label(next), err.message);
			continue;
		}
		if (add_rule(next, rule) < 0)
			log_error("refresh: out of memory recording '%s' of %s", rule,
				  lease_label(next));
	}
}

void v1dev_refresh_drop(struct daemon *d, struct lease *next, const struct dg_node *gone,
			size_t n_gone)
{
	size_t kept = 0;

	for (size_t i = 0; i < next->n_cg1_added; i++) {
		const char *rule = next->cg1_added[i].rule;
		bool go = false;
		int r;

		for (size_t k = 0; k < n_gone && !go; k++)
			go = rule_is_node(rule, &gone[k]);
		if (!go) {
			next->cg1_added[kept++] = next->cg1_added[i];
			continue;
		}
		r = d->cg1.fd < 0 ? 0 : devlist_deny(&d->cg1, next->cg1_path, rule);
		if (r < 0 && r != -ENOENT)
			log_warning_errno(r,
					  "refresh: cannot deny '%s' in v1 devices cgroup %s: %m",
					  rule, next->cg1_path);
	}
	next->n_cg1_added = kept;
}
