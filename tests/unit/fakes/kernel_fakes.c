// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gate/bpfgate.h"
#include "gate/devlist.h"
#include "gate/foreign.h"
#include "gate/guard.h"
#include "sys/cgroup.h"
#include "sys/cgroup1.h"
#include "sys/holders.h"
#include "sys/prober.h"
#include "kernel_fakes.h"
#include "metrics/metrics.h"
#include "node/nodes.h"
#include "lease/state.h"
#include "sys/target.h"
#include "watch/watch.h"

struct fake_kernel fake;

static struct {
	const char *fn;
	int nth;
	int r;
} failure;

void fake_reset(uint64_t cgid, const char *cgroup)
{
	memset(&fake, 0, sizeof(fake));
	memset(&failure, 0, sizeof(failure));
	fake.target_cgid = cgid;
	fake.target_cgroup = cgroup;
}

void fake_fail(const char *fn, int nth, int r)
{
	failure.fn = fn;
	failure.nth = nth;
	failure.r = r;
}

/* 0, or the injected error when this is the call asked to fail. */
static int injected(const char *fn)
{
	if (!failure.fn || strcmp(failure.fn, fn) != 0 || failure.nth <= 0)
		return 0;
	if (--failure.nth > 0)
		return 0;
	failure.fn = NULL;
	return failure.r;
}

static ssize_t find_u64(const uint64_t *v, size_t n, uint64_t x)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i] == x)
			return (ssize_t)i;
	}
	return -1;
}

static void del_u64(uint64_t *v, size_t *n, uint64_t x)
{
	ssize_t i = find_u64(v, *n, x);

	if (i >= 0)
		v[i] = v[--*n];
}

bool fake_has_grant(uint64_t cgid, uint32_t major, uint32_t minor)
{
	for (size_t i = 0; i < fake.n_grants; i++) {
		const struct fake_grant *g = &fake.grants[i];

		if (g->cgid == cgid && g->major == major && g->minor == minor)
			return true;
	}
	return false;
}

bool fake_is_guarded(uint64_t cgid)
{
	return find_u64(fake.guarded, fake.n_guarded, cgid) >= 0;
}

bool fake_is_saved(uint64_t cgid)
{
	return find_u64(fake.saved, fake.n_saved, cgid) >= 0;
}

bool fake_has_node(const char *name)
{
	for (size_t i = 0; i < fake.n_nodes; i++) {
		if (strcmp(fake.nodes[i], name) == 0)
			return true;
	}
	return false;
}

/* bpfgate */

int bpfgate_grant_put(struct bpfgate *bg, uint64_t cgid, const struct dg_node *node)
{
	int r = injected(__func__);

	(void)bg;
	if (r < 0)
		return r;
	if (!fake_has_grant(cgid, node->major, node->minor))
		fake.grants[fake.n_grants++] =
			(struct fake_grant){ cgid, node->major, node->minor };
	return 0;
}

/* One call per node, so a failure can still be injected at the Nth node. */
int bpfgate_grants_put(struct bpfgate *bg, uint64_t cgid, const struct dg_node *nodes, size_t n,
		       size_t *ret_failed)
{
	for (size_t i = 0; i < n; i++) {
		int r = bpfgate_grant_put(bg, cgid, &nodes[i]);

		if (r < 0) {
			*ret_failed = i;
			return r;
		}
	}
	*ret_failed = n;
	return 0;
}

int bpfgate_grant_del(struct bpfgate *bg, uint64_t cgid, const struct dg_node *node)
{
	(void)bg;
	for (size_t i = 0; i < fake.n_grants; i++) {
		struct fake_grant *g = &fake.grants[i];

		if (g->cgid == cgid && g->major == node->major && g->minor == node->minor) {
			*g = fake.grants[--fake.n_grants];
			return 0;
		}
	}
	return -ENOENT;
}

int guard_apply(struct bpfgate *bg, uint64_t cgid, int cgfd, struct guard_info *info,
		struct dg_error *err)
{
	int r = injected(__func__);

	(void)bg;
	(void)cgfd;
	(void)info;
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "fake guard failure");
	if (!fake_is_guarded(cgid))
		fake.guarded[fake.n_guarded++] = cgid;
	return 0;
}

