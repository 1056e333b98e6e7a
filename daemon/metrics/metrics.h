/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devgated's own counters: requests served and failed, latencies, hook
 * stages, waiting grants. Any module may count here; nothing here knows
 * the daemon's state. The page that shows them (with the leases, the GPUs
 * and the BPF device counters) is view/metrics_page.c.
 */
#ifndef DEVGATE_METRICS_H
#define DEVGATE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "promtext.h"
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

/* The OCI hook stages counted apart, the last one being "other". */
#define METRICS_HOOK_STAGES 7

struct metrics;

/* A copy of every counter at one moment, for the page that shows them. */
struct metrics_snapshot {
	uint64_t counters[METRIC_COUNTER_MAX];
	/* Failed requests by operation and error code; [DG_OP_MAX] is "did not parse". */
	uint64_t failures[DG_OP_MAX + 1][DG_CODE_MAX];
	uint64_t hook_calls[METRICS_HOOK_STAGES]; /* by metrics_hook_stage(i) */
	struct promtext_histogram grant_time;	  /* seconds a grant request took */
	struct promtext_histogram revoke_time;	  /* seconds a revoke request took */
	struct promtext_histogram queue_wait;	  /* seconds served waiters waited */
	uint64_t queue_length;			  /* grants waiting now */
};

/* Makes a set of counters, all zero; -ENOMEM. */
int metrics_new(struct metrics **ret);
/* Frees the counters; NULL is fine. */
void metrics_free(struct metrics *m);

/*
 * The counting calls below do nothing when m is NULL, so a module may count
 * before devgated made its counters, or in a test without them.
 */

/* Adds n to counter c. */
void metrics_inc(struct metrics *m, enum metrics_counter c, uint64_t n);
/* Counts a failed request; op is DG_OP_MAX when the request did not parse. */
void metrics_request_failed(struct metrics *m, enum dg_op op, enum dg_code code);
/* Counts a grant or revoke whose "source" is "hook/STAGE", by stage. */
void metrics_hook_call(struct metrics *m, const char *source);
/* Records how long a grant or revoke request took, in nanoseconds. */
void metrics_observe(struct metrics *m, enum dg_op op, uint64_t ns);
/* Counts a waiting grant that was served after waiting ns nanoseconds. */
void metrics_queue_served(struct metrics *m, uint64_t ns);
/* Grants waiting now (devgate_queue_length); the wait queue says so as it changes. */
void metrics_queue_length(struct metrics *m, size_t n);

/* Copies every counter of m into *ret. */
void metrics_snapshot(const struct metrics *m, struct metrics_snapshot *ret);
/* The name of hook stage i (below METRICS_HOOK_STAGES), as in the label. */
const char *metrics_hook_stage(size_t i);

#endif
