// SPDX-License-Identifier: Apache-2.0
/*
 * Noticing that a leased container ended. Each lease's cgroup.events file
 * is watched with inotify (on a host with cgroup v1 alone, which has no
 * such file, a pidfd of one of its processes), so a lease is released as
 * soon as its cgroup empties or goes; a periodic tick re-checks a batch of
 * leases in case an event was missed. An ended container is handed to d->hooks.cgroup_ended:
 * this file must not release leases itself, nor touch gates (heal.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "core/config.h"
#include "cleanup.h"
#include "log.h"
#include "sys/cgroup1.h"
#include "sys/target.h"
#include "util.h"
#include "watch.h"

/*
 * Leases checked per periodic tick. inotify already reports ended
 * containers, so the tick is a safety net; bounding it keeps one tick from
 * holding up requests on a host with thousands of containers.
 */
#define TICK_BATCH 64

int watch_init(struct daemon *d)
{
	struct itimerspec its = { 0 };

	d->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (d->inotify_fd < 0)
		return -errno;
	if (d->cg.v1 && (d->v1exit_fd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		return -errno;
	d->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (d->timer_fd < 0)
		return -errno;
	its.it_interval.tv_sec = d->cfg->recheck_ms / 1000;
	its.it_interval.tv_nsec = (long)(d->cfg->recheck_ms % 1000) * 1000000L;
	its.it_value = its.it_interval;
	if (timerfd_settime(d->timer_fd, 0, &its, NULL) < 0)
		return -errno;
	return 0;
}

void watch_fini(struct daemon *d)
{
	d->inotify_fd = safe_close(d->inotify_fd);
	d->v1exit_fd = safe_close(d->v1exit_fd);
	d->timer_fd = safe_close(d->timer_fd);
}

/* Opens a pidfd on pid into *(int *)ctx: the first process of the cgroup that still runs. */
static int pidfd_of(pid_t pid, void *ctx)
{
	int *fd = ctx;

	*fd = pidfd_open_pid(pid);
	return *fd >= 0;
}

/*
 * cgroup v1 has no cgroup.events: a pidfd of one of the container's
 * processes, in d->v1exit_fd under the lease's id, turns readable when that
 * process exits; watch_v1_handle then checks the cgroup and, while it
 * still has processes, watches another. The pidfd is kept in l->watch.
 */
static int watch_v1_add(struct daemon *d, struct lease *l)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = l->cgid };
	int fd = -1, r = cgroup1_procs_walk(&d->cg1, l->cgroup, 1, pidfd_of, &fd);

	if (r <= 0 || fd < 0)
		return log_warning_errno(r < 0 ? -r : ESRCH,
					 "cannot watch the processes of %s (v1 devices cgroup "
					 "%s): %m; relying on the periodic check",
					 lease_label(l), l->cgroup);
	if (epoll_ctl(d->v1exit_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		r = -errno;
		close(fd);
		return log_warning_errno(-r, "cannot watch %s: %m; relying on the periodic check",
					 lease_label(l));
	}
	l->watch = fd;
	return 0;
}

int watch_add(struct daemon *d, struct lease *l)
{
	char path[PATH_MAX];
	int wd;

	if (d->v1exit_fd >= 0)
		return watch_v1_add(d, l);
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
	if (d->v1exit_fd >= 0) /* a pidfd: closing it leaves the epoll set */
		close(l->watch);
	else
		(void)inotify_rm_watch(d->inotify_fd, l->watch);
	l->watch = -1;
}

/* Returns the lease whose cgroup.events has the inotify watch wd, or NULL. */
static struct lease *lease_by_watch(struct daemon *d, int wd)
{
	for (size_t i = 0; i < d->leases.n; i++) {
		if (d->leases.v[i]->watch == wd)
			return d->leases.v[i];
	}
	return NULL;
}

/*
 * Hands the lease to cgroup_ended if its container has no process left or
 * its cgroup is gone; returns whether it did. A cgroup that cannot be
 * checked now (EMFILE, say) keeps its lease: the periodic tick tries again.
 */
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
	if (populated < 0)
		log_warning_errno(-populated, "cannot check whether %s ended", lease_label(l));
	return false;
}

/*
 * Releases the leases of containers that have ended but whose inotify event
 * has not been read yet (a runtime that reuses a container's name at once).
 * Called before a grant is refused for want of a free GPU; returns how many
 * it released.
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

/* Reads every pending inotify event and checks the leases they name. */
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

/* A watched process of a leased v1 cgroup exited: the lease goes, or another is watched. */
void watch_v1_handle(struct daemon *d)
{
	struct epoll_event ev[16];
	int n = epoll_wait(d->v1exit_fd, ev, ARRAY_SIZE(ev), 0);

	for (int i = 0; i < n; i++) {
		struct lease *l = lease_table_find(&d->leases, ev[i].data.u64);

		if (!l || check_ended(d, l))
			continue;
		watch_del(d, l);
		(void)watch_v1_add(d, l);
	}
}

/* Checks a batch of leases, round the table, for a container that ended unseen. */
void watch_tick(struct daemon *d)
{
	uint64_t expirations, ids[TICK_BATCH];
	size_t n = d->leases.n, batch = n < TICK_BATCH ? n : TICK_BATCH;

	(void)!read(d->timer_fd, &expirations, sizeof(expirations));
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
	}
}
