// SPDX-License-Identifier: Apache-2.0
/*
 * Putting displaced gates back. Someone with CAP_BPF may replace the device
 * programs of a leased cgroup; this file notices (attach events, the heal
 * check, the periodic re-check) and has guard.c wrap the new program in a
 * gate again. It must not release leases or decide that a container ended:
 * that is watch.c's, and a cgroup that cannot be opened is left to it.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "core/config.h"
#include "cleanup.h"
#include "gate/devlist.h"
#include "gate/guard.h"
#include "heal.h"
#include "log.h"
#include "metrics/metrics.h"
#include "util.h"

/*
 * The heal check. Where tracing programs are allowed, attach events heal at
 * once (attach_watch.c) and this check stays off; elsewhere it runs every
 * heal-ms, comparing each leased cgroup's device programs with what devgate
 * last found settled: one handle open and one query per lease, the full
 * check only on a difference. A lease costs ~12 us a look
 * (bench/results.md, 2 cores), so the period grows by HEAL_LEASE_US per
 * lease to stay near 2.5% of a CPU with thousands of leases. Not by the
 * time a look took: a query can wait ms on the cgroup lock while a runtime
 * attaches, and one slow look must not slow the next heal.
 */
#define HEAL_LEASE_US 500
/* Leases looked at per tick: with 10,000, one pass would hold requests ~120 ms. */
#define HEAL_BATCH 64
/*
 * Leases re-checked per periodic tick. inotify already reports ended
 * containers, so the tick is a safety net; bounding it keeps one tick from
 * holding up requests (at ~50 us a lease) on a host with thousands.
 */
#define RECHECK_BATCH 64

/* Arms the heal check to run once in ms; not when it is off or attach events heal. */
static void heal_arm(struct daemon *d, uint64_t ms)
{
	struct itimerspec its = { 0 };

	if (d->heal_fd < 0 || d->cfg->heal_ms == 0 || d->attach)
		return;
	its.it_value.tv_sec = (time_t)(ms / 1000);
	its.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
	(void)timerfd_settime(d->heal_fd, 0, &its, NULL);
}

int heal_init(struct daemon *d)
{
	d->heal_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (d->heal_fd < 0)
		return -errno;
	heal_arm(d, d->cfg->heal_ms);
	return 0;
}

void heal_fini(struct daemon *d)
{
	d->heal_fd = safe_close(d->heal_fd);
}

/*
 * Only a timer the last tick left asleep is armed. One that expired and
 * waits for the loop reads as disarmed too, and arming it again would clear
 * that expiry: grants arriving back to back then put the check off for as
 * long as they go on (a heal took 96 ms at heal-ms 10, bench/NOTES.md).
 */
void heal_wake(struct daemon *d)
{
	if (!d->heal_asleep)
		return;
	d->heal_asleep = false;
	heal_arm(d, d->cfg->heal_ms);
}

/*
 * Puts the gates back if someone else moved them; returns whether it had
 * to. It keeps the digest of the programs only when they were found
 * settled, so a change made by someone else while devgated looked is never
 * taken for settled.
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

/* Like recheck_guard_at, opening the lease's cgroup first. */
static bool recheck_guard(struct daemon *d, struct lease *l)
{
	auto_close int cgfd = -1;

	if (cgroup_open_id(&d->cg, l->cgid, &cgfd) < 0) {
		l->progs_digest = 0;
		return false;
	}
	return recheck_guard_at(d, l, cgfd);
}

/*
 * A runtime that rewrites its devices list (runc update, docker update)
 * drops devgate's rules. full walks the sub-cgroups even when the list has
 * them all: a new sub-cgroup lacks them (v1 does not pass an allow down).
 */
