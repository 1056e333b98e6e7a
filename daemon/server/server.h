/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control socket: a unix stream socket, one JSON request per line
 * (common/protocol.h). Root only (mode 0600), unless socket-group or
 * admin-group let others in (peer.h decides who may do what).
 */
#ifndef DEVGATE_SERVER_H
#define DEVGATE_SERVER_H

#include <stdint.h>

#include "core/daemon.h"
#include "wire.h"

struct waiting_ops;

/*
 * Makes the socket's directory and takes the lock beside the socket
 * (SOCKET.lock), which keeps every other devgated off this socket for as
 * long as *ret stays open. Returns 0, or a negative errno with err set
 * (DG_E_STATE: another devgated holds it).
 */
int server_lock(struct daemon *d, int *ret, struct dg_error *err);
/* Opens the control socket (d->cfg->socket_path) and sets d->listen_fd. */
int server_listen(struct daemon *d, struct dg_error *err);
/* Cuts every client (a waiting grant's client sees the connection close) and removes the socket. */
void server_close(struct daemon *d);
/* The listening socket is readable: accepts clients up to max-clients. */
void server_accept(struct daemon *d);
/* Handles epoll events on a client's socket; c is the event's data pointer. */
void server_client_event(struct daemon *d, struct client *c, uint32_t events);
/* Periodic: cuts clients idle past client-timeout-ms and resumes a paused accept. */
void server_tick(struct daemon *d);

/* The worker of a request's name lookup ended (tag: TAG_LOOKUP | its number). */
void server_lookup_event(struct daemon *d, uint64_t tag);
#define TAG_LOOKUP (1ull << 62)
/* Sends ev to every client streaming stream (DG_OP_WATCH or DG_OP_EVENTS). */
void server_broadcast(struct daemon *d, enum dg_op stream, const union dg_stream_event *ev);

/*
 * What the wait queue (waiting.h) needs of the server: retrying a waiting
 * client's grant, and writing to that client. Its ctx is the daemon.
 */
extern const struct waiting_ops server_waiting_ops;

/*
 * epoll tags: the low bits of a pointer are free, so small ints mark fds.
 * A waiting grant's target process is tagged with TAG_WAITER (waiting.h).
 */
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
	TAG_V1EXIT,
	TAG_MAX
};

#endif
