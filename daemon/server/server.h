/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control socket: a unix stream socket, root only (mode 0600 and
 * SO_PEERCRED checked), one JSON request per line (common/protocol.h).
 */
#ifndef DEVGATE_SERVER_H
#define DEVGATE_SERVER_H

#include <stdint.h>

#include "core/daemon.h"
#include "wire.h"

int server_listen(struct daemon *d, struct dg_error *err);
void server_close(struct daemon *d);
void server_accept(struct daemon *d);
/* Events for client fds; data is the struct client. */
void server_client_event(struct daemon *d, struct client *c, uint32_t events);
/* Periodic: cuts clients idle past client-timeout-ms, resumes a paused accept. */
void server_tick(struct daemon *d);
/* Sends ev to every client streaming stream (DG_OP_WATCH or DG_OP_EVENTS). */
void server_broadcast(struct daemon *d, enum dg_op stream, const union dg_stream_event *ev);

/*
 * The wait queue (grant --wait), after every turn of the loop: answers
 * waiters whose time ran out, tries them all in order when capacity may
 * have appeared (d->queue_dirty), and tells each whose place changed.
 */
void server_queue_run(struct daemon *d);
/* The target process of a waiter ended (tag: TAG_WAITER | its number). */
void server_waiter_event(struct daemon *d, uint64_t tag);
/* Periodic: drops waiters whose container ended. */
void server_queue_check(struct daemon *d);
/* How long the loop may sleep before server_queue_run has work; -1: forever. */
int server_queue_timeout_ms(const struct daemon *d);

/* epoll tags: the low bits of a pointer are free, so small ints mark fds. */
enum {
	TAG_LISTEN = 1,
	TAG_SIGNAL,
	TAG_INOTIFY,
	TAG_TIMER,
	TAG_EVENTS,
	TAG_METRICS,
	TAG_ATTACH,
	TAG_HEAL,
	TAG_UEVENT,
	TAG_EXPIRY,
	TAG_MAX
};
/* A waiting grant's target pidfd: this bit (never set in a user pointer) and its number. */
#define TAG_WAITER (1ull << 63)

#endif
