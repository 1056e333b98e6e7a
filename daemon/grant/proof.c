// SPDX-License-Identifier: Apache-2.0
/*
 * The proof before "granted" (proof.h): which nodes to prove (the granted
 * GPU-class ones, and one GPU-class node the container was not granted),
 * the fingerprint of the container's device layers that spares a proof
 * when nothing changed, and, when the kernel still denies, which layer
 * does: the v1 devices cgroup, a device program that is not devgate's, or
 * else an LSM or the driver. The prober (prober.c) asks the kernel; this
 * file must not change the kernel nor the state directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgv1.h"
#include "cleanup.h"
#include "proccg.h"
#include "gate/bpfgate.h"
#include "gate/foreign.h"
#include "log.h"
#include "proof.h"
#include "sys/cgroup.h"
#include "sys/cgroup1.h"
#include "sys/prober.h"
#include "util.h"

#define PROOF_TIMEOUT_MS 5000

/* The prober's time: PROOF_TIMEOUT_MS, or DEVGATE_TEST_PROOF_TIMEOUT_MS for the tests. */
static int proof_timeout_ms(void)
{
	const char *v = getenv("DEVGATE_TEST_PROOF_TIMEOUT_MS");
	uint32_t ms;

	return v && parse_u32(v, &ms) == 0 && ms > 0 && ms <= INT_MAX ? (int)ms : PROOF_TIMEOUT_MS;
}
#define V1_LIST_MAX ((size_t)256 * 1024)

/* The v2 cgroup the prober joins: the one that holds the target process. */
struct cgwhere {
	const char *path;
	int fd;
	char *own_path; /* path and fd when opened here, not t's */
	int own_fd;
};

static void cgwhere_done(struct cgwhere *w)
{
	free(w->own_path);
	w->own_fd = safe_close(w->own_fd);
}

/*
 * The cgroup of t's process (proc_cg: its /proc/PID/cgroup, NULL when
 * unread) when it is t's cgroup or below it (a container
 * named by its top cgroup, whose processes sit in a child: the top may take
 * none), else t's own.
 */
static void cgwhere_of(const struct daemon *d, const struct target *t, const char *proc_cg,
		       struct cgwhere *ret)
{
	auto_free char *path = NULL;
	int fd = -1;

	ret->path = t->cgroup;
	ret->fd = t->cgfd;
	if (!d->cg.v1 && proc_cg && proc_cgroup_parse(proc_cg, &path) == 0 &&
	    strcmp(path, t->cgroup) != 0 && cgroup_path_is_ancestor(t->cgroup, path) &&
	    cgroup_open_path(&d->cg, path, &fd) == 0) {
		ret->path = ret->own_path = TAKE_PTR(path);
		ret->fd = ret->own_fd = fd;
	}
}

/* The v1 devices cgroup of a process: its directory, and its devices.list. */
struct v1dev {
	char *dir;  /* absolute path, NULL: the process has none */
	char *list; /* devices.list as read, NULL when unread */
};

static void v1dev_done(struct v1dev *v)
{
	free(v->dir);
	free(v->list);
}

/*
 * Finds the v1 devices cgroup in proc_cg (a process's /proc/PID/cgroup, or
 * NULL and r_read, why it is unread) under root (devgated's, fd -1: none)
 * and reads its devices.list; v->dir stays NULL without one.
 */
static int v1dev_of(const struct cg1root *root, const char *proc_cg, int r_read, struct v1dev *v)
{
	auto_free char *path = NULL;
	char list[PATH_MAX];
	int r;

	if (root->fd < 0)
		return 0;
	r = proc_cg ? cgv1_devices_parse(proc_cg, &path) : r_read < 0 ? r_read : -EIO;
	if (r < 0)
		return r == -ENOMEDIUM ? 0 : r;
	if (asprintf(&v->dir, "%s%s", root->mount, strcmp(path, "/") ? path : "") < 0) {
		v->dir = NULL;
		return -ENOMEM;
	}
	snprintf(list, sizeof(list), "%s/devices.list", v->dir);
	return read_file_at(AT_FDCWD, list, V1_LIST_MAX, &v->list, NULL);
}