/* No digest is known here: always the full guard_apply, where failures are injected. */
int guard_ensure(struct bpfgate *bg, uint64_t cgid, int cgfd, uint64_t known,
		 struct guard_info *info, struct dg_error *err)
{
	(void)known;
	return guard_apply(bg, cgid, cgfd, info, err);
}

int guard_remove(struct bpfgate *bg, uint64_t cgid, int cgfd, struct dg_error *err)
{
	(void)bg;
	(void)cgfd;
	(void)err;
	del_u64(fake.guarded, &fake.n_guarded, cgid);
	return 0;
}

int bpfgate_devgrants_set(struct bpfgate *bg, bool any)
{
	(void)bg;
	fake.devgrants = any;
	return 0;
}

bool bpfgate_is_guarded(const struct bpfgate *bg, uint32_t major, uint32_t minor)
{
	(void)bg;
	(void)minor;
	return major == 195 || major == 510;
}

int bpfgate_devgrants_sync(struct bpfgate *bg)
{
	fake.devgrants = false;
	for (size_t i = 0; i < fake.n_grants; i++) {
		if (!bpfgate_is_guarded(bg, fake.grants[i].major, fake.grants[i].minor))
			fake.devgrants = true;
	}
	return fake.devgrants;
}

int bpfgate_counters_drop(struct bpfgate *bg, uint64_t cgid, const struct dg_node *nodes, size_t n)
{
	(void)bg;
	(void)cgid;
	(void)nodes;
	(void)n;
	return 0;
}

int cgroup_open_id(const struct cgroot *root, uint64_t id, int *ret_fd)
{
	(void)root;
	(void)id;
	*ret_fd = -1;
	return -ENOENT;
}

/* nodes: one container, nodes by name */

int nodes_create(const struct target *t, const struct node_opts *opts, const struct dg_node *nodes,
		 size_t n, struct node_result *res, struct dg_error *err)
{
	int r = injected(__func__);

	(void)t;
	(void)opts;
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "fake node failure");
	for (size_t i = 0; i < n; i++) {
		res[i] = (struct node_result){ .status = NODE_PRESENT };
		if (fake_has_node(nodes[i].name))
			continue;
		strcpy(fake.nodes[fake.n_nodes++], nodes[i].name);
		res[i].status = NODE_CREATED;
	}
	return 0;
}

/* Driver files: grant --driver is tested against real containers (driver.bats). */
int nodes_open_files(int host_root, struct node_file *f, size_t n, struct dg_error *err)
{
	(void)host_root;
	(void)f;
	(void)n;
	return dg_error_set(err, DG_E_KERNEL, ENOSYS, "no driver files in unit tests");
}

void nodes_close_files(struct node_file *f, size_t n)
{
	(void)f;
	(void)n;
}

int nodes_mount_files(const struct target *t, const struct node_opts *o, const struct node_file *f,
		      size_t n, struct node_files_result *ret, struct dg_error *err)
{
	(void)t;
	(void)o;
	(void)f;
	(void)n;
	(void)ret;
	return dg_error_set(err, DG_E_KERNEL, ENOSYS, "no driver files in unit tests");
}

int nodes_unmount_files(const struct target *t, const struct node_opts *o,
			const struct node_file *f, size_t n, struct node_files_result *ret,
			struct dg_error *err)
{
	(void)t;
	(void)o;
	(void)f;
	(void)n;
	(void)err;
	ret->replied = true;
	return 0;
}

int nodes_remove(const struct target *t, const struct node_opts *opts, const struct dg_node *nodes,
		 size_t n, struct node_result *res, struct dg_error *err)
{
	(void)t;
	(void)opts;
	(void)err;
	for (size_t i = 0; i < n; i++) {
		res[i] = (struct node_result){ .status = NODE_ABSENT };
		for (size_t k = 0; k < fake.n_nodes; k++) {
			if (strcmp(fake.nodes[k], nodes[i].name) != 0)
				continue;
			if (k != --fake.n_nodes)
				strcpy(fake.nodes[k], fake.nodes[fake.n_nodes]);
			res[i].status = NODE_REMOVED;
			break;
		}
	}
	return 0;
}

/* the proof: no v1 hierarchy; a node opens when the grants map has it (fail: all denied) */

int bpfgate_grants_list(struct bpfgate *bg, struct dg_grant_key **ret, size_t *ret_n)
{
	(void)bg;
	*ret = NULL;
	*ret_n = 0;
	return 0;
}

const char *bpfgate_proof_comm(void)
{
	return NULL;
}

