/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The order of grants waiting for GPUs (grant --wait): highest priority
 * first, first come first within a priority. Pure bookkeeping, no I/O: the
 * server keeps the clients and tries the waiters in this order whenever
 * capacity may have appeared (server.c, "serve").
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
	void *owner;			  /* the server's client */
};

struct queue {
	struct queue_entry **v; /* in serving order */
	size_t n, cap;
	uint64_t next_seq;
};

/* Inserts e (not copied) in its place; 0 or -ENOMEM. */
int queue_add(struct queue *q, struct queue_entry *e);
/* Takes e out if it is queued; true if it was. */
bool queue_remove(struct queue *q, const struct queue_entry *e);
/* 1-based place of e; 0 when not queued. */
size_t queue_position(const struct queue *q, const struct queue_entry *e);
/* The earliest deadline of all entries; 0: none has one. */
uint64_t queue_next_deadline(const struct queue *q);
void queue_fini(struct queue *q);

#endif