/* True when a devices.list entry ("c 195:* rwm", "a *:* rwm") allows node. */
static bool v1_entry_allows(const char *e, const struct dg_node *node)
{
	char type, maj[16], min[16], acc[8];
	char want = node->block ? 'b' : 'c';
	uint32_t a = node->access ? node->access : DG_ACC_READ | DG_ACC_WRITE;

	if (sscanf(e, "%c %15[^:]:%15s %7s", &type, maj, min, acc) != 4)
		return false;
	if (type != 'a' && type != want)
		return false;
	if (type != 'a' && ((strcmp(maj, "*") != 0 && strtoul(maj, NULL, 10) != node->major) ||
			    (strcmp(min, "*") != 0 && strtoul(min, NULL, 10) != node->minor)))
		return false;
	return (!(a & DG_ACC_READ) || strchr(acc, 'r')) &&
	       (!(a & DG_ACC_WRITE) || strchr(acc, 'w'));
}

static bool v1_list_allows(const char *list, const struct dg_node *node)
{
	for (const char *l = list; l && *l;) {
		const char *eol = strchr(l, '\n');

		if (v1_entry_allows(l, node))
			return true;
		l = eol ? eol + 1 : NULL;
	}
	return false;
}

/*
 * The topmost v1 devices cgroup from dir up that denies node, in buf: the
 * one to change (below it nothing can allow what it denies). false when
 * dir's own list allows it.
 */
static bool v1_denier(const struct v1dev *v, const struct dg_node *node, char *buf, size_t len)
{
	char d[PATH_MAX];
	bool found = false;

	if (!v->dir || !v->list || v1_list_allows(v->list, node))
		return false;
	snprintf(d, sizeof(d), "%s", v->dir);
	for (;;) {
		auto_free char *list = NULL;
		char f[PATH_MAX + 16];
		char *slash;

		snprintf(f, sizeof(f), "%s/devices.list", d);
		if (read_file_at(AT_FDCWD, f, V1_LIST_MAX, &list, NULL) < 0 ||
		    v1_list_allows(list, node))
			break;
		snprintf(buf, len, "%s", d);
		found = true;
		slash = strrchr(d, '/');
		if (!slash || slash == d)
			break;
		*slash = '\0';
	}
	return found;
}

