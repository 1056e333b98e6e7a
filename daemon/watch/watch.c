// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cleanup.h"
#include "gate/guard.h"
#include "log.h"
#include "metrics/metrics.h"
#include "util.h"
#include "watch.h"

/*
 * The displaced-gate check. Where tracing programs are allowed, attach
 * events heal at once (attach_watch.c) and this check stays off; elsewhere
 * it runs every heal-ms, comparing each leased cgroup's device programs with
 * what devgate last found settled: one handle open and one query per lease,
 * the full check only on a difference. A lease costs ~12 us a look
 * (bench/results.md, 2 cores), so the period grows by HEAL_LEASE_US per
 * lease to stay near 2.5% of a CPU with thousands of leases. Not by the
 * time a look took: a query can wait ms on the cgroup lock while a runtime
 * attaches, and one slow look must not slow the next heal.
 */
#define HEAL_LEASE_US 500
/* Leases looked at per tick: with 10,000, one pass would hold requests ~120 ms. */
#define HEAL_BATCH 64

static void heal_arm(struct daemon *d, uint64_t ms)
{
	struct itimerspec its = { 0 };

	if (d->heal_fd < 0 || d->cfg.heal_ms == 0 || d->attach)
		return;
	its.it_value.tv_sec = (time_t)(ms / 1000);
	its.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
	(void)timerfd_settime(d->heal_fd, 0, &its, NULL);
}

int watch_init(struct daemon *d)
{
	struct itimerspec its = { 0 };

	d->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (d->inotify_fd < 0)
		return -errno;
	d->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (d->timer_fd < 0)
		return -errno;
	its.it_interval.tv_sec = d->cfg.recheck_ms / 1000;
	its.it_interval.tv_nsec = (long)(d->cfg.recheck_ms % 1000) * 1000000L;
	its.it_value = its.it_interval;
	if (timerfd_settime(d->timer_fd, 0, &its, NULL) < 0)
		return -errno;
	d->heal_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (d->heal_fd < 0)
		return -errno;
	heal_arm(d, d->cfg.heal_ms);
	return 0;
}

void watch_fini(struct daemon *d)
{
	d->inotify_fd = safe_close(d->inotify_fd);
	d->timer_fd = safe_close(d->timer_fd);
	d->heal_fd = safe_close(d->heal_fd);
}

int watch_add(struct daemon *d, struct lease *l)
{
	struct itimerspec its;
	char path[PATH_MAX];
	int wd;

	/* The heal check sleeps while there is no lease; wake it. */
	if (d->heal_fd >= 0 && timerfd_gettime(d->heal_fd, &its) == 0 && its.it_value.tv_sec == 0 &&
	    its.it_value.tv_nsec == 0)
		heal_arm(d, d->cfg.heal_ms);

	snprintf(path, sizeof(path), "%s%s/cgroup.events", d->cg.mount,
		 strcmp(l->cgroup, "/") == 0 ? "" : l->cgroup);
	wd = inotify_add_watch(d->inotify_fd, path, IN_MODIFY);
	if (wd < 0)
		return log_warning_errno(
			errno, "cannot watch %s: %m; relying on the periodic check", path);
	l->watch = wd;
	return 0;
}

void watch_del(struct daemon *d, struct lease *l)
{
	if (l->watch < 0)
		return;
	(void)inotify_rm_watch(d->inotify_fd, l->watch);
	l->watch = -1;
}

static struct lease *lease_by_watch(struct daemon *d, int wd)
{
	for (size_t i = 0; i < d->leases.n; i++) {
		if (d->leases.v[i]->watch == wd)
			return d->leases.v[i];
	}
	return NULL;
}

/* Releases the lease if its container has no process left; true if it did. */
static bool check_ended(struct daemon *d, struct lease *l)
{
	auto_close int cgfd = -1;
	int populated = cgroup_open_id(&d->cg, l->cgid, &cgfd);

	if (populated == 0)
		populated = cgroup_populated(cgfd);
	if (populated == 0) {
		d->hooks.cgroup_ended(d, l->cgid, "container ended");
		return true;
	}
	if (populated == -ENOENT || populated == -ENODEV) {
		d->hooks.cgroup_ended(d, l->cgid, "cgroup removed");
		return true;
	}
	if (populated < 0) /* e.g. EMFILE: keep the lease, the tick retries */
		log_warning_errno(-populated, "cannot check whether %s ended", lease_label(l));
	return false;
}

/*
 * Releases the GPU leases of containers that have ended but whose end the
 * watch has not reported yet (a runtime reusing a container's name at once).
 * Called before a grant is refused for want of a free GPU; returns how many.
 */
size_t watch_release_ended(struct daemon *d, uint64_t except_cgid)
{
	auto_free uint64_t *ids = lease_table_ids(&d->leases);
	size_t n = d->leases.n, released = 0;

	if (!ids)
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct lease *l = lease_table_find(&d->leases, ids[i]);

		if (l && l->cgid != except_cgid && lease_holds(l) && check_ended(d, l))
			released++;
	}
	return released;
}

void watch_handle(struct daemon *d)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		ssize_t n = read(d->inotify_fd, buf, sizeof(buf));

		if (n <= 0)
			return;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			struct lease *l = lease_by_watch(d, ev->wd);

			p += sizeof(*ev) + ev->len;
			if (!l)
				continue;
			if (ev->mask & IN_IGNORED) {
				l->watch = -1; /* the kernel dropped it: the file is gone */
				d->hooks.cgroup_ended(d, l->cgid, "cgroup removed");
				continue;
			}
			check_ended(d, l);
		}
	}
}

