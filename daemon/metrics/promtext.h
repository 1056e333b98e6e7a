/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus text exposition format 0.0.4, pure functions (unit-tested). */
#ifndef DEVGATE_PROMTEXT_H
#define DEVGATE_PROMTEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PROMTEXT_MAX_BUCKETS 16

struct promtext_label {
	const char *name;
	const char *value;
};

struct promtext_histogram {
	const double *bounds; /* upper bounds in seconds, ascending; +Inf implied */
	size_t n_bounds;
	uint64_t counts[PROMTEXT_MAX_BUCKETS]; /* per bucket, not cumulative; last is +Inf */
	uint64_t count;
	double sum;
};

/* A label value with \, " and newline escaped. */
void promtext_escaped(FILE *f, const char *s);
/* # HELP and # TYPE lines of a family. */
void promtext_family(FILE *f, const char *name, const char *type, const char *help);
void promtext_sample(FILE *f, const char *name, const struct promtext_label *labels,
		     size_t n_labels, uint64_t value);
/* A value in thousandths, written as a decimal: 1500 -> 1.500. */
void promtext_sample_milli(FILE *f, const char *name, const struct promtext_label *labels,
			   size_t n_labels, uint64_t milli);
void promtext_histogram_init(struct promtext_histogram *h, const double *bounds, size_t n);
void promtext_histogram_observe(struct promtext_histogram *h, double v);
/* The family, its cumulative buckets, _sum and _count. */
void promtext_histogram_write(FILE *f, const char *name, const char *help,
			      const struct promtext_histogram *h);

#endif
