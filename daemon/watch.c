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
#include "guard.h"
#include "log.h"
#include "metrics.h"
#include "util.h"
#include "watch.h"

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
	return 0;
}

void watch_fini(struct daemon *d)
{
	d->inotify_fd = safe_close(d->inotify_fd);
	d->timer_fd = safe_close(d->timer_fd);
}

int watch_add(struct daemon *d, struct lease *l)
{
	char path[PATH_MAX];
	int wd;

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

		if (l && l->cgid != except_cgid && l->n_gpus > 0 && check_ended(d, l))
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

static void recheck_guard(struct daemon *d, struct lease *l)
{
	struct dg_error err = { 0 };
	auto_close int cgfd = -1;
	int r = cgroup_open_id(&d->cg, l->cgid, &cgfd);

	if (r == 0)
		r = guard_needed(d->bg, l->cgid, cgfd);
	if (r <= 0)
		return;
	if (guard_apply(d->bg, l->cgid, cgfd, NULL, &err) < 0) {
		log_error("cannot re-apply gates to %s: %s", lease_label(l), err.message);
		return;
	}
	log_notice("the runtime changed the device programs of %s; gates re-applied",
		   lease_label(l));
	metrics_inc(d->metrics, METRIC_RECONCILE_FIXES, 1);
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
		if (l)
			recheck_guard(d, l);
	}
}