/*
 * Puts the gates back if someone else moved them; true if it had to. Keeps
 * the digest of the programs only when they were found settled, so a change
 * made by someone else while devgated looked is never taken for settled.
 */
static bool recheck_guard_at(struct daemon *d, struct lease *l, int cgfd)
{
	struct dg_error err = { 0 };
	uint64_t digest = 0;
	int r = guard_needed(d->bg, l->cgid, cgfd, &digest);

	l->progs_digest = r == 0 ? digest : 0;
	if (r <= 0)
		return false;
	if (guard_apply(d->bg, l->cgid, cgfd, NULL, &err) < 0) {
		log_error("cannot re-apply gates to %s: %s", lease_label(l), err.message);
		return false;
	}
	metrics_inc(d->metrics, METRIC_RECONCILE_FIXES, 1);
	return true;
}

static bool recheck_guard(struct daemon *d, struct lease *l)
{
	auto_close int cgfd = -1;

	if (cgroup_open_id(&d->cg, l->cgid, &cgfd) < 0) {
		l->progs_digest = 0;
		return false;
	}
	return recheck_guard_at(d, l, cgfd);
}

/* Compares l's device programs with the last found settled. */
static void heal_check(struct daemon *d, struct lease *l)
{
	auto_close int cgfd = -1;
	uint64_t digest = 0, t0;
	int r = cgroup_open_id(&d->cg, l->cgid, &cgfd);

	if (r == 0)
		r = guard_digest(cgfd, &digest);
	if (r < 0 || digest == l->progs_digest)
		return; /* a vanished cgroup is for check_ended */
	/* Our own grants and revokes change it too; the full check tells. */
	t0 = now_mono_ns();
	if (recheck_guard_at(d, l, cgfd))
		log_notice("the device programs of %s changed; gates re-applied in %.1f ms",
			   lease_label(l), (double)(now_mono_ns() - t0) / 1e6);
}

/*
 * A batch of leases per tick, round the table: every lease is still looked
 * at once per n * HEAL_LEASE_US, and requests wait at most one batch.
 */
void watch_heal_tick(struct daemon *d)
{
	size_t n = d->leases.n, batch = n < HEAL_BATCH ? n : HEAL_BATCH;
	uint64_t expirations, period_ms = batch * HEAL_LEASE_US / 1000;

	(void)!read(d->heal_fd, &expirations, sizeof(expirations));
	for (size_t k = 0; k < batch; k++) {
		if (d->heal_next >= d->leases.n)
			d->heal_next = 0;
		heal_check(d, d->leases.v[d->heal_next++]);
	}
	if (d->leases.n > 0) /* else asleep until watch_add() */
		heal_arm(d, period_ms > d->cfg.heal_ms ? period_ms : d->cfg.heal_ms);
}

void watch_attach_changed(void *ctx, uint64_t cgroup_id, uint32_t pid, uint64_t ts_ns)
{
	struct daemon *d = ctx;
	struct lease *l = lease_table_find(&d->leases, cgroup_id);
	uint64_t now;

	if (!l || !recheck_guard(d, l))
		return;
	now = now_mono_ns(); /* when the gates are back */
	log_notice("PID %u changed the device programs of %s; gates re-applied %.3f ms later", pid,
		   lease_label(l), now > ts_ns ? (double)(now - ts_ns) / 1e6 : 0.0);
}

/*
 * Only a leased cgroup has gates that a runtime could have meant to replace
 * through; guard_apply decides what the attempt proves.
 */
void watch_attach_replaced(void *ctx, uint64_t cgroup_id, uint32_t old_id, uint32_t new_id)
{
	struct daemon *d = ctx;

	if (!lease_table_find(&d->leases, cgroup_id))
		return;
	log_debug("cgroup %llu: an attach asked to replace device program %u by %u",
		  (unsigned long long)cgroup_id, old_id, new_id);
	guard_note_replace(d->bg, cgroup_id, old_id, new_id);
}

/*
 * Leases re-checked per tick. inotify already reports ended containers, so
 * the tick is a safety net; bounding it keeps one tick from holding up
 * requests (at ~50 us a lease) on a host with thousands of containers.
 */
#define TICK_BATCH 64

static bool leased(uint64_t cgid, const void *data)
{
	return lease_table_find(data, cgid) != NULL;
}

void watch_tick(struct daemon *d)
{
	uint64_t expirations, ids[TICK_BATCH];
	size_t n = d->leases.n, batch = n < TICK_BATCH ? n : TICK_BATCH;

	(void)!read(d->timer_fd, &expirations, sizeof(expirations));
	bpfgate_repin(d->bg);
	guard_repin(d->bg);
	/* Releases drop counters by key; a stray (a minor the inventory lacks) goes here. */
	if (bpfgate_sweep_due(d->bg, now_mono_ns()))
		(void)bpfgate_counters_sweep(d->bg, leased, &d->leases);
	if (n == 0)
		return;
	/* Releasing edits the table: pick the ids first, round-robin. */
	for (size_t i = 0; i < batch; i++)
		ids[i] = d->leases.v[(d->tick_cursor + i) % n]->cgid;
	d->tick_cursor = (d->tick_cursor + batch) % n;
	for (size_t i = 0; i < batch; i++) {
		struct lease *l = lease_table_find(&d->leases, ids[i]);

		if (l)
			check_ended(d, l);
		l = lease_table_find(&d->leases, ids[i]);
		if (l && recheck_guard(d, l))
			log_notice("the device programs of %s changed; gates re-applied at the "
				   "periodic check",
				   lease_label(l));
	}
}
