/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devgated's metrics: the daemon's own counters, the BPF device counters of
 * live leases, rendered as Prometheus text exposition (format 0.0.4), and
 * the optional HTTP endpoint (libmicrohttpd, driven by devgated's epoll
 * loop: no threads). The metric names are listed in metrics.c.
 */
#ifndef DEVGATE_METRICS_H
#define DEVGATE_METRICS_H

#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "daemon.h"
#include "protocol.h"

#define METRICS_MAX_BUCKETS 16

enum metrics_counter {
	METRIC_GRANTS,
	METRIC_REVOKES,
	METRIC_RELEASES,
	METRIC_RECONCILE_FIXES,
	METRIC_COUNTER_MAX,
};

int metrics_new(struct metrics **ret);
/* Stops the HTTP endpoint too. NULL is fine. */
void metrics_free(struct metrics *m);

/* Counting; m may be NULL (nothing is counted). */
void metrics_inc(struct metrics *m, enum metrics_counter c, uint64_t n);
/* A request failed; op is DG_OP_MAX when the request did not parse. */
void metrics_request_failed(struct metrics *m, enum dg_op op, enum dg_code code);
/* A grant or revoke carried "source": counts "hook/STAGE" sources. */
void metrics_hook_call(struct metrics *m, const char *source);
/* How long a grant or revoke request took. */
void metrics_observe(struct metrics *m, enum dg_op op, uint64_t ns);

/* The whole exposition document; *ret is malloc'd. */
int metrics_render(struct daemon *d, char **ret, size_t *ret_len);

/* Serves GET /metrics on listen ("ADDR:PORT", "[ADDR6]:PORT"). */
int metrics_http_start(struct daemon *d, const char *listen, struct dg_error *err);
/* The endpoint's epoll fd for devgated's loop; -1 when not serving. */
int metrics_http_fd(const struct metrics *m);
/* Longest wait before metrics_http_run must run, in ms; -1: none. */
int metrics_http_timeout(struct metrics *m);
void metrics_http_run(struct metrics *m);

/* ---- exposition text, pure (unit-tested) ---- */

struct metrics_label {
	const char *name;
	const char *value;
};

struct metrics_histogram {
	const double *bounds; /* upper bounds in seconds, ascending; +Inf implied */
	size_t n_bounds;
	uint64_t counts[METRICS_MAX_BUCKETS]; /* per bucket, not cumulative; last is +Inf */
	uint64_t count;
	double sum;
};

/* A label value with \, " and newline escaped. */
void metrics_write_escaped(FILE *f, const char *s);
/* # HELP and # TYPE lines of a family. */
void metrics_write_family(FILE *f, const char *name, const char *type, const char *help);
void metrics_write_sample(FILE *f, const char *name, const struct metrics_label *labels,
			  size_t n_labels, uint64_t value);
void metrics_histogram_init(struct metrics_histogram *h, const double *bounds, size_t n);
void metrics_histogram_observe(struct metrics_histogram *h, double v);
/* The family, its cumulative buckets, _sum and _count. */
void metrics_histogram_write(FILE *f, const char *name, const char *help,
			     const struct metrics_histogram *h);
/* "127.0.0.1:9400" or "[::1]:9400"; numeric addresses only, port 1-65535. */
int metrics_parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len);

#endif