/* FNV-1a over the programs' digest and the v1 list: the layers in one number, never 0. */
static uint64_t fingerprint(uint64_t progs, const char *v1list)
{
	uint64_t h = 1469598103934665603ULL;

	for (int i = 0; i < 8; i++)
		h = (h ^ ((progs >> (8 * i)) & 0xff)) * 1099511628211ULL;
	for (const char *c = v1list ? v1list : ""; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ULL;
	return h ? h : 1;
}

static bool node_listed(const struct dg_node *set, size_t n, uint32_t major, uint32_t minor)
{
	for (size_t i = 0; i < n; i++) {
		if (set[i].major == major && set[i].minor == minor && !set[i].block)
			return true;
	}
	return false;
}

/*
 * A GPU's node that lease next does not grant (the neighbour), in ret;
 * false when every GPU of the host is granted.
 */
static bool neighbour(const struct daemon *d, const struct dg_node *nodes, size_t n,
		      struct dg_node *ret)
{
	for (size_t i = 0; i < d->inv->n_gpus; i++) {
		struct lease *tmp = lease_new(0);
		struct dg_node gn[8];
		size_t k = 0;

		if (tmp && lease_add_gpu(tmp, &d->inv->gpus[i], false) > 0)
			k = lease_gpu_nodes(&tmp->gpus[0], d->inv, gn, 8);
		lease_free(tmp);
		if (k && !node_listed(nodes, n, gn[0].major, gn[0].minor) &&
		    bpfgate_is_guarded(d->bg, gn[0].major, gn[0].minor)) {
			*ret = gn[0];
			ret->access = 0;
			return true;
		}
	}
	return false;
}

/* Names the layer that denies node inside t's container, in buf, with a hint in err. */
static void blame(struct daemon *d, const struct cgwhere *w, const struct v1dev *v1,
		  const struct dg_node *node, char *buf, size_t len, struct dg_error *err)
{
	struct foreign_prog fp[8];
	char dir[PATH_MAX];
	size_t n = 0;

	if (v1_denier(v1, node, dir, sizeof(dir))) {
		snprintf(buf, len, "the v1 devices cgroup at %s", dir);
		dg_error_hint(err,
			      "that cgroup's devices.list must allow c %u:%u (and its parents'); "
			      "or run the container with cgroup v2",
			      node->major, node->minor);
		return;
	}
	if (!d->cg.v1 && foreign_progs(d->bg, &d->cg, w->path, fp, 8, &n) == 0 && n) {
		snprintf(buf, len,
			 "BPF program ID %u (%s, attached at cgroup %s) that is not devgate's",
			 fp[0].id, fp[0].name[0] ? fp[0].name : "no name", fp[0].cgroup);
		dg_error_hint(err, "'bpftool cgroup tree' shows it; detach it or make it allow the "
				   "device");
		return;
	}
	snprintf(buf, len, "an LSM or the driver");
	dg_error_hint(err, "check the container's AppArmor or SELinux profile, and the kernel log");
}

/* Says why the prober could not report, as an error. */
static int unproven(const struct cgwhere *w, const struct v1dev *v1, const struct prober_result *p,
		    struct dg_error *err)
{
	auto_free char *ev = NULL;

	if (p->frozen)
		return dg_error_set(err, DG_E_UNPROVEN, EBUSY,
				    "cannot prove the grant: cgroup %s is frozen (the prober was "
				    "killed)",
				    w->path);
	if (p->join_v2 == EAGAIN)
		return dg_error_set(err, DG_E_UNPROVEN, EAGAIN,
				    "cannot prove the grant: cgroup %s is at its pids.max",
				    w->path);
	if (p->join_v2)
		return dg_error_set(err, DG_E_UNPROVEN, p->join_v2,
				    "cannot prove the grant: no process can join cgroup %s: %s",
				    w->path, strerror(p->join_v2));
	if (p->no_answer)
		return dg_error_set(
			err, DG_E_UNPROVEN, ECHILD,
			"cannot prove the grant: the prober in cgroup %s was killed before "
			"it answered (is the container stopping?)",
			w->path);
	if (p->join_v1)
		return dg_error_set(
			err, DG_E_UNPROVEN, p->join_v1,
			"cannot prove the grant: cannot join the v1 devices cgroup %s: %s",
			v1->dir ? v1->dir : "?", strerror(p->join_v1));
	if (read_file_at(w->fd, "cgroup.events", 4096, &ev, NULL) == 0 && strstr(ev, "frozen 1"))
		return dg_error_set(err, DG_E_UNPROVEN, ETIMEDOUT,
				    "cannot prove the grant: cgroup %s is frozen (the prober was "
				    "killed)",
				    w->path);
	return dg_error_set(err, DG_E_UNPROVEN, ETIMEDOUT,
			    "cannot prove the grant: the prober in cgroup %s did not answer within "
			    "%d ms (it was killed)",
			    w->path, proof_timeout_ms());
}

/* True when devgate's grants map holds node for cgroup cgid (or the map cannot be read). */
static bool widened(struct daemon *d, uint64_t cgid, const struct dg_node *node)
{
	auto_free struct dg_grant_key *keys = NULL;
	size_t n = 0;

	if (bpfgate_grants_list(d->bg, &keys, &n) < 0)
		return true;
	for (size_t i = 0; i < n; i++) {
		if (keys[i].cgroup_id == cgid && keys[i].major == node->major &&
		    keys[i].minor == node->minor)
			return true;
	}
	return false;
}

/*
 * Turns the prober's answers into an error naming the layer; 0 when all is
 * as granted, 1 when the neighbour opens by its runtime's leave.
 */
static int judge(struct daemon *d, const struct cgwhere *w, const struct lease *next,
		 const struct v1dev *v1, const struct dg_node *probe, size_t n, bool has_nb,
		 const struct prober_result *p, struct dg_error *err)
{
	char layer[PATH_MAX + 128];
	size_t granted = has_nb ? n - 1 : n;

	for (size_t i = 0; i < granted; i++) {
		if (p->err[i] != EPERM)
			continue;
		blame(d, w, v1, &probe[i], layer, sizeof(layer), err);
		char hint[DG_HINT_MAX];

		snprintf(hint, sizeof(hint), "%s", err->hint);
		dg_error_set(
			err, DG_E_UNPROVEN, EPERM,
			"not granted: /dev/%s (c %u:%u) stays denied inside %s by %s; the grant was "
			"rolled back",
			probe[i].name, probe[i].major, probe[i].minor, lease_label(next), layer);
		dg_error_hint(err, "%s", hint);
		return -EPERM;
	}
	if (has_nb && p->err[n - 1] != EPERM) {
		/* Not granted, the gate asks the runtime's program: open, that allows it. */
		if (!widened(d, next->cgid, &probe[n - 1]))
			return 1;
		dg_error_set(err, DG_E_UNPROVEN, EEXIST,
			     "not granted: /dev/%s (c %u:%u), which %s was not granted, opens "
			     "inside it by an entry of devgate's grants map; the grant was rolled "
			     "back",
			     probe[n - 1].name, probe[n - 1].major, probe[n - 1].minor,
			     lease_label(next));
		dg_error_hint(err, "restart devgated: its start reconciles the grants map with the "
				   "records");
		return -EEXIST;
	}
	return 0;
}

/* The nodes to prove: next's GPU-class ones (opening any other may act: a watchdog). */
static size_t proof_nodes(const struct daemon *d, const struct dg_node *nodes, size_t n,
			  struct dg_node *out)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (!nodes[i].block && bpfgate_is_guarded(d->bg, nodes[i].major, nodes[i].minor))
			out[k++] = nodes[i];
	}
	return k;
}

