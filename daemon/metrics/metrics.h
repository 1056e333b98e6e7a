/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devgated's metrics: the daemon's own counters and the BPF device counters
 * of live leases, rendered as Prometheus text (promtext.c). The HTTP
 * endpoint is metrics_http.c. The metric names are listed in metrics.c.
 */
#ifndef DEVGATE_METRICS_H
#define DEVGATE_METRICS_H

#include <stdint.h>

#include "core/daemon.h"
#include "protocol.h"

enum metrics_counter {
	METRIC_GRANTS,
	METRIC_REVOKES,
	METRIC_RELEASES,
	METRIC_RECONCILE_FIXES,
	METRIC_RECORDS_BROKEN,
	METRIC_EXPIRATIONS,
	METRIC_REFRESHES,
	METRIC_QUEUE_TIMEOUTS,
	METRIC_QUEUE_CANCELLED,
	METRIC_COUNTER_MAX,
};

int metrics_new(struct metrics **ret);
/* NULL is fine. */
void metrics_free(struct metrics *m);

/* Counting; m may be NULL (nothing is counted). */
void metrics_inc(struct metrics *m, enum metrics_counter c, uint64_t n);
/* A request failed; op is DG_OP_MAX when the request did not parse. */
void metrics_request_failed(struct metrics *m, enum dg_op op, enum dg_code code);
/* A grant or revoke carried "source": counts "hook/STAGE" sources. */
void metrics_hook_call(struct metrics *m, const char *source);
/* How long a grant or revoke request took. */
void metrics_observe(struct metrics *m, enum dg_op op, uint64_t ns);

/* A waiting grant was served after waiting ns (counted and observed). */
void metrics_queue_served(struct metrics *m, uint64_t ns);
/* Grants waiting now (devgate_queue_length); the wait queue says so as it changes. */
void metrics_queue_length(struct metrics *m, size_t n);

/* The whole exposition document; *ret is malloc'd. */
int metrics_render(struct daemon *d, char **ret, size_t *ret_len);

#endif
