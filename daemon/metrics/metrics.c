// SPDX-License-Identifier: Apache-2.0
/*
 * devgated's own counters, kept in memory: how many requests were served
 * and failed, how long grants and revokes took, which hook stages called,
 * how long waiting grants waited. Modules all over devgated count here, so
 * this file must stay a leaf: it knows nothing of struct daemon, the
 * leases or BPF, and it writes no text. view/metrics_page.c reads a
 * snapshot of these counters and renders the Prometheus page.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "metrics.h"
#include "util.h"

/* OCI hook stages; anything else a hook sends is counted as "other". */
static const char *const hook_stages[METRICS_HOOK_STAGES] = {
	"prestart",  "createRuntime", "createContainer", "startContainer",
	"poststart", "poststop",      "other",
};

/* 0.5 ms to 1 s: a grant forks a helper and touches BPF and the disk. */
static const double duration_bounds[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
					  0.05,	  0.1,	 0.25,	 0.5,	1 };

/* 10 ms to an hour: a waiter is served the moment a lease ends, or much later. */
static const double wait_bounds[] = { 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600 };

struct metrics {
	struct metrics_snapshot now;
};

int metrics_new(struct metrics **ret)
{
	struct metrics *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	promtext_histogram_init(&m->now.grant_time, duration_bounds, ARRAY_SIZE(duration_bounds));
	promtext_histogram_init(&m->now.revoke_time, duration_bounds, ARRAY_SIZE(duration_bounds));
	promtext_histogram_init(&m->now.queue_wait, wait_bounds, ARRAY_SIZE(wait_bounds));
	*ret = m;
	return 0;
}

void metrics_free(struct metrics *m)
{
	free(m);
}

void metrics_inc(struct metrics *m, enum metrics_counter c, uint64_t n)
{
	if (m && c < METRIC_COUNTER_MAX)
		m->now.counters[c] += n;
}

void metrics_request_failed(struct metrics *m, enum dg_op op, enum dg_code code)
{
	if (!m || (int)op < 0 || op > DG_OP_MAX || (int)code < 0 || code >= DG_CODE_MAX)
		return;
	m->now.failures[op][code]++;
}

void metrics_queue_served(struct metrics *m, uint64_t ns)
{
	if (m)
		promtext_histogram_observe(&m->now.queue_wait, (double)ns / 1e9);
}

void metrics_queue_length(struct metrics *m, size_t n)
{
	if (m)
		m->now.queue_length = n;
}

void metrics_hook_call(struct metrics *m, const char *source)
{
	size_t i;

	if (!m || !source || !startswith(source, "hook/"))
		return;
	/* Known stages only: a client must not grow the label set at will. */
	for (i = 0; i + 1 < ARRAY_SIZE(hook_stages); i++) {
		if (strcmp(source + 5, hook_stages[i]) == 0)
			break;
	}
	m->now.hook_calls[i]++;
}

void metrics_observe(struct metrics *m, enum dg_op op, uint64_t ns)
{
	if (!m)
		return;
	if (op == DG_OP_GRANT)
		promtext_histogram_observe(&m->now.grant_time, (double)ns / 1e9);
	else if (op == DG_OP_REVOKE)
		promtext_histogram_observe(&m->now.revoke_time, (double)ns / 1e9);
}

void metrics_snapshot(const struct metrics *m, struct metrics_snapshot *ret)
{
	*ret = m->now;
}

const char *metrics_hook_stage(size_t i)
{
	return i < ARRAY_SIZE(hook_stages) ? hook_stages[i] : NULL;
}
