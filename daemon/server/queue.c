// SPDX-License-Identifier: Apache-2.0
/*
 * The wait queue's order (queue.h): an array of entries kept sorted as they
 * come and go. It must stay pure bookkeeping: no I/O, no clock, no clients,
 * so the unit test can check the order alone.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "queue.h"

/* Returns whether a is served before b: higher priority first, then arrival. */
static bool before(const struct queue_entry *a, const struct queue_entry *b)
{
	return a->priority != b->priority ? a->priority > b->priority : a->seq < b->seq;
}

int queue_add(struct queue *q, struct queue_entry *e)
{
	size_t at;

	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers, as meant */
	if (ARRAY_GROW(q->v, q->n, q->cap) < 0)
		return -ENOMEM;
	e->seq = ++q->next_seq;
	/* The newest comes last among its priority: stop at the first it precedes. */
	for (at = 0; at < q->n && !before(e, q->v[at]); at++)
		;
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers, as meant */
	memmove(&q->v[at + 1], &q->v[at], (q->n - at) * sizeof(*q->v));
	q->v[at] = e;
	q->n++;
	return 0;
}

size_t queue_position(const struct queue *q, const struct queue_entry *e)
{
	for (size_t i = 0; i < q->n; i++) {
		if (q->v[i] == e)
			return i + 1;
	}
	return 0;
}

bool queue_remove(struct queue *q, const struct queue_entry *e)
{
	size_t pos = queue_position(q, e);

	if (pos == 0)
		return false;
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers, as meant */
	memmove(&q->v[pos - 1], &q->v[pos], (q->n - pos) * sizeof(*q->v));
	q->n--;
	return true;
}

uint64_t queue_next_deadline(const struct queue *q)
{
	uint64_t next = 0;

	for (size_t i = 0; i < q->n; i++) {
		uint64_t t = q->v[i]->deadline_ns;

		if (t && (!next || t < next))
			next = t;
	}
	return next;
}

void queue_fini(struct queue *q)
{
	free(q->v);
	*q = (struct queue){ 0 };
}