int foreign_effective_digest(int cgfd, uint64_t *ret)
{
	(void)cgfd;
	*ret = 1 + fake.n_guarded;
	return 0;
}

int foreign_progs(struct bpfgate *bg, const struct cgroot *root, const char *path,
		  struct foreign_prog *ret, size_t max, size_t *ret_n)
{
	(void)bg;
	(void)root;
	(void)path;
	(void)ret;
	(void)max;
	*ret_n = 0;
	return 0;
}

int cgroup_of_pid(pid_t pid, char **ret)
{
	(void)pid;
	(void)ret;
	return -ESRCH;
}

/* Every faked process is in the v2 root and no v1 devices cgroup. */
int proc_cgroup_read(pid_t pid, char **ret)
{
	(void)pid;
	*ret = strdup("0::/\n");
	return *ret ? 0 : -ENOMEM;
}

int cgroup_open_path(const struct cgroot *root, const char *path, int *ret_fd)
{
	(void)root;
	(void)path;
	(void)ret_fd;
	return -ENOENT;
}

/* cgroup v1: a pure v2 host, where no process has a v1 devices cgroup. */
int cg1root_open(struct cg1root *ret)
{
	(void)ret;
	return -ENOMEDIUM;
}

void cg1root_close(struct cg1root *r)
{
	(void)r;
}

int cgroup1_devices_parse(const char *text, char **ret)
{
	(void)text;
	(void)ret;
	return -ENOMEDIUM;
}

int cgroup1_devices_of_pid(pid_t pid, char **ret)
{
	(void)pid;
	(void)ret;
	return -ENOMEDIUM;
}

int cgroup1_within(const char *outer, const char *inner)
{
	(void)outer, (void)inner;
	return 1;
}

int cgroup1_procs_walk(const struct cg1root *root, const char *path, int depth,
		       int (*each)(pid_t pid, void *ctx), void *ctx)
{
	(void)root, (void)path, (void)depth, (void)each, (void)ctx;
	return 0;
}

int prober_run(int cgfd, int v1_procs_fd, const char *comm, const struct dg_node *nodes, size_t n,
	       int timeout_ms, struct prober_result *ret, struct dg_error *err)
{
	/* EAGAIN: the clone met pids.max; EBUSY: frozen; ECHILD: killed; else: denied. */
	int inj = injected("prober_run");
	bool deny = inj < 0 && inj != -EAGAIN && inj != -EBUSY && inj != -ECHILD;

	(void)cgfd;
	(void)v1_procs_fd;
	(void)comm;
	(void)timeout_ms;
	(void)err;
	*ret = (struct prober_result){ .join_v2 = inj == -EAGAIN ? EAGAIN : 0,
				       .frozen = inj == -EBUSY,
				       .no_answer = inj == -ECHILD };
	for (size_t i = 0; i < n; i++)
		ret->err[i] =
			!deny && fake_has_grant(fake.target_cgid, nodes[i].major, nodes[i].minor)
				? ENXIO
				: EPERM;
	return 0;
}

/* target: every PID and cgroup path is the one container */

static int fake_target(pid_t pid, struct target *ret, struct dg_error *err)
{
	int r = injected("target");

	if (r < 0)
		return dg_error_set(err, DG_E_NO_TARGET, -r, "fake: no such target");
	*ret = (struct target)TARGET_INIT;
	ret->pid = pid;
	ret->cgid = fake.target_cgid;
	ret->cgroup = strdup(fake.target_cgroup);
	return ret->cgroup ? 0 : -ENOMEM;
}

int target_from_pid(const struct cgroot *root, const char *self_cgroup, pid_t pid,
		    struct target *ret, struct dg_error *err)
{
	(void)root;
	(void)self_cgroup;
	return fake_target(pid, ret, err);
}

int target_from_cgroup(const struct cgroot *root, const char *self_cgroup, const char *path,
		       struct target *ret, struct dg_error *err)
{
	(void)root;
	(void)self_cgroup;
	(void)path;
	return fake_target(4242, ret, err);
}

/* The fake target's process never ends. */
int pidfd_alive(int pidfd)
{
	(void)pidfd;
	return 0;
}

void target_done(struct target *t)
{
	free(t->cgroup);
	*t = (struct target)TARGET_INIT;
}

/* watch, state, metrics */