int proof_check(struct daemon *d, const struct target *t, struct lease *next,
		const struct dg_node *nodes, size_t n, uint64_t effective, struct dg_error *err)
{
	auto_cleanup(v1dev_done) struct v1dev v1 = { 0 };
	auto_cleanup(cgwhere_done) struct cgwhere w = { .fd = -1, .own_fd = -1 };
	struct dg_node probe[DG_MAX_NODES + 1];
	struct prober_result res;
	auto_free char *proc_cg = NULL;
	auto_close int procs = -1;
	uint64_t progs = 0, fp, t0 = now_mono_ns();
	size_t k = proof_nodes(d, nodes, n, probe);
	bool has_nb;
	int r;

	if (k == 0)
		return 0;
	/* One read of /proc/PID/cgroup for both hierarchies. */
	r = proc_cgroup_read(t->pid, &proc_cg);
	cgwhere_of(d, t, r == 0 ? proc_cg : NULL, &w);
	r = v1dev_of(&d->cg1, r == 0 ? proc_cg : NULL, r, &v1);
	/*
	 * The gate step's read is as fresh as one here (a change after either
	 * goes unseen alike) when it was of the same cgroup.
	 */
	if (r == 0 && !d->cg.v1 && effective && w.fd == t->cgfd)
		progs = effective;
	else if (r == 0 && !d->cg.v1) /* cgroup v1 alone: no program, its list is the layer */
		r = foreign_effective_digest(w.fd, &progs);
	if (r < 0)
		return dg_error_set(
			err, DG_E_UNPROVEN, -r,
			"cannot prove the grant: cannot read the device layers of %s: %s",
			lease_label(next), strerror(-r));
	fp = fingerprint(progs, v1.list);
	if (next->proof_fp == fp) {
		log_debug("proof: %s: device layers unchanged since the last proof, not proven "
			  "again (%llu us)",
			  lease_label(next), (unsigned long long)(now_mono_ns() - t0) / 1000);
		return 0;
	}
	has_nb = neighbour(d, probe, k, &probe[k]);
	if (v1.dir) {
		char f[PATH_MAX + 16];

		snprintf(f, sizeof(f), "%s/cgroup.procs", v1.dir);
		procs = open(f, O_WRONLY | O_CLOEXEC);
		if (procs < 0)
			return dg_error_set(err, DG_E_UNPROVEN, errno,
					    "cannot prove the grant: cannot open %s: %m", f);
	}
	r = prober_run(d->cg.v1 ? -1 : w.fd, procs, bpfgate_proof_comm(), probe, k + has_nb,
		       proof_timeout_ms(), &res, err);
	if (r < 0)
		return r;
	if (res.join_v2 || res.join_v1 || res.timed_out || res.no_answer || res.frozen)
		return unproven(&w, &v1, &res, err);
	r = judge(d, &w, next, &v1, probe, k + has_nb, has_nb, &res, err);
	if (r < 0)
		return r;
	next->proof_fp = fp;
	log_debug("proof: %s: %zu node(s) reach the driver%s (prober: clone %u us, to its first "
		  "step %u us, joins %u us, opens %u us, to reaped %u us) (%llu us)",
		  lease_label(next), k,
		  !has_nb ? ""
		  : r	  ? ", the neighbour opens (its runtime allows it)"
			  : ", the neighbour stays denied",
		  res.times.clone_us, res.times.to_run_us, res.times.joins_us, res.times.opens_us,
		  res.times.reaped_us, (unsigned long long)(now_mono_ns() - t0) / 1000);
	return 0;
}
