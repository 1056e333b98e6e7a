// SPDX-License-Identifier: Apache-2.0
/*
 * Leases that expire (grant --ttl): one timer, armed for the earliest
 * expiry in the table (expiry.h). Expired leases go to
 * d->hooks.lease_expired; this file must not revoke them itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cleanup.h"
#include "expiry.h"
#include "log.h"
#include "util.h"

/*
 * Arms the timer for when, in seconds since the epoch; 0 disarms it. An
 * absolute CLOCK_REALTIME time holds across suspend and clock steps.
 */
static void arm(struct daemon *d, int64_t when)
{
	struct itimerspec its = { .it_value = { .tv_sec = (time_t)when } };

	if (d->expiry_fd < 0)
		return;
	/* 0 disarms; a time in the past fires at once. */
	if (timerfd_settime(d->expiry_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
		log_error_errno(errno, "cannot arm the lease expiry timer: %m");
		return;
	}
	d->expiry_armed = when;
}

int expiry_init(struct daemon *d)
{
	d->expiry_fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
	d->expiry_armed = 0;
	return d->expiry_fd < 0 ? -errno : 0;
}

void expiry_fini(struct daemon *d)
{
	safe_close(d->expiry_fd);
	d->expiry_fd = -1;
}

void expiry_note(struct daemon *d, const struct lease *l)
{
	/* A lease that went (released, expired) holds nothing and needs no wake-up. */
	if (lease_holds(l) && l->expires > 0 &&
	    (d->expiry_armed == 0 || l->expires < d->expiry_armed))
		arm(d, l->expires);
}

void expiry_run(struct daemon *d)
{
	uint64_t ticks;
	int64_t now = now_wall_s(), next;
	uint64_t *ids = NULL;
	size_t n = 0;

	/* Drain the timer; at start it has not fired and the read fails with EAGAIN. */
	if (d->expiry_fd >= 0 && read(d->expiry_fd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		log_debug("reading the expiry timer: %s", strerror(errno));
	d->expiry_armed = 0;
	/* Collect the ids first: a revoke edits the table. */
	for (size_t i = 0; i < d->leases.n; i++) {
		const struct lease *l = d->leases.v[i];

		if (l->expires > 0 && l->expires <= now) {
			uint64_t *v = realloc(ids, (n + 1) * sizeof(*ids));

			if (!v) {
				log_error("out of memory listing expired leases");
				break;
			}
			ids = v;
			ids[n++] = l->cgid;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (d->hooks.lease_expired)
			d->hooks.lease_expired(d, ids[i]);
	}
	free(ids);
	next = lease_table_next_expiry(&d->leases);
	/* One that could not be revoked is tried again in a second, not in a loop. */
	arm(d, next > 0 && next <= now ? now + 1 : next);
}