void heal_cgroup1(struct daemon *d, struct lease *l, bool full)
{
	auto_free char *list = NULL;
	struct dg_error err = { 0 };
	size_t lost = 0;

	if (!l->cg1_path || !l->n_cg1_added || d->cg1.fd < 0 ||
	    devlist_read(&d->cg1, l->cg1_path, &list) < 0)
		return; /* a vanished cgroup is for watch.c */
	for (size_t i = 0; i < l->n_cg1_added; i++) {
		const char *rule = l->cg1_added[i].rule;
		bool lacks = devlist_allows(list, rule) == 0;

		lost += lacks;
		if ((lacks || full) && devlist_allow(&d->cg1, l->cg1_path, rule, &err) < 0) {
			log_error("cannot put devgate's v1 device rules back in %s: %s",
				  lease_label(l), err.message);
			return;
		}
	}
	if (!lost)
		return;
	metrics_inc(d->metrics, METRIC_RECONCILE_FIXES, 1);
	log_notice("the v1 devices list of %s (%s) lost %zu of devgate's rules; put back",
		   lease_label(l), l->cg1_path, lost);
}

/* Compares l's device programs with the last found settled; re-checks on a difference. */
static void heal_check(struct daemon *d, struct lease *l)
{
	auto_close int cgfd = -1;
	uint64_t digest = 0, t0;
	int r = cgroup_open_id(&d->cg, l->cgid, &cgfd);

	heal_cgroup1(d, l, false);
	if (r == 0)
		r = guard_digest(cgfd, &digest);
	if (r < 0 || digest == l->progs_digest)
		return; /* a vanished cgroup is for watch.c */
	/* Our own grants and revokes change it too; the full check tells. */
	t0 = now_mono_ns();
	if (recheck_guard_at(d, l, cgfd))
		log_notice("the device programs of %s changed; gates re-applied in %.1f ms",
			   lease_label(l), (double)(now_mono_ns() - t0) / 1e6);
}

/*
 * Looks at a batch of leases per tick, round the table: every lease is
 * still looked at once per n * HEAL_LEASE_US, and requests wait at most one
 * batch. With no lease left, the timer sleeps until heal_wake.
 */
void heal_tick(struct daemon *d)
{
	size_t n = d->leases.n, batch = n < HEAL_BATCH ? n : HEAL_BATCH;
	uint64_t expirations, period_ms = batch * HEAL_LEASE_US / 1000;

	(void)!read(d->heal_fd, &expirations, sizeof(expirations));
	for (size_t k = 0; k < batch; k++) {
		if (d->heal_next >= d->leases.n)
			d->heal_next = 0;
		heal_check(d, d->leases.v[d->heal_next++]);
	}
	if (d->leases.n > 0)
		heal_arm(d, period_ms > d->cfg->heal_ms ? period_ms : d->cfg->heal_ms);
	else
		d->heal_asleep = true;
}

static bool leased(uint64_t cgid, const void *data)
{
	return lease_table_find(data, cgid) != NULL;
}

void heal_recheck(struct daemon *d)
{
	size_t n = d->leases.n, batch = n < RECHECK_BATCH ? n : RECHECK_BATCH;

	bpfgate_repin(d->bg);
	guard_repin(d->bg);
	/* Releases drop counters by key; a stray (a minor the inventory lacks) goes here. */
	if (bpfgate_sweep_due(d->bg, now_mono_ns()))
		(void)bpfgate_counters_sweep(d->bg, leased, &d->leases);
	if (n == 0)
		return;
	for (size_t i = 0; i < batch; i++) {
		struct lease *l = d->leases.v[(d->recheck_next + i) % n];

		heal_cgroup1(d, l, true);
		if (recheck_guard(d, l))
			log_notice("the device programs of %s changed; gates re-applied at the "
				   "periodic check",
				   lease_label(l));
	}
	d->recheck_next = (d->recheck_next + batch) % n;
}

void heal_attach_changed(void *ctx, uint64_t cgroup_id, uint32_t pid, uint64_t ts_ns)
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
 * Notes an attach that asked to replace old_id by new_id. Only a leased
 * cgroup has gates that a runtime could have meant to replace through;
 * guard_apply decides what the attempt proves.
 */
void heal_attach_replaced(void *ctx, uint64_t cgroup_id, uint32_t old_id, uint32_t new_id)
{
	struct daemon *d = ctx;

	if (!lease_table_find(&d->leases, cgroup_id))
		return;
	log_debug("cgroup %llu: an attach asked to replace device program %u by %u",
		  (unsigned long long)cgroup_id, old_id, new_id);
	guard_note_replace(d->bg, cgroup_id, old_id, new_id);
}
