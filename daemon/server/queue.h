/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The order of grants waiting for GPUs (grant --wait): highest priority
 * first, first come first within a priority. Pure bookkeeping, no I/O and
 * no clock: waiting.c keeps the waiters and tries them in this order
 * whenever GPUs may have freed.
 */
#ifndef DEVGATE_QUEUE_H
#define DEVGATE_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "wire.h"

struct queue_entry {
	int64_t priority;
	uint64_t seq;			  /* arrival order, set by queue_add */
	uint64_t since_ns;		  /* CLOCK_MONOTONIC at arrival */
	uint64_t deadline_ns;		  /* CLOCK_MONOTONIC; 0: waits as long as it takes */
	const struct dg_grant_req *grant; /* what it asks for */
	uid_t uid;			  /* who asks */
	void *owner;			  /* the record that holds this entry (a waiter) */
};

struct queue {
	struct queue_entry **v; /* in serving order */
	size_t n, cap;
	uint64_t next_seq;
};

/* Inserts e in its place (e itself, not a copy) and numbers it; 0 or -ENOMEM. */
int queue_add(struct queue *q, struct queue_entry *e);
/* Takes e out of the queue; returns false when it was not in it. */
bool queue_remove(struct queue *q, const struct queue_entry *e);
/* Returns e's place, counting from 1, or 0 when e is not queued. */
size_t queue_position(const struct queue *q, const struct queue_entry *e);
/* Returns the earliest deadline of all entries, or 0 when none has one. */
uint64_t queue_next_deadline(const struct queue *q);
/* Frees the list itself; the entries belong to the caller. */
void queue_fini(struct queue *q);

#endif
