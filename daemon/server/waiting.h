/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Grants that wait for GPUs (grant --wait). A grant refused because its
 * GPUs are busy waits here while its client keeps the connection: the
 * client hears its place in line as event lines, then one reply. Waiters
 * are tried again, in queue order (queue.h), whenever GPUs may have freed.
 *
 * The wait queue reaches the socket server and the grant path only through
 * struct waiting_ops, so it knows nothing of clients or sockets.
 */
#ifndef DEVGATE_WAITING_H
#define DEVGATE_WAITING_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "wire.h"

struct metrics;
struct waiting;
struct waiter;

/* What waiting_ops.retry returns when the GPUs are still busy. */
#define WAITING_BUSY 1

/*
 * What the wait queue needs from outside. Each call gets back the ctx given
 * to waiting_new, and the client given to waiting_add.
 */
struct waiting_ops {
	/*
	 * Tries the waiter's grant again, as a new request from its client
	 * would be tried. Returns 0 when it was served (reply filled), < 0 when
	 * it was refused (err says why), or WAITING_BUSY when its GPUs are
	 * still busy (err says which).
	 */
	int (*retry)(void *ctx, void *client, const struct dg_request *req, union dg_reply *reply,
		     struct dg_arena *a, struct dg_error *err);
	/* Returns whether the container the grant names has ended (pidfd: its process). */
	bool (*gone)(void *ctx, const struct dg_target_args *target, int pidfd);
	/*
	 * Sends the client one event line (its place in line). Returns < 0
	 * when the client had to be cut; its waiter was cancelled then.
	 */
	int (*tell)(void *ctx, void *client, json_object *msg);
	/*
	 * Sends the client its last line (the grant's reply or an error) and
	 * lets it send requests again. The waiter is gone by then.
	 */
	void (*answer)(void *ctx, void *client, json_object *msg);
};

/*
 * epfd is the loop's epoll set: the process a waiting grant names joins it,
 * so that its end wakes the loop. m may be NULL (nothing is counted).
 */
int waiting_new(int epfd, struct metrics *m, const struct waiting_ops *ops, void *ctx,
		struct waiting **ret);
/* Frees the queue; call it after every waiter was cancelled. NULL is fine. */
void waiting_free(struct waiting *w);

/*
 * Queues client's grant req, refused for now because of reason. Takes
 * pidfd (the target's process, closed on failure) and, on success, the
 * request itself (*req is left empty). *ret is the waiter, for
 * waiting_cancel.
 */
int waiting_add(struct waiting *w, void *client, uid_t uid, struct dg_request *req, int pidfd,
		const char *reason, struct waiter **ret, struct dg_error *err);
/* Drops a waiter whose client left, without a word to the client. */
void waiting_cancel(struct waiting *w, struct waiter *waiter, const char *why);

/*
 * GPUs may have freed (a lease went, GPUs appeared or were allowed again):
 * the next waiting_run tries every waiter. since_ns is when the loop woke
 * for that event; the log line of a served waiter counts from it. w may be
 * NULL: before the loop starts, nobody waits.
 */
void waiting_wake(struct waiting *w, uint64_t since_ns);
/*
 * After every turn of the loop: answers the waiters whose time ran out,
 * tries them all in order if waiting_wake was called, and tells each one
 * whose place changed.
 */
void waiting_run(struct waiting *w);
/* How long the loop may sleep before waiting_run has work; -1: as long as it likes. */
int waiting_timeout_ms(const struct waiting *w);
/* The process a waiting grant names ended (tag: TAG_WAITER | its number). */
void waiting_event(struct waiting *w, uint64_t tag);
/* Periodic: drops the waiters whose container ended. */
void waiting_check(struct waiting *w);
/* The waiters in line, for devgatectl queue; strings are copied into a. */
int waiting_list(const struct waiting *w, struct dg_queue_reply *out, struct dg_arena *a);

/*
 * The epoll tag of a waiting grant's target process: this bit (never set in
 * a pointer, nor in the loop's other tags) and the waiter's number. A number,
 * not a pointer: an event of this batch may come after the waiter is gone.
 */
#define TAG_WAITER (1ull << 63)

#endif