int watch_add(struct daemon *d, struct lease *l)
{
	(void)d;
	(void)l;
	fake.watched++;
	return 0;
}

void watch_del(struct daemon *d, struct lease *l)
{
	(void)d;
	(void)l;
	fake.watched--;
}

size_t watch_release_ended(struct daemon *d, uint64_t except_cgid)
{
	(void)d;
	(void)except_cgid;
	return 0;
}

int state_save(struct state *s, const struct lease *l)
{
	int r = injected(__func__);

	(void)s;
	if (r < 0)
		return r;
	if (!fake_is_saved(l->cgid))
		fake.saved[fake.n_saved++] = l->cgid;
	return 0;
}

int state_remove(struct state *s, uint64_t cgid)
{
	int r = injected(__func__);

	(void)s;
	if (r < 0)
		return r;
	del_u64(fake.saved, &fake.n_saved, cgid);
	return 0;
}

int state_pending_save(struct state *s, const struct lease *next)
{
	int r = injected(__func__);

	(void)s;
	if (r < 0)
		return r;
	fake.pending = next->cgid;
	return 0;
}

int state_pending_clear(struct state *s, uint64_t cgid)
{
	(void)s;
	if (fake.pending == cgid)
		fake.pending = 0;
	return 0;
}

int state_revoking_mark(struct state *s, const struct lease *l)
{
	int r = injected(__func__);

	(void)s;
	if (r < 0)
		return r;
	fake.revoking = l->cgid;
	return 0;
}

int state_revoking_clear(struct state *s, uint64_t cgid)
{
	(void)s;
	if (fake.revoking == cgid)
		fake.revoking = 0;
	return 0;
}

/* The one-write forms (state.h) act as the steps they stand for, so faults inject alike. */
int state_pending_commit(struct state *s, const struct lease *next)
{
	int r = state_save(s, next);

	if (r == 0)
		(void)state_pending_clear(s, next->cgid);
	return r;
}

int state_revoke_begin(struct state *s, const struct lease *gone, const struct lease *next)
{
	(void)next;
	return state_revoking_mark(s, gone);
}

int state_revoke_record(struct state *s, const struct lease *next)
{
	return lease_holds(next) ? state_save(s, next) : state_remove(s, next->cgid);
}

int state_revoke_end(struct state *s, const struct lease *next)
{
	return state_revoking_clear(s, next->cgid);
}

int state_moving_mark(struct state *s, const struct lease *gone, uint64_t to)
{
	int r = injected(__func__);

	(void)s;
	(void)to;
	if (r < 0)
		return r;
	fake.moving = gone->cgid;
	return 0;
}

int state_moving_clear(struct state *s, uint64_t cgid)
{
	(void)s;
	if (fake.moving == cgid)
		fake.moving = 0;
	return 0;
}

/* The fake cgroup cannot be opened, so nobody holds anything. */
size_t holders_find(int cgfd, const struct dg_node *nodes, size_t n, struct holder *out, size_t max)
{
	(void)cgfd;
	(void)nodes;
	(void)n;
	(void)out;
	(void)max;
	return 0;
}

size_t holders_signal(const struct cgroot *root, const struct holder *h, size_t n,
		      const char *cgroup_path, int sig)
{
	(void)root;
	(void)h;
	(void)n;
	(void)cgroup_path;
	(void)sig;
	return 0;
}

void metrics_inc(struct metrics *m, enum metrics_counter c, uint64_t n)
{
	(void)m;
	(void)c;
	(void)n;
}

int cgroup_path_is_ancestor(const char *path, const char *other)
{
	return strncmp(path, other, strlen(path)) == 0;
}

int devlist_read(const struct cg1root *root, const char *path, char **ret)
{
	(void)root;
	(void)path;
	(void)ret;
	return -ENOENT;
}

int devlist_missing(const char *list, bool block, uint32_t major, uint32_t minor, uint32_t acc,
		    char out[DEVLIST_RULE_MAX])
{
	(void)list, (void)block, (void)major, (void)minor, (void)acc, (void)out;
	return 0;
}

int devlist_allow(const struct cg1root *root, const char *path, const char *rule,
		  struct dg_error *err)
{
	(void)root, (void)path, (void)rule, (void)err;
	return 0;
}

int devlist_deny(const struct cg1root *root, const char *path, const char *rule)
{
	(void)root, (void)path, (void)rule;
	return 0;
}
