// SPDX-License-Identifier: Apache-2.0
/*
 * Writes the Prometheus text exposition format 0.0.4 to a FILE: a family's
 * HELP and TYPE lines, samples with escaped label values, and histograms
 * (which it also counts into). Pure functions of their arguments: it knows
 * no metric of devgated's and must not read any state (unit-tested).
 */
#include <stdio.h>
#include <string.h>

#include "promtext.h"

void promtext_escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", f);
		else if (*s == '"')
			fputs("\\\"", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

void promtext_family(FILE *f, const char *name, const char *type, const char *help)
{
	/* HELP text escapes backslash and newline only; ours has neither. */
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* {name="value",...}, values escaped; nothing at all for no labels. */
static void write_labels(FILE *f, const struct promtext_label *labels, size_t n)
{
	if (n == 0)
		return;
	fputc('{', f);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s%s=\"", i ? "," : "", labels[i].name);
		promtext_escaped(f, labels[i].value ? labels[i].value : "");
		fputc('"', f);
	}
	fputc('}', f);
}

void promtext_sample(FILE *f, const char *name, const struct promtext_label *labels,
		     size_t n_labels, uint64_t value)
{
	fputs(name, f);
	write_labels(f, labels, n_labels);
	fprintf(f, " %llu\n", (unsigned long long)value);
}

void promtext_sample_milli(FILE *f, const char *name, const struct promtext_label *labels,
			   size_t n_labels, uint64_t milli)
{
	fputs(name, f);
	write_labels(f, labels, n_labels);
	fprintf(f, " %llu.%03llu\n", (unsigned long long)(milli / 1000),
		(unsigned long long)(milli % 1000));
}

void promtext_histogram_init(struct promtext_histogram *h, const double *bounds, size_t n)
{
	*h = (struct promtext_histogram){ .bounds = bounds };
	h->n_bounds = n < PROMTEXT_MAX_BUCKETS ? n : PROMTEXT_MAX_BUCKETS - 1;
}

void promtext_histogram_observe(struct promtext_histogram *h, double v)
{
	size_t i = 0;

	while (i < h->n_bounds && v > h->bounds[i])
		i++;
	h->counts[i]++; /* i == n_bounds: the +Inf bucket */
	h->count++;
	h->sum += v;
}

void promtext_histogram_write(FILE *f, const char *name, const char *help,
			      const struct promtext_histogram *h)
{
	uint64_t cumulative = 0;

	promtext_family(f, name, "histogram", help);
	for (size_t i = 0; i <= h->n_bounds; i++) {
		cumulative += h->counts[i];
		if (i < h->n_bounds)
			fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i],
				(unsigned long long)cumulative);
		else
			fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name,
				(unsigned long long)cumulative);
	}
	fprintf(f, "%s_sum %.9g\n%s_count %llu\n", name, h->sum, name,
		(unsigned long long)h->count);
}
