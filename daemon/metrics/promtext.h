/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Prometheus text exposition format 0.0.4: families, samples,
 * histograms. Pure functions (unit-tested); the page that uses them is
 * view/metrics_page.c.
 */
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

/* Writes a label value with \, " and newline escaped. */
void promtext_escaped(FILE *f, const char *s);
/* Writes the # HELP and # TYPE lines of a family; type is "counter", "gauge", ... */
void promtext_family(FILE *f, const char *name, const char *type, const char *help);
/* Writes one sample line: name{labels} value. A NULL label value is written as "". */
void promtext_sample(FILE *f, const char *name, const struct promtext_label *labels,
		     size_t n_labels, uint64_t value);
/* The same for a value in thousandths, written as a decimal: 1500 -> 1.500. */
void promtext_sample_milli(FILE *f, const char *name, const struct promtext_label *labels,
			   size_t n_labels, uint64_t milli);
/*
 * Makes h an empty histogram with the n upper bounds (ascending, kept by
 * pointer); more than PROMTEXT_MAX_BUCKETS - 1 bounds are cut.
 */
void promtext_histogram_init(struct promtext_histogram *h, const double *bounds, size_t n);
/* Counts one value v in its bucket (a value equal to a bound is in that bound's bucket). */
void promtext_histogram_observe(struct promtext_histogram *h, double v);
/* Writes the family, its cumulative buckets, _sum and _count. */
void promtext_histogram_write(FILE *f, const char *name, const char *help,
			      const struct promtext_histogram *h);

#endif
